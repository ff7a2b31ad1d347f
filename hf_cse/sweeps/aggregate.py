"""Mean and spread over seeds: the statistics of ``python -m hf_cse.sweep`` and ``benchmarks/quality.py``."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import scipy.stats

STS_TEST_COLUMNS: tuple[str, ...] = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "avg")
"""The 7 STS test tasks and their average, in the papers' column order."""


def has_test_scores(scores: Any) -> bool:
    """Whether ``scores`` (a run's ``test`` mapping, or an ``hf_cse.eval`` JSON) holds a number for every column of
    :data:`STS_TEST_COLUMNS`."""
    return isinstance(scores, Mapping) and all(
        isinstance(scores.get(column), (int, float)) for column in STS_TEST_COLUMNS
    )


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (n - 1) of ``values``; the deviation is ``None`` for a single value.

    Raises:
        ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError("mean_std needs at least one value.")
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) if len(values) > 1 else None)


def column_stats(
    rows: Iterable[Mapping[str, Any]], columns: Sequence[str]
) -> tuple[dict[str, float], dict[str, float | None]]:
    """Per column, the :func:`mean_std` of the numbers the rows hold for it (rows without it are left out; a
    column no row holds is absent from both dicts).

    Returns:
        ``(mean, std)``, each ``{column: value}``.
    """
    rows = list(rows)
    mean: dict[str, float] = {}
    std: dict[str, float | None] = {}
    for column in columns:
        values = [float(row[column]) for row in rows if isinstance(row.get(column), (int, float))]
        if values:
            mean[column], std[column] = mean_std(values)
    return mean, std


def format_mean_std(mean: float | None, std: float | None, digits: int = 2) -> str:
    """``"72.00 ± 2.00"``; the mean alone without a deviation; ``"-"`` without a mean (or a NaN one)."""
    if mean is None or math.isnan(mean):
        return "-"
    return f"{mean:.{digits}f}" if std is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def compare_seed_averages(values: Sequence[float], reference: Sequence[float]) -> dict[str, Any]:
    """One arm's per-seed scores (e.g. 7-task averages) against a reference arm's.

    Returns:
        ``delta_avg`` (difference of the means), ``range`` (lowest and highest of ``values``), ``beyond_spread``
        (the two ranges do not overlap: every seed of one arm scores above every seed of the other) and ``welch_p``
        (two-sided Welch t-test; ``None`` under two values on a side or with zero variance on both).

    Raises:
        ValueError: either side is empty.
    """
    if not values or not reference:
        raise ValueError("compare_seed_averages needs at least one value on each side.")
    welch_p = None
    if len(values) > 1 and len(reference) > 1:
        p = float(scipy.stats.ttest_ind(values, reference, equal_var=False).pvalue)
        welch_p = None if math.isnan(p) else p
    return {
        "delta_avg": statistics.fmean(values) - statistics.fmean(reference),
        "range": [min(values), max(values)],
        "beyond_spread": min(values) > max(reference) or max(values) < min(reference),
        "welch_p": welch_p,
    }
