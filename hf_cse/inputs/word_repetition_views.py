"""``word_repetition_views``: ESimCSE's positive pair, the sentence and the sentence with some of its tokens repeated
(:class:`~hf_cse.augment.views.WordRepetition`): the run's view maker, so ``view_augmentation`` stays ``dropout``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..augment.views import WordRepetition
from ..errors import UsageError
from ..registry import register_input_provider
from .base import SENTENCES, InputProvider, TrainingSetup


@register_input_provider("word_repetition_views")
class WordRepetitionViews(InputProvider):
    """Makes the views with word repetition at the objective's ``dup_rate`` (its ``get_config_dict()``), so that
    ``--objective esimcse`` alone trains ESimCSE.

    Raises:
        UsageError: the objective has no ``dup_rate``.
    """

    makes_views = True
    views_made_with = "word repetition"

    def __init__(self, setup: TrainingSetup) -> None:
        super().__init__(setup)
        objective = setup.objective
        dup_rate = objective.get_config_dict().get("dup_rate")
        if not isinstance(dup_rate, (int, float)):
            raise UsageError(f"Objective {objective.name!r} needs a dup_rate for its word-repetition views.")
        self.augmentation = WordRepetition(dup_rate)

    def stack_views(self, batch: Mapping[str, Any], num_views: int) -> dict[str, torch.Tensor]:
        return self.augmentation.stack(self.setup.model, batch[SENTENCES], num_views)
