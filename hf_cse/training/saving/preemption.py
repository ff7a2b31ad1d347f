"""Preemption: SIGTERM (what SLURM and Kubernetes send before they stop a job) and SIGUSR1 (what
``sbatch --signal`` sends) never cut a save short. A second signal stops at once, unless it comes within
:data:`REPEAT_WINDOW_S` of the first: then it is the same request delivered twice (SLURM signals every process of a
job step, and the agent of ``accelerate launch`` or ``torchrun``, signalled too, sends it on to its workers).

The handling covers a whole run (:func:`handling_preemption_signals`, around ``run_unsup.main``: from the load to the
final publish), and ``Trainer.train`` on its own for a library user. What the first signal does depends on the phase
it arrives in:

- **before training** (loading the corpus and model, recovering the folder): training starts as planned and stops
  after its first step, with a checkpoint, as below;
- **training**: the current optimizer step is finished, a checkpoint is saved through the run's one save path, and
  training ends with a one-line :class:`~hf_cse.errors.PreemptedError` saying how to resume;
- **after the last step** (the final save, metrics, state, scores, card): the run finishes them first (the final
  publish must not be cut short: with ``--save_strategy no`` it is the only copy of every step), then ends normally.

The signal only sets a flag; during training the decision is taken at the end of each optimizer step, and with
several processes the flags are combined (a max over a CPU ``gloo`` group, so no GPU synchronization), so every
process stops after the same step even when the signal reached only some of them.

A scheduler signals every process of the job (SLURM: the whole process group), dataloader workers included: those
ignore the preemption signals from their start (torch's own handler would end them, and the batch they owe the main
process with them), and stop when the main process stops them.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from ...errors import PreemptedError
from ...redaction import command_line

logger = logging.getLogger(__name__)

PREEMPTION_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGUSR1") if hasattr(signal, name)
)  # Windows has no SIGUSR1

REPEAT_WINDOW_S = 2.0
"""Seconds after the first signal within which the same signal again is a repeat of it, not a second request."""

LOADING, TRAINING, FINISHING = "loading", "training", "finishing"
"""The phases of a run, as the first signal's warning names what happens next."""
_WHAT_HAPPENS = {
    LOADING: "training will stop after its first step, with a checkpoint",
    TRAINING: "saving a checkpoint after this step, then stopping",
    FINISHING: "finishing the final save first",
}


@dataclass
class _SignalState:
    """The preemption signals of this process while a :func:`handling_preemption_signals` block runs."""

    depth: int = 0
    phase: str = LOADING
    received: int | None = None
    received_at: float = 0.0
    previous: dict[int, Any] = field(default_factory=dict)


_STATE = _SignalState()


def _handle(signum: int, frame: object) -> None:
    now = time.monotonic()
    if _STATE.received is not None:
        if signum == _STATE.received and now - _STATE.received_at < REPEAT_WINDOW_S:
            logger.info("Received %s again: the same request, forwarded.", signal.Signals(signum).name)
            return
        signal.signal(signum, signal.SIG_DFL)  # a second signal: stop at once, as without this handler
        _mask_signals(block=False)
        os.kill(os.getpid(), signum)
        return
    _STATE.received, _STATE.received_at = signum, now
    logger.warning(
        "Received %s: %s (send it again to stop at once).", signal.Signals(signum).name, _WHAT_HAPPENS[_STATE.phase]
    )


@contextlib.contextmanager
def handling_preemption_signals() -> Iterator[None]:
    """Handle the preemption signals while the block runs (see the module docstring), on the main thread; elsewhere
    nothing is installed and the signals keep their handlers. Blocks nest: the outermost one installs the handler
    (and forgets an earlier signal), the inner ones share it; leaving the outermost one puts the previous handlers
    back. Also a decorator (``run_unsup.main`` holds it for the whole run)."""
    if _STATE.depth == 0:
        try:
            previous = {signum: signal.signal(signum, _handle) for signum in PREEMPTION_SIGNALS}
        except ValueError:  # not the main thread: signals cannot be handled here
            logger.debug("Preemption signals are not handled: not in the main thread.")
            yield
            return
        _STATE.previous, _STATE.received, _STATE.phase = previous, None, LOADING
    _STATE.depth += 1
    try:
        yield
    finally:
        _STATE.depth -= 1
        if _STATE.depth == 0:
            for signum, handler in _STATE.previous.items():
                signal.signal(signum, handler)
            _STATE.previous = {}


def signals_handled() -> bool:
    """Whether this process handles the preemption signals now (inside :func:`handling_preemption_signals`)."""
    return bool(_STATE.previous)


