"""Sentences to token ids, with the prompt template of a pooler that uses one (``mask``), and padding into
batches: the model's side of tokenization, which reads the pooler's settings (:class:`PoolingConfig`) and fills in
its token ids and template lengths, hence here beside the model and not in :mod:`hf_cse.text`."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from transformers import PreTrainedTokenizerBase

from ..errors import UsageError
from .configuration_cse import PoolingConfig

logger = logging.getLogger(__name__)


def _special_token_frame(tokenizer: PreTrainedTokenizerBase) -> tuple[list[int], list[int]]:
    """The ids a tokenizer puts before and after one sequence (``[CLS]`` / ``[SEP]``, ``<s>`` / ``</s>``)."""
    probe = "hello"
    bare = tokenizer(probe, add_special_tokens=False)["input_ids"]
    framed = tokenizer(probe)["input_ids"]
    for start in range(len(framed) - len(bare) + 1):
        if framed[start : start + len(bare)] == bare:
            return framed[:start], framed[start + len(bare) :]
    raise ValueError(
        f"Cannot locate the special tokens of {type(tokenizer).__name__}: {framed} does not contain {bare}."
    )


def use_eos_for_padding(tokenizer: PreTrainedTokenizerBase) -> None:
    """Give a tokenizer without a pad token (Llama's, Mistral's) its end-of-sequence token as one, the usual choice for
    decoders: padding is masked out, so which id fills it does not change an embedding. The tokenizer is changed in
    place, so that it is saved with the pad token and sentence-transformers pads the same way.

    Raises:
        UsageError: the tokenizer has neither a pad token nor an end-of-sequence token.
    """
    if tokenizer.pad_token is not None:
        return
    if tokenizer.eos_token is None:
        raise UsageError(
            f"The tokenizer {type(tokenizer).__name__} has no pad token and no eos token to pad with; set one "
            "(tokenizer.pad_token = ...) before training."
        )
    logger.info("The tokenizer has no pad token: padding with its eos token %r.", tokenizer.eos_token)
    tokenizer.pad_token = tokenizer.eos_token


def shortest_max_seq_length(tokenizer: PreTrainedTokenizerBase) -> int:
    """The shortest truncation length that keeps a token of the sentence: the special tokens ``tokenizer`` puts around
    one sentence (BERT's ``[CLS]`` and ``[SEP]``: 2; Llama's ``<s>``: 1; Qwen3's: none) plus one. Shorter, every
    sentence would embed alike (BERT at 2: ``[CLS] [SEP]``), or not be truncated at all (a fast tokenizer asked for
    fewer tokens than its special tokens logs an error and returns the whole sentence)."""
    return tokenizer.num_special_tokens_to_add(pair=False) + 1


class SentenceTokenizer:
    """Tokenizes sentences the way a :class:`~hf_cse.modeling.modeling_cse.CSEModel` expects them.

    For a pooler that :attr:`~hf_cse.modeling.poolers.Pooler.uses_prompt_template` (``mask``,
    ``prompt_last_token``) each sentence is wrapped in the pooler's
    :meth:`~hf_cse.modeling.poolers.Pooler.prompt_template`, ``[MASK]`` replaced by the tokenizer's own mask token
    for a pooler that :attr:`~hf_cse.modeling.poolers.Pooler.needs_mask_token`. Truncation only ever shortens the
    sentence: the template's tokens are always kept, so the mask token (or the prompt's last token) is always present.
    Every row is checked to hold exactly one mask token as it is tokenized (once, when the training data is
    prepared): the model's forward pass in training does not check it, since reading the count on the host would
    synchronize with the device at every step.

    Batches are padded on the right whatever the tokenizer's ``padding_side``: under a decoder's causal attention
    real tokens then never follow padding, and the positions of a sentence's tokens do not depend on its batch.

    Args:
        tokenizer: the encoder's tokenizer.
        pooling: the model's pooling settings; ``pooling.mask_token_id`` is filled in from the tokenizer.
        max_seq_length: length limit in tokens, special and template tokens included; ``None`` uses
            ``pooling.max_seq_length`` and then the tokenizer's ``model_max_length``.
    """

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, pooling: PoolingConfig, max_seq_length: int | None = None
    ) -> None:
        self.tokenizer = tokenizer
        self.pooling = pooling
        use_eos_for_padding(tokenizer)
        # hf_cse pads on the right (pad); the tokenizer saved with the model then tells sentence-transformers to pad as
        # hf_cse did: on the left, a rotary decoder's positions would shift and its embeddings move by rounding.
        tokenizer.padding_side = "right"
        limit = max_seq_length or pooling.max_seq_length or tokenizer.model_max_length
        self.max_seq_length = int(min(limit, 100_000))  # model_max_length is a huge sentinel when unset
        if self.max_seq_length < (shortest := shortest_max_seq_length(tokenizer)):
            raise UsageError(
                f"max_seq_length={self.max_seq_length} leaves no room for a sentence: {type(tokenizer).__name__} "
                f"adds {shortest - 1} special tokens to each; use at least {shortest}."
            )
        self.returns_token_type_ids = "token_type_ids" in tokenizer.model_input_names
        pooler = pooling.get_pooler()
        self.uses_prompt_template = pooler.uses_prompt_template
        self.checks_mask_token = pooler.needs_mask_token
        if self.uses_prompt_template:
            self._prepare_template(pooler.prompt_template(pooling))

    def _prepare_template(self, template: str) -> None:
        tok = self.tokenizer
        if self.checks_mask_token:
            if tok.mask_token is None:
                raise ValueError(
                    f"pooler={self.pooling.pooler!r} needs a tokenizer with a mask token; {type(tok).__name__} has "
                    "none (decoder tokenizers usually have none: use pooler='prompt_last_token' or 'last_token')."
                )
            self.pooling.mask_token_id = tok.mask_token_id
            template = template.replace("[MASK]", tok.mask_token)
        prefix, suffix = template.split("{sentence}")
        self._prefix_ids = tok(prefix, add_special_tokens=False)["input_ids"] if prefix else []
        self._suffix_ids = tok(suffix, add_special_tokens=False)["input_ids"] if suffix else []
        self._lead_ids, self._trail_ids = _special_token_frame(tok)
        framed_template = self._lead_ids + self._prefix_ids + self._suffix_ids + self._trail_ids
        masks = framed_template.count(tok.mask_token_id)
        if self.checks_mask_token and masks != 1:  # e.g. the tokenizer's own "<mask>" written beside [MASK]
            raise UsageError(
                f"prompt_template {template!r} tokenizes to {masks} mask tokens "
                f"({tok.mask_token!r}) with {type(tok).__name__}; pooler='mask' needs exactly one: write [MASK] once "
                "and no mask token of the tokenizer."
            )
        self.pooling.template_prefix_length = len(self._lead_ids) + len(self._prefix_ids)
        self.pooling.template_suffix_length = len(self._suffix_ids) + len(self._trail_ids)
        fixed = len(self._lead_ids) + len(self._prefix_ids) + len(self._suffix_ids) + len(self._trail_ids)
        self._sentence_budget = self.max_seq_length - fixed
        if self._sentence_budget < 1:
            raise ValueError(
                f"max_seq_length={self.max_seq_length} leaves no room for a sentence: the prompt template "
                f"{template!r} takes {fixed} tokens with special tokens."
            )

    def __call__(self, sentences: Sequence[str]) -> dict[str, list[list[int]]]:
        """Token ids of each sentence, unpadded: ``{"input_ids": [[...], ...], ...}``."""
        sentences = list(sentences)
        if not self.uses_prompt_template:
            encoded = self.tokenizer(sentences, truncation=True, max_length=self.max_seq_length)
            empty = next(
                (sentence for sentence, ids in zip(sentences, encoded["input_ids"], strict=True) if not ids), None
            )
            if empty is not None:  # a decoder's tokenizer adds no token of its own: the row would be all padding
                raise UsageError(
                    f"The sentence {empty!r} gives no token (this tokenizer adds no special token of its own, as "
                    "decoders' do not): its embedding would be read from padding. Remove empty sentences from the "
                    "data."
                )
            return {key: encoded[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in encoded}
        bodies = self.tokenizer(
            sentences, add_special_tokens=False, truncation=True, max_length=self._sentence_budget
        )["input_ids"]
        input_ids = [self._lead_ids + self._prefix_ids + body + self._suffix_ids + self._trail_ids for body in bodies]
        if self.checks_mask_token:
            self._check_one_mask(sentences, bodies)
        result = {"input_ids": input_ids, "attention_mask": [[1] * len(ids) for ids in input_ids]}
        if self.returns_token_type_ids:
            result["token_type_ids"] = [[0] * len(ids) for ids in input_ids]
        return result

    def _check_one_mask(self, sentences: list[str], bodies: list[list[int]]) -> None:
        """Raise :class:`~hf_cse.errors.UsageError` naming the first sentence whose own tokens (after truncation)
        hold the mask token: its row would hold two, and the mask pooler would read the sentence's."""
        mask_token_id = self.tokenizer.mask_token_id
        for sentence, body in zip(sentences, bodies, strict=True):
            if mask_token_id in body:
                shown = sentence if len(sentence) <= 80 else sentence[:77] + "..."
                raise UsageError(
                    f"The sentence {shown!r} contains the mask token {self.tokenizer.mask_token!r}, which "
                    "pooler='mask' keeps for the prompt template's one mask: remove or rewrite it in the data."
                )

    def pad(
        self, rows: Sequence[dict[str, list[int]]], pad_to_multiple_of: int | None = None
    ) -> dict[str, torch.Tensor]:
        """Pad rows of token ids (one dict per sentence) to the longest row, rounded up to a multiple of
        ``pad_to_multiple_of`` when given: tensors ``[B, L]``."""
        return self.tokenizer.pad(
            list(rows),
            padding="longest",
            pad_to_multiple_of=pad_to_multiple_of,
            padding_side="right",
            return_tensors="pt",
        )

    def batch(self, sentences: Sequence[str]) -> dict[str, torch.Tensor]:
        """Tokenize and pad in one call: tensors ``[B, L]``."""
        features = self(sentences)
        return self.pad([dict(zip(features, row, strict=True)) for row in zip(*features.values(), strict=True)])
