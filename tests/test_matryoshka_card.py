"""The model card's per-dimension STS table of a Matryoshka run: scored by run_unsup.py at the end of training, saved
as matryoshka_sts.json, rendered from that file by the run's card and again by hf_cse.push; the values are those of
``python -m hf_cse.eval --truncate_dim`` on the saved model."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import yaml
from conftest import SENTENCES, run_unsup, write_config, write_senteval_downstream, write_train_file

from hf_cse.commands.eval import main as eval_main
from hf_cse.commands.push import push_run
from hf_cse.evaluation.sts_model_index import STS_DISPLAY
from hf_cse.export.model_card import TRAINING_SUMMARY_FILE, TrainingSummary, read_matryoshka_results
from hf_cse.run_files import MATRYOSHKA_RESULTS_FILE

DIMS = [32, 16, 4]  # 32: the tiny encoder's full size
PAPER_BLOCK = {
    "source": "Someone et al. 2024, Table 1",
    "method": "Method X, BERT-base",
    **{task: 70.0 for task in ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")},
    "avg": 70.0,
}


def matryoshka_run(tmp_path: Path, tiny_encoder_dir: Path, **overrides: object) -> Path:
    """Train 2 steps with ``--matryoshka_dims 32 16 4``; the output folder."""
    train = write_train_file(tmp_path, SENTENCES * 2)
    config = write_config(tmp_path, tiny_encoder_dir, train, **overrides)
    run_unsup.main(["--config", str(config), "--matryoshka_dims", *map(str, DIMS)])
    return tmp_path / "out"


def table_rows(card: str) -> dict[str, list[str]]:
    """The per-dimension table's rows of ``card``: ``{"header": [...], "32": [cells], ...}``."""
    section = card.split("### Matryoshka dimensions", 1)[1]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    header, body = rows[0], rows[2:]  # rows[1] is the alignment rule
    end = next((i for i, row in enumerate(body) if not re.fullmatch(r"\d+", row[0])), len(body))
    return {"header": header, **{row[0]: row[1:] for row in body[:end]}}


def eval_dims(out: Path, sts_dir: Path, *options: str) -> dict[str, dict[str, float]]:
    """``python -m hf_cse.eval --truncate_dim 32 16 4`` on the saved model: ``{str(d): {task: score, "avg": ...}}``."""
    output = eval_main(
        ["--model_name_or_path", str(out), "--sts_dir", str(sts_dir), "--device", "cpu", *options]
        + ["--truncate_dim", *map(str, DIMS)]
    )
    return output["truncate_dim"]


def test_the_card_has_one_row_per_dimension_equal_to_eval_truncate_dim_and_push_keeps_it(
    tmp_path: Path, tiny_encoder_dir: Path
) -> None:
    sts_dir = write_senteval_downstream(tmp_path)
    out = matryoshka_run(
        tmp_path,
        tiny_encoder_dir,
        sts_dir=str(sts_dir),
        eval_sts_tasks=["stsb", "sickr"],
        eval_strategy="steps",
        eval_steps=2,
    )
    saved = json.loads((out / MATRYOSHKA_RESULTS_FILE).read_text(encoding="utf-8"))
    assert saved["dims"] == DIMS and [evaluation["name"] for evaluation in saved["evaluations"]] == ["dev"]
    dev = saved["evaluations"][0]
    assert dev["splits"] == {"stsb": "dev", "sickr": "trial"}

    expected = eval_dims(out, sts_dir, "--tasks", "stsb", "sickr", "--stsb_split", "dev", "--sickr_split", "trial")
    assert expected["4"] != expected["32"]  # the truncation changes the scores: the equality below can fail
    assert dev["scores"] == {dim: pytest.approx(scores, abs=1e-9) for dim, scores in expected.items()}

    def assert_card_table() -> None:
        rows = table_rows((out / "README.md").read_text(encoding="utf-8"))
        assert rows["header"] == ["dim", "STS-B dev", "SICK-R trial", "Avg. (dev)"]
        assert list(rows)[1:] == [str(dim) for dim in DIMS]
        for dim in DIMS:
            scores = expected[str(dim)]
            assert rows[str(dim)] == [f"{scores['stsb']:.2f}", f"{scores['sickr']:.2f}", f"{scores['avg']:.2f}"]

    assert_card_table()
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"--tasks stsb sickr --stsb_split dev --sickr_split trial --truncate_dim {' '.join(map(str, DIMS))}" in card

    push_run(out, "user/matryoshka", dry_run=True)  # re-renders the card from the folder's files
    assert_card_table()
    (out / TRAINING_SUMMARY_FILE).unlink()  # a checkpoint-like folder: the summary rebuilt from training_args.json
    push_run(out, "user/matryoshka", dry_run=True)
    assert_card_table()


