"""OssCSE's surface-structure splits of STS datasets (Shi et al., 2023, Section 3.3, Tables 2, 3 and 6).

Within one dataset, a pair's *surface* similarity is its match error rate (MER, low = similar wording; computed by
:func:`~hf_cse.text.match_error_rate`) and its *deep* similarity the gold score. A pair is

* **Cont.** (consistent) when both agree: gold score above the dataset's median and MER below the median MER, or
  gold score below the median and MER above the median MER;
* **Oppn.** (opposed) otherwise: similar wording with a low score (negations), or different wording with a high
  score (paraphrases), and every pair exactly at one of the two medians.

Ties: "above" and "below" are strict, so a pair whose score or MER equals the median is Oppn., following the paper's
"otherwise Oppn." (medians are ``numpy.median``: the mean of the two middle values for an even count). Reading
"above"/"below" as ">="/"<=" instead puts more pairs into Cont. (up to 134 more in STS12-MSRvid, whose median MER
0.5 is shared by 122 pairs) and moves the counts away from the paper's Table 2.

Only datasets whose median gold score lies in ``[2, 3.5]`` are kept (the paper's footnote 3: a dataset with a
skewed score distribution makes the median split meaningless). A model's Spearman correlation is then computed
within each split of each kept dataset, and averaged over datasets weighted by the split sizes (Table 3).

Reproduction of Table 2 (measured on ``shared/data``, strict ties):

* The paper split SentEval's Moses-tokenized, lower-cased copy (``sts_senteval_tok``) with, by all signs, plain
  ``jiwer.mer`` (punctuation tokens count as words): that reproduces 10 of its 16 median MERs exactly (3 more within
  0.003), and its Cont. counts within 95 pairs in total. :func:`~hf_cse.text.match_error_rate` lower-cases and
  drops punctuation, which raises some median MERs (STS12-MSRvid 0.5 instead of 0.444) and moves the Cont. counts by
  202 pairs in total on the tokenized copy (231 on the original text), 1 to 48 per dataset.
* Table 2 lists 16 datasets, but four more have a median score in ``[2, 3.5]``: STS12-MSRpar (3.25), STS14-deft-news,
  STS14-OnWN and STS14-tweet-news (3.4 each). The paper's effective upper bound lies in ``[3.2, 3.25)``;
  ``median_score_range=(2.0, 3.2)`` selects exactly Table 2's datasets.

``mer="plain"`` (``--mer plain`` in the report) is :func:`~hf_cse.text.plain_match_error_rate`, plain ``jiwer.mer``
on the text as it is, the paper's apparent choice; ``mer="normalized"`` (default) is
:func:`~hf_cse.text.match_error_rate`, which compares words only, whatever the tokenization of the copy at hand.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .metric import sts_correlation
from .options import DEFAULT_MEDIAN_SCORE_RANGE, MER_FUNCTIONS
from .sts_data import STS_SUBSETS, STSSubset, load_sts_task
from .sts_evaluator import EncodeFn, encode_unique, pair_similarities

#: ``(task, split)`` of the datasets the paper considers: every STS12-16 subset, STS-B train and STS-B test.
SURFACE_STRUCTURE_TASKS: tuple[tuple[str, str], ...] = (
    *((task, "test") for task in STS_SUBSETS),
    ("stsb", "train"),
    ("stsb", "test"),
)


@dataclass
class SurfaceStructureSplit:
    """The Cont./Oppn. split of one STS dataset.

    Attributes:
        subset: the dataset's pairs.
        mers: MER of each pair (sentence1 as the reference), ``[num_pairs]``.
        median_score: median gold score of the dataset.
        median_mer: median MER of the dataset.
        is_cont: ``True`` for Cont. pairs, ``False`` for Oppn. pairs, ``[num_pairs]``.
        kept: whether ``median_score`` lies in the median score range (only kept datasets are scored).
    """

    subset: STSSubset = field(repr=False)
    mers: np.ndarray = field(repr=False)
    median_score: float
    median_mer: float
    is_cont: np.ndarray = field(repr=False)
    kept: bool

    @property
    def dataset(self) -> str:
        """``"<task>-<subset>"``, e.g. ``"sts12-MSRvid"``, ``"stsb-train"``."""
        return f"{self.subset.task}-{self.subset.name}"

    @property
    def num_cont(self) -> int:
        return int(self.is_cont.sum())

    @property
    def num_oppn(self) -> int:
        return len(self.is_cont) - self.num_cont


def split_surface_structure(
    subset: STSSubset,
    median_score_range: tuple[float, float] = DEFAULT_MEDIAN_SCORE_RANGE,
    mer: str = "normalized",
) -> SurfaceStructureSplit:
    """Split one dataset into Cont. and Oppn. pairs by its median gold score and median MER (see the module doc).

    Args:
        subset: the dataset's scored pairs (at least one).
        median_score_range: ``(low, high)``; the dataset is kept when ``low <= median score <= high``.
        mer: a name from :data:`MER_FUNCTIONS`: ``"normalized"`` (default) or ``"plain"``.
    """
    if mer not in MER_FUNCTIONS:
        raise ValueError(f"Unknown mer {mer!r}; valid values are: {', '.join(MER_FUNCTIONS)}.")
    mer_function = MER_FUNCTIONS[mer]
    low, high = median_score_range
    if not low <= high:
        raise ValueError(f"median_score_range must be (low, high) with low <= high, got {median_score_range}.")
    if len(subset) == 0:
        raise ValueError(f"STS dataset {subset.task}/{subset.name} has no pairs to split.")
    scores = np.asarray(subset.scores, dtype=np.float64)
    mers = np.array([mer_function(s1, s2) for s1, s2 in zip(subset.sentences1, subset.sentences2, strict=True)])
    median_score, median_mer = float(np.median(scores)), float(np.median(mers))
    # Strict comparisons: a pair at either median is neither above nor below it, hence Oppn.
    is_cont = ((scores > median_score) & (mers < median_mer)) | ((scores < median_score) & (mers > median_mer))
    return SurfaceStructureSplit(subset, mers, median_score, median_mer, is_cont, low <= median_score <= high)


@dataclass
class SurfaceStructureScore:
    """Spearman (x 100) of cosine similarity within the Cont. and Oppn. pairs of one kept dataset.

    ``nan`` for a split with fewer than 2 pairs or constant similarities/scores.
    """

    split: SurfaceStructureSplit
    cont_spearman: float
    oppn_spearman: float


@dataclass
class SurfaceStructureResults:
    """Results of :func:`evaluate_surface_structure`.

    Attributes:
        splits: every dataset's split, kept or not, in input order (Table 2).
        scores: the Spearman correlations of the kept datasets, in input order (Table 6).
        median_score_range: the range used to keep datasets.
        mer: the MER function's name (:data:`MER_FUNCTIONS`).
    """

    splits: list[SurfaceStructureSplit]
    scores: list[SurfaceStructureScore]
    median_score_range: tuple[float, float]
    mer: str = "normalized"

    @staticmethod
    def _weighted(values: Sequence[float], weights: Sequence[int]) -> float:
        scored = ~np.isnan(values)  # a split with no correlation (nan) counts for nothing
        weights = np.asarray(weights, dtype=np.float64)[scored]
        return float(np.average(np.asarray(values)[scored], weights=weights)) if weights.sum() > 0 else math.nan

    @property
    def cont_weighted(self) -> float:
        """Cont. Spearman (x 100) averaged over the kept datasets, weighted by their number of Cont. pairs."""
        return self._weighted([s.cont_spearman for s in self.scores], [s.split.num_cont for s in self.scores])

    @property
    def oppn_weighted(self) -> float:
        """Oppn. Spearman (x 100) averaged over the kept datasets, weighted by their number of Oppn. pairs."""
        return self._weighted([s.oppn_spearman for s in self.scores], [s.split.num_oppn for s in self.scores])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: the weighted averages, then per dataset its counts, medians and correlations."""
        scored = {
            s.split.dataset: {"cont_spearman": s.cont_spearman, "oppn_spearman": s.oppn_spearman} for s in self.scores
        }
        datasets = {
            split.dataset: {
                "num_cont": split.num_cont,
                "num_oppn": split.num_oppn,
                "median_score": split.median_score,
                "median_mer": split.median_mer,
                "kept": split.kept,
                **scored.get(split.dataset, {}),
            }
            for split in self.splits
        }
        return {
            "cont_weighted": self.cont_weighted,
            "oppn_weighted": self.oppn_weighted,
            "median_score_range": list(self.median_score_range),
            "mer": self.mer,
            "datasets": datasets,
        }


