"""The poolers that read the first token's state (``[CLS]``, ``<s>``): ``cls`` and ``cls_before_pooler``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ...registry import register_pooler
from .base import Pooler, PoolerInputs

if TYPE_CHECKING:
    from ..configuration_cse import PoolingConfig
    from ..modeling_cse import CSEModel


@register_pooler("cls")
class CLSPooler(Pooler):
    """The ``[CLS]`` hidden state passed through SimCSE's MLP head (dense + tanh). With ``mlp_only_train=True``
    (unsupervised SimCSE's choice, the default) the head is used in training only and inference returns the raw
    ``[CLS]`` state; sentence-transformers expresses the head as a tanh ``Dense`` module."""

    mlp_head = True
    sentence_transformers_mode = "cls"
    needs_bidirectional_attention = True  # under causal attention the first token sees only itself

    def pool(self, inputs: PoolerInputs, model: CSEModel) -> torch.Tensor:
        return inputs.last_hidden_state[:, 0]

    def describe(self, pooling: PoolingConfig) -> str:
        return "the `[CLS]` hidden state" + (
            " through SimCSE's MLP head (dense + tanh)"
            if pooling.uses_mlp_at_inference
            else " (SimCSE's MLP head was used in training only)"
        )

    def transformers_code(self, pooling: PoolingConfig) -> str:
        return "embeddings = outputs.last_hidden_state[:, 0]  # the [CLS] state"


@register_pooler("cls_before_pooler")
class CLSBeforePooler(CLSPooler):
    """The raw ``[CLS]`` hidden state, no head, in training too."""

    mlp_head = False
    description = "the `[CLS]` hidden state"
    describe = Pooler.describe
