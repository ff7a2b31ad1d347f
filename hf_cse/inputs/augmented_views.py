"""``augmented_views``: the positive views of every run whose objective has no view maker of its own, made by the
run's view augmentation (``--view_augmentation`` and ``--view_augmentation_kwargs``, :mod:`hf_cse.augment.views`:
dropout alone by default).

Views have one maker per run, an input provider with :attr:`~hf_cse.inputs.base.InputProvider.makes_views`: the one
an objective requires (two prompt templates, word repetition, MNTP's masked tokens), else this one
(:func:`~hf_cse.inputs.run_providers.run_input_providers`). The augmentations are the pieces this provider applies,
as loss forms are the pieces of objectives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..augment.views import ViewAugmentation, build_view_augmentation
from ..registry import register_input_provider
from .base import SENTENCES, InputProvider, TrainingSetup


@register_input_provider("augmented_views")
class AugmentedViews(InputProvider):
    """Stacks the views with the view augmentation of ``setup.args`` (``view_augmentation``, built with
    ``view_augmentation_kwargs``): view 1 the plain sentences, views 2.. augmented.

    Attributes:
        augmentation: the :class:`~hf_cse.augment.views.ViewAugmentation` applied.
    """

    makes_views = True

    def __init__(self, setup: TrainingSetup) -> None:
        super().__init__(setup)
        args = setup.args
        self.augmentation: ViewAugmentation = build_view_augmentation(
            args.view_augmentation, **args.view_augmentation_kwargs
        )

    def stack_views(self, batch: Mapping[str, Any], num_views: int) -> dict[str, torch.Tensor]:
        # The augmentation reads the bare model's word embeddings and pooling; the forward goes through the wrapper.
        return self.augmentation.stack(self.setup.model, batch[SENTENCES], num_views)
