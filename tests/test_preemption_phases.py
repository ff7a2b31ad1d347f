"""Preemption as an invariant over every phase of a run, tested by enumeration as the crash harness is
(tests/test_crash_consistency.py): a ``run_unsup.py`` run (``--save_strategy no``: the final save is the only copy of
its steps; two dataloader workers) gets SIGTERM, sent to every process of the run as SLURM sends it (this process and
each live worker), at the k-th point of the run, for every k:

- **loading**: entering each stage of ``run_unsup.main`` before training (parsing, the output folder's check, dev
  sets, corpus, tokenizer, model, trainer, the folder's recovery and the resume checkpoint's choice);
- **training**: every event of the Trainer's loop (``on_train_begin`` ... ``on_train_end``, every step's), and the
  instant the dataloader workers of each epoch start, signalled from inside a worker once torch has installed its
  worker handler (:func:`signalling_worker_start`);
- **finishing**: every file operation from the end of training to the end of ``main`` (the final model's publish,
  metrics, state, card).

After each:

1. the signal was handled by the run (the handler this test leaves in place while ``main`` runs never fires), and
   the invocation ended in one of two ways only: a one-line ``PreemptedError`` (exit 1) after the step expected
   (the step in progress, the first one when loading, the next one at a step's end), saving a checkpoint that
   verifies; or, after the last step, complete (exit 0), the final model published;
2. a stopped run resumed by its own "To resume" line (the user putting the token back for ``<HUB_TOKEN>``) ends with
   weights bit-equal to a straight run's, and no staging folder anywhere;
3. the ``--hub_token`` given is in no file of the run, nor in anything it printed.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import re
import shlex
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.utils.data._utils.signal_handling as worker_signals
from common.commands import SHORT_RUN, run_unsup_argv
from common.commands import SHORT_RUN_STEPS as MAX_STEPS
from conftest import REPO_ROOT
from fault_injection import FileOperations
from safetensors.torch import load_file
from transformers import TrainerCallback

import hf_cse.training.saving.resume as resume_module
from hf_cse import CSEModel, CSETrainer
from hf_cse.atomic_files import STAGING_PREFIX
from hf_cse.commands.cli import run_command
from hf_cse.training.saving import verification_problem
from hf_cse.training.saving.writer import RunWriter

sys.path.insert(0, str(REPO_ROOT))
import run_unsup  # noqa: E402

TOKEN = "hf_phaseSECRETtoken0123456789"
LOAD_STAGES = (  # (module or class, attribute): what run_unsup.main does before training
    (run_unsup, "parse_run"),
    (run_unsup, "check_output_dir_reuse"),
    (run_unsup, "load_training_dev_sets"),
    (run_unsup, "read_pairs"),
    (run_unsup.AutoTokenizer, "from_pretrained"),
    (run_unsup.AutoConfig, "from_pretrained"),
    (CSEModel, "from_pretrained"),
    (RunWriter, "recover"),
    (resume_module, "resolve_resume_checkpoint"),
)
TRAINER_EVENTS = tuple(name for name in vars(TrainerCallback) if name.startswith("on_"))


def argv(encoder_dir: Path, work: Path) -> list[str]:
    flags = run_unsup_argv(encoder_dir, work, **SHORT_RUN, save_strategy="no", dataloader_num_workers=2)
    return [*flags, "--hub_token", TOKEN]


def signal_every_process() -> None:
    """SIGTERM to this process and each of its live children (the dataloader workers), as SLURM signals a job."""
    for child in multiprocessing.active_children():
        os.kill(child.pid, signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGTERM)


class Points:
    """The points of a run in their order (``labels``, filled by a counting run); ``fire_at``: the 1-based point
    where every process gets SIGTERM. ``steps_done`` records, per point, the optimizer steps whose preemption check
    already ran."""

    def __init__(self, fire_at: int | None = None, marker: Path | None = None) -> None:
        self.fire_at, self.marker = fire_at, marker
        self.labels: list[str] = []
        self.steps_done: list[int] = []
        self.fired: str | None = None
        self.checked_steps = 0

    def hit(self, label: str, fire: Callable[[], None] = signal_every_process) -> None:
        label = re.sub(r"\.[\w-]{8}\.tmp$", ".TMP", re.sub(r"-[0-9a-f]{12}\b", "-ID", label))  # random names
        self.labels.append(label)
        self.steps_done.append(self.checked_steps)
        if len(self.labels) == self.fire_at:
            self.fired = label
            fire()


class EventPoints(TrainerCallback):
    """Every Trainer event is a point (added after the trainer's own callbacks: at a step's end, its preemption
    check has run)."""

    def __init__(self, points: Points) -> None:
        self.points = points
        for name in TRAINER_EVENTS:
            setattr(self, name, self._event(name))

    def _event(self, name: str) -> Callable[..., None]:
        def event(args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if name == "on_step_end":
                self.points.checked_steps = state.global_step
            if name == "on_epoch_begin":  # the epoch's iterator starts its workers next
                self.points.hit(f"workers start (epoch {int(state.epoch or 0) + 1})", self._signal_from_worker)
            self.points.hit(f"{name} (step {state.global_step})")

        return event

    def _signal_from_worker(self) -> None:
        assert self.points.marker is not None
        self.points.marker.write_text("armed", encoding="utf-8")  # read by the workers this epoch forks


@contextmanager
def signalling_worker_start(marker: Path) -> Iterator[None]:
    """In a dataloader worker, right after torch installs its worker signal handlers (which end a worker on a
    SIGTERM from anyone but its parent), the first worker that finds ``marker`` armed signals itself and its parent:
    the signal at the worst instant of a worker's start."""
    real = worker_signals._set_worker_signal_handlers

    def install_then_signal(*args: Any) -> None:
        real(*args)
        try:
            descriptor = os.open(marker.with_suffix(".fired"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(descriptor)
        if marker.read_text(encoding="utf-8") == "armed":
            os.kill(os.getppid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)

    worker_signals._set_worker_signal_handlers = install_then_signal
    try:
        yield
    finally:
        worker_signals._set_worker_signal_handlers = real


class FinishingOperations(FileOperations):
    """Every file operation under the run's folder while armed is a point (no fault)."""

    def __init__(self, root: Path, points: Points) -> None:
        super().__init__(root)
        self.points = points

    def _before(self, name: str, path: Any, *fault_arguments: Any, **fault_keywords: Any) -> None:
        if self._counts(path):
            self.points.hit(f"{name} {Path(path).name}")


def run_at(
    encoder_dir: Path, work: Path, monkeypatch: pytest.MonkeyPatch, fire_at: int | None
) -> tuple[Points, int | None, list[str]]:
    """One invocation of ``run_unsup.py`` (through ``run_command``, as from a shell) with SIGTERM at point
    ``fire_at`` (``None``: count the points). Returns the points, the exit status (``None``: it ended normally) and
    the unhandled signals (the handler left in place while ``main`` runs fired)."""
    command = argv(encoder_dir, work)
    points = Points(fire_at, marker=work / "worker-signal")
    points.marker.write_text("", encoding="utf-8")
    unhandled: list[str] = []
    train = CSETrainer.train
    operations = FinishingOperations(work / "out", points)

    def stage(patches: pytest.MonkeyPatch, owner: Any, attribute: str) -> None:
        real = getattr(owner, attribute)

        def entered(*args: Any, **kwargs: Any) -> Any:
            points.hit(f"loading: {attribute}")
            return real(*args, **kwargs)

        patches.setattr(owner, attribute, entered)

    def train_with_points(trainer: CSETrainer, *args: Any, **kwargs: Any) -> Any:
        trainer.add_callback(EventPoints(points))
        output = train(trainer, *args, **kwargs)
        operations.armed = True  # from here to the end of main: the final save, metrics, state, card
        return output

    with monkeypatch.context() as patches, signalling_worker_start(points.marker):
        for owner, attribute in LOAD_STAGES:
            stage(patches, owner, attribute)
        patches.setattr(CSETrainer, "train", train_with_points)
        patches.setattr(sys, "argv", ["run_unsup.py", *command])
        # accelerate's free_memory() runs gc.collect() at the end of every train(): 0.3 s a run for nothing here.
        patches.setattr(gc, "collect", lambda generation=2: 0)
        outside = signal.signal(signal.SIGTERM, lambda signum, frame: unhandled.append(points.fired or "?"))
        status = None
        try:
            with operations.installed(patches):
                run_command(run_unsup.main, "run_unsup.py")
        except SystemExit as exit_info:
            status = exit_info.code
        finally:
            operations.armed = False
            signal.signal(signal.SIGTERM, outside)
    return points, status, unhandled


def staging_leftovers(folder: Path) -> list[str]:
    return sorted(
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.name.startswith((STAGING_PREFIX, ".checkpoint-"))
    )


def files_holding(folder: Path, text: str) -> list[str]:
    return sorted(
        str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()
    )


@pytest.fixture(scope="module")
def enumerated(tiny_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A straight run: its points in order, the steps checked at each, and its final weights."""
    work = tmp_path_factory.mktemp("straight")
    with pytest.MonkeyPatch.context() as monkeypatch:
        points, status, unhandled = run_at(tiny_encoder_dir, work, monkeypatch, None)
    assert status is None and unhandled == []
    return {
        "labels": points.labels,
        "steps_done": points.steps_done,
        "weights": load_file(work / "out" / "model.safetensors"),
    }


def test_the_run_has_points_in_every_phase(enumerated: dict[str, Any]) -> None:
    labels = enumerated["labels"]
    loading = [label for label in labels if label.startswith("loading: ")]
    assert len(loading) >= len(LOAD_STAGES)  # each stage entered at least once
    steps = {f"on_step_begin (step {step - 1})" for step in range(1, MAX_STEPS + 1)}
    steps |= {f"on_step_end (step {step})" for step in range(1, MAX_STEPS + 1)}
    assert steps <= set(labels) and "workers start (epoch 1)" in labels
    finishing = labels[labels.index(f"on_train_end (step {MAX_STEPS})") + 1 :]
    assert any("model.safetensors" in label for label in finishing) and len(finishing) >= 10


def check_point(
    encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture,
    enumerated: dict[str, Any],
    k: int,
) -> None:
    labels, total = enumerated["labels"], len(enumerated["labels"])
    work = tmp_path / f"point-{k}"
    work.mkdir()
    points, status, unhandled = run_at(encoder_dir, work, monkeypatch, k)
    context = f"SIGTERM at point {k}/{total} ({labels[k - 1]})"
    assert points.fired == labels[k - 1], f"{context}: the run went another way ({points.fired})"
    assert unhandled == [], f"{context}: the signal was not handled by the run"
    printed = capfd.readouterr()
    output = work / "out"
    expected_stop = enumerated["steps_done"][k - 1] + 1
    if expected_stop <= MAX_STEPS:  # before the last step's end: a checkpoint after that step, and one line
        assert status == 1, f"{context}: ended with {status}"
        error = printed.err.strip().splitlines()[-1]
        prefix = f"run_unsup.py: error: Stopped by SIGTERM after step {expected_stop} of {MAX_STEPS}; saved "
        assert error.startswith(prefix), f"{context}: {error}"
        assert verification_problem(output / f"checkpoint-{expected_stop}") is None, context
        assert not (output / "model.safetensors").exists(), context
        resume = shlex.split(error.split("To resume: ", 1)[1])
        assert resume[:2] == ["python", "run_unsup.py"] and resume[-2:] == ["--resume_from_checkpoint", "true"]
        assert resume[resume.index("--hub_token") + 1] == "<HUB_TOKEN>", context
        resume[resume.index("--hub_token") + 1] = TOKEN  # what the user puts back
        run_command(run_unsup.main, "run_unsup.py", resume[2:])
        printed = capfd.readouterr()
    else:  # after the last step: the run finishes its final save, then ends normally
        assert status is None, f"{context}: ended with {status}"
    weights = load_file(output / "model.safetensors")
    assert all(torch.equal(enumerated["weights"][name], value) for name, value in weights.items()), context
    assert staging_leftovers(output) == [], context
    assert files_holding(work, TOKEN) == [] and TOKEN not in printed.out + printed.err, context


def phase_points(labels: list[str], phase: str) -> list[int]:
    """The 1-based points of ``phase``: loading (the stages before training), training (its events, up to
    ``on_train_end``), finishing (the file operations after it)."""
    end_of_training = labels.index(f"on_train_end (step {MAX_STEPS})") + 1
    loading = [k for k, label in enumerate(labels, 1) if label.startswith("loading: ")]
    if phase == "loading":
        return loading
    if phase == "training":
        return [k for k in range(1, end_of_training + 1) if k not in loading]
    return list(range(end_of_training + 1, len(labels) + 1))


FINISHING_STRIDE = 8
"""The default suite checks every 8th operation of the finishing phase (and its last); the slow suite every one."""


@pytest.mark.parametrize(
    "phase", ["loading", "training", "finishing", pytest.param("finishing-every", marks=pytest.mark.slow)]
)
def test_sigterm_at_every_point_of_a_run_loses_nothing_and_says_one_line(
    tiny_encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture,
    enumerated: dict[str, Any],
    phase: str,
) -> None:
    points = phase_points(enumerated["labels"], phase.split("-")[0])
    if phase == "finishing":
        points = sorted({*points[::FINISHING_STRIDE], points[-1]})
    for k in points:
        check_point(tiny_encoder_dir, tmp_path, monkeypatch, capfd, enumerated, k)
