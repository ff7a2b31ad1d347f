"""Objectives by name: ``build_objective("simcse", temperature=0.05)`` returns an ``nn.Module``.

Each objective lives in its own module and is registered here; ``obj(z1, z2)`` on the two views' pooled
embeddings (each ``[B, D]``) returns the scalar loss; objective-specific inputs come by keyword.
"""

from __future__ import annotations

import inspect
from typing import Any

from .base import ContrastiveObjective, LossForm
from .dcl import DCLLoss, DebiasedForm
from .dclr import DCLRLoss, InstanceWeighting, NoiseNegatives
from .focal_infonce import FocalForm, FocalInfoNCELoss
from .simcse import InfoNCEForm, SimCSELoss

OBJECTIVES: dict[str, type[ContrastiveObjective]] = {
    cls.name: cls for cls in (SimCSELoss, DCLLoss, DCLRLoss, FocalInfoNCELoss)
}


def build_objective(name: str, **hparams: Any) -> ContrastiveObjective:
    """Instantiate the objective registered as ``name`` with ``hparams``.

    Raises:
        ValueError: unknown name (the message lists the registered ones) or an unknown hyper-parameter
            (the message lists the objective's hyper-parameters).
    """
    if name not in OBJECTIVES:
        raise ValueError(f"Unknown objective {name!r}; valid objectives are: {', '.join(sorted(OBJECTIVES))}.")
    cls = OBJECTIVES[name]
    accepted = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = sorted(set(hparams) - set(accepted))
    if unknown:
        raise ValueError(f"Objective {name!r} got unknown hyper-parameters {unknown}; it accepts: {accepted}.")
    return cls(**hparams)


__all__ = [
    "OBJECTIVES",
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
