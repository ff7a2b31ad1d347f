"""Preemption: SIGTERM (what SLURM and Kubernetes send before they stop a job) and SIGUSR1 (what
``sbatch --signal`` sends) finish the current optimizer step, save a checkpoint through the run's one save path,
and end training with a one-line :class:`~hf_cse.errors.PreemptedError` saying how to resume. A second signal stops
at once.

The signal only sets a flag; the decision is taken at the end of each optimizer step, and with several processes
the flags are combined (a max over a CPU ``gloo`` group, so no GPU synchronization), so every process stops after
the same step even when the signal reached only some of them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from ...errors import PreemptedError

logger = logging.getLogger(__name__)

PREEMPTION_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGUSR1") if hasattr(signal, name)
)  # Windows has no SIGUSR1


class PreemptionCallback(TrainerCallback):
    """Turns a preemption signal into "save a checkpoint and stop" at the end of the current optimizer step.

    Use :meth:`handling_signals` around ``Trainer.train``; afterwards :meth:`raise_if_stopped` raises the
    :class:`PreemptedError` when training stopped this way.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.stopped_at: int | None = None
        self._group: dist.ProcessGroup | None = None

    def _handle(self, signum: int, frame: object) -> None:
        if self.received is not None:  # the second signal: stop at once, as without this handler
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.received = signum
        logger.warning(
            "Received %s: saving a checkpoint after this step, then stopping (send it again to stop at once).",
            signal.Signals(signum).name,
        )

    @contextlib.contextmanager
    def handling_signals(self, world_size: int) -> Iterator[None]:
        """Handle the preemption signals while the block runs (from the main thread; elsewhere, nothing is
        installed and the signals keep their handlers). ``world_size > 1``: every process must enter together."""
        self.received = self.stopped_at = None
        if world_size > 1 and dist.is_available() and dist.is_initialized():
            self._group = dist.new_group(backend="gloo")
        previous = {}
        try:
            for signum in PREEMPTION_SIGNALS:
                previous[signum] = signal.signal(signum, self._handle)
        except ValueError:  # not the main thread: signals cannot be handled here
            logger.debug("Preemption signals are not handled: train() does not run in the main thread.")
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            if self._group is not None:
                dist.destroy_process_group(self._group)
                self._group = None

    def _any_process_signalled(self) -> bool:
        flag = self.received is not None
        if self._group is None:
            return flag
        received = torch.tensor([int(flag)])
        dist.all_reduce(received, op=dist.ReduceOp.MAX, group=self._group)
        return bool(received.item())  # a CPU tensor: no device synchronization

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: object
    ) -> None:
        if self.stopped_at is None and self._any_process_signalled():
            self.stopped_at = state.global_step
            control.should_save = True
            control.should_training_stop = True

    def raise_if_stopped(self, output_dir: str, max_steps: int) -> None:
        """Raise :class:`PreemptedError` (one line: the checkpoint and the command to resume) if a signal stopped
        training."""
        if self.stopped_at is None:
            return
        name = signal.Signals(self.received).name if self.received is not None else "a signal on another process"
        checkpoint = Path(output_dir) / f"checkpoint-{self.stopped_at}"
        raise PreemptedError(
            f"Stopped by {name} after step {self.stopped_at} of {max_steps}; saved {checkpoint}. To resume: "
            f"{resume_command()}"
        )


def resume_command(argv: list[str] | None = None) -> str:
    """The command line that resumes this run: this process's command with ``--resume_from_checkpoint true``."""
    argv = list(sys.argv if argv is None else argv)
    kept: list[str] = []
    skip_value = False
    for arg in argv[1:]:
        if skip_value:
            skip_value = False
            continue
        if arg == "--resume_from_checkpoint":
            skip_value = True
            continue
        if not arg.startswith("--resume_from_checkpoint="):
            kept.append(arg)
    program = argv[0] if argv else "run_unsup.py"
    prefix = ["python"] if program.endswith(".py") else []
    return shlex.join([*prefix, program, *kept, "--resume_from_checkpoint", "true"])
