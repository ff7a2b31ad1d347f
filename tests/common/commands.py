"""Running hf_cse's command lines from a test: as a process (``python ARGS``), or ``run_unsup.py`` in this process
the way its ``__main__`` runs it, the flags of a short ``run_unsup.py`` run on the tiny model, and a run from a
config file."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG_GUARD_S, REPO_ROOT, SENTENCES, run_unsup, write_config, write_train_file

from hf_cse.commands.cli import run_command


def run_script(args: list[str], **env: str) -> subprocess.CompletedProcess:
    """``python ARGS`` from the repository root, offline, with ``env`` added to the environment."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **env},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )


def run_unsup_in_process(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, argv: list[str]) -> tuple:
    """``run_unsup.py ARGV`` run in this process as its ``__main__`` runs it: the exit status and the last line of
    stderr (the log lines before it are the run's), after checking that no traceback was printed."""
    monkeypatch.delenv("HF_CSE_TRACEBACK", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        run_command(run_unsup.main, "run_unsup.py", argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return exit_info.value.code, err.splitlines()[-1]


EVERY_LOAD = ("read_pairs", "stream_sentences", "load_training_dev_sets", "resolve_model_path")
"""What ``run_unsup.main`` reads before training: the corpus (read whole, its sentences or labelled pairs, or
streamed), the dev sets, the model."""


def refuse_to_load(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make ``run_unsup.NAME`` fail the test if called (each of :data:`EVERY_LOAD` when no name is given): the error
    must come before it."""
    for name in names or EVERY_LOAD:
        message = f"{name} ran before the error"
        monkeypatch.setattr(run_unsup, name, lambda *args, message=message, **kwargs: pytest.fail(message))


def run_unsup_before_any_load(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, argv: list[str]
) -> tuple:
    """:func:`run_unsup_in_process` with every load of :data:`EVERY_LOAD` failing the test: for errors that must
    come before anything loads."""
    refuse_to_load(monkeypatch)
    return run_unsup_in_process(monkeypatch, capsys, argv)


SHORT_RUN_STEPS = 4
SHORT_RUN = {
    "learning_rate": 1e-3,
    "max_steps": SHORT_RUN_STEPS,
    "logging_steps": 1,
    "seed": 0,
    "disable_tqdm": "true",
}
"""The flags of a short seeded run that logs every step (the crash, full-disk and preemption sweeps)."""
SAVING_RUN = {**SHORT_RUN, "save_steps": 2, "save_total_limit": 1}
"""A short run that saves checkpoint-2 and checkpoint-4, the step-4 save also rotating checkpoint-2 away."""


def run_unsup_argv(encoder_dir: Path, work: Path, **flags: object) -> list[str]:
    """``run_unsup.py`` flags training the tiny model on ``work/train.txt`` (written by the first call: the
    sentences twice) into ``work/out``; ``flags`` add to these or replace them."""
    train_file = work / "train.txt"
    if not train_file.exists():
        train_file.write_text("\n".join(SENTENCES * 2) + "\n", encoding="utf-8")
    values = {
        "model_name_or_path": encoder_dir,
        "train_file": train_file,
        "output_dir": work / "out",
        "per_device_train_batch_size": 4,
        "report_to": "none",
        "use_cpu": "true",
        **flags,
    }
    return [f"--{key}={value}" for key, value in values.items()]


def train_from_a_config(encoder_dir: Path, tmp_path: Path, **settings: object) -> str:
    """``run_unsup.py --config`` with ``conftest.write_config``'s run on the sentences, ``settings`` added; checks
    the training loss is finite and returns the model card written to ``tmp_path/out``."""
    config = write_config(tmp_path, encoder_dir, write_train_file(tmp_path, SENTENCES), **settings)
    metrics = run_unsup.main(["--config", str(config)])
    assert math.isfinite(metrics["train_loss"])
    return (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
