"""Input providers (see :mod:`hf_cse.inputs.base`): extra inputs of objectives and auxiliary terms, prepared once
on the corpus and provided every step. Each provider registers itself by name
(:func:`~hf_cse.registry.register_input_provider`); every module of this package is imported below, so a new
built-in provider is one new file, and a user's provider is one module imported with ``--import_module``. A provider's
settings are a dataclass of its own (:class:`InputSettings`), given as ``--input_kwargs '{"NAME": {...}}'``."""

import importlib
import pkgutil

from .augmented_views import AugmentedViews, build_view_maker
from .base import (
    SENTENCES,
    InputProvider,
    InputSettings,
    ProvidedInputs,
    StepContext,
    TrainingSetup,
    build_input_providers,
    build_step_inputs,
    provider_settings,
    setting_names,
)
from .complementary import ComplementaryProvider, ComplementarySimilarities
from .negation_pairs import NegationsAndParaphrases
from .prompt_views import PromptTemplateViews

# Register the providers of every module in this package, including ones not named above.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "SENTENCES",
    "AugmentedViews",
    "ComplementaryProvider",
    "ComplementarySimilarities",
    "InputProvider",
    "InputSettings",
    "NegationsAndParaphrases",
    "PromptTemplateViews",
    "ProvidedInputs",
    "StepContext",
    "TrainingSetup",
    "build_input_providers",
    "build_step_inputs",
    "build_view_maker",
    "provider_settings",
    "setting_names",
]
