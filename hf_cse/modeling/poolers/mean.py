"""The poolers that average over the sentence's tokens: ``avg`` (last layer: SimCSE's mean on encoders, LLM2Vec's on
decoder LLMs), ``avg_first_last`` and ``avg_top2`` (two layers' average, as in SimCSE's code), and ``weighted_mean``
(LLM2Vec's position-weighted mean)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ...registry import register_pooler
from .base import Pooler, PoolerInputs, masked_mean, real_token_ranks, span_mask

if TYPE_CHECKING:
    from ..configuration_cse import PoolingConfig
    from ..modeling_cse import CSEModel

_MASK_CODE = 'mask = batch["attention_mask"].unsqueeze(-1).to(outputs.last_hidden_state.dtype)\n'

TOKEN_CHOICES = ("all", "sentence")
"""The ``tokens`` a mean averages: ``all`` (every attended token, the tokenizer's special tokens included: SimCSE's
``avg``) or ``sentence`` (the sentence's own tokens: LLM2Vec's ``mean``, whose ``embed_mask`` leaves the BOS out)."""

LLM2VEC_CITATION = """@article{llm2vec,
    title = "{LLM2Vec}: {L}arge Language Models Are Secretly Powerful Text Encoders",
    author = "BehnamGhader, Parishad and Adlakha, Vaibhav and Mosbach, Marius and Bahdanau, Dzmitry and
              Chapados, Nicolas and Reddy, Siva",
    journal = "arXiv preprint arXiv:2404.05961",
    year = "2024",
    url = "https://arxiv.org/abs/2404.05961",
}"""


class _SentenceTokensMean(Pooler):
    """A mean whose ``tokens`` setting picks which tokens it averages (:data:`TOKEN_CHOICES`); unset, LLM2Vec's on a
    tokenizer that puts nothing after the sentence (decoder LLMs: Llama, Mistral, Gemma, Qwen), SimCSE's elsewhere
    (encoders, whose tokenizers end every sentence in ``[SEP]`` or ``</s>``)."""

    leaves_out_instruction = True

    def __init__(self, tokens: str | None = None) -> None:
        if tokens is not None and tokens not in TOKEN_CHOICES:
            raise ValueError(
                f"The {self.name} pooler's tokens must be one of {', '.join(TOKEN_CHOICES)} (or unset: sentence on a "
                f"decoder's tokenizer, all on an encoder's), got {tokens!r}."
            )
        self.tokens = tokens

    def sentence_span(self, lead: int, trail: int) -> tuple[int, int] | None:
        """``all``: none left out; ``sentence``: the ``lead`` and ``trail`` special tokens; unset: ``sentence`` where
        the tokenizer adds nothing after the sentence (LLM2Vec's ``embed_mask`` marks the last ``n`` tokens of a
        left-padded row, ``n`` the sentence's own count, which leaves out exactly the tokens before it), else
        ``all``."""
        tokens = self.tokens or ("sentence" if trail == 0 else "all")
        return (lead, trail) if tokens == "sentence" and (lead or trail) else None

    @staticmethod
    def span(pooling: PoolingConfig) -> tuple[int, int] | None:
        """The saved ``(first, last)`` special-token counts left out, or ``None`` (every attended token)."""
        prefix, suffix = pooling.template_prefix_length, pooling.template_suffix_length
        return None if not prefix and not suffix else (prefix or 0, suffix or 0)

    def tokens_mask(self, inputs: PoolerInputs, model: CSEModel) -> torch.Tensor:
        """``[B, L]``: the tokens averaged; each row's own span where the batch gives one (rows with an instruction,
        :class:`~hf_cse.modeling.tokenization.SentenceTokenizer`'s ``row_span``), else the saved one."""
        if inputs.template_lengths is not None:
            lengths = inputs.template_lengths
            return span_mask(inputs.attention_mask, lengths[:, :1], lengths[:, 1:])
        span = self.span(model.pooling)
        return inputs.attention_mask if span is None else span_mask(inputs.attention_mask, *span)

    def left_out(self, pooling: PoolingConfig) -> str:
        """The card's words for the tokens the mean leaves out, or ``""``."""
        span = self.span(pooling)
        if span is None:
            return ""
        parts = " and ".join(
            part for part in (f"first {span[0]}" * bool(span[0]), f"last {span[1]}" * bool(span[1])) if part
        )
        return f", without the tokenizer's special tokens around it (each sentence's {parts})"

    @staticmethod
    def instruction_note(pooling: PoolingConfig) -> str:
        """The card's words for the instruction the mean leaves out of queries, or ``""`` without one."""
        if pooling.instruction is None:
            return ""
        return f'; a query\'s instruction (`{pooling.instruction!r}`, `prompt_name="query"`) left out'

    def span_code(self, pooling: PoolingConfig) -> str:
        """Plain-transformers lines that make ``mask`` ``[B, L, 1]`` cover the averaged tokens (right padding)."""
        span = self.span(pooling)
        if span is None:
            return _MASK_CODE
        return (
            "# The sentence's own tokens: each row's first and last special tokens left out (LLM2Vec's mean).\n"
            'rank = batch["attention_mask"].cumsum(dim=1) - 1\n'
            'length = batch["attention_mask"].sum(dim=1, keepdim=True)\n'
            f'mask = batch["attention_mask"].bool() & (rank >= {span[0]}) & (rank < length - {span[1]})\n'
            "mask = mask.unsqueeze(-1).to(outputs.last_hidden_state.dtype)\n"
        )


@register_pooler("avg")
class MeanPooler(_SentenceTokensMean):
    """The mean of the last layer over the sentence's tokens. Which tokens is the ``tokens`` setting
    (``--pooler_kwargs '{"tokens": "all"}'``, saved in ``config.json``): ``all``, every attended token, the
    tokenizer's special tokens included (SimCSE's ``avg``: ``[CLS]`` and ``[SEP]`` count); ``sentence``, the
    sentence's own tokens (LLM2Vec's ``mean``: its ``embed_mask`` leaves Llama's and Gemma's BOS out). Unset (the
    default): ``sentence`` on a tokenizer that puts nothing after a sentence (decoder LLMs), ``all`` on one that does
    (encoders), so ``--pooler avg`` is SimCSE's mean on BERT and LLM2Vec's on a decoder. sentence-transformers'
    ``mean`` averages every attended token: it expresses ``all``, and ``sentence`` where the tokenizer adds no special
    token (Qwen's).

    Args:
        tokens: ``"all"``, ``"sentence"`` or unset (see above).
    """

    sentence_transformers_mode = "mean"
    sentence_transformers_kwargs = {"tokens": "all"}

    def sentence_transformers_pooling(self, pooling: PoolingConfig) -> str | None:
        return "mean" if self.span(pooling) is None else None

    def describe(self, pooling: PoolingConfig) -> str:
        llm2vec = "" if self.span(pooling) is None else " (LLM2Vec's mean)"  # left_out says nothing then either
        mean = "the mean of the last layer over the sentence's tokens"
        return mean + self.left_out(pooling) + self.instruction_note(pooling) + llm2vec

    def pool(self, inputs: PoolerInputs, model: CSEModel) -> torch.Tensor:
        return masked_mean(inputs.last_hidden_state, self.tokens_mask(inputs, model))

    def transformers_code(self, pooling: PoolingConfig) -> str:
        return self.span_code(pooling) + (
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


@register_pooler("weighted_mean")
class WeightedMeanPooler(_SentenceTokensMean):
    """LLM2Vec's ``weighted_mean``: the last layer's average over the sentence's tokens, token ``i`` (from 1) weighted
    ``i`` (so later tokens, which a causal decoder lets see more of the sentence, count more); LLM2Vec's code puts
    ``arange(n) + 1`` on the last ``n`` (``embed_mask``) tokens of each left-padded row and divides by their sum. The
    ``tokens`` setting is ``avg``'s: unset, the sentence's own tokens on a decoder's tokenizer (the BOS left out, as
    LLM2Vec's ``embed_mask``), every token on an encoder's. sentence-transformers' ``weightedmean`` weights from the
    first attended token: it expresses this pooler where nothing is left out.

    Args:
        tokens: ``"all"``, ``"sentence"`` or unset (see :class:`MeanPooler`).
    """

    sentence_transformers_mode = "weightedmean"
    sentence_transformers_kwargs = {"tokens": "all"}
    citations = (LLM2VEC_CITATION,)

    def sentence_transformers_pooling(self, pooling: PoolingConfig) -> str | None:
        # With a prompt left out, sentence-transformers' weightedmean still weights from the prompt's first token
        # (the sentence's first token weighs prompt length + 1), LLM2Vec's from the sentence's (1).
        return "weightedmean" if self.span(pooling) is None and pooling.instruction is None else None

    def describe(self, pooling: PoolingConfig) -> str:
        return (
            "the position-weighted mean of the last layer over the sentence's tokens (token i weighted i"
            + self.left_out(pooling)
            + self.instruction_note(pooling)
            + "; LLM2Vec's weighted mean)"
        )

    def pool(self, inputs: PoolerInputs, model: CSEModel) -> torch.Tensor:
        mask = self.tokens_mask(inputs, model)
        weights = (real_token_ranks(mask) + 1).clamp(min=0) * mask  # 1, 2, ... over the averaged tokens
        weights = weights.unsqueeze(-1).to(inputs.last_hidden_state.dtype)
        return (inputs.last_hidden_state * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)

    def transformers_code(self, pooling: PoolingConfig) -> str:
        return self.span_code(pooling) + (
            "weights = (mask.squeeze(-1).cumsum(dim=1) * mask.squeeze(-1)).unsqueeze(-1)  # 1, 2, ... per token\n"
            "embeddings = (outputs.last_hidden_state * weights).sum(1) / weights.sum(1).clamp(min=1.0)"
        )
