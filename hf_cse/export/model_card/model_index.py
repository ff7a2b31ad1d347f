"""STS results on a card: :class:`STSCardResults` (read from ``STSResults`` or the ``hf_cse.eval`` JSON) and the
``model-index`` entries (``huggingface_hub.EvalResult``) that carry them, and the dev scores, in the YAML front matter.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from huggingface_hub import EvalResult

from .summary import TrainingSummary

if TYPE_CHECKING:
    from .matryoshka_section import MatryoshkaCardResults

#: File ``python -m hf_cse.push`` writes with the STS results it computed (the ``hf_cse.eval`` JSON format).
STS_RESULTS_FILE = "sts_results.json"

# STS tasks in the order papers report them: (display name, dataset id for the model-index).
STS_DISPLAY = {
    "sts12": ("STS12", "mteb/sts12-sts"),
    "sts13": ("STS13", "mteb/sts13-sts"),
    "sts14": ("STS14", "mteb/sts14-sts"),
    "sts15": ("STS15", "mteb/sts15-sts"),
    "sts16": ("STS16", "mteb/sts16-sts"),
    "stsb": ("STS-B", "mteb/stsbenchmark-sts"),
    "sickr": ("SICK-R", "sick"),
}
_STSB_SPLIT_NAMES = {"test": "test", "dev": "validation", "train": "train"}
_METRIC_NAME = "Spearman correlation x 100 of cosine similarities"

#: How the card describes each STS text variant (``STSCardResults.text``).
STS_TEXT = {
    "raw": "**raw** text (original casing and punctuation, as MTEB reads it)",
    "tokenized": (
        "SentEval's **Moses-tokenized, lower-cased** copy of STS12-16 and STS-B (the text SimCSE-family papers "
        "evaluate on); SICK-R raw, as SentEval reads it"
    ),
}


@dataclass
class STSCardResults:
    """The STS numbers a card shows, from :class:`~hf_cse.evaluation.STSResults` or the ``hf_cse.eval`` JSON.

    Attributes:
        scores: ``{task: 'all' Spearman x 100}`` in evaluation order (canonical task names).
        settings: the evaluation settings (``sickr_split``, ``stsb_split``, ``max_seq_length``, ...).
        num_pairs: ``{task: scored pairs}`` when known.
        text: ``"raw"`` or ``"tokenized"`` (SentEval's Moses-tokenized, lower-cased copy), or ``None`` if unknown.
        alignment_uniformity: ``{"alignment", "uniformity", "stsb_split", "min_score"}`` when measured.
    """

    scores: dict[str, float]
    settings: dict[str, Any] = field(default_factory=dict)
    num_pairs: dict[str, int] = field(default_factory=dict)
    text: str | None = None
    alignment_uniformity: dict[str, Any] | None = None

    @property
    def avg(self) -> float:
        return sum(self.scores.values()) / len(self.scores) if self.scores else math.nan

    @classmethod
    def from_any(cls, results: Any, text: str | None = None) -> STSCardResults:
        """Read an ``STSResults``, the dict of ``STSResults.to_dict()`` / ``hf_cse.eval --output_json`` (with optional
        ``"text"`` and ``"alignment_uniformity"`` entries), or an ``STSCardResults`` (returned as is, ``text`` set).

        Args:
            text: ``"raw"`` or ``"tokenized"``, overriding the one the results record.

        Raises:
            TypeError: ``results`` is none of these. ValueError: no task score, or an unknown ``text``.
        """
        if isinstance(results, STSCardResults):
            card = results
        elif hasattr(results, "tasks") and hasattr(results, "settings"):  # STSResults
            card = cls(
                scores={task: float(result.all) for task, result in results.tasks.items()},
                settings=dict(results.settings),
                num_pairs={task: int(result.num_pairs) for task, result in results.tasks.items()},
            )
        elif isinstance(results, Mapping):
            details = results.get("details", {}) or {}
            scores = {task: float(results[task]) for task in STS_DISPLAY if isinstance(results.get(task), int | float)}
            card = cls(
                scores=scores,
                settings=dict(details.get("settings", {}) or {}),
                num_pairs={
                    task: int(details[task]["num_pairs"])
                    for task in scores
                    if isinstance(details.get(task), Mapping) and "num_pairs" in details[task]
                },
                text=results.get("text"),
                alignment_uniformity=results.get("alignment_uniformity"),
            )
        else:
            raise TypeError(f"Cannot read STS results from {type(results).__name__}.")
        if not card.scores:
            raise ValueError("The STS results hold no task score.")
        if text is not None:
            card.text = text
        if card.text is not None and card.text not in STS_TEXT:
            raise ValueError(f"STS text must be one of {sorted(STS_TEXT)}, got {card.text!r}.")
        return card

    def sickr_split(self) -> str:
        return str(self.settings.get("sickr_split") or "test")

    def stsb_split(self) -> str:
        return str(self.settings.get("stsb_split") or "test")


def _sts_dataset(task: str, split: str) -> tuple[str, str, str]:
    """``(display name, dataset type, split)`` of a task for the model-index."""
    name, dataset_type = STS_DISPLAY[task]
    if task == "stsb":
        return name, dataset_type, _STSB_SPLIT_NAMES.get(split, split)
    if task == "sickr":
        if split == "all":  # MTEB's SICK-R: all 9,927 pairs, its Hub copy's "test" split
            return name, "mteb/sickr-sts", "test"
        return name, dataset_type, split  # SICK's own train / trial / test split
    return name, dataset_type, "test"


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
            name, dataset_type, hub_split = _sts_dataset(task, split)
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
                name, dataset_type, hub_split = _sts_dataset(task, split)
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
            name, dataset_type, hub_split = _sts_dataset(task, split)
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
