"""Input providers (see :mod:`hf_cse.inputs.base`): extra inputs of objectives and auxiliary terms, prepared once
on the corpus and provided every step. Each provider registers itself by name
(:func:`~hf_cse.registry.register_input_provider`); every module of this package is imported below, so a new
built-in provider is one new file, and a user's provider is one module imported with ``--import_module``. A provider's
settings are a dataclass of its own (:class:`InputSettings`), given as ``--input_kwargs '{"NAME": {...}}'``."""

import importlib
import pkgutil

from .augmented_views import AugmentedViews
from .base import (
    SENTENCES,
    InputProvider,
    InputSettings,
    ProvidedInputs,
    StepContext,
    TrainingSetup,
    build_step_inputs,
    provider_settings,
    setting_names,
)
from .complementary import ComplementaryProvider, ComplementarySimilarities
from .negation_pairs import NegationsAndParaphrases
from .prompt_views import PromptTemplateViews
from .run_providers import RunProviders, build_input_providers, run_input_providers, run_input_settings

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
    "RunProviders",
    "StepContext",
    "TrainingSetup",
    "build_input_providers",
    "build_step_inputs",
    "provider_settings",
    "run_input_providers",
    "run_input_settings",
    "setting_names",
]
