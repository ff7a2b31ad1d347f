"""The poolers that average over the sentence's tokens: ``avg`` (last layer), ``avg_first_last`` and ``avg_top2``
(two layers' average, as in SimCSE's code)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ...registry import register_pooler
from .base import Pooler, PoolerInputs, masked_mean

if TYPE_CHECKING:
    from ..configuration_cse import PoolingConfig
    from ..modeling_cse import CSEModel

_MASK_CODE = 'mask = batch["attention_mask"].unsqueeze(-1).to(outputs.last_hidden_state.dtype)\n'


@register_pooler("avg")
class MeanPooler(Pooler):
    """The mean of the last layer over non-padding tokens."""

    sentence_transformers_mode = "mean"
    description = "the mean of the last layer over the sentence's tokens"

    def pool(self, inputs: PoolerInputs, model: CSEModel) -> torch.Tensor:
        return masked_mean(inputs.last_hidden_state, inputs.attention_mask)

    def transformers_code(self, pooling: PoolingConfig) -> str:
        return _MASK_CODE + (
            "embeddings = (outputs.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1.0)"
            "  # mean of real tokens"
        )


@register_pooler("avg_first_last")
class FirstLastMeanPooler(Pooler):
    """The mean over tokens of (first layer + last layer) / 2; the "first layer" is the output of the first
    transformer layer (``hidden_states[1]``), as in SimCSE's code. sentence-transformers cannot express it."""

    needs_all_layers = True
    description = "the mean over tokens of the first and last layers' average"

    def pool(self, inputs: PoolerInputs, model: CSEModel) -> torch.Tensor:
        return masked_mean((inputs.hidden_states[1] + inputs.last_hidden_state) / 2.0, inputs.attention_mask)

    def transformers_code(self, pooling: PoolingConfig) -> str:
        return _MASK_CODE + (
            "hidden = (outputs.hidden_states[1] + outputs.last_hidden_state) / 2.0"
            "  # first layer's output + last layer\n"
            "embeddings = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)"
        )


@register_pooler("avg_top2")
class TopTwoMeanPooler(Pooler):
    """The mean over tokens of (last layer + second-to-last layer) / 2. sentence-transformers cannot express it."""

    needs_all_layers = True
    description = "the mean over tokens of the last two layers' average"

    def pool(self, inputs: PoolerInputs, model: CSEModel) -> torch.Tensor:
        return masked_mean((inputs.hidden_states[-2] + inputs.last_hidden_state) / 2.0, inputs.attention_mask)

    def transformers_code(self, pooling: PoolingConfig) -> str:
        return (
            _MASK_CODE + "hidden = (outputs.hidden_states[-2] + outputs.last_hidden_state) / 2.0  # last two layers\n"
            "embeddings = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)"
        )
