"""Hard-negative mining for labelled pairs: for each anchor, the corpus positives most similar to it under a sentence
encoder, with the false negatives left out. What ``python -m hf_cse.mine`` (:mod:`hf_cse.commands.mine`) runs.

**The candidates** are the distinct positives of the pairs (each text once, in the order of its first row), and a
candidate is skipped for an anchor when

1. its text is a positive of that anchor (its own, or that of another row with the same anchor text), or the anchor
   itself: a known positive is no negative;
2. its cosine similarity with the anchor is above ``margin * score(anchor, own positive)``: *positive-aware* mining,
   the relative margin of NV-Retriever's TopK-PercPos (Moreira et al., 2024, "NV-Retriever: Improving text embedding
   models with effective hard-negative mining", arXiv:2407.15831: the most similar candidates whose score is at most
   a percentage of the positive's, 95% in NV-Retriever-v1), which leaves out the candidates the encoder
   scores as close as the positive, the likeliest false negatives. The rule reads the score of a positive the encoder
   finds similar (> 0); with ``margin = 1``, only candidates scored above the positive are skipped.

Of the rest, the ``k`` most similar are the anchor's hard negatives, most similar first, ties broken by corpus order.

**Exact**: every anchor is scored against the whole corpus (one matrix product of normalized float32 embeddings per
chunk of anchors, ``torch.topk`` over its rows), no approximate index: the corpus embeddings ``[N, D]`` must fit in
the device's memory (a million 768-dimensional texts: 3 GiB). The result does not depend on the chunking but through
float32 rounding of the products (a matrix product's summation order may vary with its shape), and is the same on
every run with the same chunks and device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers.utils.logging import tqdm

from .errors import UsageError, echo
from .mining_margin import DEFAULT_MARGIN
from .modeling.encoder import SentenceEncoder
from .number_ranges import NumberRange

_BLOCK_SCORES = 1 << 26
"""The scores one chunk of anchors holds by default (``chunk * N``): 256 MiB of float32, and two boolean masks of a
quarter that, whatever the corpus size."""
_MAX_CHUNK = 1024
"""At most this many anchors a chunk by default: beyond it the products are no faster, only larger."""


_COUNT = NumberRange(low=1, integer=True)
_MARGIN = NumberRange(low=0, low_open=True, high=1)


class TooFewCandidatesError(UsageError):
    """An anchor has fewer eligible candidates than the negatives asked for.

    Attributes:
        row: the anchor's row (from 0).
        eligible: its candidates left once its positives, itself and those above the margin are skipped.
        skipped_by_margin: how many of its candidates the margin skipped.
    """

    def __init__(self, row: int, eligible: int, skipped_by_margin: int, num_negatives: int, candidates: str) -> None:
        """``candidates``: what the message calls the ``eligible`` count, e.g. ``eligible candidates of ...``."""
        super().__init__(
            f"anchor {row + 1} has {eligible} {candidates}, fewer than the {num_negatives} negatives asked for."
        )
        self.row, self.eligible, self.skipped_by_margin = row, eligible, skipped_by_margin


@dataclass(frozen=True)
class MiningCorpus:
    """The candidates of a set of labelled pairs, and which of them are known positives of each anchor.

    Attributes:
        texts: the ``N`` distinct positives, in the order of their first row.
        positive_index: ``[A]`` int64, each row's own positive in ``texts``.
        excluded: ``[E, 2]`` int64 ``(row, index in texts)``, sorted: the other candidates each row skips by text
            (the positives of other rows with the same anchor text, and the anchor itself when it is a positive
            too); its own positive is not listed again.
    """

    texts: list[str]
    positive_index: torch.Tensor
    excluded: torch.Tensor

    def candidates_per_anchor(self) -> torch.Tensor:
        """``[A]`` int64: each row's candidates before the margin (the corpus less the texts it skips)."""
        skipped = torch.bincount(self.excluded[:, 0], minlength=len(self.positive_index))
        return len(self.texts) - 1 - skipped


