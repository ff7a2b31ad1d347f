"""Geometry of an embedding space: alignment and uniformity, and in-batch negative similarities.

* :func:`alignment_uniformity` (Wang & Isola, 2020, as SimCSE, DCLR and Focal-InfoNCE report them), on L2-normalized
  embeddings ``f(x)``:

  - ``alignment = E ||f(x) - f(y)||^2`` over positive pairs: STS-B pairs with a gold score of at least 4 (lower is
    better: paraphrases sit close together);
  - ``uniformity = log E exp(-2 ||f(x) - f(y)||^2)`` over all pairs of distinct sentences of the same STS-B split
    (lower is better: embeddings spread over the sphere; 0 when they all coincide, about -4 when they are spread
    uniformly over a high-dimensional sphere, where squared distances concentrate at 2).

* :func:`in_batch_negative_similarities` and :func:`similarity_histogram` (DCLR, Figure 1): cosine similarity between
  each sentence and its in-batch negatives, for random batches of ``B`` sentences of a corpus, binned by 0.1. A large
  share of negatives with a high similarity is the false-negative problem DCLR's instance weighting addresses.

* :class:`EmbeddingCache` wraps an ``encode`` function so that analyses sharing sentences (STS scores, alignment and
  uniformity, Cont./Oppn. splits all read the STS sentences) embed each of them once.

Example (inside a training loop, with the STS-B dev sets the trainer already holds)::

    encode = EmbeddingCache(lambda sentences: encoder.encode(sentences, batch_size=128))  # one cache per model state
    metrics = score_sts_dev(encode, dev_sets)
    metrics.update(alignment_uniformity(encode, dev_sets.subsets["stsb"]))  # {"alignment": ..., "uniformity": ...}
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .options import ALIGNMENT_MIN_SCORE
from .sts_data import STSSubset
from .sts_evaluator import EncodeFn, encode_unique


class EmbeddingCache:
    """An ``encode`` function that embeds each distinct sentence only once, whatever the number of calls.

    Use one cache per model state (e.g. per evaluation during training): embeddings are never refreshed.

    Args:
        encode: ``encode(list_of_N_sentences) -> [N, D]`` float embeddings, in input order.
        batch_size: sentences per call of ``encode`` for the sentences not cached yet; ``None`` (default) passes them
            all in one call, which lets an encoder that sorts by length batch them best.

    Calling the cache returns float32 CPU embeddings ``[N, D]`` in input order, like ``encode``.
    """

    def __init__(self, encode: EncodeFn, batch_size: int | None = None) -> None:
        self.encode = encode
        self.batch_size = batch_size
        self._table: dict[str, torch.Tensor] = {}

    def __call__(self, sentences: Sequence[str]) -> torch.Tensor:
        sentences = list(sentences)
        if not sentences:
            raise ValueError("EmbeddingCache got no sentences.")
        missing = [sentence for sentence in sentences if sentence not in self._table]  # encode_unique dedupes
        self._table.update(encode_unique(self.encode, missing, batch_size=self.batch_size))
        return torch.stack([self._table[sentence] for sentence in sentences])

    def __len__(self) -> int:
        """Number of distinct sentences embedded so far."""
        return len(self._table)


def alignment(embeddings1: torch.Tensor, embeddings2: torch.Tensor, alpha: float = 2.0) -> float:
    """Alignment loss ``E ||f(x) - f(y)||^alpha`` of positive pairs, on L2-normalized embeddings.

    Args:
        embeddings1: first embedding of each pair, ``[N, D]``.
        embeddings2: second embedding of each pair, ``[N, D]``.
        alpha: exponent of the distance (Wang & Isola's default, 2).

    Returns:
        The mean, in ``[0, 2^alpha]``; 0 when each pair is one embedding twice.
    """
    if embeddings1.shape != embeddings2.shape or embeddings1.ndim != 2 or len(embeddings1) == 0:
        raise ValueError(
            "alignment needs two non-empty [N, D] tensors of the same shape, got "
            f"{tuple(embeddings1.shape)} and {tuple(embeddings2.shape)}."
        )
    x = F.normalize(embeddings1.double(), dim=-1)
    y = F.normalize(embeddings2.double(), dim=-1)
    return float((x - y).norm(dim=-1).pow(alpha).mean())


def uniformity(embeddings: torch.Tensor, t: float = 2.0, chunk_size: int = 1024) -> float:
    """Uniformity loss ``log E exp(-t ||f(x) - f(y)||^2)`` over the distinct pairs of L2-normalized embeddings.

    Distinct pairs are the ``N (N - 1) / 2`` unordered pairs ``i < j`` (an embedding is never paired with itself, as
    ``torch.pdist`` in Wang & Isola's code). The mean is taken with ``logsumexp`` in float64, in blocks of
    ``chunk_size`` rows, so memory stays at ``chunk_size x N`` whatever ``N``.

    Args:
        embeddings: ``[N, D]`` with ``N >= 2``.
        t: the temperature (Wang & Isola's default, 2).
        chunk_size: rows per block.

    Returns:
        The loss, in ``[-4 t, 0]`` (for ``t = 2``: 0 when all embeddings coincide, lower is more uniform).
    """
    if embeddings.ndim != 2 or len(embeddings) < 2:
        raise ValueError(f"uniformity needs [N, D] embeddings with N >= 2, got shape {tuple(embeddings.shape)}.")
    x = F.normalize(embeddings.double(), dim=-1)
    n = len(x)
    columns = torch.arange(n)
    block_terms = []
    for start in range(0, n - 1, chunk_size):
        block = x[start : start + chunk_size]
        # ||a - b||^2 = 2 - 2 a.b for unit vectors; the clamp removes rounding below 0 for near-identical rows.
        squared = (2.0 - 2.0 * block @ x.T).clamp_min(0.0)
        upper = columns[None, :] > torch.arange(start, start + len(block))[:, None]
        block_terms.append(torch.logsumexp(-t * squared[upper], dim=0))
    return float(torch.logsumexp(torch.stack(block_terms), dim=0) - math.log(n * (n - 1) / 2))


def positive_pairs(subsets: Sequence[STSSubset], min_score: float = ALIGNMENT_MIN_SCORE) -> list[tuple[str, str]]:
    """The ``(sentence1, sentence2)`` pairs of ``subsets`` with a gold score ``>= min_score``: alignment's positive
    pairs (none: alignment is undefined)."""
    return [(s1, s2) for subset in subsets for s1, s2, score in subset if score >= min_score]


def alignment_uniformity(
    encode: EncodeFn,
    subsets: Sequence[STSSubset],
    *,
    min_score: float = ALIGNMENT_MIN_SCORE,
    batch_size: int | None = None,
) -> dict[str, float]:
    """Alignment over the positive pairs and uniformity over the distinct sentences of STS subsets.

    Args:
        encode: ``encode(list_of_N_sentences) -> [N, D]``, as in :func:`~hf_cse.evaluation.evaluate_sts`; an
            :class:`EmbeddingCache` avoids re-embedding sentences that another evaluation already embedded.
        subsets: the subsets to measure, e.g. ``load_sts_task("stsb", sts_dir, "test")`` or, during training,
            ``dev_sets.subsets["stsb"]`` (STS-B dev).
        min_score: pairs with a gold score ``>= min_score`` are the positive pairs of the alignment (default 4 on
            STS-B's 0-5 scale: SimCSE's "pairs with a score higher than 4", here with the pairs scored exactly 4).
        batch_size: sentences per ``encode`` call (``None``: all distinct sentences in one call).

    Returns:
        ``{"alignment": float, "uniformity": float}`` (keys ready for an ``eval_`` prefix).

    Raises:
        ValueError: no pair reaches ``min_score``, or fewer than 2 distinct sentences.
    """
    positives = positive_pairs(subsets, min_score)
    if not positives:
        names = ", ".join(f"{subset.task}/{subset.name}" for subset in subsets) or "no subsets"
        raise ValueError(f"No pair with a gold score >= {min_score} in {names}: alignment is undefined.")
    sentences = list(dict.fromkeys(s for subset in subsets for s in (*subset.sentences1, *subset.sentences2)))
    embed = EmbeddingCache(encode, batch_size)
    spread = uniformity(embed(sentences))  # first: every distinct sentence in one encode call
    first, second = zip(*positives, strict=True)
    return {"alignment": alignment(embed(first), embed(second)), "uniformity": spread}


def in_batch_negative_similarities(
    encode: EncodeFn,
    sentences: Sequence[str],
    batch_size: int = 64,
    num_batches: int = 8,
    seed: int = 0,
) -> np.ndarray:
    """Cosine similarities between sentences and their in-batch negatives, over random batches of a corpus.

    ``num_batches`` batches of ``batch_size`` distinct corpus lines are drawn without replacement (fewer batches when
    the corpus is too small for all of them); within a batch every sentence is a negative of every other one, as in
    unsupervised SimCSE training. Each unordered pair is counted once: the similarity is symmetric, so the
    distribution is the same as over the ``B - 1`` negatives of each sentence.

    Args:
        encode: ``encode(list_of_N_sentences) -> [N, D]``.
        sentences: the corpus, at least ``batch_size`` sentences.
        batch_size: ``B``, sentences per batch (DCLR's Figure 1 uses 256: 255 negatives per sentence).
        num_batches: batches to draw.
        seed: seed of the random draw.

    Returns:
        float64 cosine similarities, ``[num_batches, B * (B - 1) / 2]`` (one row per batch drawn).
    """
    if batch_size < 2:
        raise ValueError(f"batch_size must be >= 2 (a batch of 1 has no in-batch negative), got {batch_size}.")
    if num_batches < 1:
        raise ValueError(f"num_batches must be >= 1, got {num_batches}.")
    if len(sentences) < batch_size:
        raise ValueError(f"The corpus has {len(sentences)} sentences, fewer than one batch of {batch_size}.")
    num_batches = min(num_batches, len(sentences) // batch_size)
    rows = np.random.default_rng(seed).permutation(len(sentences))[: num_batches * batch_size]
    sample = [sentences[i] for i in rows]
    # A corpus may repeat a line: the cache embeds it once, and it stays twice in the batch.
    embeddings = F.normalize(EmbeddingCache(encode)(sample).double(), dim=-1)
    upper = torch.triu_indices(batch_size, batch_size, offset=1)
    similarities = [
        (batch @ batch.T)[upper[0], upper[1]] for batch in embeddings.view(num_batches, batch_size, -1).unbind()
    ]
    return torch.stack(similarities).numpy()


@dataclass
class SimilarityHistogram:
    """Counts of cosine similarities in equal-width bins over ``[-1, 1]``.

    Attributes:
        edges: bin edges, ``[K + 1]``; bin ``k`` is ``[edges[k], edges[k + 1])``, the last bin also holds 1.0.
        counts: values per bin, ``[K]``.
        mean: mean similarity.
    """

    edges: np.ndarray
    counts: np.ndarray
    mean: float

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    @property
    def shares(self) -> np.ndarray:
        """Share of the values in each bin, ``[K]``, summing to 1."""
        return self.counts / max(self.total, 1)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict: ``edges``, ``counts``, ``shares``, ``total`` and ``mean``."""
        return {
            "edges": [round(float(edge), 10) for edge in self.edges],
            "counts": [int(count) for count in self.counts],
            "shares": [float(share) for share in self.shares],
            "total": self.total,
            "mean": self.mean,
        }


def similarity_histogram(similarities: np.ndarray | Sequence[float], bin_width: float = 0.1) -> SimilarityHistogram:
    """Bin cosine similarities into ``[-1, -1 + w), ..., [1 - w, 1]`` (DCLR's Figure 1 uses ``w = 0.1``).

    Values a rounding error outside ``[-1, 1]`` are clipped into the end bins; a value on an inner edge belongs to the
    bin it starts (0.7 is counted in ``[0.7, 0.8)``).

    Args:
        similarities: cosine similarities, any shape with at least one value (flattened).
        bin_width: ``w``; ``2 / w`` must be a whole number (0.1, 0.05, 0.2, 0.25, 0.5, ...).
    """
    values = np.asarray(similarities, dtype=np.float64).ravel()
    if values.size == 0:
        raise ValueError("similarity_histogram got no similarities.")
    num_bins = round(2.0 / bin_width) if bin_width > 0 else 0
    if num_bins < 1 or not math.isclose(num_bins * bin_width, 2.0, rel_tol=1e-9):
        raise ValueError(f"bin_width must divide [-1, 1] into whole bins (e.g. 0.1, 0.05, 0.25), got {bin_width}.")
    width = 2.0 / num_bins
    edges = np.arange(num_bins + 1) * width - 1.0
    # (0.7 + 1) / 0.1 is 16.999999999999996 in floating point: the slack puts a value on an edge into the bin that
    # starts there, as the docstring promises, instead of the one before.
    position = (np.clip(values, -1.0, 1.0) + 1.0) / width
    counts = np.bincount(np.clip(np.floor(position + 1e-9).astype(int), 0, num_bins - 1), minlength=num_bins)
    return SimilarityHistogram(edges=edges, counts=counts, mean=float(values.mean()))
