"""Nothing is lost: divergence stops a run, checkpoints appear whole, resume skips broken ones, one run per folder."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from common.commands import run_unsup_argv
from conftest import HANG_GUARD_S, REPO_ROOT, hold_lock
from conftest import make_tiny_trainer as make_trainer
from fault_injection import TORCH_WRITE_FAILURES, library_error
from safetensors.torch import load_file

from hf_cse import CSETrainer
from hf_cse.atomic_files import staged_publish
from hf_cse.errors import (
    CheckpointError,
    DiskFullError,
    OutputDirLockedError,
    SaveFailedError,
    TrainingDivergedError,
    UsageError,
)
from hf_cse.folder_lock import LOCK_FILE, FolderLock
from hf_cse.training.saving import is_committed, newest_verified_checkpoint, resolve_resume_checkpoint
from hf_cse.training.step.divergence import NonFiniteLossMonitor
from hf_cse.write_failures import write_error, write_errors_as_one_line, write_failure_errno

sys.path.insert(0, str(REPO_ROOT))
import run_unsup  # noqa: E402


def checkpoint_names(output_dir: Path) -> list[str]:
    return sorted(p.name for p in output_dir.iterdir() if p.name.startswith("checkpoint-"))


# --- divergence ---------------------------------------------------------------------------------------------------


def test_monitor_names_the_first_non_finite_step_and_stays_quiet_while_finite() -> None:
    monitor = NonFiniteLossMonitor()
    monitor.check()  # nothing recorded yet
    for step, value in [(1, 2.0), (2, 1.5)]:
        monitor.record(torch.tensor(value), step)
    monitor.check()
    monitor.record(torch.tensor(float("nan")), 3)
    monitor.record(torch.tensor(float("inf")), 4)
    with pytest.raises(TrainingDivergedError, match="at step 3;"):
        monitor.check()


def test_recording_a_loss_never_reads_it_on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way a tensor reaches Python (a device synchronization on a GPU) fails while steps are recorded."""

    def host_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("the loss was read on the host")

    monitor = NonFiniteLossMonitor()
    for name in ("__bool__", "__float__", "__int__", "item", "tolist", "cpu", "numpy"):
        monkeypatch.setattr(torch.Tensor, name, host_read)
    for step, value in enumerate([1.0, float("nan"), 2.0], start=1):
        monitor.record(torch.tensor(value), step)
    monkeypatch.undo()
    with pytest.raises(TrainingDivergedError, match="at step 2;"):
        monitor.check()


