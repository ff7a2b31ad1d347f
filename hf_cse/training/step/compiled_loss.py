"""``--torch_compile`` for the loss: the objective and each auxiliary term compiled beside the model.

The Trainer compiles the model only (``accelerate``'s dynamo plugin wraps it); the loss runs after it in
:meth:`~hf_cse.training.trainer.CSETrainer.compute_loss`. Model and loss are compiled as separate graphs, not one:
between them a step makes its views and runs its input providers, which read host-side columns (sentence numbers,
negation flags as Python lists, so the step never reads the device back); dynamo would specialize a single graph on
those values and recompile at every step. The loss parts themselves compile whole
(``tests/every_part/test_fullgraph.py``: every registered objective, loss form and term with ``fullgraph=True``), so
each is one graph: on a GPU, inductor fuses its few dozen operators into a handful of kernels.

CUDA graphs are left to the model: ``reduce-overhead`` (and ``max-autotune``, which turns them on too) would replay
the loss into static output buffers that the next step overwrites, while the trainer keeps every step's loss parts
until it logs them. The loss is compiled with the mode's other settings, without CUDA graphs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ...objectives.contract import ObjectiveOutput, StepInputs

LossCall = Callable[[StepInputs], ObjectiveOutput]

WITHOUT_CUDA_GRAPHS = {"reduce-overhead": None, "max-autotune": "max-autotune-no-cudagraphs"}
"""``torch_compile_mode`` -> the mode the loss is compiled with: the same, less CUDA graphs (``None``: default)."""


def loss_compile_mode(mode: str | None) -> str | None:
    """The ``torch.compile`` mode of the loss under ``torch_compile_mode=mode``: ``mode`` without CUDA graphs."""
    return WITHOUT_CUDA_GRAPHS.get(mode, mode) if mode is not None else None


class LossCompiler:
    """``compiler(part)``: what :meth:`CSETrainer.compute_loss` calls for a loss part (the objective, an auxiliary
    term): under ``args.torch_compile``, the part ``torch.compile``d with the run's ``torch_compile_backend`` and
    :func:`loss_compile_mode`, once per part; otherwise the part itself.

    ``fullgraph=False``, as the Trainer compiles the model: a user's own part that breaks the graph still trains.
    The parts stay the trainer's (``trainer.objective``, ``trainer.auxiliary_losses``), so one replaced after the
    trainer is built is the one called; a compiled wrapper shares its part's parameters and state.

    Args:
        args: the run's training arguments (``torch_compile``, ``torch_compile_backend``, ``torch_compile_mode``).
    """

    def __init__(self, args: Any) -> None:
        self.enabled = bool(getattr(args, "torch_compile", False))
        self.backend = getattr(args, "torch_compile_backend", None) or "inductor"
        self.mode = loss_compile_mode(getattr(args, "torch_compile_mode", None))
        self._compiled: dict[int, tuple[nn.Module, LossCall]] = {}  # id -> (the part, kept alive; its wrapper)

    def __call__(self, part: nn.Module) -> LossCall:
        if not self.enabled:
            return part
        entry = self._compiled.get(id(part))
        if entry is None or entry[0] is not part:
            entry = self._compiled[id(part)] = (part, torch.compile(part, backend=self.backend, mode=self.mode))
        return entry[1]
