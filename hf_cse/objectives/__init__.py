"""Objectives by name: ``build_objective("simcse", temperature=0.05)`` returns an ``nn.Module``.

Each objective, loss form and auxiliary term lives in its own module here and registers itself by name
(:mod:`hf_cse.registry`); every module of this package is imported below, so a new objective is one new file.
``obj(StepInputs(z1, z2, **values))`` on the two views' pooled embeddings (each ``[B, D]``) returns an
``ObjectiveOutput(loss, logs)``; what else it reads comes by name from the input providers it requires
(:mod:`hf_cse.objectives.contract`).
"""

from __future__ import annotations

import importlib
import pkgutil

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
from .base import ContrastiveObjective, FormOutput, LossForm, NegativesOutput
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

build_objective = OBJECTIVES.build
"""``build_objective(name, **hparams)``: the objective registered as ``name``; an unknown name or hyper-parameter is
a one-line error listing the valid ones."""
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
