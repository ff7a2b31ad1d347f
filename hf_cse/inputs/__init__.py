"""Input providers (see :mod:`hf_cse.inputs.base`): extra inputs of objectives and auxiliary terms, prepared once
on the corpus and provided every step. Each provider registers itself by name
(:func:`~hf_cse.registry.register_input_provider`); every module of this package is imported below, so a new
built-in provider is one new file, and a user's provider is one module imported with ``--import_module``."""

import importlib
import pkgutil

from .base import (
    SENTENCES,
    InputProvider,
    ProvidedInputs,
    StepContext,
    TrainingSetup,
    build_input_providers,
    build_step_inputs,
)
from .complementary import ComplementaryProvider, ComplementarySimilarities
from .negation_pairs import NegationsAndParaphrases
from .prompt_views import PromptTemplateViews

# Register the providers of every module in this package, including ones not named above.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "SENTENCES",
    "ComplementaryProvider",
    "ComplementarySimilarities",
    "InputProvider",
    "NegationsAndParaphrases",
    "PromptTemplateViews",
    "ProvidedInputs",
    "StepContext",
    "TrainingSetup",
    "build_input_providers",
    "build_step_inputs",
]
