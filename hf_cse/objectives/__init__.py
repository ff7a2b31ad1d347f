"""Objectives by name: ``build_objective("simcse", temperature=0.05)`` returns an ``nn.Module``.

Each objective lives in its own module and is registered here; ``obj(z1, z2)`` on the two views' pooled
embeddings (each ``[B, D]``) returns the scalar loss; objective-specific inputs come by keyword.
"""

from __future__ import annotations

import inspect
from typing import Any

from .auxiliary import (
    AUXILIARY_LOSSES,
    AuxiliaryInputs,
    AuxiliaryLoss,
    DistillationLoss,
    RecallLoss,
    TwoWayMarginLoss,
)
from .base import ContrastiveObjective, LossForm
from .dcl import DCLLoss, DebiasedForm
from .dclr import DCLRLoss, InstanceWeighting, NoiseNegatives
from .focal_infonce import FocalForm, FocalInfoNCELoss
from .osscse import OssCSELoss
from .simcse import InfoNCEForm, SimCSELoss

OBJECTIVES: dict[str, type[ContrastiveObjective]] = {
    cls.name: cls for cls in (SimCSELoss, DCLLoss, DCLRLoss, FocalInfoNCELoss, OssCSELoss)
}


def _build(registry: dict[str, type], kind: str, kinds: str, name: str, hparams: dict[str, Any]) -> Any:
    if name not in registry:
        raise ValueError(f"Unknown {kind} {name!r}; valid {kinds} are: {', '.join(sorted(registry))}.")
    cls = registry[name]
    accepted = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = sorted(set(hparams) - set(accepted))
    if unknown:
        raise ValueError(
            f"{kind.capitalize()} {name!r} got unknown hyper-parameters {unknown}; it accepts: {accepted}."
        )
    return cls(**hparams)


def build_objective(name: str, **hparams: Any) -> ContrastiveObjective:
    """Instantiate the objective registered as ``name`` with ``hparams``.

    Raises:
        ValueError: unknown name (the message lists the registered ones) or an unknown hyper-parameter
            (the message lists the objective's hyper-parameters).
    """
    return _build(OBJECTIVES, "objective", "objectives", name, hparams)


def build_auxiliary_loss(name: str, **hparams: Any) -> AuxiliaryLoss:
    """Instantiate the auxiliary term registered as ``name`` (see :data:`AUXILIARY_LOSSES`), like
    :func:`build_objective`."""
    return _build(AUXILIARY_LOSSES, "auxiliary loss", "auxiliary losses", name, hparams)


__all__ = [
    "AUXILIARY_LOSSES",
    "OBJECTIVES",
    "AuxiliaryInputs",
    "AuxiliaryLoss",
    "DistillationLoss",
    "OssCSELoss",
    "RecallLoss",
    "TwoWayMarginLoss",
    "build_auxiliary_loss",
    "ContrastiveObjective",
    "DCLLoss",
    "DCLRLoss",
    "DebiasedForm",
    "FocalForm",
    "FocalInfoNCELoss",
    "InfoNCEForm",
    "InstanceWeighting",
    "LossForm",
    "NoiseNegatives",
    "SimCSELoss",
    "build_objective",
]
