"""ESimCSE (Wu et al., 2022): word-repetition positives and a momentum-encoder queue of negatives."""

from __future__ import annotations

from typing import Any

from ..augment.views import DEFAULT_DUP_RATE, ESIMCSE_CITATION
from ..number_ranges import PROBABILITY, check_setting
from ..registry import register_objective
from .base import ContrastiveObjective
from .simcse import InfoNCEForm

DEFAULT_QUEUE_SIZE = 160
"""ESimCSE's queue for BERT-base: 2.5 times its batch of 64 (the ratio its queue-size analysis found best)."""


@register_objective("esimcse")
class ESimCSELoss(ContrastiveObjective):
    """ESimCSE: InfoNCE where the positive of each sentence ``x_i`` is its word-repeated copy ``x_i+``
    (:class:`~hf_cse.augment.views.WordRepetition`, the ``word_repetition_views`` input provider) and the negatives
    are the batch's other positives plus a queue ``M`` of past sentences encoded by a momentum encoder
    (:mod:`hf_cse.inputs.momentum_queue`)::

        l_i = -log( e^{cos(h_i, h_i+)/t} / ( sum_j e^{cos(h_i, h_j+)/t} + sum_{m in M} e^{cos(h_i, h_m)/t} ) )

    the paper's Eq. (5), and the code's cross-entropy over ``[cos(z1, z2) | cos(z1, queue)] / t``. The queue holds the
    newest ``momentum_queue_size`` embeddings of the plain sentences (view 1) by the momentum encoder, dropout off;
    ``theta_m <- momentum * theta_m + (1 - momentum) * theta`` every step.

    Args:
        temperature: defaults to 0.05.
        dup_rate: word repetition's largest share of repeated tokens; defaults to 0.32 (the paper's).
        momentum_queue_size: ``|M|`` in sentences; defaults to 160 (2.5 x the paper's BERT-base batch of 64; hf_cse
            takes it in sentences, as the code's ``neg_size``, not as a ratio). 0 turns the queue off (the paper's
            "w/o momentum contrast" ablation).
        momentum: defaults to 0.995 (the paper's).
    """

    citation = ESIMCSE_CITATION
    required_inputs = ("word_repetition_views",)

    def __init__(
        self,
        temperature: float = 0.05,
        dup_rate: float = DEFAULT_DUP_RATE,
        momentum_queue_size: int = DEFAULT_QUEUE_SIZE,
        momentum: float = 0.995,
    ) -> None:
        super().__init__(InfoNCEForm(temperature))
        self.dup_rate = check_setting("dup_rate", dup_rate, PROBABILITY)
        if momentum_queue_size != 0:
            self.use_momentum_queue(momentum_queue_size, momentum)

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "dup_rate": self.dup_rate}
