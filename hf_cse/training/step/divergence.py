"""Stop a diverged run: a non-finite loss ends training with an error naming the step, and non-finite weights are
never saved.

The check costs no host-device synchronization per step: each step's loss updates a flag that stays on the device
(the first step whose loss was not finite), and the host reads it only on steps that log, evaluate or save, at
the end of an epoch and at the end of training, which is before anything can be written or reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from ...errors import TrainingDivergedError

FIX_HINT = "lower --learning_rate, set --max_grad_norm, or train in bf16 instead of fp16"


class NonFiniteLossMonitor:
    """Remembers, on the loss's device, the first step whose loss was NaN or infinite.

    Args:
        reduce_min: combines the per-process values into the global minimum (``identity`` in one process); every
            process then raises together instead of leaving the others waiting in a collective.
    """

    def __init__(self, reduce_min: Callable[[torch.Tensor], torch.Tensor] = lambda t: t) -> None:
        self.reduce_min = reduce_min
        self.first_step: torch.Tensor | None = None

    def record(self, loss: torch.Tensor, step: int) -> None:
        """Note ``loss`` (a scalar) of optimizer step ``step``; no synchronization."""
        loss = loss.detach()
        if self.first_step is None:
            self.first_step = torch.full((), math.inf, dtype=torch.float64, device=loss.device)
        bad = ~torch.isfinite(loss)
        # clamp with a Python number: no host-to-device copy of the step either.
        self.first_step = torch.where(bad, self.first_step.clamp(max=step), self.first_step)

    def check(self) -> None:
        """Raise :class:`TrainingDivergedError` if any recorded loss was not finite (one synchronization)."""
        if self.first_step is None:
            return
        first = float(self.reduce_min(self.first_step.reshape(1)).min())
        if math.isfinite(first):
            raise TrainingDivergedError(
                f"Training diverged: the loss became NaN or infinite at step {int(first)}; stopped before saving "
                f"anything from this point (earlier checkpoints are intact). To fix: {FIX_HINT}."
            )


class DivergenceCallback(TrainerCallback):
    """Checks the monitor whenever the Trainer is about to log, evaluate or save, and when training ends."""

    def __init__(self, monitor: NonFiniteLossMonitor) -> None:
        self.monitor = monitor

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: object
    ) -> None:
        writes = control.should_log or control.should_evaluate or control.should_save or control.should_training_stop
        if writes or (state.max_steps and state.global_step >= state.max_steps):
            self.monitor.check()

    def on_epoch_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: object
    ) -> None:
        self.monitor.check()


def check_finite_parameters(parameters: Iterable[tuple[str, torch.Tensor]], step: int, what: str) -> None:
    """Raise :class:`TrainingDivergedError` naming the first non-finite parameter, instead of saving ``what``."""
    named = [(name, p) for name, p in parameters if p.is_floating_point()]
    if not named:
        return
    finite = torch.stack([torch.isfinite(p.detach()).all() for _, p in named]).cpu()
    if bool(finite.all()):
        return
    name = named[int((~finite).nonzero()[0])][0]
    raise TrainingDivergedError(
        f"Training diverged: weight {name!r} holds NaN or infinite values at step {step}; {what} was not saved "
        f"(earlier checkpoints are intact). To fix: {FIX_HINT}."
    )
