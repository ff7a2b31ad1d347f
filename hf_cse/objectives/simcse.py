"""Unsupervised SimCSE (Gao et al., 2021): dropout makes the positive, the rest of the batch the negatives."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .base import ContrastiveObjective, check_temperature, check_views, cosine_logits


class SimCSELoss(ContrastiveObjective):
    """InfoNCE over in-batch negatives.

    For a batch of ``B`` sentences encoded twice (``z1``, ``z2``: ``[B, D]``)::

        l_i = -log( e^{cos(z1_i, z2_i)/t} / sum_j e^{cos(z1_i, z2_j)/t} )

    averaged over ``i``. Computed as ``cross_entropy`` over float32 logits, i.e. with logsumexp.

    Args:
        temperature: ``t``; defaults to 0.05 (the paper's value).
    """

    name = "simcse"
    citation = """@inproceedings{gao2021simcse,
    title = "{S}im{CSE}: Simple Contrastive Learning of Sentence Embeddings",
    author = "Gao, Tianyu and Yao, Xingcheng and Chen, Danqi",
    booktitle = "Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing",
    year = "2021",
    pages = "6894--6910",
}"""

    def __init__(self, temperature: float = 0.05) -> None:
        super().__init__()
        self.temperature = check_temperature(temperature)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        check_views(z1, z2)
        logits = cosine_logits(z1, z2, self.temperature)
        labels = torch.arange(logits.shape[0], device=logits.device)
        return nn.functional.cross_entropy(logits, labels)

    def get_config_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature}
