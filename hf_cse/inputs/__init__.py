"""Input providers (see :mod:`hf_cse.inputs.base`): extra inputs of objectives and auxiliary terms, prepared once
on the corpus and provided every step. Importing this package registers the built-in ones."""

from .base import SENTENCES, InputProvider, ProvidedInputs, StepInputs, TrainingSetup, build_input_providers
from .complementary import ComplementaryProvider, ComplementarySimilarities
from .negation_pairs import NegationsAndParaphrases
from .prompt_views import PromptTemplateViews

__all__ = [
    "SENTENCES",
    "ComplementaryProvider",
    "ComplementarySimilarities",
    "InputProvider",
    "NegationsAndParaphrases",
    "PromptTemplateViews",
    "ProvidedInputs",
    "StepInputs",
    "TrainingSetup",
    "build_input_providers",
]
