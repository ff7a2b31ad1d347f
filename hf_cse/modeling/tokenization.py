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
from .poolers import Pooler

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


def fill_template(template: str, sentence: str) -> str:
    """The prompt of ``sentence`` under ``template`` as PromptEOL's code builds it before tokenizing it in one call:
    ``{sentence}`` replaced by the sentence, the whole stripped of surrounding whitespace."""
    return template.replace("{sentence}", sentence).strip()


class SentenceTokenizer:
    """Tokenizes sentences the way a :class:`~hf_cse.modeling.modeling_cse.CSEModel` expects them.

    For a pooler that :attr:`~hf_cse.modeling.poolers.Pooler.uses_prompt_template` (``mask``,
    ``prompt_last_token``) each sentence is wrapped in the pooler's
    :meth:`~hf_cse.modeling.poolers.Pooler.prompt_template`, ``[MASK]`` replaced by the tokenizer's own mask token
    for a pooler that :attr:`~hf_cse.modeling.poolers.Pooler.needs_mask_token`. How the prompt becomes ids is the
    pooler's :attr:`~hf_cse.modeling.poolers.Pooler.tokenizes_prompt_whole`: the filled prompt in one tokenizer call,
    special tokens added as the tokenizer adds them (PromptEOL's code: ``prompt_last_token``), or the template's
    prefix, the sentence and the suffix tokenized apart and joined inside the tokenizer's special tokens
    (PromptBERT's training code: ``mask``). Truncation only ever shortens the sentence: the template's tokens are
    always kept, so the mask token (or the prompt's last token) is always present. In one piece, a prompt longer than
    ``max_seq_length`` is rebuilt from the sentence's first tokens, decoded back to text, as PromptEOL's training
    code truncates (``ft_llm.py``: the sentence's ids cut, decoded, put in the template), with fewer tokens until it
    fits (a decoded piece may tokenize longer in context).
    Every row is checked to hold exactly one mask token as it is tokenized (once, when the training data is
    prepared): the model's forward pass in training does not check it, since reading the count on the host would
    synchronize with the device at every step.

    Each sentence first passes through the pooler's :meth:`~hf_cse.modeling.poolers.Pooler.rewrite_sentence`
    (PromptEOL's evaluation rewrite, where ``prompt_last_token`` is asked for it, when ``inference``).

    With an instruction (``pooling.instruction``, for ``prompt_name="query"``, or ``"document"`` where
    ``pooling.instruct_positives``), each sentence is the instruction followed by the sentence, tokenized in one call
    as sentence-transformers tokenizes a prompt and its text (and LLM2Vec its instruction and query); the tokens the
    mean leaves out are those sentence-transformers counts as the prompt's (the instruction alone tokenized, less a
    trailing special token), so a saved model's ``include_prompt: false`` Pooling leaves out the same tokens
    (:attr:`row_span`). Each row is checked to begin with exactly those ids: a tokenizer that joins the instruction's
    last characters to the sentence's first (``"; "`` then ``"A"`` becomes ``▁A`` on SentencePiece, ``ĠA`` on a
    byte-level BPE) would leave out or pool the wrong tokens, and is refused in one line.

    Batches are padded on the right whatever the tokenizer's ``padding_side``: under a decoder's causal attention
    real tokens then never follow padding, and the positions of a sentence's tokens do not depend on its batch.

    Args:
        tokenizer: the encoder's tokenizer.
        pooling: the model's pooling settings; ``pooling.mask_token_id`` is filled in from the tokenizer.
        max_seq_length: length limit in tokens, special and template tokens included; ``None`` uses
            ``pooling.max_seq_length`` and then the tokenizer's ``model_max_length``.
        inference: the sentences are encoded outside training (:class:`~hf_cse.modeling.encoder.SentenceEncoder`:
            evaluation, ``encode``), which a pooler may rewrite otherwise; ``False`` (default): training data.
        prompt_name: ``"query"`` or ``"document"``: the sentences get the prompt of that name
            (:meth:`~hf_cse.modeling.configuration_cse.PoolingConfig.prompt`: the instruction, or nothing); ``None``
            (default): none.

    Attributes:
        prompt: the text put before every sentence (``""``: none).
        row_span: for a pooler that :attr:`~hf_cse.modeling.poolers.Pooler.leaves_out_instruction`: the
            ``(first, last)`` tokens of each row its mean leaves out, the instruction's included, which the model gets
            as per-row ``template_lengths`` where rows with and without the instruction meet (labelled pairs) or the
            rows have one (``encode``); ``None`` for other poolers.
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        pooling: PoolingConfig,
        max_seq_length: int | None = None,
        inference: bool = False,
        prompt_name: str | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.inference = inference
        self.prompt = pooling.prompt(prompt_name)
        self.row_span: tuple[int, int] | None = None
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
        self.pooler = pooler = pooling.get_pooler()
        self.tokenizes_prompt_whole = pooler.uses_prompt_template and pooler.tokenizes_prompt_whole
        if self.tokenizes_prompt_whole and pooling.template_denoising:
            raise ValueError(
                f"template_denoising reads the template's token lengths around every sentence, which pooler="
                f"{pooling.pooler!r} does not keep fixed (it tokenizes the prompt in one piece)."
            )
        if pooler.uses_prompt_template:
            self._prepare_template(pooler.prompt_template(pooling), pooler.template_writes_special_tokens)
        else:  # the tokens a mean leaves out around the sentence (LLM2Vec's BOS), or none
            span = None
            if type(pooler).sentence_span is not Pooler.sentence_span:  # only a pooler that asks reads the frame
                lead, trail = _special_token_frame(tokenizer)
                span = pooler.sentence_span(len(lead), len(trail))
            pooling.template_prefix_length, pooling.template_suffix_length = span or (None, None)
            if pooler.leaves_out_instruction:
                self.row_span = span or (0, 0)
            if self.prompt:
                self._prepare_instruction()

    def _prepare_instruction(self) -> None:
        """The instruction's ids as sentence-transformers counts a prompt (tokenized alone, special tokens added, a
        trailing special token dropped), which every row must begin with, and :attr:`row_span` widened to them; the
        instruction checked to leave room for a sentence and to stay whole before a probe sentence."""
        tok = self.tokenizer
        ids = tok(self.prompt)["input_ids"]
        self._instruction_ids = ids[: len(ids) - (ids[-1] in tok.all_special_ids)]
        self._trailing_specials = len(_special_token_frame(tok)[1])
        length = len(self._instruction_ids)
        if self.max_seq_length < length + self._trailing_specials + 1:
            raise UsageError(
                f"max_seq_length={self.max_seq_length} leaves no room for a sentence after the instruction "
                f"{self.prompt!r}, which takes {length} tokens with the special tokens before it."
            )
        lead, trail = self.row_span
        self.row_span = (max(lead, length), trail)
        probe = ["A sentence."]
        self._check_instruction(probe, tok([self.prompt + sentence for sentence in probe])["input_ids"])

    def _check_instruction(self, sentences: Sequence[str], rows: Sequence[list[int]]) -> None:
        """Raise :class:`~hf_cse.errors.UsageError` naming the first sentence whose row does not begin with the
        instruction's own ids (the tokenizer joined its end to the sentence's start) or holds no token after them."""
        ids = self._instruction_ids
        for sentence, row in zip(sentences, rows, strict=True):
            shown = sentence if len(sentence) <= 80 else sentence[:77] + "..."
            if row[: len(ids)] != ids:
                joint = self.tokenizer.convert_ids_to_tokens(row[len(ids) - 1 : len(ids) + 1])
                alone = self.tokenizer.convert_ids_to_tokens(ids[-1:])
                raise UsageError(
                    f"{type(self.tokenizer).__name__} joins the end of the instruction {self.prompt!r} to the start "
                    f"of the sentence {shown!r} ({joint} where the instruction alone ends in {alone}), so the tokens "
                    "left out of the mean would not be the instruction's: end the instruction with a character this "
                    "tokenizer keeps apart from the next word, e.g. a newline instead of a trailing space."
                )
            if len(row) - self._trailing_specials <= len(ids):
                raise UsageError(
                    f"The sentence {shown!r} gives no token after the instruction {self.prompt!r}: its embedding "
                    "would average nothing. Remove empty sentences from the data."
                )

    def _prepare_template(self, template: str, writes_special_tokens: bool = False) -> None:
        """Tokenize ``template``'s pieces around its ``{sentence}`` (once or more: Echo's twice) and fill in the
        pooling's template lengths: the tokens before the last copy of the sentence (the other copies left out) and
        after it, special tokens included."""
        tok = self.tokenizer
        if self.pooler.needs_mask_token:
            if tok.mask_token is None:
                raise ValueError(
                    f"pooler={self.pooling.pooler!r} needs a tokenizer with a mask token; {type(tok).__name__} has "
                    "none (decoder tokenizers usually have none: use pooler='prompt_last_token' or 'last_token')."
                )
            self.pooling.mask_token_id = tok.mask_token_id
            template = template.replace("[MASK]", tok.mask_token)
        if writes_special_tokens:  # the template's own [BOS] and [EOS], as Echo's released templates write <s>, </s>
            template = template.replace("[BOS]", tok.bos_token or "").replace("[EOS]", tok.eos_token or "")
        pieces = template.split("{sentence}")
        self._piece_ids = [tok(piece, add_special_tokens=False)["input_ids"] if piece else [] for piece in pieces]
        self._lead_ids, self._trail_ids = ([], []) if writes_special_tokens else _special_token_frame(tok)
        self._piece_ids[0] = self._lead_ids + self._piece_ids[0]
        self._piece_ids[-1] = self._piece_ids[-1] + self._trail_ids
        fixed = sum(len(ids) for ids in self._piece_ids)
        masks = sum(ids.count(tok.mask_token_id) for ids in self._piece_ids)
        if self.pooler.needs_mask_token and masks != 1:  # e.g. the tokenizer's own "<mask>" written beside [MASK]
            raise UsageError(
                f"prompt_template {template!r} tokenizes to {masks} mask tokens "
                f"({tok.mask_token!r}) with {type(tok).__name__}; pooler='mask' needs exactly one: write [MASK] once "
                "and no mask token of the tokenizer."
            )
        self.pooling.template_prefix_length = fixed - len(self._piece_ids[-1])
        self.pooling.template_suffix_length = len(self._piece_ids[-1])
        self._template = template
        if self.tokenizes_prompt_whole:  # the template alone, in one piece, as an empty sentence gives it
            fixed = len(tok(fill_template(template, ""))["input_ids"])
        copies = len(pieces) - 1
        self._sentence_budget = (self.max_seq_length - fixed) // copies
        if self._sentence_budget < 1:
            raise ValueError(
                f"max_seq_length={self.max_seq_length} leaves no room for a sentence: the prompt template "
                f"{template!r} takes {fixed} tokens with special tokens"
                + (f" and holds the sentence {copies} times." if copies > 1 else ".")
            )

    def __call__(self, sentences: Sequence[str]) -> dict[str, list[list[int]]]:
        """Token ids of each sentence, unpadded: ``{"input_ids": [[...], ...], ...}``."""
        sentences = [self.pooler.rewrite_sentence(sentence, self.inference) for sentence in sentences]
        if not self.pooler.uses_prompt_template:
            texts = [self.prompt + sentence for sentence in sentences] if self.prompt else sentences
            encoded = self.tokenizer(texts, truncation=True, max_length=self.max_seq_length)
            if self.prompt:
                self._check_instruction(sentences, encoded["input_ids"])
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
        if self.tokenizes_prompt_whole:
            # Each prompt in one call (PromptEOL's tokenizer(prompt)); one too long rebuilt shorter (_shortened).
            rows = self.tokenizer([fill_template(self._template, sentence) for sentence in sentences])["input_ids"]
            input_ids = [
                row if len(row) <= self.max_seq_length else self._shortened(sentence, row)
                for sentence, row in zip(sentences, rows, strict=True)
            ]
            if self.pooler.needs_mask_token:  # the template's one mask, and none of the sentence's
                self._check_one_mask(sentences, input_ids, allowed=1)
        else:
            bodies = self.tokenizer(
                sentences, add_special_tokens=False, truncation=True, max_length=self._sentence_budget
            )["input_ids"]
            first, *rest = self._piece_ids
            input_ids = [first + [i for piece in rest for i in (*body, *piece)] for body in bodies]
            if self.pooler.needs_mask_token:
                self._check_one_mask(sentences, bodies)
        result = {"input_ids": input_ids, "attention_mask": [[1] * len(ids) for ids in input_ids]}
        if self.returns_token_type_ids:
            result["token_type_ids"] = [[0] * len(ids) for ids in input_ids]
        return result

    def _shortened(self, sentence: str, row: list[int]) -> list[int]:
        """The prompt of ``sentence`` (whose ids ``row`` are too many) cut to fit ``max_seq_length``, as PromptEOL's
        training cuts a sentence: its first ``k`` tokens (tokenized alone) decoded back to text and put in the
        template; ``k`` falls by the excess until the prompt fits (at ``k = 0``, the template alone, which
        :meth:`_prepare_template` checked fits). The card's plain-transformers code does the same
        (:mod:`hf_cse.export.model_card.snippets`)."""
        tok = self.tokenizer
        ids = tok(sentence, add_special_tokens=False)["input_ids"]
        keep = len(ids)
        while len(row) > self.max_seq_length and keep > 0:
            keep = max(0, keep - (len(row) - self.max_seq_length))
            row = tok(fill_template(self._template, tok.decode(ids[:keep])))["input_ids"]
        return row

    def _check_one_mask(self, sentences: list[str], bodies: list[list[int]], allowed: int = 0) -> None:
        """Raise :class:`~hf_cse.errors.UsageError` naming the first sentence whose own tokens (after truncation)
        hold the mask token: its row would hold two, and the mask pooler would read the sentence's. ``bodies``: the
        sentences' own ids (``allowed`` 0), or whole rows holding the template's one mask (``allowed`` 1)."""
        mask_token_id = self.tokenizer.mask_token_id
        for sentence, body in zip(sentences, bodies, strict=True):
            if body.count(mask_token_id) > allowed:
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
