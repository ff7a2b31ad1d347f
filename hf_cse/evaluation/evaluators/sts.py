"""``STSEvaluator``: the default evaluation of a run, STS dev Spearman plus alignment and uniformity."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import UsageError, echo
from ...registry import register_evaluator
from ..analysis import ALIGNMENT_MIN_SCORE, EmbeddingCache, alignment_uniformity, positive_pairs
from ..sts_evaluator import EncodeFn, STSDevSets, load_sts_dev_sets, score_sts_dev
from ..sts_model_index import sts_dev_entries
from .base import Evaluator, EvaluatorSpec, SpecContext

logger = logging.getLogger(__name__)


@register_evaluator("sts")
class STSEvaluator(Evaluator):
    """STS dev Spearman (×100) and alignment/uniformity on STS-B dev (Wang & Isola): what a run evaluates unless
    told otherwise, with the numbers and names it always had.

    Returns ``{"stsb_spearman": ..., "alignment": ..., "uniformity": ...}`` (plus ``"sickr_spearman"`` and
    ``"avg_spearman"`` with SICK-R trial); the trainer logs them as ``eval_stsb_spearman``, ... Alignment and
    uniformity need a pair with a gold score >= 4 in STS-B dev; without one they are left out, with a warning.

    Args:
        dev_sets: the dev sets, read once (:func:`~hf_cse.evaluation.load_sts_dev_sets`); ``None``: read from
            ``sts_dir`` at the first call.
        sts_dir: SentEval-layout folder; ``None`` reads MTEB's Hub copy (network).
        tasks: dev tasks when ``dev_sets`` is ``None``: ``"stsb"`` and/or ``"sickr"``; default ``("stsb",)``.
        name: the prefix in a :class:`~hf_cse.evaluation.evaluators.SequentialEvaluator`; default ``"sts"``.

    The primary metric is the first task's Spearman (``stsb_spearman`` by default). The ``--evaluators`` spec is
    ``sts``, without a path: its data is the run's ``sts_dir`` and ``eval_sts_tasks``.
    """

    primary_metric = "stsb_spearman"

    def __init__(
        self,
        dev_sets: STSDevSets | None = None,
        *,
        sts_dir: str | os.PathLike | None = None,
        tasks: Sequence[str] = ("stsb",),
        name: str = "sts",
    ) -> None:
        self.dev_sets = dev_sets
        self.sts_dir = sts_dir
        self.tasks = list(dev_sets.tasks if dev_sets is not None else tasks)
        if not self.tasks:
            raise ValueError("STSEvaluator needs a dev task: stsb and/or sickr.")
        self.name = name
        self.primary_metric = f"{self.tasks[0]}_spearman"

    @classmethod
    def parse_spec(cls, kind: str, path: str | None, spec: str) -> EvaluatorSpec:
        if path is not None:
            raise UsageError(f"Evaluator {echo(spec)}: {kind} takes no path (its data is sts_dir / eval_sts_tasks).")
        return super().parse_spec(kind, path, spec)

    @classmethod
    def spec_primary_metric(cls, spec: EvaluatorSpec, sts_tasks: Sequence[str]) -> str:
        return f"{sts_tasks[0]}_spearman"

    @classmethod
    def from_spec(cls, spec: EvaluatorSpec, context: SpecContext) -> STSEvaluator:
        return cls(context.dev_sets, sts_dir=context.sts_dir, tasks=context.sts_tasks, name=spec.name)

    def __call__(self, encode: EncodeFn) -> dict[str, float]:
        if self.dev_sets is None:
            self.dev_sets = load_sts_dev_sets(self.sts_dir, self.tasks)
        # One cache per call: the STS score and alignment/uniformity embed STS-B dev once between them.
        cached = EmbeddingCache(encode)
        scores = score_sts_dev(cached, self.dev_sets)
        stsb_dev = self.dev_sets.subsets.get("stsb", [])
        if positive_pairs(stsb_dev):
            scores.update(alignment_uniformity(cached, stsb_dev))
        elif stsb_dev:
            # A custom dev set may lack positive pairs: alignment is then undefined, which must not stop training.
            logger.warning(
                f"STS-B dev has no pair with a gold score >= {ALIGNMENT_MIN_SCORE:g}: eval_alignment and "
                "eval_uniformity are not reported."
            )
        return scores

    def model_index_entries(self, metrics: Mapping[str, float]) -> list[dict[str, Any]]:
        """The STS-B dev / SICK-R trial Spearman results, as the card has always reported the dev scores."""
        return sts_dev_entries(metrics)
