"""Mean and spread over seeds: the statistics of ``python -m hf_cse.sweep`` and ``benchmarks/quality.py``."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

STS_TEST_COLUMNS: tuple[str, ...] = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "avg")
"""The 7 STS test tasks and their average, in the papers' column order."""


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
