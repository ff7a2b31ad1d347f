"""hf_cse: unsupervised contrastive sentence-embedding training on the Hugging Face Trainer."""

from .modeling.configuration_cse import POOLERS, PoolingConfig
from .modeling.encoder import SentenceEncoder
from .modeling.modeling_cse import CSEModel, CSEModelOutput
from .objectives import OBJECTIVES, build_objective
from .training.trainer import CSETrainer
from .training.training_args import CSETrainingArguments

__version__ = "0.1.0"

__all__ = [
    "OBJECTIVES",
    "POOLERS",
    "CSEModel",
    "CSEModelOutput",
    "CSETrainer",
    "CSETrainingArguments",
    "PoolingConfig",
    "SentenceEncoder",
    "build_objective",
]
