"""Debiased contrastive learning (Chuang et al., 2020): correct the negatives' sum for false negatives."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ..number_ranges import NumberRange, check_setting
from ..registry import register_loss_form, register_objective
from .base import (
    MASKED_LOGIT,
    ContrastiveObjective,
    FormOutput,
    LossForm,
    log_mean_exp,
    masked_logsumexp,
)


@register_loss_form("debiased")
class DebiasedForm(LossForm):
    """The debiased loss of Chuang et al. (2020), Figure 3, in log space.

    With ``pos = e^{s_p/t}`` (the first positive view), ``neg = sum_{j kept} e^{s_n_ij/t}``, ``N`` the number of
    kept negatives and ``pos_M = mean_m e^{s_p_m/t}`` over the ``M`` positive views::

        Ng = max( (-N * tau_plus * pos_M + neg) / (1 - tau_plus),  N * e^{-1/t} )
        l_i = -log( pos / (pos + Ng) )

    With ``M = 1``, ``pos_M = pos``. For ``M > 1`` the paper (Figure 3 caption) replaces "the pos in line 8", the
    ``Ng`` line, by the average: the extra positives ``v`` only estimate the false negatives' share, as in its
    Eq. (7), where the numerator keeps the single ``e^{f(x)^T f(x+)}``.

    Every term is handled as a logarithm: at ``t = 0.05`` the exponentials reach e^20.

    Where the floor ``N e^{-1/t}`` wins, the negatives get no gradient: only the positive is pulled. That happens
    whenever ``mean_j e^{(s_n_ij - s_p)/t} <= tau_plus``, so at SimCSE's ``t = 0.05`` with dropout positives
    (``s_p`` near 1) nearly every row; the output's ``logs["dcl_floor_share"]`` is the share of anchors at the floor.

    Args:
        temperature: ``t``; defaults to 0.05.
        tau_plus: class prior ``tau+`` in ``[0, 1)``; defaults to 0.1. ``tau_plus = 0`` is InfoNCE with the
            ``N e^{-1/t}`` floor.
    """

    supports_multiple_positives = True

    citation = """@inproceedings{chuang2020debiased,
    title = {Debiased Contrastive Learning},
    author = {Chuang, Ching-Yao and Robinson, Joshua and Lin, Yen-Chen and Torralba, Antonio and Jegelka, Stefanie},
    booktitle = {Advances in Neural Information Processing Systems},
    year = {2020},
}"""

    def __init__(self, temperature: float = 0.05, tau_plus: float = 0.1) -> None:
        super().__init__(temperature)
        self.tau_plus = check_setting("tau_plus", tau_plus, NumberRange(low=0, high=1, high_open=True))

    def forward(self, positive: torch.Tensor, negative: torch.Tensor, keep: torch.Tensor) -> FormOutput:
        t = self.temperature
        log_pos = positive[:, 0] / t
        log_neg = masked_logsumexp(negative / t, keep)
        count = keep.sum(dim=1, dtype=log_pos.dtype)
        log_count = torch.log(count.clamp(min=1.0))
        # One positive view: its log-mean-exp is log_pos itself (a logsumexp of one entry is the entry, exactly).
        log_pos_mean = log_pos if positive.shape[1] == 1 else log_mean_exp(positive / t)
        # log(neg - N tau+ pos_M) exists only where neg > N tau+ pos_M; the clamp keeps the other branch finite so
        # masking it does not propagate a NaN gradient from it.
        excess = log_count + math.log(max(self.tau_plus, 1e-300)) + log_pos_mean - log_neg
        log_debiased = log_neg + torch.log1p(-torch.exp(excess.clamp(max=-1e-7)))
        log_debiased = log_debiased.masked_fill(excess >= 0, MASKED_LOGIT)
        log_floor = log_count - 1.0 / t
        log_ng = torch.maximum(log_debiased - math.log1p(-self.tau_plus), log_floor)
        floor_share = torch.mean(log_ng == log_floor, dtype=log_ng.dtype).detach()
        log_ng = log_ng.masked_fill(count == 0, MASKED_LOGIT)
        # -log(pos / (pos + Ng)) = log(1 + Ng / pos): one softplus forward and one backward, where logaddexp and a
        # subtraction took eight. Its threshold (linear above 50) is exact in float64: e^-50 is below its precision.
        losses = nn.functional.softplus(log_ng - log_pos, threshold=50)
        return FormOutput(losses, {"dcl_floor_share": floor_share})

    def get_config_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "tau_plus": self.tau_plus}


@register_objective("dcl")
class DCLLoss(ContrastiveObjective):
    """Debiased contrastive loss over in-batch negatives (``N = B - 1``), optionally with ``M > 1`` positives.

    Extra positive views (more dropout passes) come through ``extra_positives``; the trainer makes them with
    ``objective_kwargs: {"num_positive_views": M}``.

    Args:
        temperature: ``t``; defaults to 0.05 (SimCSE's; the paper's vision runs use 0.5).
        tau_plus: class prior; defaults to 0.1.
        num_positive_views: ``M``, the number of positive views per anchor; defaults to 1.
    """

    citation = DebiasedForm.citation

    def __init__(self, temperature: float = 0.05, tau_plus: float = 0.1, num_positive_views: int = 1) -> None:
        super().__init__(DebiasedForm(temperature, tau_plus))
        self.num_positive_views = check_setting(
            "num_positive_views", num_positive_views, NumberRange(low=1, high=16, integer=True)
        )

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "num_positive_views": self.num_positive_views}
