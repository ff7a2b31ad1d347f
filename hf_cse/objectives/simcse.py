"""Unsupervised SimCSE (Gao et al., 2021): dropout makes the positive, the rest of the batch the negatives."""

from __future__ import annotations

import torch

from ..registry import register_loss_form, register_objective
from .base import ContrastiveObjective, FormOutput, LossForm, positive_cross_entropy


@register_loss_form("infonce")
class InfoNCEForm(LossForm):
    """``l_i = -s_p/t + log( e^{s_p/t} + sum_{j kept} e^{s_n_ij/t} )``, i.e. cross-entropy over the row."""

    def forward(self, positive: torch.Tensor, negative: torch.Tensor, keep: torch.Tensor) -> FormOutput:
        return FormOutput(positive_cross_entropy(positive[:, :1], negative, keep, self.temperature))


@register_objective("simcse")
class SimCSELoss(ContrastiveObjective):
    """InfoNCE over in-batch negatives.

    For a batch of ``B`` sentences encoded twice (``z1``, ``z2``: ``[B, D]``)::

        l_i = -log( e^{cos(z1_i, z2_i)/t} / sum_j e^{cos(z1_i, z2_j)/t} )

    averaged over ``i``, computed in float32 with logsumexp.

    Args:
        temperature: ``t``; defaults to 0.05 (the paper's value).
    """

    citation = """@inproceedings{gao2021simcse,
    title = "{S}im{CSE}: Simple Contrastive Learning of Sentence Embeddings",
    author = "Gao, Tianyu and Yao, Xingcheng and Chen, Danqi",
    booktitle = "Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing",
    year = "2021",
    pages = "6894--6910",
}"""

    def __init__(self, temperature: float = 0.05) -> None:
        super().__init__(InfoNCEForm(temperature))
