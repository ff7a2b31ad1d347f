"""``ScoredPairsEvaluator``: the user's own sentence pairs with gold similarity scores, scored like STS."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import UsageError
from ...json_types import is_finite_number
from ...registry import register_evaluator
from ..metric import sts_correlation
from ..sts_evaluator import EncodeFn, encode_unique, pair_similarities
from .base import Evaluator, EvaluatorSpec, SpecContext
from .files import read_rows

PAIR_COLUMNS = ("sentence1", "sentence2", "score")


@register_evaluator("pairs")
class ScoredPairsEvaluator(Evaluator):
    """Spearman and Pearson correlation (×100, like STS) between the cosine similarity of each pair's embeddings
    and its gold score: checkpoint selection on a practitioner's own domain.

    Args:
        sentences1, sentences2: the pairs, ``N`` each (``N >= 2``).
        scores: gold similarity of each pair, ``N`` numbers on any scale (only their order and linearity count).
        name: the prefix in a :class:`~hf_cse.evaluation.evaluators.SequentialEvaluator` and the card's data set
            name; default ``"pairs"``.
        batch_size: sentences per ``encode`` call; ``None`` (default) encodes every distinct sentence in one call.

    Returns ``{"spearman": ..., "pearson": ...}``; the primary metric is ``spearman``. The ``--evaluators`` spec is
    ``pairs:FILE`` (:meth:`from_file`), named after the file.

    Example:
        >>> evaluator = ScoredPairsEvaluator.from_file("my_pairs.tsv")  # columns sentence1, sentence2, score
        >>> evaluator(encoder.encode)  # {"spearman": 71.3, "pearson": 69.8}
    """

    primary_metric = "spearman"
    takes_path = True

    def __init__(
        self,
        sentences1: Sequence[str],
        sentences2: Sequence[str],
        scores: Sequence[float],
        *,
        name: str = "pairs",
        batch_size: int | None = None,
    ) -> None:
        if not len(sentences1) == len(sentences2) == len(scores):
            raise ValueError(
                f"ScoredPairsEvaluator needs as many sentences1, sentences2 and scores, got {len(sentences1)}, "
                f"{len(sentences2)} and {len(scores)}."
            )
        if len(scores) < 2:
            raise ValueError(f"ScoredPairsEvaluator needs at least 2 pairs to correlate, got {len(scores)}.")
        self.sentences1, self.sentences2 = list(sentences1), list(sentences2)
        self.scores = np.asarray(scores, dtype=np.float64)
        self.name = name
        self.batch_size = batch_size
        self.source: str | None = None

    @classmethod
    def from_file(cls, path: str | os.PathLike, *, name: str | None = None, **kwargs: Any) -> ScoredPairsEvaluator:
        """Read the pairs of a ``.tsv``/``.csv`` file (a header naming ``sentence1``, ``sentence2``, ``score``; other
        columns ignored) or a ``.jsonl`` file (one object per line with those keys).

        Args:
            name: default: the file's name without its suffix.

        Raises:
            FileNotFoundError: no such file.
            UsageError: a missing column, empty text or a score that is not a number (naming the file, line and
                column), or fewer than 2 pairs.
        """
        path = Path(path)
        sentences1, sentences2, scores = [], [], []
        for row in read_rows(path, PAIR_COLUMNS):
            sentences1.append(row.text("sentence1"))
            sentences2.append(row.text("sentence2"))
            scores.append(row.number("score"))
        if len(scores) < 2:
            raise UsageError(f"{path} holds {len(scores)} pair(s); at least 2 are needed to correlate.")
        evaluator = cls(sentences1, sentences2, scores, name=name or path.stem, **kwargs)
        evaluator.source = path.name
        return evaluator

    @classmethod
    def from_spec(cls, spec: EvaluatorSpec, context: SpecContext) -> ScoredPairsEvaluator:
        return cls.from_file(spec.path, name=spec.name)

    def __call__(self, encode: EncodeFn) -> dict[str, float]:
        table = encode_unique(encode, [*self.sentences1, *self.sentences2], batch_size=self.batch_size)
        similarities = pair_similarities(table, self.sentences1, self.sentences2)
        return sts_correlation(predictions=similarities, references=self.scores)

    def model_index_entries(self, metrics: Mapping[str, float]) -> list[dict[str, Any]]:
        """Task ``sentence-similarity`` on the file (by name), metrics ``cosine_spearman`` and ``cosine_pearson``."""
        names = {"spearman": "Spearman correlation x 100", "pearson": "Pearson correlation x 100"}
        return [
            {
                "task_type": self.task_type,
                "task_name": self.task_name,
                "dataset_type": self.source or self.name,
                "dataset_name": self.name,
                "metric_type": f"cosine_{key}",
                "metric_name": f"{names[key]} of cosine similarities",
                "metric_value": round(float(metrics[key]), 2),
            }
            for key in names
            if is_finite_number(metrics.get(key))
        ]
