"""Sentence poolers: one class per pooler, registered by name in :data:`hf_cse.registry.POOLERS`.

Importing this package registers the built-in poolers, in the order ``--pooler`` lists them: ``cls``,
``cls_before_pooler`` (:mod:`.first_token`), ``avg``, ``avg_first_last``, ``avg_top2``, ``weighted_mean``
(:mod:`.mean`), ``mask`` (:mod:`.prompt`), ``last_token`` and ``prompt_last_token`` (:mod:`.last_token`, for decoder
LLMs), ``echo`` (:mod:`.echo`, for causal decoders). A user's pooler subclasses :class:`Pooler` and registers with
:func:`hf_cse.register_pooler` (see :mod:`.base`).
"""

from ...registry import POOLERS, register_pooler
from .base import Pooler, PoolerInputs, masked_mean, pooler_class, span_mask

# isort: off
# The import order is the registration order, which --pooler's choices and the error messages list.
from .first_token import CLSBeforePooler, CLSPooler
from .mean import LLM2VEC_CITATION, FirstLastMeanPooler, MeanPooler, TopTwoMeanPooler, WeightedMeanPooler
from .prompt import DEFAULT_PROMPT_TEMPLATE, PROMPTBERT_CITATION, MaskPooler
from .last_token import (
    PROMPTEOL_CITATION,
    PROMPTEOL_TEMPLATE,
    LastTokenPooler,
    PromptLastTokenPooler,
    prompteol_rewrite,
)
from .echo import ECHO_CITATION, ECHO_TEMPLATE, EchoPooler
# isort: on

__all__ = [
    "DEFAULT_PROMPT_TEMPLATE",
    "ECHO_CITATION",
    "ECHO_TEMPLATE",
    "LLM2VEC_CITATION",
    "POOLERS",
    "PROMPTBERT_CITATION",
    "PROMPTEOL_CITATION",
    "PROMPTEOL_TEMPLATE",
    "CLSBeforePooler",
    "CLSPooler",
    "EchoPooler",
    "FirstLastMeanPooler",
    "LastTokenPooler",
    "MaskPooler",
    "MeanPooler",
    "Pooler",
    "PoolerInputs",
    "PromptLastTokenPooler",
    "TopTwoMeanPooler",
    "WeightedMeanPooler",
    "masked_mean",
    "pooler_class",
    "prompteol_rewrite",
    "register_pooler",
    "span_mask",
]
