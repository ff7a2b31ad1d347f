"""Counts, during training steps, the calls that make a GPU's host wait for the device (issue 31, item 1).

A step is the span from the Trainer's ``on_step_begin`` to its ``on_step_end``: forward, backward, gradient clipping,
optimizer and scheduler. The first step is a warm-up, not counted (once-per-run checks, such as the processes' batch
sizes, run there). Steps that log, evaluate or save may read values back; the tests give none of those.
Counted: ``Tensor.item/tolist/cpu/numpy/nonzero``, ``bool/int/float()`` of a tensor and ``torch.nonzero``; on a CPU
they cost nothing, but each is a synchronization on a GPU. Each call is recorded with the 4 innermost frames.

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

TENSOR_METHODS = ("item", "tolist", "cpu", "numpy", "nonzero", "__bool__", "__int__", "__float__")


class StepToggle(TrainerCallback):
    """Switches counting on at the start of each step and off at its end, before any callback reads values."""

    def __init__(self, state: dict[str, bool]) -> None:
        self.state = state

    def on_step_begin(self, args: Any, state: Any, *other: Any, **kwargs: Any) -> None:
        self.state["active"] = state.global_step > 0  # the first step (global_step 0 before it) is a warm-up

    def on_step_end(self, *args: Any, **kwargs: Any) -> None:
        self.state["active"] = False


@contextlib.contextmanager
def counting(trainer_class: type) -> Iterator[Counter[str]]:
    """Count host synchronizations inside the steps of every ``trainer_class`` built in the block; yields the
    counter (``"method at file:line <- ..."`` -> calls)."""
    counts: Counter[str] = Counter()
    state = {"active": False}
    originals: dict[tuple[Any, str], Any] = {}

    def counted(owner: Any, name: str) -> None:
        original = getattr(owner, name)
        originals[(owner, name)] = original

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if state["active"]:
                frames = traceback.extract_stack(limit=6)[:-1]
                where = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in reversed(frames[-4:]))
                counts[f"{name} at {where}"] += 1
            return original(*args, **kwargs)

        setattr(owner, name, wrapper)

    for name in TENSOR_METHODS:
        counted(torch.Tensor, name)
    counted(torch, "nonzero")
    original_init = trainer_class.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.callback_handler.callbacks.insert(0, StepToggle(state))  # first: off before the others' on_step_end

    trainer_class.__init__ = init
    originals[(trainer_class, "__init__")] = original_init
    try:
        yield counts
    finally:
        for (owner, name), original in originals.items():
            setattr(owner, name, original)


if os.environ.get("HF_CSE_SYNC_COUNTS"):  # imported by run_unsup.py --import_module under torchrun
    from hf_cse import CSETrainer

    _context = counting(CSETrainer)
    _counts = _context.__enter__()

    def _write() -> None:
        path = Path(os.environ["HF_CSE_SYNC_COUNTS"]) / f"rank{os.environ.get('RANK', '0')}.json"
        path.write_text(json.dumps(dict(_counts)), encoding="utf-8")

    atexit.register(_write)
