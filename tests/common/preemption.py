"""A callback that preempts a training run the way a scheduler would (tests/test_preemption.py and the processes of
tests/preemption_processes.py)."""

from __future__ import annotations

import os
import signal
from typing import Any

from transformers import TrainerCallback


class SignalAt(TrainerCallback):
    """Sends ``signum`` to this process ``times`` times while step ``step`` runs (as a scheduler would, mid-step)."""

    def __init__(self, step: int, signum: int = signal.SIGTERM, times: int = 1) -> None:
        self.step, self.signum, self.times = step, signum, times

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step + 1 == self.step:
            for _ in range(self.times):
                os.kill(os.getpid(), self.signum)
