"""Counts, during training steps, the calls that make a GPU's host wait for the device (issue 31, item 1).

A step is the span from the Trainer's ``on_step_begin`` to its ``on_step_end``: forward, backward, gradient clipping,
optimizer and scheduler. The first step is a warm-up, not counted (once-per-run checks, such as the processes' batch
sizes, run there). Steps that log, evaluate or save may read values back; the tests give none of those.
Counted: the read-backs ``Tensor.item/tolist/cpu/numpy/nonzero``, ``bool/int/float()`` of a tensor, a tensor
as a Python index (``__index__``: a slice bound) and ``torch.nonzero``, and the copies of Python data to a device,
``torch.tensor/as_tensor`` given a ``device`` that is not None (a blocking copy from pageable host memory, after
which PyTorch waits for the stream). On a CPU they cost nothing, but each is a synchronization on a GPU. Not
seen: ``host_tensor.to(device)``, which on a CPU cannot be told from a move between devices. Each call is
recorded with its caller's 4 innermost frames.

The calls are seen through a ``TorchFunctionMode`` entered for each counted step, not by patching ``torch``: torch
finds its tensor constructors by identity (``with torch.device(...)``, which transformers loads models under, would
stop placing a patched ``torch.tensor``), and a mode sees every name a function is called by. A mode belongs to the
thread that entered it; PyTorch carries it into the autograd engine's threads, so backward passes are counted too.

In-process: ``with counting(trainer_class) as counts: ...``. Under torchrun, as ``run_unsup.py --import_module
host_sync_probe`` with ``HF_CSE_SYNC_COUNTS=DIR``: counts from import on, written to ``DIR/rank{RANK}.json`` at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from transformers import TrainerCallback

READ_BACKS = frozenset(
    [getattr(torch.Tensor, name) for name in ("item", "tolist", "cpu", "numpy", "nonzero")]
    + [torch.Tensor.__bool__, torch.Tensor.__int__, torch.Tensor.__float__, torch.Tensor.__index__, torch.nonzero]
)
"""Functions that read a tensor's values back to the host."""
FROM_HOST = frozenset([torch.tensor, torch.as_tensor])
"""Functions that make a tensor of Python data, copied to the ``device`` they are given."""


class StepCounts(TorchFunctionMode):
    """While entered, counts each call of :data:`READ_BACKS`, and of :data:`FROM_HOST` given a device (explicitly
    or by a ``torch.device`` context): ``"name at file:line <- ..."`` -> calls, in :attr:`counts`."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func in READ_BACKS or (func in FROM_HOST and kwargs.get("device") is not None):
            # The caller's frames: not this mode's, nor another mode's dispatch (a torch.device context's).
            frames = [frame for frame in traceback.extract_stack(limit=8) if frame.name != "__torch_function__"]
            where = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in reversed(frames[-4:]))
            self.counts[f"{func.__name__} at {where}"] += 1
        return func(*args, **kwargs)


class StepToggle(TrainerCallback):
    """Enters ``mode`` at the start of each step and leaves it at its end, before any callback reads values."""

    def __init__(self, mode: StepCounts) -> None:
        self.mode = mode
        self.active = False

    def on_step_begin(self, args: Any, state: Any, *other: Any, **kwargs: Any) -> None:
        if state.global_step > 0 and not self.active:  # the first step (global_step 0 before it) is a warm-up
            self.mode.__enter__()
            self.active = True

    def on_step_end(self, *args: Any, **kwargs: Any) -> None:
        self.stop()

    def stop(self) -> None:
        """Leave the mode if in a step, restoring the mode stack the step found."""
        if self.active:
            self.active = False
            self.mode.__exit__(None, None, None)


@contextlib.contextmanager
def counting(trainer_class: type) -> Iterator[Counter[str]]:
    """Count host synchronizations inside the steps of every ``trainer_class`` built in the block; yields the
    counter (``"function at file:line <- ..."`` -> calls)."""
    mode = StepCounts()
    toggles: list[StepToggle] = []
    original_init = trainer_class.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        toggles.append(StepToggle(mode))
        self.callback_handler.callbacks.insert(0, toggles[-1])  # first: off before the others' on_step_end

    trainer_class.__init__ = init
    try:
        yield mode.counts
    finally:
        for toggle in toggles:  # a step that raised never ended
            toggle.stop()
        trainer_class.__init__ = original_init


if os.environ.get("HF_CSE_SYNC_COUNTS"):  # imported by run_unsup.py --import_module under torchrun
    from hf_cse import CSETrainer

    _context = counting(CSETrainer)
    _counts = _context.__enter__()

    def _write() -> None:
        path = Path(os.environ["HF_CSE_SYNC_COUNTS"]) / f"rank{os.environ.get('RANK', '0')}.json"
        path.write_text(json.dumps(dict(_counts)), encoding="utf-8")

    atexit.register(_write)
