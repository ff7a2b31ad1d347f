"""``SequentialEvaluator``: several evaluators in one evaluation, each metric prefixed by its evaluator's name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import UsageError, echo
from ..sts_evaluator import EncodeFn
from .base import Evaluator, check_metrics


class SequentialEvaluator(Evaluator):
    """Runs ``evaluators`` in order and merges their metrics as ``{name}_{metric}`` (``sts_stsb_spearman``,
    ``scifact_ndcg@10``).

    Args:
        evaluators: one or more evaluators with distinct names.
        primary_metric: the prefixed key that selects checkpoints; default: the first evaluator's primary metric.
            ``greater_is_better`` is that of the evaluator it belongs to.
        name: default ``"sequential"`` (the prefix if this is itself nested in another sequence).

    Each evaluator gets the same encode function: a sentence two evaluators share is encoded by each (no cache
    spans evaluators, so that a large retrieval corpus is never held in memory).
    """

    def __init__(
        self, evaluators: Sequence[Evaluator], *, primary_metric: str | None = None, name: str = "sequential"
    ) -> None:
        self.evaluators = list(evaluators)
        if not self.evaluators:
            raise ValueError("SequentialEvaluator needs at least one evaluator.")
        names = [evaluator.name for evaluator in self.evaluators]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise UsageError(
                f"Evaluators share the name {', '.join(map(repr, duplicated))}; their metrics would collide: give "
                "each its own name."
            )
        self.name = name
        first = self.evaluators[0]
        self.primary_metric = primary_metric or f"{first.name}_{first.primary_metric}"
        owner = next(
            (e for e in self.evaluators if f"{e.name}_{e.primary_metric}" == self.primary_metric),
            next((e for e in self.evaluators if self.primary_metric.startswith(f"{e.name}_")), None),
        )
        if owner is None:
            raise UsageError(
                f"primary_metric {echo(self.primary_metric)} belongs to none of the evaluators "
                f"{', '.join(names)}: prefix it with one's name, e.g. {first.name}_{first.primary_metric}."
            )
        self.greater_is_better = owner.greater_is_better

    def __call__(self, encode: EncodeFn) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for evaluator in self.evaluators:
            scores = check_metrics(evaluator, evaluator(encode))
            metrics.update({f"{evaluator.name}_{key}": value for key, value in scores.items()})
        return metrics

    def model_index_entries(self, metrics: Mapping[str, float]) -> list[dict[str, Any]]:
        """Each evaluator's entries, from its own (unprefixed) share of ``metrics``."""
        entries = []
        for evaluator in self.evaluators:
            prefix = f"{evaluator.name}_"
            own = {key[len(prefix) :]: value for key, value in metrics.items() if key.startswith(prefix)}
            entries += evaluator.model_index_entries(own) if own else []
        return entries
