"""Ctrl-C says what is true for the output folder as the run leaves it (issue 56, item 4): a run stopped before its
first checkpoint said that ``--resume_from_checkpoint true`` goes on from the newest checkpoint, which was then
refused ("holds no verified checkpoint-N folder"). Each line's advice is followed here, and must work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from common.commands import run_unsup_argv, run_unsup_in_process
from common.training_checks import add_to_every_trainer
from conftest import run_unsup
from transformers import TrainerCallback

from hf_cse.errors import UsageError
from hf_cse.training.saving.output_dir import interrupted_run_hint

SIGTERM = "(SIGTERM, unlike Ctrl-C, saves a checkpoint after the current step before stopping)"
INTERRUPTED = "run_unsup.py: interrupted (Ctrl-C); "


class CtrlCAfter(TrainerCallback):
    """Ctrl-C as the optimizer step ``step`` ends (once: the command run after it trains to the end)."""

    def __init__(self, step: int) -> None:
        self.step: int | None = step

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == self.step:
            self.step = None
            raise KeyboardInterrupt


def argv_of(encoder_dir: Path, work: Path) -> list[str]:
    """A 6-step run that saves checkpoint-3 and checkpoint-6."""
    return run_unsup_argv(encoder_dir, work, max_steps=6, save_steps=3, logging_steps=1, disable_tqdm="true")


def test_ctrl_c_before_the_first_checkpoint_says_the_same_command_starts_anew_and_it_does(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    argv = argv_of(tiny_encoder_dir, tmp_path)
    add_to_every_trainer(monkeypatch, CtrlCAfter(1))
    code, line = run_unsup_in_process(monkeypatch, capsys, argv)
    assert (code, line) == (
        130,
        f"{INTERRUPTED}no checkpoint was saved, so there is nothing to resume: the same command starts the run anew "
        f"{SIGTERM}.",
    )
    with pytest.raises(UsageError) as refused:  # what the line said before
        run_unsup.main([*argv, "--resume_from_checkpoint=true"])
    assert str(refused.value).endswith(
        "holds no verified checkpoint-N folder, so there is nothing to resume: the same command without "
        "--resume_from_checkpoint starts the run anew."
    )
    assert run_unsup.main(argv)["epoch"] > 0 and (tmp_path / "out" / "checkpoint-6").is_dir()


def test_ctrl_c_after_a_checkpoint_names_it_and_resuming_goes_on_from_it(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    argv = argv_of(tiny_encoder_dir, tmp_path)
    add_to_every_trainer(monkeypatch, CtrlCAfter(4))
    code, line = run_unsup_in_process(monkeypatch, capsys, argv)
    assert (code, line) == (
        130,
        f"{INTERRUPTED}the same command with --resume_from_checkpoint true goes on from checkpoint-3, the newest "
        f"checkpoint {SIGTERM}.",
    )
    run_unsup.main([*argv, "--resume_from_checkpoint=true"])
    assert (tmp_path / "out" / "checkpoint-6").is_dir() and (tmp_path / "out" / "model.safetensors").is_file()


def test_a_folder_holding_a_run_without_checkpoints_is_started_anew_with_overwrite(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """A run that saves no checkpoint (``--save_strategy no``) leaves its final model only: neither a new run nor a
    resume is taken there, and every message says ``--overwrite_output_dir true``, which is."""
    out = tmp_path / "out"
    argv = run_unsup_argv(tiny_encoder_dir, tmp_path, max_steps=2, save_strategy="no")
    run_unsup.main(argv)
    overwrite = (
        f"the same command with --overwrite_output_dir true starts the run anew (it moves what {str(out)!r} holds "
        "into _previous-run-TIME/), or choose another --output_dir"
    )
    assert (
        interrupted_run_hint(out) == f"no checkpoint was saved, so there is nothing to resume: {overwrite} {SIGTERM}"
    )
    with pytest.raises(UsageError) as refused:
        run_unsup.main(argv)
    assert str(refused.value).endswith(
        "without a checkpoint-N folder to resume from; pass --overwrite_output_dir true to move it aside and train "
        "anew, or choose another --output_dir."
    )
    with pytest.raises(UsageError) as refused:
        run_unsup.main([*argv, "--resume_from_checkpoint=true"])
    assert str(refused.value).endswith(
        overwrite.replace(" true ", " true in place of --resume_from_checkpoint ", 1) + "."
    )
    run_unsup.main([*argv, "--overwrite_output_dir=true"])
    assert len(list(out.glob("_previous-run-*"))) == 1
