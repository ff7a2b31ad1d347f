"""Offline loading of the ``sts_correlation`` evaluate module that ships inside this package."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where the metric loads: evaluate takes ~1 s to import, which every command paid
    import evaluate

#: Folder of the ``sts_correlation`` module script (``sts_correlation/sts_correlation.py``), the layout
#: ``evaluate.load`` expects for a local module: a directory holding a script of the same name.
STS_METRIC_PATH: Path = Path(__file__).resolve().parent / "metrics" / "sts_correlation"


def load_sts_metric(**kwargs) -> evaluate.EvaluationModule:
    """Load the STS correlation metric (Spearman and Pearson x 100) from its local path, with no network.

    Args:
        **kwargs: passed to ``evaluate.load`` (e.g. ``experiment_id``, ``num_process``/``process_id`` for
            distributed use). ``keep_in_memory`` defaults to ``True``: the predictions of one STS evaluation
            are small, and this keeps ``compute`` from writing Arrow cache files on every evaluation step.

    Returns:
        The metric; ``metric.compute(predictions=..., references=...)`` returns ``{"spearman", "pearson"}``.

    Example:
        >>> metric = load_sts_metric()
        >>> metric.compute(predictions=[0.1, 0.4, 0.35, 0.8], references=[0.0, 2.0, 1.0, 5.0])["spearman"]
        100.0
    """
    if not (STS_METRIC_PATH / "sts_correlation.py").is_file():
        raise FileNotFoundError(
            f"The sts_correlation metric script is missing: expected {STS_METRIC_PATH / 'sts_correlation.py'}. "
            "The package was installed without its package data (hf_cse/evaluation/metrics/*/*.py)."
        )
    import evaluate

    kwargs.setdefault("keep_in_memory", True)
    return evaluate.load(str(STS_METRIC_PATH), **kwargs)


@functools.lru_cache(maxsize=1)
def _default_metric() -> evaluate.EvaluationModule:
    # One shared instance: evaluate.load hashes and copies the script, which is wasted work when the trainer's
    # eval hook scores STS-B dev every `eval_steps`. `compute` leaves no state behind, so sharing is safe.
    return load_sts_metric()


def sts_correlation(predictions: Sequence[float], references: Sequence[float]) -> dict[str, float]:
    """Spearman and Pearson correlation (x 100) of predicted similarities with gold scores.

    Args:
        predictions: predicted similarity per pair, shape ``[num_pairs]`` (list, numpy array or 1-D tensor).
        references: gold score per pair, shape ``[num_pairs]``.

    Returns:
        ``{"spearman": float, "pearson": float}``, both in ``[-100, 100]`` (``nan`` for a constant input).
    """
    return _default_metric().compute(predictions=predictions, references=references)