def candidate_corpus(anchors: Sequence[str], positives: Sequence[str]) -> MiningCorpus:
    """The :class:`MiningCorpus` of the pairs ``(anchors[i], positives[i])``."""
    if len(anchors) != len(positives):
        raise ValueError(f"{len(anchors)} anchors but {len(positives)} positives; mining takes them in pairs.")
    index = {text: i for i, text in enumerate(dict.fromkeys(positives))}  # each distinct positive, in order
    positives_of: dict[str, set[int]] = {}
    for anchor, positive in zip(anchors, positives, strict=True):
        positives_of.setdefault(anchor, set()).add(index[positive])
    excluded: list[tuple[int, int]] = []
    for row, (anchor, positive) in enumerate(zip(anchors, positives, strict=True)):
        itself = {index[anchor]} if anchor in index else set()  # the anchor, when it is a positive too
        excluded += [(row, j) for j in sorted((positives_of[anchor] | itself) - {index[positive]})]
    return MiningCorpus(
        texts=list(index),
        positive_index=torch.tensor([index[positive] for positive in positives], dtype=torch.long),
        excluded=torch.tensor(excluded, dtype=torch.long).reshape(-1, 2),
    )


@dataclass(frozen=True)
class MinedNegatives:
    """What :func:`mine_hard_negatives` found.

    Attributes:
        indices: ``[A, k]`` int64, each anchor's hard negatives in the corpus, most similar first (ties: corpus
            order).
        scores: ``[A, k]`` float32, their cosine similarities with the anchor.
        positive_scores: ``[A]`` float32, each anchor's cosine similarity with its own positive.
        skipped_by_margin: ``[A]`` int64, each anchor's candidates skipped as scored above ``margin`` times its
            positive's score (every one of them is more similar to the anchor than its hard negatives).
    """

    indices: torch.Tensor
    scores: torch.Tensor
    positive_scores: torch.Tensor
    skipped_by_margin: torch.Tensor


def check_mining_settings(num_negatives: object, margin: object) -> None:
    """Raise a one-line :class:`~hf_cse.errors.UsageError` naming a bad value and the valid ones: ``num_negatives``
    an integer >= 1, ``margin`` a number in (0, 1]."""
    if not _COUNT.accepts(num_negatives):
        raise UsageError(f"num_negatives={echo(num_negatives)}: the hard negatives per anchor, an integer >= 1.")
    if not _MARGIN.accepts(margin):
        raise UsageError(
            f"margin={echo(margin)}: a candidate is skipped when its score is above margin x the positive's score; "
            f"use a number in (0, 1] (default {DEFAULT_MARGIN}; 1 skips only candidates scored above the positive)."
        )


