"""A Matryoshka run's STS scores per embedding prefix, read from the ``matryoshka_sts.json`` beside the model
(:mod:`hf_cse.evaluation.matryoshka`) for the card's per-dimension table, at the end of training and by
``python -m hf_cse.push`` alike."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...evaluation.sts_model_index import STS_DISPLAY
from ...run_files import MATRYOSHKA_RESULTS_FILE
from .summary import TrainingSummary

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MatryoshkaCardResults:
    """STS scores per embedding prefix, as :func:`~hf_cse.evaluation.matryoshka.evaluate_dimensions` saves them.

    Attributes:
        dims: the prefix sizes, in table order (the run's ``matryoshka_dims``).
        evaluations: ``[{"name": "dev" | "test", "splits": {task: split}, "text": ..., "scores": {str(d): {task:
            score, "avg": mean}}}]``, each a group of the table's columns.
    """

    dims: tuple[int, ...]
    evaluations: tuple[Mapping[str, Any], ...]

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> MatryoshkaCardResults:
        """Read the saved dict; ``ValueError`` naming what is malformed."""
        dims = values.get("dims")
        evaluations = values.get("evaluations")
        if not isinstance(dims, list) or not dims or not all(isinstance(dim, int) for dim in dims):
            raise ValueError(f"'dims' must be a non-empty list of integers, got {dims!r}")
        if not isinstance(evaluations, list):
            raise ValueError(f"'evaluations' must be a list, got {evaluations!r}")
        for evaluation in evaluations:
            splits, scores = evaluation.get("splits"), evaluation.get("scores")
            if not isinstance(splits, Mapping) or set(splits) - set(STS_DISPLAY):
                raise ValueError(f"'splits' must map STS tasks to splits, got {splits!r}")
            if not isinstance(scores, Mapping) or sorted(scores) != sorted(str(dim) for dim in dims):
                raise ValueError(f"'scores' must have one entry per dimension {dims}, got {sorted(scores or {})}")
        return cls(dims=tuple(dims), evaluations=tuple(evaluations))


def read_matryoshka_results(directory: str | Path, summary: TrainingSummary) -> MatryoshkaCardResults | None:
    """The per-dimension scores saved in ``directory`` for the run ``summary`` describes; ``None`` without the file,
    for a run without ``matryoshka_dims``, or for a file whose dimensions are not the run's (an earlier run's in
    the same folder) or that cannot be read, which is logged: the card then has no table rather than a wrong one."""
    path = Path(directory) / MATRYOSHKA_RESULTS_FILE
    dims = summary.objective_config.get("matryoshka_dims")
    if not path.is_file() or not dims:
        return None
    try:
        results = MatryoshkaCardResults.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, AttributeError) as err:  # JSONDecodeError is a ValueError
        logger.warning("The card leaves out the per-dimension STS table: %s is malformed: %s", path, err)
        return None
    if list(results.dims) != list(dims):
        logger.warning(
            "The card leaves out the per-dimension STS table: %s has dims %s, the run trained %s.",
            path,
            list(results.dims),
            list(dims),
        )
        return None
    return results