def load_surface_structure_datasets(sts_dir: str | os.PathLike | None) -> list[STSSubset]:
    """The 26 datasets of :data:`SURFACE_STRUCTURE_TASKS`: 24 STS12-16 subsets, STS-B train and STS-B test.

    Args:
        sts_dir: SentEval-layout folder (``shared/data/sts_senteval_tok`` is the paper's text, ``shared/data/sts``
            the original). The Hub copies (``None``) merge the STS12-16 subsets into one table per year, which is
            not how the paper splits them.

    Raises:
        FileNotFoundError: a data file is missing (the exact path is named).
    """
    return [subset for task, split in SURFACE_STRUCTURE_TASKS for subset in load_sts_task(task, sts_dir, split)]


def _spearman(similarities: np.ndarray, scores: np.ndarray) -> float:
    if len(scores) < 2:
        return math.nan
    return sts_correlation(predictions=similarities, references=scores)["spearman"]


def evaluate_surface_structure(
    encode: EncodeFn,
    subsets: Sequence[STSSubset],
    *,
    median_score_range: tuple[float, float] = DEFAULT_MEDIAN_SCORE_RANGE,
    mer: str = "normalized",
    batch_size: int | None = None,
) -> SurfaceStructureResults:
    """Split each dataset into Cont./Oppn. pairs and correlate ``encode``'s cosine similarities within each split.

    Args:
        encode: ``encode(list_of_N_sentences) -> [N, D]``, as in :func:`~hf_cse.evaluation.evaluate_sts`.
        subsets: the datasets, e.g. :func:`load_surface_structure_datasets`; each is split on its own.
        median_score_range: ``(low, high)``, inclusive, of the median gold score of the datasets that are scored.
        mer: ``"normalized"`` (default) or ``"plain"``, see :func:`split_surface_structure`.
        batch_size: sentences per ``encode`` call (``None``: all distinct sentences of the kept datasets at once).

    Returns:
        :class:`SurfaceStructureResults`; ``cont_weighted``/``oppn_weighted`` are Table 3's numbers (x 100).
    """
    if not subsets:
        raise ValueError("evaluate_surface_structure got no STS datasets.")
    splits = [split_surface_structure(subset, median_score_range, mer) for subset in subsets]
    kept = [split for split in splits if split.kept]
    sentences = (s for split in kept for s in (*split.subset.sentences1, *split.subset.sentences2))
    table = encode_unique(encode, sentences, batch_size=batch_size)
    scores = []
    for split in kept:
        similarities = pair_similarities(table, split.subset.sentences1, split.subset.sentences2)
        gold = np.asarray(split.subset.scores, dtype=np.float64)
        cont, oppn = (_spearman(similarities[pairs], gold[pairs]) for pairs in (split.is_cont, ~split.is_cont))
        scores.append(SurfaceStructureScore(split, cont_spearman=cont, oppn_spearman=oppn))
    return SurfaceStructureResults(splits, scores, tuple(median_score_range), mer)
