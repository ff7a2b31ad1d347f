"""What a first run says: where the model went, and that a short run with the Trainer's logging_steps logs no loss."""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
from pathlib import Path

import datasets
import pytest
from common.commands import run_unsup_argv
from conftest import run_unsup
from markdown_it import MarkdownIt

from hf_cse import CSETrainingArguments, PoolingConfig
from hf_cse.export.upload_list import ADAPTER_DIR, KEPT_LOCAL, RUN_FILES, RUN_RECORD_FILES
from hf_cse.markdown import markdown_text

NO_LOSS = (
    "max_steps 2 is smaller than logging_steps 500: no training loss will be logged before the run ends. Pass "
    "--logging_steps 1 (for example) to follow it."
)


def test_a_run_warns_once_that_it_logs_no_loss_and_ends_naming_the_saved_model(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative output_dir is named absolute
    argv = run_unsup_argv(tiny_encoder_dir, tmp_path, max_steps=2, output_dir="out", save_strategy="no")
    with caplog.at_level(logging.INFO):
        run_unsup.main(argv)
    messages = [record.getMessage() for record in caplog.records if record.name == run_unsup.logger.name]
    assert messages.count(NO_LOSS) == 1
    assert messages[-1] == f"Saved the model to {tmp_path / 'out'}"
    assert (tmp_path / "out" / "model.safetensors").is_file()


@pytest.mark.parametrize(
    "settings",
    [
        {"max_steps": 2, "logging_steps": 2},  # logs at the last step
        {"max_steps": -1},  # epochs: the run's length is the corpus'
        {"max_steps": 2, "logging_steps": 0.5},  # a fraction of the run
        {"max_steps": 2, "logging_first_step": True},
        {"max_steps": 2, "logging_strategy": "no"},
    ],
)
def test_no_warning_when_a_loss_is_logged_or_not_asked_for(
    caplog: pytest.LogCaptureFixture, tmp_path: Path, settings: dict[str, object]
) -> None:
    run_unsup.warn_if_no_loss_is_logged(CSETrainingArguments(output_dir=str(tmp_path), use_cpu=True, **settings))
    assert caplog.records == []


@pytest.mark.skipif(
    "HF_DATASETS_DISABLE_PROGRESS_BARS" in os.environ, reason="datasets' bars are set for the whole process here"
)
@pytest.mark.parametrize("disable_tqdm", ["true", "false"])
def test_disable_tqdm_hides_the_tokenizing_bar_too(
    disable_tqdm: str, capsys: pytest.CaptureFixture, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """Issue 56 item 9: ``--disable_tqdm true`` hid the Trainer's bars, not datasets' "Tokenizing" one; the bars are
    datasets' to show again after the run."""
    argv = run_unsup_argv(tiny_encoder_dir, tmp_path, max_steps=1, save_strategy="no", disable_tqdm=disable_tqdm)
    run_unsup.main(argv)
    assert ("Tokenizing" in capsys.readouterr().err) is (disable_tqdm == "false")
    assert not datasets.utils.are_progress_bars_disabled()


def test_max_train_samples_logs_the_count_trained_on(
    caplog: pytest.LogCaptureFixture, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """Issue 56 item 9: ``--max_train_samples 256`` logged only the file's count ("11914 training sentences")."""
    argv = run_unsup_argv(tiny_encoder_dir, tmp_path, max_steps=1, save_strategy="no", max_train_samples=8)
    with caplog.at_level(logging.INFO):
        run_unsup.main(argv)
    messages = [record.getMessage() for record in caplog.records if record.name == run_unsup.logger.name]
    assert "max_train_samples 8: training on the first 8 of the 24 sentences." in messages


def _readme_upload_bullet() -> tuple[set[str], set[str]]:
    """The backticked names of the docs' "Uploaded: ... Left out: ..." bullet (docs/loading-and-sharing.md):
    ``(uploaded, left_out)``."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "loading-and-sharing.md").read_text(encoding="utf-8")
    bullet = page.split("- Uploaded: ", 1)[1].split("\n- ", 1)[0]
    uploaded, left_out = bullet.split("Left out:", 1)
    left_out = left_out.split("and, named in one", 1)[0]  # what follows is the foreign files, not hf_cse's own

    def names(text: str) -> set[str]:
        return set(re.findall(r"`([^`]+)`", text))

    return names(uploaded), names(left_out)


def test_the_readme_upload_list_is_the_allowlist() -> None:
    """Issue 32 item 3: the docs' upload list names exactly the run files the allowlist uploads, and what it says
    is left out is what the allowlist keeps local."""
    uploaded, left_out = _readme_upload_bullet()
    results = {name for name in uploaded if name.endswith(".json")}
    assert results == set(RUN_RECORD_FILES)
    assert f"{ADAPTER_DIR}/" in uploaded
    for name in results:
        assert RUN_FILES.fullmatch(name), name
        assert not KEPT_LOCAL.fullmatch(name), name
    examples = {"checkpoint-*": "checkpoint-7/", "training_args.*": "training_args.json", "report/": "report/"}
    for name in left_out & set(examples):
        assert KEPT_LOCAL.fullmatch(examples[name]), name
    assert set(examples) <= left_out
    for name in ("training_args.bin", "training_args.json", "report/report.md", "checkpoint-7/model.safetensors"):
        assert not RUN_FILES.fullmatch(name), name


@pytest.mark.parametrize(
    "text",
    [
        'SimCSE, BERT-base (Gao et al.\'s "unsup" row: 76.25%; see p. 5)',
        "*bold* _em_ ~~del~~ `code` [link](http://x) ![img](y) <b>tag</b> &amp; a|b $x$ # not a heading \\ end",
        "1. not a list > nor a quote",
    ],
)
def test_card_text_renders_as_itself_with_only_markup_escaped(text: str) -> None:
    """Issue 32 item 6: a comma, quote or parenthesis is written as is (the card once read ``SimCSE\\, BERT-base``);
    what could start markup is escaped, so the text still renders as itself."""
    escaped = markdown_text(text)
    if not set(text) & set("\\`*_~[]<>&|$#"):
        assert escaped == text
    inline = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parseInline(f"x {escaped} y")[0].children
    assert [token.type for token in inline] == ["text"] and inline[0].content == f"x {text} y"


def test_help_says_what_selects_the_best_checkpoint(capsys: pytest.CaptureFixture) -> None:
    """Issue 32 item 7: not the Trainer's "Defaults to 'loss'": hf_cse selects on the evaluators' primary metric."""
    with pytest.raises(SystemExit):
        run_unsup.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    help_text = text.split("--metric-for-best-model METRIC_FOR_BEST_MODEL", 1)[1].split(" --", 1)[0]
    assert "Defaults to 'loss'" not in help_text and "stsb_spearman (STS-B dev Spearman) by default" in help_text


def test_a_card_without_sts_scores_says_how_to_score_them_and_put_them_on_the_card() -> None:
    """Issue 32 item 6: the Evaluation section's ``hf_cse.eval --output_json`` command is followed by the push that
    brings that file onto the card; both parse with their commands' own parsers."""
    from hf_cse.commands.eval import build_parser as eval_parser
    from hf_cse.commands.push import build_parser as push_parser
    from hf_cse.export.model_card import TrainingSummary, render_card_from_summary

    summary = TrainingSummary(None, None, "simcse", {}, pooling=PoolingConfig(pooler="cls").to_dict())
    card = render_card_from_summary(summary, "user/my model")
    commands = card.split("## Evaluation\n", 1)[1].split("```bash\n", 1)[1].split("\n```", 1)[0].split("\n")
    assert [command.split()[:3] for command in commands] == [
        ["python", "-m", "hf_cse.eval"],
        ["python", "-m", "hf_cse.push"],
    ]
    scored = eval_parser().parse_args(shlex.split(commands[0])[3:])
    pushed = push_parser().parse_args(shlex.split(commands[1])[3:])
    assert scored.output_json == pushed.sts_results == "sts.json"
    assert scored.model_name_or_path == pushed.repo_id == "user/my model"


def test_a_saved_model_names_the_encoder_architecture_that_loads_it(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """Issue 32 item 6: ``config.json`` said ``"architectures": ["CSEModel"]``, which is no transformers class; the
    root is a plain encoder checkpoint, and says so."""
    from transformers import AutoModel

    from hf_cse import CSEModel

    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls"))
    model.save_pretrained(tmp_path / "saved")
    config = json.loads((tmp_path / "saved" / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == [type(AutoModel.from_pretrained(tmp_path / "saved")).__name__] == ["BertModel"]
    assert CSEModel.from_pretrained(tmp_path / "saved").pooling.pooler == "cls"  # hf_cse still reads its settings