def _mask_signals(block: bool) -> None:
    """Block (or unblock) the preemption signals in this thread, where the platform can (not on Windows)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK if block else signal.SIG_UNBLOCK, PREEMPTION_SIGNALS)


def ignore_preemption_signals(worker_init_fn: Callable[[int], None] | None, worker_id: int) -> None:
    """A dataloader worker's ``worker_init_fn`` (as ``functools.partial(ignore_preemption_signals, original)``): ignore
    the preemption signals, which the main process handles, then run the original.

    The worker starts with them blocked (its parent blocks them while it starts workers,
    :meth:`PreemptionCallback.on_epoch_begin`): one that arrived since is discarded here, never delivered to torch's
    worker handler (which ends the worker on a signal from anyone but its parent).
    """
    for signum in PREEMPTION_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    _mask_signals(block=False)
    if worker_init_fn is not None:
        worker_init_fn(worker_id)


class PreemptionCallback(TrainerCallback):
    """Turns a preemption signal into "save a checkpoint and stop" at the end of the current optimizer step.

    Use :meth:`handling_signals` around ``Trainer.train``; afterwards :meth:`raise_if_stopped` raises the
    :class:`PreemptedError` when training stopped this way.
    """

    def __init__(self) -> None:
        self.stopped_at: int | None = None
        self._group: dist.ProcessGroup | None = None
        self._workers_start_blocked = False

    @contextlib.contextmanager
    def handling_signals(self, world_size: int) -> Iterator[None]:
        """Handle the preemption signals while the block runs (inside a run's :func:`handling_preemption_signals`,
        keeping a signal received while loading; else on its own). ``world_size > 1``: every process must enter
        together."""
        self.stopped_at = None
        if world_size > 1 and dist.is_available() and dist.is_initialized():
            self._group = dist.new_group(backend="gloo")
        try:
            with handling_preemption_signals():
                _STATE.phase = TRAINING
                try:
                    yield
                finally:
                    _STATE.phase = FINISHING
                    self._unblock_workers_start()
        finally:
            if self._group is not None:
                dist.destroy_process_group(self._group)
                self._group = None

    def _any_process_signalled(self) -> bool:
        flag = _STATE.received is not None
        if self._group is None:
            return flag
        received = torch.tensor([int(flag)])
        dist.all_reduce(received, op=dist.ReduceOp.MAX, group=self._group)
        return bool(received.item())  # a CPU tensor: no device synchronization

    # --- dataloader workers: they ignore the signals from their first instruction ---------------------------------

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        loader = kwargs.get("train_dataloader")
        if signals_handled() and loader is not None and getattr(loader, "num_workers", 0) > 0:
            # Read by each iterator as it starts its workers (every epoch, and the resumed epoch's skipping loader).
            loader.worker_init_fn = functools.partial(ignore_preemption_signals, loader.worker_init_fn)

    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        # The epoch's iterator forks its workers next: they inherit the blocked signals, which stay pending in them
        # until ignore_preemption_signals, and in this process until the first step begins.
        loader = kwargs.get("train_dataloader")
        if signals_handled() and loader is not None and getattr(loader, "num_workers", 0) > 0:
            _mask_signals(block=True)
            self._workers_start_blocked = True

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._unblock_workers_start()

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        _STATE.phase = FINISHING  # no step ends any more: a signal from here waits for the final save

    def _unblock_workers_start(self) -> None:
        if self._workers_start_blocked:
            self._workers_start_blocked = False
            _mask_signals(block=False)  # a signal that arrived meanwhile is handled now

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: object
    ) -> None:
        if self.stopped_at is None and self._any_process_signalled():
            self.stopped_at = state.global_step
            control.should_save = True
            control.should_training_stop = True
        elif state.global_step >= state.max_steps > 0:
            _STATE.phase = FINISHING  # the last step's check is done: a signal from here waits for the final save

    def raise_if_stopped(self, output_dir: str, max_steps: int) -> None:
        """Raise :class:`PreemptedError` (one line: the checkpoint and the command to resume) if a signal stopped
        training."""
        if self.stopped_at is None:
            return
        received = _STATE.received
        name = signal.Signals(received).name if received is not None else "a signal on another process"
        checkpoint = Path(output_dir) / f"checkpoint-{self.stopped_at}"
        raise PreemptedError(
            f"Stopped by {name} after step {self.stopped_at} of {max_steps}; saved {checkpoint}. To resume: "
            f"{resume_command()}"
        )


def resume_command(argv: Sequence[str] | None = None, launcher: Sequence[str] | None = None) -> str:
    """The command line that resumes this run, secrets redacted (``--hub_token <HUB_TOKEN>``): the command that
    started it with ``--resume_from_checkpoint true``.

    That command is this process's own (``argv``, default ``sys.argv``), or, for a process of a multi-process run,
    the launcher's (``accelerate launch ...``, ``torchrun ...``): ``launcher`` (default: :func:`launcher_command`).
    """
    argv = list(sys.argv if argv is None else argv)
    launcher = launcher_command(argv) if launcher is None else list(launcher)
    script = launcher[: len(launcher) - len(argv)] if launcher else []
    program = argv[0] if argv else "run_unsup.py"
    if not script:
        script = ["python"] if program.endswith(".py") else []
    return command_line([*script, program, *_without_resume_flag(argv[1:]), "--resume_from_checkpoint", "true"])


def _without_resume_flag(arguments: Sequence[str]) -> list[str]:
    kept, remaining = [], iter(arguments)
    for arg in remaining:
        if arg == "--resume_from_checkpoint":
            next(remaining, None)  # its value
        elif not arg.startswith("--resume_from_checkpoint="):
            kept.append(arg)
    return kept


def launcher_command(argv: Sequence[str] | None = None) -> list[str] | None:
    """The command line of the launcher that started this process with these very arguments (``accelerate launch
    ... run_unsup.py ARGS``, ``torchrun ...``: the parent process's, read from ``/proc``), interpreter shown as
    ``python`` and a console script by its name; ``None`` when this process was started otherwise (a shell, a sweep,
    SLURM's ``srun``), or the parent's command line cannot be read."""
    argv = list(sys.argv if argv is None else argv)
    try:
        raw = Path(f"/proc/{os.getppid()}/cmdline").read_bytes()
    except OSError:
        return None
    parent = [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0")[:-1]]
    if not argv or len(parent) <= len(argv) or parent[-len(argv) :] != argv:
        return None
    if Path(parent[0]).name.startswith("python"):
        interpreter_arguments = parent[1:]
        if interpreter_arguments and not interpreter_arguments[0].startswith("-"):
            # A console script (`accelerate launch`): the kernel ran its shebang's interpreter on its file.
            parent = [Path(interpreter_arguments[0]).name, *interpreter_arguments[1:]]
        else:
            parent = ["python", *interpreter_arguments]
    return parent
