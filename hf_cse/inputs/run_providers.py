"""Which input providers a run builds, decided once, and building them.

A run builds the providers its objective and its auxiliary terms require (``required_inputs``), ``duplicate_texts``
under ``--mask_duplicates`` and one maker of the positive views (the required provider that makes them, else
``augmented_views``, the run's view augmentation). :func:`run_input_providers` makes that decision from the objective,
the terms and the arguments alone, without a model: ``run_unsup.py`` checks what those providers' settings name before
anything loads (:func:`~hf_cse.training.arguments.checks.check_input_paths`), the trainer builds the same providers
(:func:`build_input_providers`), and the model card shows their settings (also when re-rendered from a checkpoint's
``training_args.json``), so that none of them can disagree. A setting given for a provider the run does not
build (in ``input_kwargs``) is refused by both (:func:`run_input_settings`), never
silently ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ..augment.views import DEFAULT_VIEW_AUGMENTATION
from ..errors import UsageError
from ..objectives.auxiliary import required_inputs, switched_off_auxiliary_losses
from ..registry import AUXILIARY_LOSSES, INPUT_PROVIDERS
from .augmented_views import AugmentedViews
from .base import InputProvider, InputSettings, TrainingSetup, provider_settings
from .duplicates import DuplicateTexts
from .labelled_pairs import LabelledPairs

if TYPE_CHECKING:
    from ..objectives.auxiliary import AuxiliaryLoss
    from ..objectives.base import ContrastiveObjective


logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunProviders:
    """The input providers of a run, by name (:func:`run_input_providers`).

    Attributes:
        required: those whose values the step gives the objective and its terms, in build order: the objective's
            and its auxiliary terms' ``required_inputs``, then ``duplicate_texts`` under ``mask_duplicates``.
        view_maker: the one that makes the positive views: the provider among ``required`` that does, else
            ``augmented_views`` (the run's view augmentation), built beside them.
    """

    required: tuple[str, ...]
    view_maker: str
    switched_off: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """``{provider: (term, ...)}``: the providers that only auxiliary terms at weight 0 require (named, e.g. by a
    sweep's ablation, but not built), each with those terms: a setting given for one is unused, with a warning."""

    @property
    def names(self) -> tuple[str, ...]:
        """Every provider the run builds: ``required``, then the view maker when it is not among them."""
        return tuple(dict.fromkeys((*self.required, self.view_maker)))


def run_input_providers(
    objective: ContrastiveObjective,
    auxiliary_losses: Mapping[str, tuple[AuxiliaryLoss, float]],
    arguments: Mapping[str, Any],
) -> RunProviders:
    """The input providers a run with ``objective``, ``auxiliary_losses`` (``{name: (term, weight)}``, the weighted
    terms) and training ``arguments`` builds; the one decision, for the checks before anything loads, for the build
    and for the model card.

    ``arguments`` is ``CSETrainingArguments`` as a mapping (``vars(args)``) or the ``training_args.json`` record a
    checkpoint saved them in, as :func:`run_input_settings` reads them; it reads ``mask_duplicates`` (default
    ``False``), ``view_augmentation`` (default ``dropout``) and ``num_hard_negatives`` (default ``None``: one sentence
    a row; set, the data are labelled pairs and ``labelled_pairs`` makes the views), a key missing from an older record
    as its default.

    Raises:
        UsageError: a required input no provider gives, or two required providers that give the same embedding
            (:func:`~hf_cse.objectives.auxiliary.required_inputs`); two of them make the views, or one does and the
            run also names a view augmentation (its views would be made without it); on labelled pairs, what cannot
            train on them (:func:`_check_labelled_pairs`); a ``hard_negative_weight`` without hard negatives. One line.
    """
    duplicates = (DuplicateTexts.name,) if arguments.get("mask_duplicates") else ()  # hf_cse.inputs.duplicates
    required = tuple(dict.fromkeys((*required_inputs(objective, auxiliary_losses), *duplicates)))
    switched_off: dict[str, tuple[str, ...]] = {}
    off_terms = switched_off_auxiliary_losses(
        getattr(objective, "default_auxiliary_losses", {}), arguments.get("auxiliary_losses") or {}
    )
    for term in off_terms:
        for name in AUXILIARY_LOSSES[term].required_inputs if term in AUXILIARY_LOSSES else ():
            switched_off[name] = (*switched_off.get(name, ()), term)
    switched_off = {name: terms for name, terms in switched_off.items() if name not in required}
    makers = [name for name in required if INPUT_PROVIDERS[name].makes_views]
    made_with = [INPUT_PROVIDERS[name].views_made_with or f"the {name!r} input provider" for name in makers]
    view_augmentation = arguments.get("view_augmentation") or DEFAULT_VIEW_AUGMENTATION
    num_hard_negatives = arguments.get("num_hard_negatives")
    if getattr(objective, "hard_negative_weight", 0) and not num_hard_negatives:
        data = "one sentence a row" if num_hard_negatives is None else "pairs without hard negatives"
        raise UsageError(
            f"Objective {objective.name!r}'s hard_negative_weight weighs each anchor's hard negatives, and the "
            f"training data are {data}: drop hard_negative_weight, or train on triplets (sent0,sent1,hard_neg)."
        )
    if num_hard_negatives is not None:
        _check_labelled_pairs(objective, required, made_with, view_augmentation)
        return RunProviders(required, LabelledPairs.name, switched_off)
    if len(makers) > 1:
        raise UsageError(f"Input providers {' and '.join(map(repr, makers))} both make the views; a run has one.")
    if not makers:
        return RunProviders(required, AugmentedViews.name, switched_off)
    if view_augmentation != DEFAULT_VIEW_AUGMENTATION:
        raise UsageError(
            f"Objective {objective.name!r} makes its views with {made_with[0]}; it cannot be combined with "
            f"view_augmentation={view_augmentation!r} (use {DEFAULT_VIEW_AUGMENTATION!r})."
        )
    return RunProviders(required, makers[0], switched_off)


PAIR_OBJECTIVES = "simcse, dcl or focal_infonce (docs/pairs.md)"
"""The built-in objectives that train on labelled pairs, for messages (``tests/test_pairs_training.py`` checks the
list against every registered objective)."""


def _check_labelled_pairs(
    objective: ContrastiveObjective, required: tuple[str, ...], made_with: list[str], view_augmentation: str
) -> None:
    """Refuse, in one line, what cannot train on labelled pairs: an objective that makes its own views (two prompt
    templates, word repetition, MNTP's masked tokens) or takes several positive views per anchor, a view augmentation
    (the positive is given, not made), and a provider whose values assume one sentence a row
    (:attr:`~hf_cse.inputs.base.InputProvider.takes_labelled_pairs`)."""
    layout = "labelled pairs (the data give each anchor its positive)"
    if made_with:
        raise UsageError(
            f"Objective {objective.name!r} makes its views with {made_with[0]}, so it cannot train on {layout}: "
            f"train it on a corpus of one sentence a row, or the pairs with {PAIR_OBJECTIVES}."
        )
    if getattr(objective, "num_positive_views", 1) != 1:
        raise UsageError(
            f"Objective {objective.name!r} takes {objective.num_positive_views} positive views per anchor, and "
            f"{layout} give one: set num_positive_views 1."
        )
    if view_augmentation != DEFAULT_VIEW_AUGMENTATION:
        raise UsageError(
            f"view_augmentation={view_augmentation!r} makes a positive view of each sentence, and {layout}: use "
            f"{DEFAULT_VIEW_AUGMENTATION!r} (dropout alone, as supervised SimCSE)."
        )
    refused = [name for name in required if not INPUT_PROVIDERS[name].takes_labelled_pairs]
    if refused:
        raise UsageError(
            f"The input provider {refused[0]!r} (of objective {objective.name!r}, its auxiliary terms or the run's "
            f"settings) gives values for a corpus of one sentence a row, not for {layout}: train it on one sentence "
            f"a row, or the pairs with {PAIR_OBJECTIVES}."
        )


def run_input_settings(run: RunProviders, arguments: Mapping[str, Any]) -> dict[str, InputSettings]:
    """``{name: settings}`` of every provider of ``run``, read from the run's training ``arguments``
    (``CSETrainingArguments`` as a mapping; :func:`~hf_cse.inputs.base.provider_settings`).

    Raises:
        UsageError: ``input_kwargs`` sets a provider the run does not build (the run would ignore the setting: the
            message names it and the providers the run builds); a setting its provider does
            not take or refuses; or a provider still defines a ``settings()`` method (its settings would go
            unrecorded). One line.
    """
    _refuse_unused_settings(run, arguments)
    settings = {}
    for name in run.names:
        cls = INPUT_PROVIDERS[name]
        if callable(getattr(cls, "settings", None)):  # the contract before InputSettings: it would go unrecorded
            raise UsageError(
                f"Input provider {name!r} defines settings(), which hf_cse no longer reads: declare its settings as "
                "a dataclass, its Settings (a subclass of hf_cse.InputSettings), whose record() reports them."
            )
        settings[name] = provider_settings(cls, arguments)
    return settings


def _refuse_unused_settings(run: RunProviders, arguments: Mapping[str, Any]) -> None:
    """Refuse settings for providers that ``run`` does not build: a provider named in ``input_kwargs``. A provider
    that only terms at weight 0 require (``run.switched_off``: an ablation keeps the settings of the term it switches
    off) gets a warning instead."""
    unused = []
    for name in arguments.get("input_kwargs") or {}:
        if name in run.names:
            continue
        if name in run.switched_off:
            logger.warning(
                "input_kwargs sets %r, which this run does not build: the auxiliary terms that use it (%s) have "
                "weight 0. Not used.",
                name,
                ", ".join(map(repr, sorted(set(run.switched_off[name])))),
            )
        else:
            unused.append(name)
    if unused:
        raise UsageError(
            f"input_kwargs sets {' and '.join(map(repr, unused))}, which this run does not use: its input providers "
            f"(of its objective, auxiliary terms, views and mask_duplicates) are {', '.join(map(repr, run.names))}; "
            "drop the setting or change the objective."
        )


def build_input_providers(
    run: RunProviders, setup: TrainingSetup, settings: Mapping[str, InputSettings] | None = None
) -> tuple[dict[str, InputProvider], InputProvider]:
    """The providers of ``run`` built from ``setup``, each with its settings: ``settings[name]`` where given (those
    :func:`~hf_cse.training.arguments.checks.check_input_paths` checked before the model loaded, with what the check
    read), else read from the run's arguments (:func:`run_input_settings`).

    Returns:
        ``{name: provider}`` of ``run.required``, in order, and the view maker (one of them, or built beside them).

    Raises:
        UsageError: as :func:`run_input_settings`.
        ValueError: ``settings`` names a provider that ``run`` does not build.
    """
    given = dict(settings or {})
    foreign = sorted(set(given) - set(run.names))
    if foreign:
        raise ValueError(f"settings were given for input providers {foreign}, which this run does not build.")
    # Settings given for every provider were read, and the run's unused ones refused or warned about, by
    # run_input_settings in check_input_paths: not again here, where its warnings would be logged a second time.
    every = given if set(given) == set(run.names) else {**run_input_settings(run, vars(setup.args)), **given}
    built = {}
    for name in run.names:
        cls, values = INPUT_PROVIDERS[name], every[name]
        # A provider that takes no settings may define __init__(self, setup) alone.
        built[name] = cls(setup, values) if fields(values) else cls(setup)
    return {name: built[name] for name in run.required}, built[run.view_maker]
