"""What every objective shares: float32 similarity logits and the argument checks."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn


def check_temperature(temperature: float) -> float:
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}.")
    return float(temperature)


def check_views(z1: torch.Tensor, z2: torch.Tensor) -> None:
    """Both views ``[B, D]`` with the same shape and ``B >= 2`` (a single sentence has no in-batch negative)."""
    if z1.dim() != 2 or z1.shape != z2.shape:
        raise ValueError(f"Expected two views of shape [B, D]; got {tuple(z1.shape)} and {tuple(z2.shape)}.")
    if z1.shape[0] < 2:
        raise ValueError(
            f"A contrastive batch needs at least 2 sentences for in-batch negatives; got {z1.shape[0]}. "
            "Use a larger batch or dataloader_drop_last=True."
        )


def cosine_logits(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """``cos(z1_i, z2_j) / temperature`` as ``[B, B]`` in float32 (float64 for float64 inputs), whatever the
    autocast dtype.

    At temperature 0.05 these logits reach 20 and their exponentials e^20: callers must reduce them with
    ``logsumexp``/``cross_entropy``, never with a plain ``exp().sum()``.
    """
    dtype = torch.promote_types(z1.dtype, torch.float32)
    with torch.autocast(device_type=z1.device.type, enabled=False):
        a = nn.functional.normalize(z1.to(dtype), dim=-1)
        b = nn.functional.normalize(z2.to(dtype), dim=-1)
        return a @ b.T / temperature


class ContrastiveObjective(nn.Module):
    """Base class: ``forward(z1, z2, **extra) -> scalar loss`` on the two views' embeddings ``[B, D]``.

    Subclasses set ``name`` (the registry key) and ``citation`` (BibTeX, collected for model cards), and return
    their hyper-parameters from :meth:`get_config_dict`.
    """

    name: ClassVar[str]
    citation: ClassVar[str] = ""

    def get_config_dict(self) -> dict[str, Any]:
        return {}
