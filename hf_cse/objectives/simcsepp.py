"""SimCSE++ (Xu et al., 2023): in-batch negatives from an off-dropout forward of the batch, and a dimension-wise
contrastive term (DCL) on the two dropout views."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..number_ranges import NumberRange, check_setting
from ..registry import register_auxiliary_loss, register_objective
from .auxiliary import AuxiliaryInputs, AuxiliaryLoss
from .base import ContrastiveObjective, check_views, loss_dtype, normalized
from .contract import ObjectiveOutput, StepInputs
from .simcse import InfoNCEForm

SIMCSEPP_CITATION = """@inproceedings{xu2023simcsepp,
    title = "{S}im{CSE}++: Improving Contrastive Learning for Sentence Embeddings from Two Perspectives",
    author = "Xu, Jiahao and Shao, Wei and Chen, Lihui and Liu, Lemao",
    booktitle = "Proceedings of the 2023 Conference on Empirical Methods in Natural Language Processing",
    year = "2023",
}"""

OFF_DROPOUT = "off_dropout"
"""The step input SimCSE++ reads: the sentences' embeddings ``[B, D]`` with dropout off (given by the
``off_dropout_embeddings`` input provider, :mod:`hf_cse.inputs.off_dropout`)."""

BATCH_NORM_EPS = 1e-5
"""``torch.nn.BatchNorm1d``'s default ``eps``, which the code's ``BatchNorm1d(hidden, affine=False)`` uses."""


@register_objective("simcsepp")
class SimCSEPPLoss(ContrastiveObjective):
    """SimCSE++'s instance-wise term: the positive is SimCSE's (two dropout views), the negatives are similarities
    between the batch's **off-dropout** embeddings ``h^0`` (the encoder run once more with dropout off)::

        l_i = -log( e^{r cos(z1_i, z2_i)/t} / ( e^{r cos(z1_i, z2_i)/t} + sum_{j != i} e^{cos(h0_i, h0_j)/t} ) )

    averaged over ``i``; ``h^0`` keeps its gradients (the code does not detach it) and comes from the
    ``off_dropout_embeddings`` input provider (:mod:`hf_cse.inputs.off_dropout`), gathered across processes like
    the views. The full SimCSE++ loss ``l + lambda * l_DCL`` adds the ``dimension_contrast`` term
    (:class:`DimensionContrastLoss`), on by default (:attr:`default_auxiliary_losses`: ``lambda = 0.1``,
    ``temperature = 5``); ``auxiliary_losses='{"dimension_contrast": {"weight": 0}}'`` gives off-dropout SimCSE alone.

    hf_cse implements the paper's method: off-dropout negatives and the dimension-wise term together. From the
    released code (Jiahao004/SimCSE-plus-plus) it takes the hyper-parameters of ``run_re_vicreg.sh``, its script
    for the two combined: BERT-base with SimCSE's settings (batch 64, lr 3e-5, t = 0.05, ``cls`` pooler with the MLP
    in training only, max length 32, one epoch), ``pos_ratio`` 1 (the off-dropout-only script ``run_re.sh`` uses
    0.9), DCL weight 0.1 and temperature 5; and the loss of ``simcse/models_re_vicreg.py``'s off-dropout branch: the
    negatives' anchor is ``h0_i`` (not ``z1_i``), the denominator holds ``cos(h0_i, h0_j)``, as written above. Where
    it departs from the released script: at the repository's head ``run_re_vicreg.sh`` passes no off-dropout
    sampling (``--sampling_strategy off_dropout``) and ``models_re_vicreg.py`` has its dimension-wise term commented
    out, so the script as released trains neither of the paper's two parts (an earlier revision of the model file
    has both, as here). One revision of the code gathers ``z1, z2, h0`` across GPUs and another does not; hf_cse
    gathers them (the global batch, as for every objective here).

    Args:
        temperature: ``t``; defaults to 0.05.
        pos_ratio: ``r``, a scale on the positive's logit (the code's ``--pos_ratio``); defaults to 1.0.
    """

    citation = SIMCSEPP_CITATION
    default_auxiliary_losses = {"dimension_contrast": {"weight": 0.1, "temperature": 5.0}}
    required_inputs = ("off_dropout_embeddings",)

    def __init__(self, temperature: float = 0.05, pos_ratio: float = 1.0) -> None:
        super().__init__(InfoNCEForm(temperature))
        self.pos_ratio = check_setting("pos_ratio", pos_ratio, NumberRange(low=0, high=10, low_open=True))

    def forward(self, inputs: StepInputs) -> ObjectiveOutput:
        """Mean loss over the anchors ``inputs.anchors`` ``[B, D]`` (positives ``inputs.positives`` ``[B, D]``,
        off-dropout embeddings ``inputs["off_dropout"]`` ``[B, D]``), over ``inputs.anchor_rows`` when gathered."""
        z1, z2 = inputs.anchors, inputs.positives
        check_views(z1, z2)
        if inputs.extra_positives:
            raise ValueError("simcsepp takes one positive view per anchor (num_positive_views 1).")
        off_dropout = inputs.tensor(OFF_DROPOUT)
        if off_dropout.shape != z1.shape:
            raise ValueError(f"off_dropout has shape {tuple(off_dropout.shape)}; expected {tuple(z1.shape)}.")
        with torch.autocast(device_type=z1.device.type, enabled=False):
            anchors, positives, negatives = normalized(torch.stack([z1, z2, off_dropout]))  # one normalization
            positive = (anchors * positives).sum(dim=1, keepdim=True)
            if self.pos_ratio != 1:
                positive = self.pos_ratio * positive
            keep = ~torch.eye(z1.shape[0], dtype=torch.bool, device=z1.device)
            form = self.form(positive, negatives @ negatives.T, keep)
            losses = form.losses if inputs.anchor_rows is None else form.losses[inputs.anchor_rows]
            return ObjectiveOutput(losses.mean(), form.logs)

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "pos_ratio": self.pos_ratio}


@register_auxiliary_loss("dimension_contrast")
class DimensionContrastLoss(AuxiliaryLoss):
    """SimCSE++'s dimension-wise contrastive term (DCL): each embedding dimension of view 1 is contrasted with the
    same dimension of view 2 (positive) against the other dimensions of view 2 (negatives), over this process's
    rows (the code computes it per GPU)::

        a = BN(z1), b = BN(z2)                       (per dimension over the batch: mean 0, variance 1)
        C = a^T b / (B * tau)                        ([D, D], the cross-correlation of the two views / tau)
        l_DCL = 1/D sum_k ( -C_kk + log sum_l e^{C_kl} )

    ``BN`` is ``BatchNorm1d(affine=False)`` in training mode, as in the code: batch mean and biased batch variance,
    ``eps = 1e-5``. Gradients flow through the batch statistics.

    Args:
        temperature: ``tau``; defaults to 5.0 (the code's ``--sw_temp`` default "5 if with off-dropout negatives,
            20 if alone").
    """

    citation = SIMCSEPP_CITATION

    def __init__(self, temperature: float = 5.0) -> None:
        super().__init__()
        self.temperature = check_setting("temperature", temperature, NumberRange(low=1e-3, high=1000))

    def forward(self, inputs: AuxiliaryInputs) -> ObjectiveOutput:
        z1, z2 = inputs.anchors, inputs.positives
        check_views(z1, z2)
        with torch.autocast(device_type=z1.device.type, enabled=False):
            # Both views standardized in one batch norm over [B, 2D] (statistics per column, as each alone).
            a, b = standardized(torch.cat([z1, z2], dim=1)).split(z1.shape[1], dim=1)
            correlation = a.T @ b / (z1.shape[0] * self.temperature)
            losses = torch.logsumexp(correlation, dim=1) - correlation.diagonal()
            return ObjectiveOutput(losses.mean(), {"dimension_correlation": correlation.diagonal().mean().detach()})

    def get_config_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature}


def standardized(z: torch.Tensor) -> torch.Tensor:
    """``[B, D] -> [B, D]``: each column minus its batch mean, over ``sqrt(biased batch variance + 1e-5)``, in
    :func:`~hf_cse.objectives.base.loss_dtype` (``BatchNorm1d(affine=False)`` in training mode)."""
    # batch_norm, not the formula written out: one operator forward and one backward instead of about twenty.
    z = z.to(loss_dtype(z))
    return nn.functional.batch_norm(z, None, None, training=True, momentum=0.0, eps=BATCH_NORM_EPS)
