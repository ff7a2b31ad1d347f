"""Objectives by name: ``build_objective("simcse", temperature=0.05)`` returns an ``nn.Module``.

Each objective, loss form and auxiliary term lives in its own module here and registers itself by name
(:mod:`hf_cse.registry`); every module of this package is imported below, so a new objective is one new file.
``obj(StepInputs(z1, z2, **values))`` on the two views' pooled embeddings (each ``[B, D]``) returns an
``ObjectiveOutput(loss, logs)``; what else it reads comes by name from the input providers it requires
(:mod:`hf_cse.objectives.contract`).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any

from ..errors import UsageError
from ..registry import AUXILIARY_LOSSES, LOSS_FORMS, OBJECTIVES
from .auxiliary import (
    AuxiliaryInputs,
    AuxiliaryLoss,
    DistillationLoss,
    RecallLoss,
    TwoWayMarginLoss,
    build_weighted_auxiliary_losses,
    required_inputs,
)
from .base import ContrastiveObjective, FormOutput, LossForm, MomentumQueueSettings, NegativesOutput
from .contract import ObjectiveOutput, StepInputs
from .dcl import DCLLoss, DebiasedForm
from .dclr import DCLRLoss, InstanceWeighting, NoiseNegatives
from .focal_infonce import FocalForm, FocalInfoNCELoss
from .matryoshka import MatryoshkaObjective, check_matryoshka_dims, with_matryoshka
from .osscse import OssCSELoss
from .simcse import InfoNCEForm, SimCSELoss

# Register the objectives of every module in this package, including ones not named above.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

MOMENTUM_QUEUE_HPARAMS = ("momentum_queue_size", "momentum")
"""Hyper-parameters every :class:`ContrastiveObjective` takes through :func:`build_objective`: a momentum queue."""


def build_objective(name: str, **hparams: Any) -> ContrastiveObjective:
    """The objective registered as ``name``, built with ``hparams``; an unknown name or hyper-parameter is a one-line
    error listing the valid ones.

    ``momentum_queue_size`` (and optionally ``momentum``, default 0.995) give any objective built on
    :class:`ContrastiveObjective` a momentum-encoder queue of extra negatives
    (:meth:`ContrastiveObjective.use_momentum_queue`), e.g. ``--objective_kwargs '{"momentum_queue_size": 128}'``,
    unless its constructor takes them itself (``esimcse``).
    """
    accepted = inspect.signature(OBJECTIVES[OBJECTIVES.check(name)].__init__).parameters
    queue = {key: hparams.pop(key) for key in MOMENTUM_QUEUE_HPARAMS if key in hparams and key not in accepted}
    objective = OBJECTIVES.build(name, **hparams)
    if queue:
        if "momentum_queue_size" not in queue:
            raise UsageError(f"Objective {name!r}: momentum needs momentum_queue_size (the queue's length).")
        if not isinstance(objective, ContrastiveObjective):
            raise UsageError(f"Objective {name!r} is no ContrastiveObjective; it cannot take a momentum queue.")
        objective.use_momentum_queue(queue["momentum_queue_size"], queue.get("momentum", 0.995))
    return objective


build_auxiliary_loss = AUXILIARY_LOSSES.build
"""``build_auxiliary_loss(name, **hparams)``: the auxiliary term registered as ``name``, like
:func:`build_objective`."""

__all__ = [
    "AUXILIARY_LOSSES",
    "LOSS_FORMS",
    "OBJECTIVES",
    "AuxiliaryInputs",
    "AuxiliaryLoss",
    "ContrastiveObjective",
    "DCLLoss",
    "DCLRLoss",
    "DebiasedForm",
    "DistillationLoss",
    "FocalForm",
    "FormOutput",
    "FocalInfoNCELoss",
    "InfoNCEForm",
    "InstanceWeighting",
    "LossForm",
    "MatryoshkaObjective",
    "MomentumQueueSettings",
    "NegativesOutput",
    "NoiseNegatives",
    "ObjectiveOutput",
    "OssCSELoss",
    "RecallLoss",
    "SimCSELoss",
    "StepInputs",
    "TwoWayMarginLoss",
    "build_auxiliary_loss",
    "build_objective",
    "build_weighted_auxiliary_losses",
    "check_matryoshka_dims",
    "with_matryoshka",
    "required_inputs",
]
