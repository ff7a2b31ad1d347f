"""STS results on a card: :class:`STSCardResults` (read from ``STSResults`` or the ``hf_cse.eval`` JSON), and how the
card describes the STS text variants (the tasks' names and Hub data sets: :mod:`hf_cse.evaluation.sts_model_index`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...evaluation.sts_model_index import STS_DISPLAY

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

    def split(self, task: str) -> str:
        """The split ``task`` was scored on: the settings' ``sickr_split`` / ``stsb_split``, else ``test``."""
        return str(self.settings.get(f"{task}_split") or "test")
