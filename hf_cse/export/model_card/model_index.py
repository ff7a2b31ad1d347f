"""The ``model-index`` of a card's YAML front matter: one ``huggingface_hub.EvalResult`` per STS test score, dev score
and Matryoshka prefix score, with the structure the Hub expects."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from huggingface_hub import EvalResult

from .sts_results import STSCardResults, sts_dataset
from .summary import TrainingSummary

if TYPE_CHECKING:
    from .matryoshka_section import MatryoshkaCardResults

_METRIC_NAME = "Spearman correlation x 100 of cosine similarities"


def eval_results(
    summary: TrainingSummary, sts: STSCardResults | None, matryoshka: MatryoshkaCardResults | None = None
) -> list[EvalResult]:
    """One model-index result per STS score: task ``sentence-similarity``, the dataset (name, Hub type, split and,
    when known, ``config`` ``raw`` / ``tokenized`` for the text variant) and metric ``cosine_spearman`` (x 100; its
    ``config`` is ``all`` for STS12-16, the pairs of all subsets concatenated); then one per dev score of the saved
    model (``summary.final_dev``: STS-B dev, SICK-R trial); then, for a Matryoshka run, one per task and embedding
    prefix of its per-dimension table (metric ``args`` ``truncate_dim: d``). ``[]`` when there is none.

    The dev scores are the entries the run's evaluators recorded in ``summary.evaluator_results`` (each one's
    :meth:`~hf_cse.evaluation.evaluators.Evaluator.model_index_entries`: retrieval under task ``retrieval``), or for a
    summary without them (a checkpoint's ``training_args.json``) the STS dev scores of ``summary.final_dev``."""
    results = []
    common = {"task_type": "sentence-similarity", "task_name": "Semantic Textual Similarity"}
    if sts is not None:
        for task, value in sts.scores.items():
            split = {"stsb": sts.stsb_split(), "sickr": sts.sickr_split()}.get(task, "test")
            name, dataset_type, hub_split = sts_dataset(task, split)
            results.append(
                EvalResult(
                    **common,
                    dataset_type=dataset_type,
                    dataset_name=name,
                    dataset_split=hub_split,
                    dataset_config=sts.text,
                    metric_type="cosine_spearman",
                    metric_name=_METRIC_NAME,
                    metric_config="all" if task.startswith("sts1") else None,
                    metric_value=round(float(value), 2),
                )
            )
    if summary.evaluator_results is None:  # a summary without the evaluators' own entries: the STS dev scores
        results += sts_dev_results(summary.final_dev, prefix="eval_")
    else:
        results += [EvalResult(**entry) for entry in summary.evaluator_results]
    for evaluation in matryoshka.evaluations if matryoshka is not None else ():
        for dim in matryoshka.dims:
            scores = evaluation["scores"][str(dim)]
            for task, split in evaluation["splits"].items():
                if not _is_finite(scores.get(task)):
                    continue
                name, dataset_type, hub_split = sts_dataset(task, split)
                results.append(
                    EvalResult(
                        **common,
                        dataset_type=dataset_type,
                        dataset_name=name if evaluation.get("name") == "test" else f"{name} ({split})",
                        dataset_split=hub_split,
                        dataset_config=evaluation.get("text"),
                        metric_type="cosine_spearman",
                        metric_name=f"{_METRIC_NAME}, first {dim} dimensions",
                        metric_config="all" if task.startswith("sts1") else None,
                        metric_args={"truncate_dim": dim},
                        metric_value=round(float(scores[task]), 2),
                    )
                )
    return results


def sts_dev_results(metrics: Mapping[str, Any], prefix: str = "") -> list[EvalResult]:
    """One ``sentence-similarity`` result per STS dev score in ``metrics`` (``{prefix}stsb_spearman``: STS-B dev,
    ``{prefix}sickr_spearman``: SICK-R trial; metric ``cosine_spearman`` x 100), the saved model's dev scores as the
    card reports them (:class:`~hf_cse.evaluation.evaluators.STSEvaluator` and summaries without evaluators)."""
    results = []
    common = {"task_type": "sentence-similarity", "task_name": "Semantic Textual Similarity"}
    for task, split in (("stsb", "dev"), ("sickr", "trial")):
        value = metrics.get(f"{prefix}{task}_spearman")
        if _is_finite(value):
            name, dataset_type, hub_split = sts_dataset(task, split)
            results.append(
                EvalResult(
                    **common,
                    dataset_type=dataset_type,
                    dataset_name=f"{name} ({split})",
                    dataset_split=hub_split,
                    metric_type="cosine_spearman",
                    metric_name=_METRIC_NAME,
                    metric_value=round(float(value), 2),
                )
            )
    return results


def eval_result_dict(result: EvalResult) -> dict[str, Any]:
    """``result``'s set fields, JSON-ready: ``EvalResult(**eval_result_dict(result))`` rebuilds it."""
    return {key: value for key, value in dataclasses.asdict(result).items() if value is not None}


def _is_finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
