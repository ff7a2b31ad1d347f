"""hf_cse: unsupervised contrastive sentence-embedding training on the Hugging Face Trainer.

The public names (``hf_cse.__all__``) are imported on first use (PEP 562 ``__getattr__``): ``import hf_cse``, which
every ``hf_cse.*`` module runs first, imports no torch, transformers or peft (seconds of CPU), so a command imports
only what it uses (``python -m hf_cse.download --help`` none of them). ``from hf_cse import CSEModel`` imports the
defining module then, as an eager import would. The built-in parts fill their registries (:mod:`hf_cse.registry`)
as their packages are imported (``hf_cse.objectives``, ``hf_cse.modeling.poolers``, ...), no longer all at once here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# isort: off
# First: its filters must be in place before peft imports bitsandbytes. Every hf_cse module, and so every path to
# peft through hf_cse, runs this package's __init__ before it.
from . import _third_party_logs  # noqa: F401

# isort: on
from .lazy_exports import lazy_attributes, type_checking_exports
from .version import __version__ as __version__

if TYPE_CHECKING:
    from .augment.views import ViewAugmentation as ViewAugmentation
    from .evaluation import Evaluator as Evaluator
    from .evaluation import InformationRetrievalEvaluator as InformationRetrievalEvaluator
    from .evaluation import ScoredPairsEvaluator as ScoredPairsEvaluator
    from .evaluation import SequentialEvaluator as SequentialEvaluator
    from .evaluation import STSEvaluator as STSEvaluator
    from .inputs import InputProvider as InputProvider
    from .inputs import InputSettings as InputSettings
    from .inputs import ProvidedInputs as ProvidedInputs
    from .inputs import StepContext as StepContext
    from .inputs import TrainingSetup as TrainingSetup
    from .modeling.configuration_cse import POOLERS as POOLERS
    from .modeling.configuration_cse import PoolingConfig as PoolingConfig
    from .modeling.encoder import SentenceEncoder as SentenceEncoder
    from .modeling.modeling_cse import CSEModel as CSEModel
    from .modeling.modeling_cse import CSEModelOutput as CSEModelOutput
    from .modeling.poolers import Pooler as Pooler
    from .modeling.poolers import PoolerInputs as PoolerInputs
    from .objectives import OBJECTIVES as OBJECTIVES
    from .objectives import AuxiliaryLoss as AuxiliaryLoss
    from .objectives import ContrastiveObjective as ContrastiveObjective
    from .objectives import FormOutput as FormOutput
    from .objectives import LossForm as LossForm
    from .objectives import NegativesOutput as NegativesOutput
    from .objectives import ObjectiveOutput as ObjectiveOutput
    from .objectives import StepInputs as StepInputs
    from .objectives import build_objective as build_objective
    from .objectives.matryoshka import MatryoshkaObjective as MatryoshkaObjective
    from .registry import register_auxiliary_loss as register_auxiliary_loss
    from .registry import register_evaluator as register_evaluator
    from .registry import register_input_provider as register_input_provider
    from .registry import register_loss_form as register_loss_form
    from .registry import register_objective as register_objective
    from .registry import register_pooler as register_pooler
    from .registry import register_view_augmentation as register_view_augmentation
    from .training.data.pairs import read_pairs as read_pairs
    from .training.data.streaming import stream_sentences as stream_sentences
    from .training.trainer import CSETrainer as CSETrainer
    from .training.training_args import CSETrainingArguments as CSETrainingArguments

# The public names are the imports above, read from this file; each is imported from its submodule on first use.
_EXPORTS = type_checking_exports(__file__)
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