def test_a_paper_config_run_adds_the_test_sets_per_dimension(tmp_path: Path, tiny_encoder_dir: Path) -> None:
    """A paper config scores the 7 test sets at the end: per dimension too, from the same encoding; the full size's
    row equals the run's sts_results.json."""
    sts_dir = write_senteval_downstream(tmp_path)
    out = matryoshka_run(tmp_path, tiny_encoder_dir, sts_dir=str(sts_dir), paper_results=PAPER_BLOCK)
    saved = json.loads((out / MATRYOSHKA_RESULTS_FILE).read_text(encoding="utf-8"))
    dev, test = saved["evaluations"]
    assert (dev["name"], test["name"], test["text"]) == ("dev", "test", "raw")
    assert test["splits"] == {**{f"sts1{i}": "test" for i in range(2, 7)}, "stsb": "test", "sickr": "test"}
    expected = eval_dims(out, sts_dir)  # hf_cse.eval's defaults with --sts_dir: the 7 tasks, SimCSE's splits
    assert test["scores"] == {dim: pytest.approx(scores, abs=1e-9) for dim, scores in expected.items()}
    full = json.loads((out / "sts_results.json").read_text(encoding="utf-8"))
    assert test["scores"]["32"] == pytest.approx({key: full[key] for key in test["scores"]["32"]}, abs=1e-9)

    rows = table_rows((out / "README.md").read_text(encoding="utf-8"))
    assert rows["header"] == ["dim", "STS-B dev", "STS12", "STS13", "STS14", "STS15", "STS16", "STS-B test"] + [
        "SICK-R test",
        "Avg. (test)",
    ]
    for dim in DIMS:
        scores = test["scores"][str(dim)]
        assert rows[str(dim)] == [
            f"{dev['scores'][str(dim)]['stsb']:.2f}",
            *(f"{scores[task]:.2f}" for task in test["splits"]),
            f"{scores['avg']:.2f}",
        ]

    # The model-index holds the same scores: one metric per task and prefix, its args naming the prefix.
    assert dev["splits"] == {"stsb": "dev"}  # the Hub's STS-B copy calls it "validation"
    expected_index = {
        (STS_DISPLAY[task][1], {"dev": "validation"}.get(split, split), dim): round(group["scores"][str(dim)][task], 2)
        for group in (dev, test)
        for task, split in group["splits"].items()
        for dim in DIMS
    }
    assert model_index_per_dimension((out / "README.md").read_text(encoding="utf-8")) == expected_index


def model_index_per_dimension(card: str) -> dict[tuple[str, str, int], float]:
    """``{(dataset type, split, d): value}`` of the card's model-index metrics with ``args: {truncate_dim: d}``."""
    front_matter = yaml.safe_load(card.split("---\n")[1])
    return {
        (result["dataset"]["type"], result["dataset"]["split"], metric["args"]["truncate_dim"]): metric["value"]
        for result in front_matter["model-index"][0]["results"]
        for metric in result["metrics"]
        if "truncate_dim" in (metric.get("args") or {})
    }


