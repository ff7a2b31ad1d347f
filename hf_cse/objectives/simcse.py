"""SimCSE (Gao et al., 2021): unsupervised, dropout makes the positive and the rest of the batch the negatives;
supervised, on labelled pairs, the given positive and hard negatives join the in-batch ones."""

from __future__ import annotations

from typing import Any

import torch

from ..number_ranges import NumberRange, check_setting
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

    On labelled pairs (supervised SimCSE, :mod:`hf_cse.inputs.labelled_pairs`) ``z2`` is the given positives and the
    hard negatives ``z3`` (``K`` of them per row) add ``K * B`` columns, as SimCSE's released ``cl_forward``::

        l_i = -log( e^{cos(z1_i, z2_i)/t}
                    / (sum_j e^{cos(z1_i, z2_j)/t} + sum_{k,j} e^{cos(z1_i, z3_kj)/t + w [j = i]}) )

    Args:
        temperature: ``t``; defaults to 0.05 (the paper's value).
        hard_negative_weight: ``w``, SimCSE's log weight on each anchor's own hard negatives, in ``[-20, 20]``;
            defaults to 0 (a weight of ``e^0 = 1``: SimCSE's default). A run without hard negatives refuses any other
            value (it would weigh nothing).
        symmetric: also the loss of each positive against every anchor (sentence-transformers'
            ``MultipleNegativesSymmetricRankingLoss``), the two directions averaged; defaults to ``False`` (SimCSE's).
    """

    citation = """@inproceedings{gao2021simcse,
    title = "{S}im{CSE}: Simple Contrastive Learning of Sentence Embeddings",
    author = "Gao, Tianyu and Yao, Xingcheng and Chen, Danqi",
    booktitle = "Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing",
    year = "2021",
    pages = "6894--6910",
}"""

    def __init__(self, temperature: float = 0.05, hard_negative_weight: float = 0.0, symmetric: bool = False) -> None:
        super().__init__(InfoNCEForm(temperature))
        self.hard_negative_weight = check_setting(
            "hard_negative_weight", hard_negative_weight, NumberRange(low=-20.0, high=20.0)
        )
        if not isinstance(symmetric, bool):
            raise ValueError(f"symmetric must be true or false, got {symmetric!r}.")
        self.symmetric = symmetric

    def get_config_dict(self) -> dict[str, Any]:
        config = super().get_config_dict()
        # Recorded only when set: a run without them keeps the config (and resume contract) it always had.
        if self.hard_negative_weight:
            config["hard_negative_weight"] = self.hard_negative_weight
        if self.symmetric:
            config["symmetric"] = True
        return config