def default_chunk_size(corpus_size: int) -> int:
    """Anchors scored per matrix product by default: as many as keep the ``[chunk, N]`` scores near
    :data:`_BLOCK_SCORES` entries, between 1 and :data:`_MAX_CHUNK`."""
    return max(1, min(_MAX_CHUNK, _BLOCK_SCORES // max(corpus_size, 1)))


def mine_hard_negatives(
    anchor_embeddings: torch.Tensor,
    corpus_embeddings: torch.Tensor,
    positive_index: torch.Tensor,
    excluded: torch.Tensor | None = None,
    num_negatives: int = 1,
    margin: float = DEFAULT_MARGIN,
    chunk_size: int | None = None,
    device: str | torch.device | None = None,
    show_progress_bar: bool = False,
) -> MinedNegatives:
    """Each anchor's ``num_negatives`` most similar corpus entries (cosine similarity) but its own positive, the
    ``excluded`` ones and those scored above ``margin`` times its positive's score (the rule of the module's
    docstring), exactly: chunks of ``chunk_size`` anchors against the whole corpus.

    Args:
        anchor_embeddings: ``[A, D]``, any float dtype (normalized here, in float32).
        corpus_embeddings: ``[N, D]``.
        positive_index: ``[A]`` int64, each anchor's positive in the corpus (its score sets the margin; never mined).
        excluded: ``[E, 2]`` int64 ``(anchor, corpus index)`` pairs also never mined, sorted by anchor
            (:attr:`MiningCorpus.excluded`); None: none.
        num_negatives: ``k``, hard negatives per anchor, >= 1 (default 1).
        margin: in (0, 1] (default :data:`DEFAULT_MARGIN`, 0.95).
        chunk_size: anchors per matrix product; default :func:`default_chunk_size` of ``N``.
        device: where the products run (e.g. ``"cuda:0"``); default the corpus embeddings' device.
        show_progress_bar: a tqdm bar over the anchors (transformers' tqdm: ``HF_HUB_DISABLE_PROGRESS_BARS=1`` hides
            it).

    Raises:
        TooFewCandidatesError: an anchor (the first, in order) has fewer than ``num_negatives`` eligible candidates.
        UsageError: a bad ``num_negatives``, ``margin`` or ``chunk_size``.
        ValueError: an embedding that is not finite.
    """
    check_mining_settings(num_negatives, margin)
    num_anchors, num_corpus = len(anchor_embeddings), len(corpus_embeddings)
    if chunk_size is None:
        chunk_size = default_chunk_size(num_corpus)
    if not _COUNT.accepts(chunk_size):
        raise UsageError(f"chunk_size={echo(chunk_size)}: anchors scored per matrix product, an integer >= 1.")
    if positive_index.shape != (num_anchors,):
        raise ValueError(f"positive_index has shape {tuple(positive_index.shape)}; expected [{num_anchors}].")
    if not (torch.isfinite(anchor_embeddings).all() and torch.isfinite(corpus_embeddings).all()):
        # topk ranks NaN above every score: a broken model would otherwise give arbitrary negatives.
        raise ValueError("the embeddings hold NaN or infinite values: the encoder's outputs are not finite.")
    device = torch.device(device) if device is not None else corpus_embeddings.device
    corpus = torch.nn.functional.normalize(corpus_embeddings.to(device, torch.float32), dim=1)
    anchors = torch.nn.functional.normalize(anchor_embeddings.to(torch.float32), dim=1)
    if excluded is None:
        excluded = torch.empty(0, 2, dtype=torch.long)
    excluded_rows = excluded[:, 0].contiguous()

    indices, scores, positive_scores, skipped = [], [], [], []
    progress = tqdm(
        total=num_anchors, desc="Mining", unit=" anchors", dynamic_ncols=True, disable=not show_progress_bar
    )
    try:
        for start in range(0, num_anchors, chunk_size):
            end = min(start + chunk_size, num_anchors)
            block = anchors[start:end].to(device) @ corpus.T  # [c, N]
            rows = torch.arange(end - start, device=device)
            own = positive_index[start:end].to(device)
            positive = block[rows, own]  # [c]
            block[rows, own] = -math.inf
            lo, hi = torch.searchsorted(excluded_rows, torch.tensor([start, end])).tolist()
            if hi > lo:
                pairs = excluded[lo:hi].to(device)
                block[pairs[:, 0] - start, pairs[:, 1]] = -math.inf
            # Scores above the threshold are skipped; -inf (skipped by text) never is, so they are counted once.
            above = block > (margin * positive)[:, None]
            skipped_here = above.sum(dim=1)
            block.masked_fill_(above, -math.inf)
            eligible = torch.isfinite(block).sum(dim=1)
            short = (eligible < num_negatives).nonzero()
            if len(short):
                row = int(short[0])
                margin_skips = int(skipped_here[row])
                candidates = f"eligible candidates of the corpus's {num_corpus} ({margin_skips} skipped by the margin)"
                raise TooFewCandidatesError(start + row, int(eligible[row]), margin_skips, num_negatives, candidates)
            chunk_indices, chunk_scores = top_k_in_corpus_order(block, num_negatives)
            indices.append(chunk_indices.cpu())
            scores.append(chunk_scores.cpu())
            positive_scores.append(positive.cpu())
            skipped.append(skipped_here.cpu())
            progress.update(end - start)
    finally:
        progress.close()
    if not indices:
        empty = torch.empty(0, num_negatives)
        return MinedNegatives(empty.long(), empty, torch.empty(0), torch.empty(0, dtype=torch.long))
    return MinedNegatives(torch.cat(indices), torch.cat(scores), torch.cat(positive_scores), torch.cat(skipped))


def top_k_in_corpus_order(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` highest ``scores`` of each row, highest first, the lower column first among equal scores: indices
    ``[c, k]`` int64 and their scores ``[c, k]``. Each row needs at least ``k`` finite scores.

    ``torch.topk`` alone leaves ties in any order, and may take either of two scores tied at the ``k``-th place: the
    columns above the ``k``-th score are all taken, then the lowest-numbered ones tied with it, then the ``k`` are
    sorted stably.
    """
    kth = scores.topk(k, dim=1).values[:, -1:]  # [c, 1]
    keep = scores > kth
    need = k - keep.sum(dim=1)  # [c]: how many of the tied columns each row takes, the lowest ones
    tied_rows, tied_columns = (scores == kth).nonzero(as_tuple=True)  # row by row, columns ascending
    per_row = torch.bincount(tied_rows, minlength=len(scores))
    first = per_row.cumsum(0) - per_row
    rank = torch.arange(len(tied_rows), device=scores.device) - first[tied_rows]
    taken = rank < need[tied_rows]
    keep[tied_rows[taken], tied_columns[taken]] = True
    columns = keep.nonzero(as_tuple=True)[1].view(len(scores), k)  # ascending within each row
    values = scores.gather(1, columns)
    order = values.argsort(dim=1, descending=True, stable=True)  # stable: equal scores keep the lower column first
    return columns.gather(1, order), values.gather(1, order)


@dataclass(frozen=True)
class MinedPairs:
    """Labelled pairs with their mined hard negatives.

    Attributes:
        anchors, positives: the ``A`` pairs, as given.
        negatives: ``A`` lists of ``k`` texts, most similar first.
        skipped_by_margin: the candidates skipped as scored above ``margin`` times the positive's score, over all
            anchors.
        anchors_with_skips: the anchors that had at least one such candidate.
        corpus_size: the distinct positives the negatives were mined from.
    """

    anchors: list[str]
    positives: list[str]
    negatives: list[list[str]]
    skipped_by_margin: int
    anchors_with_skips: int
    corpus_size: int


def mine_pairs(
    encoder: SentenceEncoder,
    anchors: Sequence[str],
    positives: Sequence[str],
    num_negatives: int = 1,
    margin: float = DEFAULT_MARGIN,
    batch_size: int = 128,
    chunk_size: int | None = None,
    show_progress_bar: bool = False,
) -> MinedPairs:
    """Mine ``num_negatives`` hard negatives for each pair ``(anchors[i], positives[i])`` among the distinct
    ``positives`` (:func:`candidate_corpus`, :func:`mine_hard_negatives`), with ``encoder`` on its device.

    Each distinct text is encoded once (``batch_size`` a forward pass); the products run where the encoder does.

    Raises:
        TooFewCandidatesError: an anchor has fewer than ``num_negatives`` eligible candidates (before the model runs
            when its positives and itself leave too few).
        UsageError: a bad ``num_negatives`` or ``margin``, or no pairs.
    """
    check_mining_settings(num_negatives, margin)
    anchors, positives = list(anchors), list(positives)
    if not anchors:
        raise UsageError("no pairs to mine hard negatives for.")
    corpus = candidate_corpus(anchors, positives)
    check_corpus_size(corpus, num_negatives)
    texts = list(dict.fromkeys([*anchors, *corpus.texts]))
    position = {text: i for i, text in enumerate(texts)}
    embeddings = encoder.encode(texts, batch_size=batch_size, show_progress_bar=show_progress_bar)
    mined = mine_hard_negatives(
        embeddings[[position[anchor] for anchor in anchors]],
        embeddings[[position[text] for text in corpus.texts]],
        corpus.positive_index,
        corpus.excluded,
        num_negatives=num_negatives,
        margin=margin,
        chunk_size=chunk_size,
        device=next(encoder.model.parameters()).device,
        show_progress_bar=show_progress_bar,
    )
    return MinedPairs(
        anchors=anchors,
        positives=positives,
        negatives=[[corpus.texts[j] for j in row] for row in mined.indices.tolist()],
        skipped_by_margin=int(mined.skipped_by_margin.sum()),
        anchors_with_skips=int((mined.skipped_by_margin > 0).sum()),
        corpus_size=len(corpus.texts),
    )


def check_corpus_size(corpus: MiningCorpus, num_negatives: int) -> None:
    """Raise :class:`TooFewCandidatesError` for the first anchor whose candidates, before the margin, are fewer than
    ``num_negatives``: found without encoding anything."""
    candidates = corpus.candidates_per_anchor()
    short = (candidates < num_negatives).nonzero()
    if len(short):
        row = int(short[0])
        texts = f"candidates (the corpus's {len(corpus.texts)} distinct positives less its own positives and itself)"
        raise TooFewCandidatesError(row, int(candidates[row]), 0, num_negatives, texts)
