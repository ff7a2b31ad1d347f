"""Positive views by name: ``build_view_augmentation("token_cutoff", rate=0.1)`` returns a :class:`ViewAugmentation`.

A view augmentation turns one batch into the model inputs of ONE forward pass over ``num_views * B`` rows: rows
``[0, B)`` are view 1, rows ``[B, 2B)`` view 2, and so on. A run applies the one its ``view_augmentation`` names (with
``view_augmentation_kwargs``) through the ``augmented_views`` input provider (:mod:`hf_cse.inputs.augmented_views`),
its one maker of views unless the objective requires a provider that makes them itself. View 1 is always the plain
input (its only noise is the encoder's dropout); views 2.. also carry the augmentation, dropout still on. Every
objective reads the views by slicing the pooled embeddings, so any augmentation works with any objective.

- ``dropout`` (default, SimCSE): the batch repeated ``num_views`` times; dropout alone makes the views differ.
- ``shuffle`` (ConSERT's token shuffling): the *position ids* of each sentence's tokens are permuted; the tokens
  stay where they are.
- ``token_cutoff`` / ``span_cutoff`` / ``feature_cutoff`` (ConSERT, after Shen et al., 2020): the word embeddings
  of randomly chosen tokens, of one contiguous span of tokens, or of randomly chosen feature dimensions (the same
  dimensions at every token of a sentence) are set to zero.

What these implementations keep fixed, and where they differ from ConSERT's code:

- **Special tokens and padding are never touched.** Only real (attention mask 1), non-special tokens are shuffled
  or erased; ``[CLS]``/``[SEP]`` (``<s>``/``</s>``), the prompt's mask token and padding keep their positions and
  embeddings. ConSERT shuffles and erases ``[CLS]``/``[SEP]`` too, and its feature cutoff zeroes whole columns,
  padding included. Keeping ``[CLS]`` intact matters here because the ``cls`` poolers read it.
- **Erased tokens stay in the attention mask**, as in ConSERT (which erases the vector, not the mask); Shen et al.'s
  cutoff code also drops erased tokens from the mask. The sentence keeps its length; the erased slots carry no word
  information but are still attended to.
- **Cutoff erases word embeddings, before position/token-type embeddings and LayerNorm.** The views are built as
  ``inputs_embeds`` from ``model.encoder_model.get_input_embeddings()(input_ids)``, the one embedding input every
  Hugging Face encoder accepts; BERT/RoBERTa add position and token-type embeddings, LayerNorm and dropout inside
  the encoder. ConSERT (and Shen et al.'s code) instead zero the embedding layer's full output (after LayerNorm),
  which needs model-specific surgery on the embedding module. Consequence: an erased token enters layer 1 as
  ``LayerNorm(position + token-type embedding)`` (a blank at its position), not as a zero vector; and a
  feature-cutoff dimension is zero in the word embedding only, so the position/type embeddings still fill it and
  LayerNorm re-normalizes over all dimensions. The perturbation is therefore milder than ConSERT's at the same rate.
- **Counts.** A row with ``n`` eligible tokens loses ``floor(rate * n + u)`` tokens, ``u ~ U[0, 1)`` (stochastic
  rounding: ``rate * n`` on average, so short sentences are augmented too; ConSERT's ``int(rate * n)`` erases
  nothing in a sentence shorter than ``1 / rate`` tokens). Feature cutoff erases ``floor(rate * H + u)`` of the
  ``H`` dimensions, chosen anew for each row.

All randomness comes from torch's global RNG, so ``TrainingArguments.seed`` makes it reproducible.

Default rates: ``feature_cutoff`` 0.2 is ConSERT's released unsupervised recipe (``scripts/unsup-consert-base.sh``:
feature cutoff 0.2 with shuffle as the other view). ``token_cutoff`` and ``span_cutoff`` default to 0.1, the
``aug_cutoff_ratio`` of Shen et al.'s released example script (``run_glue.sh``, span cutoff). DCLR (§6.1) names
these augmentations but gives no rates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, ClassVar

import torch
from torch import nn

from ..device_copies import DeviceCopies
from ..modeling.modeling_cse import CSEModel, default_position_ids
from ..number_ranges import PROBABILITY, NumberRange, check_setting
from ..registry import VIEW_AUGMENTATIONS, register_view_augmentation

CONSERT_CITATION = """@inproceedings{yan2021consert,
    title = "{C}on{SERT}: A Contrastive Framework for Self-Supervised Sentence Representation Transfer",
    author = "Yan, Yuanmeng and Li, Rumei and Wang, Sirui and Zhang, Fuzheng and Wu, Wei and Xu, Weiran",
    booktitle = "Proceedings of the 59th Annual Meeting of the Association for Computational Linguistics and the 11th
                 International Joint Conference on Natural Language Processing (Volume 1: Long Papers)",
    year = "2021",
    pages = "5065--5075",
}"""

CUTOFF_CITATION = """@article{shen2020cutoff,
    title = {A Simple but Tough-to-Beat Data Augmentation Approach for Natural Language Understanding and Generation},
    author = {Shen, Dinghan and Zheng, Mingzhi and Shen, Yelong and Qu, Yanru and Chen, Weizhu},
    journal = {arXiv preprint arXiv:2009.13818},
    year = {2020},
}"""

DEFAULT_TOKEN_CUTOFF_RATE = 0.1
DEFAULT_SPAN_CUTOFF_RATE = 0.1
DEFAULT_FEATURE_CUTOFF_RATE = 0.2


class ViewAugmentation:
    """Builds the stacked inputs of all views for one forward pass.

    Args:
        special_token_ids: token ids never shuffled or erased (pass ``tokenizer.all_special_ids``). ``None``
            (default) treats the first and last real token of every row (``[CLS]``/``[SEP]``, ``<s>``/``</s>``)
            and ``model.pooling.mask_token_id`` as special, which is how hf_cse frames a sentence. Ignored by
            ``dropout``.
    """

    name: ClassVar[str]
    citations: ClassVar[tuple[str, ...]] = ()
    """BibTeX of the papers the augmentation comes from, listed on model cards."""

    def __init__(self, special_token_ids: Iterable[int] | None = None) -> None:
        self.special_token_ids = None if special_token_ids is None else sorted({int(i) for i in special_token_ids})
        self._special_ids = (
            None if self.special_token_ids is None else DeviceCopies(torch.tensor(self.special_token_ids))
        )

    def stack(self, model: CSEModel, inputs: dict[str, torch.Tensor], num_views: int = 2) -> dict[str, torch.Tensor]:
        """Model kwargs for ONE forward pass over ``num_views * B`` rows.

        Args:
            model: the model the views are for (its word embeddings build ``inputs_embeds``).
            inputs: the collated batch, tensors ``[B, L]`` (``input_ids``, ``attention_mask``, optionally
                ``token_type_ids``); other keys are repeated like the rest.
            num_views: number of views, >= 1. Defaults to 2.

        Returns:
            kwargs for ``model(**kwargs)``, every tensor with ``num_views * B`` rows: rows ``[0, B)`` are view 1
            (the plain input), rows ``[(v - 1) * B, v * B)`` view ``v``.
        """
        raise NotImplementedError

    def _eligible(self, model: CSEModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``[B, L]`` bool: real, non-special tokens, the only ones an augmentation may move, erase or repeat."""
        special = None if self._special_ids is None else self._special_ids.on(input_ids.device)
        return eligible_tokens(model, input_ids, attention_mask, special)

    def hparams(self) -> dict[str, Any]:
        """The augmentation's hyper-parameters (for logs and model cards)."""
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{key}={value!r}" for key, value in self.hparams().items())
        return f"{type(self).__name__}({args})"