def test_push_with_sts_dir_adds_the_test_sets_per_dimension_and_keeps_the_dev_scores(
    tmp_path: Path, tiny_encoder_dir: Path
) -> None:
    sts_dir = write_senteval_downstream(tmp_path)
    out = matryoshka_run(
        tmp_path, tiny_encoder_dir, sts_dir=str(sts_dir), eval_sts_tasks=["stsb"], eval_strategy="steps", eval_steps=2
    )
    dev = json.loads((out / MATRYOSHKA_RESULTS_FILE).read_text(encoding="utf-8"))["evaluations"]
    assert [group["name"] for group in dev] == ["dev"]

    push_run(out, "user/matryoshka", dry_run=True, sts_dir=sts_dir)
    saved = json.loads((out / MATRYOSHKA_RESULTS_FILE).read_text(encoding="utf-8"))
    assert saved["dims"] == DIMS and saved["evaluations"][0] == dev[0]  # training's dev scores kept
    test = saved["evaluations"][1]
    assert (test["name"], test["text"]) == ("test", "raw")
    expected = eval_dims(out, sts_dir)  # hf_cse.eval's defaults with --sts_dir: the 7 tasks, SimCSE's splits
    assert test["scores"] == {dim: pytest.approx(scores, abs=1e-9) for dim, scores in expected.items()}
    full = json.loads((out / "sts_results.json").read_text(encoding="utf-8"))  # push's own full-size scores
    assert test["scores"]["32"] == pytest.approx({key: full[key] for key in test["scores"]["32"]}, abs=1e-9)
    rows = table_rows((out / "README.md").read_text(encoding="utf-8"))
    assert rows["header"][-2:] == ["SICK-R test", "Avg. (test)"]
    assert rows["4"][-1] == f"{expected['4']['avg']:.2f}"


def test_a_run_with_nothing_to_score_has_no_table_and_removes_an_earlier_runs_file(
    tmp_path: Path, tiny_encoder_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No sts_dir and no evaluation (the dev sets would come from the Hub): no table, said once; a file an earlier
    run left in the folder describes another model and goes."""
    stale = tmp_path / "out" / MATRYOSHKA_RESULTS_FILE
    stale.parent.mkdir()
    stale.write_text(json.dumps({"dims": DIMS, "evaluations": []}), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        out = matryoshka_run(tmp_path, tiny_encoder_dir, overwrite_output_dir=True)  # trained over the folder
    assert not stale.exists()
    assert "### Matryoshka dimensions" not in (out / "README.md").read_text(encoding="utf-8")
    assert "no per-dimension STS table. `python -m hf_cse.eval --truncate_dim 32 16 4`" in caplog.text


def test_a_file_for_other_dims_or_a_plain_run_is_not_rendered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    saved = {
        "dims": [32, 8],
        "evaluations": [{"name": "dev", "splits": {"stsb": "dev"}, "scores": {"32": {"stsb": 1.0}, "8": {}}}],
    }
    (tmp_path / MATRYOSHKA_RESULTS_FILE).write_text(json.dumps(saved), encoding="utf-8")

    def summary(**config: object) -> TrainingSummary:
        return TrainingSummary(base_model=None, train_data=None, objective="simcse", objective_config=config)

    assert read_matryoshka_results(tmp_path, summary(matryoshka_dims=[32, 8])).dims == (32, 8)
    assert read_matryoshka_results(tmp_path, summary()) is None  # a plain run: the file is not its own
    with caplog.at_level(logging.WARNING):
        assert read_matryoshka_results(tmp_path, summary(matryoshka_dims=[32, 16])) is None
    assert "has dims [32, 8], the run trained [32, 16]" in caplog.text
    (tmp_path / MATRYOSHKA_RESULTS_FILE).write_text('{"dims": [32, 8], "evaluations": [{"scores": {}}]}')
    with caplog.at_level(logging.WARNING):
        assert read_matryoshka_results(tmp_path, summary(matryoshka_dims=[32, 8])) is None
    assert "is malformed" in caplog.text
