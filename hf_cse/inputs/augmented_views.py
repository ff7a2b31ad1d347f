"""``augmented_views``: the positive views of every run whose objective has no view maker of its own, made by the
run's view augmentation (``--view_augmentation`` and ``--view_augmentation_kwargs``, :mod:`hf_cse.augment.views`:
dropout alone by default).

Views have one maker per run, an input provider with :attr:`~hf_cse.inputs.base.InputProvider.makes_views`: the one
an objective requires (two prompt templates, word repetition, MNTP's masked tokens), else this one
(:func:`build_view_maker`). The augmentations are the pieces this provider applies, as loss forms are the pieces of
objectives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..augment.views import DEFAULT_VIEW_AUGMENTATION, ViewAugmentation, build_view_augmentation
from ..errors import UsageError
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


def build_view_maker(providers: Mapping[str, InputProvider], setup: TrainingSetup) -> InputProvider:
    """The run's one maker of positive views: the provider among ``providers`` (those the objective and its terms
    require) that makes views, else :class:`AugmentedViews`.

    Raises:
        UsageError: two of ``providers`` make views, or one does and the run also names a view augmentation (its
            views would be made without it).
    """
    makers = [name for name, provider in providers.items() if provider.makes_views]
    if len(makers) > 1:
        raise UsageError(f"Input providers {' and '.join(map(repr, makers))} both make the views; a run has one.")
    if not makers:
        return AugmentedViews(setup)
    maker, augmentation = providers[makers[0]], setup.args.view_augmentation
    if augmentation != DEFAULT_VIEW_AUGMENTATION:
        made_with = maker.views_made_with or f"the {maker.name!r} input provider"
        raise UsageError(
            f"Objective {setup.objective.name!r} makes its views with {made_with}; it cannot be combined with "
            f"view_augmentation={augmentation!r} (use {DEFAULT_VIEW_AUGMENTATION!r})."
        )
    return maker