_NUM_VIEWS = NumberRange(low=1, integer=True)


@register_view_augmentation("dropout")
class DropoutViews(ViewAugmentation):
    """SimCSE: the batch repeated ``num_views`` times; the encoder's dropout alone makes the views differ."""

    def stack(self, model: CSEModel, inputs: dict[str, torch.Tensor], num_views: int = 2) -> dict[str, torch.Tensor]:
        check_setting("num_views", num_views, _NUM_VIEWS)
        return {key: torch.cat([value] * num_views) for key, value in inputs.items()}


class EmbeddingViewAugmentation(ViewAugmentation):
    """Base of the augmentations that feed ``inputs_embeds``: shared stacking, subclasses perturb views 2.."""

    def stack(self, model: CSEModel, inputs: dict[str, torch.Tensor], num_views: int = 2) -> dict[str, torch.Tensor]:
        check_setting("num_views", num_views, _NUM_VIEWS)
        for key in ("input_ids", "attention_mask"):
            if key not in inputs:
                raise ValueError(f"{type(self).__name__} needs inputs[{key!r}]; got keys {sorted(inputs)}.")
        if "inputs_embeds" in inputs:
            raise ValueError(f"{type(self).__name__} builds inputs_embeds itself; pass input_ids instead.")
        input_ids, attention_mask = inputs["input_ids"], inputs["attention_mask"]
        # Everything but the embeddings (and, for shuffle, the position ids) is repeated unchanged. input_ids stays
        # in the kwargs: CSEModel hands the encoder inputs_embeds and keeps the ids for the mask pooler.
        stacked = {key: torch.cat([value] * num_views) for key, value in inputs.items()}
        # One lookup for all views: every view's gradient reaches the word-embedding matrix.
        word_embeddings = model.encoder_model.get_input_embeddings()(input_ids)  # [B, L, H]
        if num_views == 1:
            stacked["inputs_embeds"] = word_embeddings
            return stacked
        eligible = self._eligible(model, input_ids, attention_mask).repeat(num_views - 1, 1)  # [R, L]
        augmented = self._augment_embeddings(word_embeddings.repeat(num_views - 1, 1, 1), eligible)
        stacked["inputs_embeds"] = torch.cat([word_embeddings, augmented])
        return stacked

    def _augment_embeddings(self, embeddings: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
        """Perturb the word embeddings ``[R, L, H]`` of the augmented rows; ``eligible`` is ``[R, L]``."""
        return embeddings


def eligible_tokens(
    model: CSEModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    special_token_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """``[B, L]`` bool: the real (attention mask 1), non-special tokens, the only ones an augmentation may move, erase
    or repeat. Special: ``special_token_ids`` ``[K]`` (on ``input_ids``' device) when given, else the first and last
    real token of each row and the prompt's mask token (see :class:`ViewAugmentation`)."""
    real = attention_mask.bool()
    if special_token_ids is not None:
        special = torch.isin(input_ids, special_token_ids)
    else:
        # hf_cse frames each sentence between its tokenizer's leading and trailing special token.
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)
        first = positions == real.int().argmax(dim=1, keepdim=True)
        last = positions == (positions * real).max(dim=1, keepdim=True).values
        special = first | last
        mask_token_id = model.pooling.mask_token_id
        if mask_token_id is not None:
            special = special | (input_ids == mask_token_id)
    return real & ~special


def _stochastic_round(values: torch.Tensor) -> torch.Tensor:
    """``floor(x + u)``, ``u ~ U[0, 1)``: an integer whose mean is ``x``."""
    return torch.floor(values + torch.rand_like(values)).long()


def _random_ranks(scores: torch.Tensor) -> torch.Tensor:
    """Rank of every entry of ``scores`` within its row (0 = smallest)."""
    return scores.argsort(dim=-1).argsort(dim=-1)


@register_view_augmentation("shuffle")
class TokenShuffle(EmbeddingViewAugmentation):
    """ConSERT's token shuffling: the position ids of the real, non-special tokens are randomly permuted.

    Tokens stay in their slots and only their position ids move, so the encoder sees the words in a new order
    (self-attention is otherwise order-blind). Special tokens and padding keep their position ids. Adds
    ``position_ids`` ``[num_views * B, L]`` to the kwargs (view 1: the encoder's default positions), so it needs an
    encoder with absolute position embeddings (BERT, RoBERTa, ...).
    """

    citations = (CONSERT_CITATION,)

    def stack(self, model: CSEModel, inputs: dict[str, torch.Tensor], num_views: int = 2) -> dict[str, torch.Tensor]:
        stacked = super().stack(model, inputs, num_views)  # checks the inputs; the embeddings stay as they are
        input_ids = inputs["input_ids"]
        base = inputs.get("position_ids")
        base = (default_position_ids(model, input_ids) if base is None else base).expand_as(input_ids)
        stacked["position_ids"] = base
        if num_views > 1:
            eligible = self._eligible(model, input_ids, inputs["attention_mask"]).repeat(num_views - 1, 1)
            stacked["position_ids"] = torch.cat([base, _shuffle_positions(base.repeat(num_views - 1, 1), eligible)])
        return stacked


def _shuffle_positions(positions: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
    """Permute ``positions`` ``[R, L]`` among the ``eligible`` slots of each row; other slots keep theirs."""
    length = positions.shape[1]
    slots = torch.arange(length, device=positions.device).expand_as(positions)
    # Eligible slots first, in order, then the others in order (they sort after every eligible slot).
    in_order = torch.where(eligible, slots, slots + length).argsort(dim=1)
    # Eligible slots first in random order, then the others in the same order as above.
    tail = 2.0 + slots.to(torch.float32) / length
    shuffled = torch.where(eligible, torch.rand(positions.shape, device=positions.device), tail).argsort(dim=1)
    return positions.scatter(1, in_order, positions.gather(1, shuffled))


class _CutoffBase(EmbeddingViewAugmentation):
    citations = (CONSERT_CITATION, CUTOFF_CITATION)
    default_rate: ClassVar[float] = 0.0

    def __init__(self, rate: float | None = None, special_token_ids: Iterable[int] | None = None) -> None:
        super().__init__(special_token_ids)
        self.rate = check_setting(f"{self.name} rate", self.default_rate if rate is None else rate, PROBABILITY)

    def hparams(self) -> dict[str, Any]:
        return {"rate": self.rate}


@register_view_augmentation("token_cutoff")
class TokenCutoff(_CutoffBase):
    """Token cutoff: zero the word embeddings of ``rate`` of each sentence's real, non-special tokens.

    Args:
        rate: fraction of eligible tokens erased per sentence, in ``[0, 1)``. Defaults to
            :data:`DEFAULT_TOKEN_CUTOFF_RATE` (0.1).
        special_token_ids: see :class:`ViewAugmentation`.
    """

    default_rate = DEFAULT_TOKEN_CUTOFF_RATE

    def _augment_embeddings(self, embeddings: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
        counts = _stochastic_round(self.rate * eligible.sum(dim=1).to(torch.float32))  # [R]
        # Ineligible slots score above every eligible one, so the `counts` lowest ranks are eligible tokens.
        scores = torch.rand(eligible.shape, device=eligible.device).masked_fill(~eligible, 2.0)
        erase = _random_ranks(scores) < counts[:, None]
        return embeddings * (~erase).unsqueeze(-1).to(embeddings.dtype)


@register_view_augmentation("span_cutoff")
class SpanCutoff(_CutoffBase):
    """Span cutoff: zero the word embeddings of one contiguous span of ``rate`` of each sentence's tokens.

    The span runs over the real, non-special tokens in order (it may straddle a prompt's mask token, which stays).

    Args:
        rate: span length as a fraction of the eligible tokens, in ``[0, 1)``. Defaults to
            :data:`DEFAULT_SPAN_CUTOFF_RATE` (0.1).
        special_token_ids: see :class:`ViewAugmentation`.
    """

    default_rate = DEFAULT_SPAN_CUTOFF_RATE

    def _augment_embeddings(self, embeddings: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
        n = eligible.sum(dim=1)  # [R]
        length = _stochastic_round(self.rate * n.to(torch.float32))
        start = torch.floor(
            torch.rand(n.shape, device=n.device) * (n - length + 1)
        ).long()  # uniform in [0, n - length]
        order = eligible.long().cumsum(dim=1) - 1  # index of each eligible token among its row's eligible tokens
        erase = eligible & (order >= start[:, None]) & (order < (start + length)[:, None])
        return embeddings * (~erase).unsqueeze(-1).to(embeddings.dtype)


@register_view_augmentation("feature_cutoff")
class FeatureCutoff(_CutoffBase):
    """Feature cutoff: zero ``rate`` of the word-embedding dimensions, the same ones at every eligible token.

    The dimensions are drawn anew for each row (sentence and view); special tokens and padding keep all theirs.

    Args:
        rate: fraction of the hidden dimensions erased, in ``[0, 1)``. Defaults to
            :data:`DEFAULT_FEATURE_CUTOFF_RATE` (0.2, ConSERT's unsupervised recipe).
        special_token_ids: see :class:`ViewAugmentation`.
    """

    default_rate = DEFAULT_FEATURE_CUTOFF_RATE

    def _augment_embeddings(self, embeddings: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
        rows, hidden = embeddings.shape[0], embeddings.shape[-1]
        counts = _stochastic_round(torch.full((rows,), self.rate * hidden, device=embeddings.device))
        dims = _random_ranks(torch.rand(rows, hidden, device=embeddings.device)) < counts[:, None]  # [R, H]
        erase = eligible.unsqueeze(-1) & dims.unsqueeze(1)  # [R, L, H]
        return embeddings * (~erase).to(embeddings.dtype)


ESIMCSE_CITATION = """@inproceedings{wu2022esimcse,
    title = "{ES}im{CSE}: Enhanced Sample Building Method for Contrastive Learning of Unsupervised Sentence Embedding",
    author = "Wu, Xing and Gao, Chaochen and Zang, Liangjun and Han, Jizhong and Wang, Zhongyuan and Hu, Songlin",
    booktitle = "Proceedings of the 29th International Conference on Computational Linguistics",
    year = "2022",
    pages = "3898--3907",
}"""
DEFAULT_DUP_RATE = 0.32
MAX_REPEATED_TOKENS = 10
"""ESimCSE's code caps the repeated tokens of a sentence at 10 (``min(10, ...)``), whatever its length."""


@register_view_augmentation("word_repetition")
class WordRepetition(ViewAugmentation):
    """ESimCSE's (sub)word repetition: views 2.. repeat a random subset of each sentence's tokens in place
    (``a b c d`` -> ``a a b c c d``), so a positive pair no longer shares its length.

    Follows ESimCSE's released code (``dup_type == "bpe"``, the subword repetition of its main results), not the
    paper's formula: with ``N`` the sentence's tokens including ``[CLS]``/``[SEP]``, ``n = min(10, int(dup_rate * N))``
    and, when ``n > 0``, ``dup_len`` drawn uniformly from ``{0, ..., n - 1}`` (Python's ``randrange(n)``); the paper
    writes ``dup_len in [0, max(2, int(dup_rate * N))]``. ``dup_len`` distinct positions among the real, non-special
    tokens (:func:`eligible_tokens`: never ``[CLS]``/``[SEP]``, the prompt's mask token or padding) are drawn uniformly
    and each of those tokens is written twice, with its attention-mask and token-type entries. The code repeats
    once per corpus at preprocessing; here every step draws anew (the torch RNG, so ``seed`` reproduces it).

    View 1 is the plain input; every view is right-padded to ``L + min(9, floor(dup_rate * L))`` slots, the most a
    row of ``L`` slots can grow (``input_ids`` with the encoder's ``pad_token_id``, other ``[B, L]`` inputs with 0):
    a length the host knows without reading the draws back, one shape for ``torch.compile``. Other inputs are
    repeated unchanged.

    Args:
        dup_rate: the largest share of a sentence's tokens repeated, in ``[0, 1)``. Defaults to 0.32 (the paper's and
            the code's).
        special_token_ids: see :class:`ViewAugmentation`.
    """

    citations = (ESIMCSE_CITATION,)

    def __init__(self, dup_rate: float = DEFAULT_DUP_RATE, special_token_ids: Iterable[int] | None = None) -> None:
        super().__init__(special_token_ids)
        self.dup_rate = check_setting("word_repetition dup_rate", dup_rate, PROBABILITY)

    def hparams(self) -> dict[str, Any]:
        return {"dup_rate": self.dup_rate}

    def repeat_counts(self, model: CSEModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``[B, L]`` long: how often each slot is written in one augmented view (2 for a repeated token, else 1)."""
        eligible = self._eligible(model, input_ids, attention_mask)
        most = torch.clamp(torch.floor(self.dup_rate * attention_mask.sum(dim=1)), max=MAX_REPEATED_TOKENS).long()
        dup_len = torch.floor(torch.rand(most.shape, device=most.device) * most).long()  # randrange(most); 0 if 0
        dup_len = torch.minimum(dup_len, eligible.sum(dim=1))
        # Ineligible slots score above every eligible one, so the dup_len lowest ranks are eligible tokens.
        scores = torch.rand(eligible.shape, device=eligible.device).masked_fill(~eligible, 2.0)
        return 1 + (_random_ranks(scores) < dup_len[:, None]).long()

    def stack(self, model: CSEModel, inputs: dict[str, torch.Tensor], num_views: int = 2) -> dict[str, torch.Tensor]:
        check_setting("num_views", num_views, _NUM_VIEWS)
        input_ids, attention_mask = inputs["input_ids"], inputs["attention_mask"]
        rows, length = input_ids.shape
        # Every view is padded to L plus the most tokens a row can repeat (a bound known on the host, not the longest
        # row, which only the device knows): the shape never waits for the device, and torch.compile sees one.
        longest = length + min(MAX_REPEATED_TOKENS - 1, math.floor(self.dup_rate * length))
        per_token = [key for key, value in inputs.items() if value.dim() == 2 and value.shape == (rows, length)]
        pad_id = model.config.pad_token_id or 0
        fills = {key: pad_id if key == "input_ids" else 0 for key in per_token}
        views = [{key: nn.functional.pad(inputs[key], (0, longest - length), value=fills[key]) for key in per_token}]
        slots = torch.arange(longest, device=input_ids.device).expand(rows, longest).contiguous()
        for _ in range(num_views - 1):
            counts = self.repeat_counts(model, input_ids, attention_mask)
            # Slot j of a view holds the token whose run of copies ends after j: repeat_interleave, row by row at once.
            source = torch.searchsorted(counts.cumsum(dim=1), slots, right=True)
            past_end = source >= length
            source = source.clamp(max=length - 1)
            views.append({key: inputs[key].gather(1, source).masked_fill(past_end, fills[key]) for key in per_token})
        stacked = {key: torch.cat([view[key] for view in views]) for key in per_token}
        stacked.update({key: torch.cat([value] * num_views) for key, value in inputs.items() if key not in per_token})
        return stacked


DEFAULT_VIEW_AUGMENTATION = "dropout"


def build_view_augmentation(name: str = DEFAULT_VIEW_AUGMENTATION, **hparams: Any) -> ViewAugmentation:
    """The view augmentation registered as ``name`` (:data:`~hf_cse.registry.VIEW_AUGMENTATIONS`), built with
    ``hparams``; an unknown name or hyper-parameter, or a bad value (e.g. a rate outside ``[0, 1)``), is a one-line
    error naming the valid ones."""
    return VIEW_AUGMENTATIONS.build(name, **hparams)


__all__ = [
    "DEFAULT_FEATURE_CUTOFF_RATE",
    "DEFAULT_SPAN_CUTOFF_RATE",
    "DEFAULT_TOKEN_CUTOFF_RATE",
    "DEFAULT_VIEW_AUGMENTATION",
    "ESIMCSE_CITATION",
    "VIEW_AUGMENTATIONS",
    "DropoutViews",
    "FeatureCutoff",
    "SpanCutoff",
    "TokenCutoff",
    "TokenShuffle",
    "ViewAugmentation",
    "WordRepetition",
    "build_view_augmentation",
    "default_position_ids",
    "eligible_tokens",
]
