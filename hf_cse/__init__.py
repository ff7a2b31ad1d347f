"""hf_cse: unsupervised contrastive sentence-embedding training on the Hugging Face Trainer."""

from . import _third_party_logs  # noqa: F401  (first: its filters must be in place before peft imports bitsandbytes)
from .augment.views import ViewAugmentation
from .evaluation import (
    Evaluator,
    InformationRetrievalEvaluator,
    ScoredPairsEvaluator,
    SequentialEvaluator,
    STSEvaluator,
)
from .inputs import InputProvider, InputSettings, ProvidedInputs, StepContext, TrainingSetup
from .modeling.configuration_cse import POOLERS, PoolingConfig
from .modeling.encoder import SentenceEncoder
from .modeling.modeling_cse import CSEModel, CSEModelOutput
from .modeling.poolers import Pooler, PoolerInputs
from .objectives import (
    OBJECTIVES,
    AuxiliaryLoss,
    ContrastiveObjective,
    FormOutput,
    LossForm,
    NegativesOutput,
    ObjectiveOutput,
    StepInputs,
    build_objective,
)
from .objectives.matryoshka import MatryoshkaObjective
from .registry import (
    register_auxiliary_loss,
    register_evaluator,
    register_input_provider,
    register_loss_form,
    register_objective,
    register_pooler,
    register_view_augmentation,
)
from .training.pairs import read_pairs
from .training.streaming import stream_sentences
from .training.trainer import CSETrainer
from .training.training_args import CSETrainingArguments
from .version import __version__ as __version__

__all__ = [
    "OBJECTIVES",
    "POOLERS",
    "AuxiliaryLoss",
    "CSEModel",
    "CSEModelOutput",
    "CSETrainer",
    "CSETrainingArguments",
    "ContrastiveObjective",
    "Evaluator",
    "FormOutput",
    "InformationRetrievalEvaluator",
    "InputProvider",
    "InputSettings",
    "LossForm",
    "MatryoshkaObjective",
    "NegativesOutput",
    "ObjectiveOutput",
    "Pooler",
    "PoolerInputs",
    "PoolingConfig",
    "ProvidedInputs",
    "STSEvaluator",
    "ScoredPairsEvaluator",
    "SentenceEncoder",
    "SequentialEvaluator",
    "StepContext",
    "StepInputs",
    "TrainingSetup",
    "ViewAugmentation",
    "build_objective",
    "read_pairs",
    "register_auxiliary_loss",
    "register_evaluator",
    "register_input_provider",
    "register_loss_form",
    "register_objective",
    "register_pooler",
    "register_view_augmentation",
    "stream_sentences",
]
