"""A real full disk: the run's (or the report's) output folder on a small tmpfs, left with ``budget`` free bytes just
before a save, for every failure point of that save (:class:`FailurePoints`: each amount of free space that makes
another of its file operations the first to find the disk full): the final save, a checkpoint save (which also
rotates an older one away) and ``python -m hf_cse.report``. The libraries raise what they really raise (safetensors
a ``SafetensorError``, tokenizers a plain ``Exception``, torch a cause-less ``RuntimeError``, Python an
``OSError``), and for each budget:

1. the invocation succeeds, or ends with one line, :class:`~hf_cse.errors.DiskFullError` (any budget below what the
   save takes must end so);
2. every ``checkpoint-N`` verifies; the folder holds no model, or one that loads with the final weights; no report
   plot is truncated (nor any left by a report that failed); no staging folder or temporary file is left;
3. with the disk enlarged, the next invocation (``--resume_from_checkpoint true``, or the report again) completes,
   bit-equal to a run that never met a full disk.

Mounting needs root (CAP_SYS_ADMIN): elsewhere these tests are skipped, saying so; tests/test_crash_consistency.py
injects the same libraries' exceptions at every file operation without a mount. The default suite takes each save's
first failure point, its middle one and its last; the slow suite every one, and checks that every library that
writes in a training save (safetensors, tokenizers, torch, Python) met the full disk.
"""

from __future__ import annotations

import contextlib
import gc
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import safetensors
import torch
from common.commands import SAVING_RUN, run_unsup_argv
from common.commands import SHORT_RUN_STEPS as MAX_STEPS
from common.crash_sweep import leftovers
from common.small_filesystem import PAGE, SmallFilesystem, small_filesystem
from conftest import REPO_ROOT
from fault_injection import FileOperations
from PIL import Image
from safetensors.torch import load_file
from transformers import AutoModel

from hf_cse import CSETrainer
from hf_cse.commands import report as report_cli
from hf_cse.errors import DiskFullError
from hf_cse.training.saving import checkpoints_newest_first, verification_problem
from hf_cse.training.saving.writer import RunWriter

sys.path.insert(0, str(REPO_ROOT))
import run_unsup  # noqa: E402


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[SmallFilesystem]:
    with small_filesystem(tmp_path / "mnt") as fs:
        yield fs


@pytest.fixture(autouse=True)
def _no_gc_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # accelerate's free_memory() runs gc.collect() at the end of every train(): seconds over a sweep, for nothing.
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)


def run_argv(encoder_dir: Path, work: Path, output_dir: Path) -> list[str]:
    """The flags of the crash sweep's run (tests/common/crash_sweep.py), training on ``work/train.txt`` (not on the
    small disk: only the output folder is)."""
    return run_unsup_argv(encoder_dir, work, output_dir=output_dir, **SAVING_RUN)


def library_of(err: BaseException | None) -> str:
    """Which library's exception a one-line error was raised from: what the disk really gave."""
    cause = err.__cause__ if err is not None else None
    if isinstance(cause, safetensors.SafetensorError):
        return "safetensors"
    if isinstance(cause, OSError):
        return "python"
    if isinstance(cause, RuntimeError):
        return "torch"
    return "tokenizers" if type(cause) is Exception else type(cause).__name__