def test_a_diverging_run_stops_naming_the_step_and_saves_no_nan_weights(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    trainer = make_trainer(tiny_encoder_dir, tmp_path, learning_rate=1e6, max_steps=30, save_steps=1, logging_steps=50)
    with pytest.raises(TrainingDivergedError, match=r"NaN or infinite at step \d+"):
        trainer.train()
    assert trainer.state.global_step < 30
    for name in checkpoint_names(tmp_path):  # every checkpoint that was written holds finite weights
        weights = load_file(tmp_path / name / "model.safetensors")
        assert all(torch.isfinite(t).all() for t in weights.values()), name
    assert not (tmp_path / "model.safetensors").exists()
    assert not (tmp_path / LOCK_FILE).exists()  # the lock is released on the way out


def test_non_finite_weights_are_never_saved(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    trainer = make_trainer(tiny_encoder_dir, tmp_path / "run", max_steps=2, save_strategy="no")
    trainer.train()
    with torch.no_grad():
        trainer.model.mlp.dense.weight[0, 0] = float("nan")
    with pytest.raises(
        TrainingDivergedError, match="weight 'mlp.dense.weight' holds NaN or infinite values at step 2"
    ):
        trainer.save_model(str(tmp_path / "final"))
    assert not (tmp_path / "final").exists()


def test_run_unsup_exits_non_zero_when_training_diverges(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    output_dir = tmp_path / "out"
    argv = run_unsup_argv(tiny_encoder_dir, tmp_path, learning_rate=1e6, max_steps=30, logging_steps=50)
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run_unsup.py"), *argv], capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert result.returncode == 1  # a failed run, not a usage error (2)
    errors = [line for line in result.stderr.splitlines() if "error:" in line or "Traceback" in line]
    assert len(errors) == 1 and "run_unsup.py: error: Training diverged: the loss" in errors[0]
    assert not (output_dir / "model.safetensors").exists()


# --- checkpoints: whole or absent, inside the output folder ---------------------------------------------------------


def test_a_crash_during_a_checkpoint_save_leaves_earlier_ones_and_resume_true_continues(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    straight = make_trainer(tiny_encoder_dir, tmp_path / "straight")
    straight.train()

    crashed_dir = tmp_path / "crashed"
    crashing = make_trainer(tiny_encoder_dir, crashed_dir)
    save_rng_state = CSETrainer._save_rng_state

    def crash_at_step_4(self: CSETrainer, output_dir: str) -> None:
        if self.state.global_step == 4:  # model, optimizer and scheduler of checkpoint-4 are written by now
            raise KeyboardInterrupt
        save_rng_state(self, output_dir)

    monkeypatch.setattr(CSETrainer, "_save_rng_state", crash_at_step_4)
    with pytest.raises(KeyboardInterrupt):
        crashing.train()
    monkeypatch.undo()
    # Ctrl-C stops at once: the Trainer's unfinished checkpoint-4 stays as it was, without the manifest that would
    # commit it (no lock left); it is never resumed from, and the next run deletes it.
    assert sorted(p.name for p in crashed_dir.iterdir()) == ["checkpoint-2", "checkpoint-4"]
    assert not is_committed(crashed_dir / "checkpoint-4")
    assert newest_verified_checkpoint(crashed_dir) == crashed_dir / "checkpoint-2"

    resumed = make_trainer(tiny_encoder_dir, crashed_dir)
    resumed.train(resume_from_checkpoint="true")
    assert not any(p.name.startswith(".") for p in crashed_dir.iterdir())
    losses = [[(e["step"], e["loss"]) for e in t.state.log_history if "loss" in e] for t in (straight, resumed)]
    assert [step for step, _ in losses[1]] == [1, 2, 3, 4, 5, 6]  # steps 1-2 from checkpoint-2's state
    assert [loss for _, loss in losses[1]] == pytest.approx([loss for _, loss in losses[0]], rel=1e-5)
    for (name, a), b in zip(straight.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6), name


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("truncate", "model.safetensors has 100 bytes, the manifest says"),
        ("flip", "model.safetensors does not match its SHA-256 in the manifest"),
        ("delete", "optimizer.pt is missing"),
        ("no_manifest", "no hf_cse_manifest.json"),
    ],
)
def test_resume_true_skips_a_checkpoint_that_fails_verification_with_a_warning(
    tiny_encoder_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str, reason: str
) -> None:
    make_trainer(tiny_encoder_dir, tmp_path, max_steps=4).train()
    latest = tmp_path / "checkpoint-4"
    if damage == "truncate":
        with (latest / "model.safetensors").open("r+b") as f:
            f.truncate(100)
    elif damage == "flip":
        data = bytearray((latest / "model.safetensors").read_bytes())
        data[-1] ^= 0xFF
        (latest / "model.safetensors").write_bytes(bytes(data))
    elif damage == "delete":
        (latest / "optimizer.pt").unlink()
    else:
        (latest / "hf_cse_manifest.json").unlink()
    with caplog.at_level(logging.WARNING, logger="hf_cse.training.saving"):
        assert newest_verified_checkpoint(tmp_path) == tmp_path / "checkpoint-2"
    assert f"Skipping {latest}: {reason}" in caplog.text
    if damage != "no_manifest":  # named explicitly: one line naming the bad file (an older checkpoint is taken)
        with pytest.raises(CheckpointError, match=f"checkpoint-4' fails verification: {reason}"):
            resolve_resume_checkpoint(str(latest), tmp_path)
    resumed = make_trainer(tiny_encoder_dir, tmp_path, max_steps=4)
    resumed.train(resume_from_checkpoint="true")  # from checkpoint-2, writing a verified checkpoint-4 again
    assert resumed.state.global_step == 4 and newest_verified_checkpoint(tmp_path) == latest


def test_resume_true_without_a_checkpoint_is_a_clear_error(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    trainer = make_trainer(tiny_encoder_dir, tmp_path)
    with pytest.raises(UsageError, match="--resume_from_checkpoint true: output_dir .* holds no verified checkpoint"):
        trainer.train(resume_from_checkpoint="true")
    assert resolve_resume_checkpoint("false", tmp_path) is None and resolve_resume_checkpoint(None, tmp_path) is None


def test_a_full_disk_is_one_clear_error_and_leaves_no_half_checkpoint(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer = make_trainer(tiny_encoder_dir, tmp_path)
    save_optimizer = CSETrainer._save_optimizer_and_scheduler
    statvfs = os.statvfs
    full = {"disk": False}

    def filesystem(path: object) -> os.statvfs_result:
        fields = list(statvfs(path))
        if full["disk"]:
            fields[3] = fields[4] = 0  # no free block: what a full disk reports
        return os.statvfs_result(fields)

    def disk_full_at_step_4(self: CSETrainer, output_dir: str) -> None:
        if self.state.global_step == 4:  # what torch.save raises when the disk fills up (it says no errno)
            full["disk"] = True
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 2368 vs 2256")
        save_optimizer(self, output_dir)

    monkeypatch.setattr(os, "statvfs", filesystem)
    monkeypatch.setattr(CSETrainer, "_save_optimizer_and_scheduler", disk_full_at_step_4)
    with pytest.raises(DiskFullError, match=f"The disk is full: saving checkpoint-4 in {tmp_path} failed"):
        trainer.train()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-2"]


def test_saves_stage_inside_the_output_folder(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The output folder as a mount point: a rename into it from anywhere outside fails as across filesystems."""
    output_dir = tmp_path / "mounted"
    replace = os.replace

    def replace_within_the_mount(src: str | os.PathLike, dst: str | os.PathLike) -> None:
        inside = [Path(p).resolve().is_relative_to(output_dir.resolve()) for p in (src, dst)]
        if inside[0] != inside[1]:
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src))
        replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_within_the_mount)
    trainer = make_trainer(tiny_encoder_dir, output_dir, max_steps=2)
    trainer.train()
    trainer.save_model()
    assert (output_dir / "model.safetensors").is_file() and (output_dir / "checkpoint-2" / "optimizer.pt").is_file()


def test_saved_files_follow_the_umask(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        trainer = make_trainer(tiny_encoder_dir, tmp_path, max_steps=2)
        trainer.train()
        trainer.save_model()
    finally:
        os.umask(previous)
    modes = {
        str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode)
        for p in [tmp_path / "checkpoint-2", *tmp_path.rglob("*.safetensors"), *tmp_path.rglob("*.json")]
    }
    assert modes["checkpoint-2"] == 0o755
    assert {path: mode for path, mode in modes.items() if path != "checkpoint-2" and mode != 0o644} == {}


def test_an_unwritable_output_folder_fails_before_training(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_file = os.open

    def refuse_the_lock(path: str | os.PathLike, *args: object, **kwargs: object) -> int:
        if Path(path).name == LOCK_FILE:  # the first file a run creates (as root, chmod would not refuse it)
            raise PermissionError(errno.EACCES, "Permission denied")
        return open_file(path, *args, **kwargs)

    trainer = make_trainer(tiny_encoder_dir, tmp_path / "out")
    monkeypatch.setattr(os, "open", refuse_the_lock)
    with pytest.raises(UsageError, match="out' is not writable \\(Permission denied\\)"):
        trainer.train()
    assert trainer.state.global_step == 0


# --- one live run per output folder ---------------------------------------------------------------------------------


def test_a_second_live_run_is_refused_and_the_first_keeps_its_folder(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    holder = hold_lock(tmp_path)
    try:
        trainer = make_trainer(tiny_encoder_dir, tmp_path)
        with pytest.raises(OutputDirLockedError, match=f"in use by another training run \\(pid {holder.pid} on "):
            trainer.train()
        assert trainer.state.global_step == 0 and checkpoint_names(tmp_path) == []
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == holder.pid
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_of_a_killed_run_is_taken_over_with_a_warning(
    tiny_encoder_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    holder = hold_lock(tmp_path)
    holder.kill()  # SIGKILL: no cleanup runs, the lock file and its record stay behind
    holder.wait()
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == holder.pid
    with caplog.at_level(logging.WARNING, logger="hf_cse.folder_lock"):
        make_trainer(tiny_encoder_dir, tmp_path, max_steps=2).train()
    assert f"training run that is no longer running (pid {holder.pid} on " in caplog.text
    assert checkpoint_names(tmp_path) == ["checkpoint-2"] and not (tmp_path / LOCK_FILE).exists()


def test_a_pid_file_lock_of_an_older_version_is_no_lock(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Whatever the record says (another host, a PID that was reused), only a held flock refuses a run: a record
    alone is what a dead holder leaves."""
    (tmp_path / LOCK_FILE).write_text(json.dumps({"host": "node-a", "pid": 1, "started": "2026-11-23 10:00:00"}))
    with caplog.at_level(logging.WARNING, logger="hf_cse.folder_lock"), FolderLock(tmp_path):
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert "no longer running (pid 1 on node-a, since 2026-11-23 10:00:00)" in caplog.text


def test_the_lock_is_reentrant_within_a_run(tmp_path: Path) -> None:
    with FolderLock(tmp_path):
        with FolderLock(tmp_path):  # train() inside run_unsup.main
            pass
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert not (tmp_path / LOCK_FILE).exists()


def test_overwrite_moves_the_earlier_run_aside_so_its_checkpoints_are_never_resumed(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    argv = run_unsup_argv(tiny_encoder_dir, tmp_path, max_steps=2, save_steps=2)
    run_unsup.main(argv)
    # An older, longer run: its checkpoint-500 has a higher number than anything the new run will write.
    (out / "checkpoint-2").rename(out / "checkpoint-500")
    old_files = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    run_unsup.main([*argv, "--overwrite_output_dir=true", "--learning_rate=1e-2"])
    assert checkpoint_names(out) == ["checkpoint-2"]
    assert newest_verified_checkpoint(out) == out / "checkpoint-2"  # `--resume_from_checkpoint true` takes the new one
    (aside,) = out.glob("_previous-run-*")  # nothing of the older run is lost, byte for byte
    assert {p.relative_to(aside): p.read_bytes() for p in aside.rglob("*") if p.is_file()} == old_files
    assert (out / "model.safetensors").read_bytes() != old_files[Path("model.safetensors")]

    # The set-aside run is no run of its own: a third run still needs a flag, and a second overwrite keeps both.
    with pytest.raises(UsageError, match="already holds a run"):
        run_unsup.main(argv)
    run_unsup.main([*argv, "--overwrite_output_dir=true"])
    assert len(list(out.glob("_previous-run-*"))) == 2 and checkpoint_names(out) == ["checkpoint-2"]


def test_run_unsup_keeps_a_finished_run_unless_told_to_resume_or_overwrite(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    argv = run_unsup_argv(tiny_encoder_dir, tmp_path, max_steps=2, save_steps=2)
    run_unsup.main(argv)
    first = (out / "model.safetensors").read_bytes()

    with pytest.raises(UsageError, match="already holds a run .*--resume_from_checkpoint true"):
        run_unsup.main([*argv, "--learning_rate=1e-2"])
    assert (out / "model.safetensors").read_bytes() == first and not (out / LOCK_FILE).exists()

    # README: `true` for the latest; another length is a changed setting (the schedule is rebuilt for it)
    run_unsup.main([*argv, "--resume_from_checkpoint=true", "--max_steps=4", "--allow_changed_settings=true"])
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 4 and checkpoint_names(out) == ["checkpoint-2", "checkpoint-4"]

    run_unsup.main([*argv, "--overwrite_output_dir=true", "--learning_rate=1e-2"])
    assert (out / "model.safetensors").read_bytes() != first


def test_resuming_a_finished_run_says_so_and_trains_nothing(
    tiny_encoder_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The Trainer, resumed from a checkpoint at max_steps, would train extra steps past the end (41 and 42 of 40)."""
    out = tmp_path / "out"
    argv = run_unsup_argv(tiny_encoder_dir, tmp_path, max_steps=4, save_steps=2)
    run_unsup.main(argv)
    first = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix == ".safetensors"}
    results = (out / "train_results.json").read_text(encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="hf_cse.training.trainer"):
        run_unsup.main([*argv, "--resume_from_checkpoint=true"])
    assert "checkpoint-4 is at step 4 of 4: this run already finished; nothing is trained" in caplog.text
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 4
    assert checkpoint_names(out) == ["checkpoint-2", "checkpoint-4"]
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.suffix == ".safetensors"} == first
    assert (out / "train_results.json").read_text(encoding="utf-8") == results  # the training run's metrics kept


# --- what each library raises for a failed write: told apart in one place ------------------------------------------

WRITE_ERRNOS = {errno.ENOSPC: DiskFullError, errno.EDQUOT: DiskFullError, errno.EIO: SaveFailedError}
WRITE_ERRNOS |= {errno.EROFS: SaveFailedError, errno.EACCES: SaveFailedError}


def raised_from(error: BaseException, cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise error from inner
    except BaseException as outer:
        return outer


@pytest.mark.parametrize("code", WRITE_ERRNOS, ids=errno.errorcode.get)
@pytest.mark.parametrize("library", ["python", "safetensors", "tokenizers", "torch"])
def test_every_library_error_for_a_failed_write_is_one_line_of_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, library: str, code: int
) -> None:
    """The class: each library that writes a save's files (Python's file functions, safetensors, tokenizers, torch)
    x each errno a write fails with, raised as that library raises it, also as the cause of another exception (a
    library that wraps it). torch says no errno: a filesystem without a free block is a full disk, else an I/O
    error; each of its messages is told apart."""
    if library == "python":
        errors = [OSError(code, os.strerror(code), str(tmp_path / "f"))]
    elif library == "torch":
        errors = [RuntimeError(message) for message in TORCH_WRITE_FAILURES]
    else:
        errors = [library_error(library, code)]
    if library == "torch":
        full = code in (errno.ENOSPC, errno.EDQUOT)
        statvfs = os.statvfs

        def filesystem(path: object) -> os.statvfs_result:
            fields = list(statvfs(path))
            if full:
                fields[3] = fields[4] = 0
            return os.statvfs_result(fields)

        monkeypatch.setattr(os, "statvfs", filesystem)
        expected_errno = errno.ENOSPC if full else errno.EIO  # torch cannot tell a quota from a full disk
    else:
        expected_errno = code
    for error in [*errors, *(raised_from(ValueError("wrapped"), err) for err in errors)]:
        assert write_failure_errno(error, tmp_path) == expected_errno, repr(error)
        one_line = write_error(error, "checkpoint-4", tmp_path, "resume")
        assert isinstance(one_line, WRITE_ERRNOS[expected_errno]) and "\n" not in str(one_line), repr(error)
        with pytest.raises(WRITE_ERRNOS[expected_errno], match=f"checkpoint-4 in {tmp_path} failed") as raised:
            with write_errors_as_one_line("checkpoint-4", tmp_path, "resume"):
                raise error
        assert raised.value.__cause__ is error and str(raised.value).endswith("then resume.")


@pytest.mark.parametrize(
    "error",
    [
        ValueError("bad value"),
        KeyError("weight"),
        RuntimeError("CUDA out of memory"),
        TypeError("no"),
        Exception("something else"),
        UsageError("a user's mistake"),
        CheckpointError("checkpoint-4 fails verification"),
        DiskFullError("already one line"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_errors_that_are_no_failed_write_pass_through_unchanged(tmp_path: Path, error: Exception) -> None:
    assert write_failure_errno(error, tmp_path) is None and write_error(error, "x", tmp_path) is None
    with pytest.raises(type(error)) as raised:
        with write_errors_as_one_line("x", tmp_path):
            raise error
    assert raised.value is error


def test_nested_saves_name_the_outermost_and_tell_torch_apart_before_the_cleanup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inner writer (a staged publish) decides while its half-written file still fills the disk; the message
    names the outer save (the run's) and says what it says to do."""
    free = {"blocks": 0}
    statvfs = os.statvfs

    def filesystem(path: object) -> os.statvfs_result:
        fields = list(statvfs(path))
        fields[3] = fields[4] = free["blocks"]
        return os.statvfs_result(fields)

    rmtree = shutil.rmtree

    def delete(path: object, *args: object, **kwargs: object) -> None:
        free["blocks"] = 1000  # what the staging folder's deletion gives back
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(os, "statvfs", filesystem)
    monkeypatch.setattr(shutil, "rmtree", delete)
    with pytest.raises(DiskFullError, match=f"saving the final model in {tmp_path / 'out'} failed .*then resume"):
        with write_errors_as_one_line("the final model", tmp_path / "out", "resume"):
            with staged_publish(tmp_path / "out", "the model") as staging:
                (staging / "optimizer.pt").write_bytes(b"half")
                raise RuntimeError(TORCH_WRITE_FAILURES[0])
    assert not (tmp_path / "out").exists() and free["blocks"] == 1000