class FailurePoints:
    """Where a full disk can stop a save, measured on a roomy run of it: before each of its file operations, the most
    bytes the save had taken by then (deletions give some back). Leaving exactly that many free makes that operation
    the first to find the disk full, so the distinct values are the save's distinct failure points."""

    def __init__(self, fs: SmallFilesystem) -> None:
        self.fs = fs
        self.start = 0
        self.peaks: list[int] = []

    def begin(self) -> None:
        self.start = self.fs.used()
        self.peaks = [0]

    def observe(self) -> None:
        self.peaks.append(max(self.peaks[-1], self.fs.used() - self.start))

    def budgets(self, every_point: bool) -> list[int]:
        """Every distinct failure point with ``every_point``, else the first, the middle one and the last."""
        points = sorted(set(self.peaks))
        return points if every_point else sorted({points[0], points[len(points) // 2], points[-1]})


# --- training: the final save and a checkpoint save ---------------------------------------------------------------


@pytest.fixture(scope="module")
def straight(tiny_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, torch.Tensor]:
    work = tmp_path_factory.mktemp("straight")
    run_unsup.main(run_argv(tiny_encoder_dir, work, work / "out"))
    return load_file(work / "out" / "model.safetensors")


def run_with_full_disk(
    fs: SmallFilesystem,
    argv: list[str],
    phase: str,
    budget: int | None,
    monkeypatch: pytest.MonkeyPatch,
    points: FailurePoints | None = None,
) -> BaseException | None:
    """One invocation, the disk left with ``budget`` free bytes from just before ``phase``'s save to the end of the
    invocation (``None``: roomy, its failure ``points`` measured); returns what ended it."""
    train, save_model, on_save = CSETrainer.train, RunWriter.save_model, RunWriter.on_save
    ops = FileOperations(Path(argv_value(argv, "output_dir")), observe=points.observe if points else None)

    def before_the_save() -> None:
        if budget is not None:
            fs.leave_free(budget)
        if points is not None:
            points.begin()
            ops.armed = True

    def train_then_fill(trainer: CSETrainer, *args: Any, **kwargs: Any) -> Any:
        output = train(trainer, *args, **kwargs)
        if phase == "final":
            before_the_save()
        return output

    def fill_then_save(writer: RunWriter, output_dir: str | None = None, internal_call: bool = False) -> None:
        # The Trainer's checkpoint save at MAX_STEPS begins with the model's save into checkpoint-N ...
        if phase == "checkpoint" and internal_call and writer.trainer.state.global_step == MAX_STEPS:
            before_the_save()
        return save_model(writer, output_dir, internal_call)

    def commit_then_disarm(writer: RunWriter, *args: Any, **kwargs: Any) -> Any:
        try:  # ... and ends with its commit
            return on_save(writer, *args, **kwargs)
        finally:
            if phase == "checkpoint":
                ops.armed = False

    with monkeypatch.context() as patches:
        patches.setattr(CSETrainer, "train", train_then_fill)
        patches.setattr(RunWriter, "save_model", fill_then_save)
        patches.setattr(RunWriter, "on_save", commit_then_disarm)
        with ops.installed(patches) if points is not None else contextlib.nullcontext():
            try:
                run_unsup.main(argv)
            except Exception as err:
                return err
            finally:
                if points is not None and ops.armed:
                    points.observe()  # what the save left: its last write counts too
                ops.armed = False
                fs.enlarge()
    return None


def argv_value(argv: list[str], name: str) -> str:
    return next(arg.split("=", 1)[1] for arg in argv if arg.startswith(f"--{name}="))


def check_folder(output_dir: Path, straight: dict[str, torch.Tensor], context: str) -> None:
    for checkpoint in checkpoints_newest_first(output_dir):
        assert verification_problem(checkpoint) is None, f"{context}: {checkpoint}"
    if (output_dir / "config.json").exists():
        AutoModel.from_pretrained(output_dir)
        saved = load_file(output_dir / "model.safetensors")
        assert all(torch.equal(straight[key], value) for key, value in saved.items()), context
    assert leftovers(output_dir) == [], context


def sweep_training(
    fs: SmallFilesystem,
    encoder_dir: Path,
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    straight: dict[str, torch.Tensor],
    phase: str,
    every_point: bool,
) -> set[str]:
    """Every budget of :func:`budgets` for ``phase``; returns the libraries whose errors the disk gave."""
    roomy = fs.path / "roomy"
    points = FailurePoints(fs)
    assert run_with_full_disk(fs, run_argv(encoder_dir, work, roomy), phase, None, monkeypatch, points) is None
    total = max(points.peaks)
    assert total > PAGE
    shutil.rmtree(roomy)
    libraries = set()
    for budget in points.budgets(every_point):
        output_dir = fs.path / f"run-{budget}"
        argv = run_argv(encoder_dir, work, output_dir)
        ended = run_with_full_disk(fs, argv, phase, budget, monkeypatch)
        context = f"{phase} save with {budget} of its {total} bytes free"
        assert ended is not None or budget >= total, f"{context}: no error"  # the sweep meets the full disk
        if ended is not None:
            assert isinstance(ended, DiskFullError), f"{context}: ended with {ended!r}"
            assert "\n" not in str(ended) and "The disk is full: saving " in str(ended), context
            libraries.add(library_of(ended))
        check_folder(output_dir, straight, context)
        run_unsup.main([*argv, "--resume_from_checkpoint=true"])
        state = json.loads((output_dir / "trainer_state.json").read_text(encoding="utf-8"))
        assert state["global_step"] == MAX_STEPS, context
        check_folder(output_dir, straight, context)
        assert (output_dir / "config.json").is_file(), context
        shutil.rmtree(output_dir)
    return libraries


@pytest.mark.parametrize("phase", ["final", "checkpoint"])
def test_a_real_full_disk_in_a_save_is_one_line_and_loses_nothing(
    small_fs: SmallFilesystem,
    tiny_encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    straight: dict[str, torch.Tensor],
    phase: str,
) -> None:
    libraries = sweep_training(small_fs, tiny_encoder_dir, tmp_path, monkeypatch, straight, phase, every_point=False)
    assert libraries <= {"safetensors", "tokenizers", "torch", "python"}, libraries


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["final", "checkpoint"])
def test_a_real_full_disk_at_every_failure_point_of_a_save(
    small_fs: SmallFilesystem,
    tiny_encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    straight: dict[str, torch.Tensor],
    phase: str,
) -> None:
    libraries = sweep_training(small_fs, tiny_encoder_dir, tmp_path, monkeypatch, straight, phase, every_point=True)
    # Every library that writes in a save met the full disk, and each error was one line.
    assert {"safetensors", "tokenizers", "torch", "python"} <= libraries, libraries


# --- python -m hf_cse.report ------------------------------------------------------------------------------------


LOG_HISTORY = [
    {"step": 1, "loss": 1.2, "loss_dclr": 1.2, "masked_negative_share": 0.05, "eval_stsb_spearman": 60.0},
    {"step": 2, "loss": 0.9, "loss_dclr": 0.9, "masked_negative_share": 0.04, "eval_stsb_spearman": 70.0},
    {"step": 2, "eval_alignment": 0.25, "eval_uniformity": -2.0},
]


def report_run_dir(encoder_dir: Path, root: Path) -> Path:
    run_dir = Path(shutil.copytree(encoder_dir, root / "run"))
    state = {"global_step": 2, "train_batch_size": 4, "log_history": LOG_HISTORY}
    (run_dir / "trainer_state.json").write_text(json.dumps(state), encoding="utf-8")
    probe = root / "probe.tsv"  # a small probe: the sweep is about the writes
    probe.write_text("sentence\tnegation\na cat sits\ta cat does not sit\n", encoding="utf-8")
    return run_dir


def check_report(output_dir: Path, context: str) -> None:
    """No staging folder or temporary file left; every plot there loads whole (a truncated PNG does not)."""
    assert leftovers(output_dir) == [], context
    for png in output_dir.glob("*.png"):
        with Image.open(png) as image:
            image.load()


def sweep_report(
    fs: SmallFilesystem, encoder_dir: Path, work: Path, monkeypatch: pytest.MonkeyPatch, every_point: bool
) -> set[str]:
    run_dir = report_run_dir(encoder_dir, work)

    def report(output_dir: Path, budget: int | None, points: FailurePoints | None = None) -> BaseException | None:
        argv = [
            str(run_dir),
            "--output_dir",
            str(output_dir),
            "--device",
            "cpu",
            "--probe_tsv",
            str(work / "probe.tsv"),
        ]
        if budget is not None:
            fs.leave_free(budget)
        ops = FileOperations(output_dir, observe=points.observe if points else None)
        with monkeypatch.context() as patches, ops.installed(patches) if points else contextlib.nullcontext():
            if points is not None:
                points.begin()
                ops.armed = True
            try:
                report_cli.main(argv)
            except Exception as err:
                return err
            finally:
                if points is not None:
                    points.observe()
                ops.armed = False
                fs.enlarge()
        return None

    points = FailurePoints(fs)
    assert report(fs.path / "roomy", None, points) is None
    total = max(points.peaks)
    expected = {path.name: path.read_bytes() for path in (fs.path / "roomy").iterdir() if path.suffix == ".png"}
    assert len(expected) == 4
    libraries = set()
    for budget in points.budgets(every_point):
        output_dir = fs.path / f"report-{budget}"
        ended = report(output_dir, budget)
        context = f"report with {budget} of its {total} bytes free"
        assert ended is not None or budget >= total, f"{context}: no error"
        if ended is not None:
            assert isinstance(ended, DiskFullError) and "\n" not in str(ended), f"{context}: {ended!r}"
            assert str(ended).startswith("The disk is full: saving ") and f" in {output_dir} failed" in str(ended)
            libraries.add(library_of(ended))
            assert not output_dir.exists() or not list(output_dir.glob("*.png")), context  # all or nothing
        check_report(output_dir, context)
        assert report(output_dir, None) is None, context  # the disk freed: the report is written whole
        check_report(output_dir, context)
        assert {png: (output_dir / png).read_bytes() for png in expected} == expected, context
        shutil.rmtree(output_dir)
    return libraries


def test_a_real_full_disk_in_the_report_is_one_line_and_leaves_no_truncated_plot(
    small_fs: SmallFilesystem, tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert sweep_report(small_fs, tiny_encoder_dir, tmp_path, monkeypatch, every_point=False) == {"python"}


@pytest.mark.slow
def test_a_real_full_disk_at_every_failure_point_of_the_report(
    small_fs: SmallFilesystem, tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert sweep_report(small_fs, tiny_encoder_dir, tmp_path, monkeypatch, every_point=True) == {"python"}
