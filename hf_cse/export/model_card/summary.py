"""The record of how a checkpoint was trained, which its card shows: :class:`TrainingSummary`, saved beside the card as
``hf_cse_training.json`` and read back by ``python -m hf_cse.push`` and ``hf_cse.eval``; and the one-line description
of the settings a resume changed. It is computed in :mod:`.summarize`.

Hub tokens never reach a summary: it copies named settings only, and ``training_args.json`` holds no ``*_token``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...json_types import check_json_fields
from ...modeling.configuration_cse import PoolingConfig
from ...run_files import TRAINING_SUMMARY_FILE


@dataclass
class TrainingSummary:
    """Everything a card says about how a checkpoint was trained; JSON-ready (see :meth:`to_dict`).

    Attributes:
        base_model: the starting checkpoint as given (Hub id, ``pip:MODULE`` or a local path).
        train_data: the training sentences as given (file, Hub dataset id, ``gensim:lee``).
        objective: the objective's registry name.
        objective_config: its hyper-parameters (``get_config_dict()``).
        auxiliary_losses: ``{name: {"weight": w, **hyper-parameters}}`` of the weighted extra terms.
        view_augmentation: ``{"name": ..., **hyper-parameters}`` of the positive views.
        pooling: the :class:`~hf_cse.modeling.configuration_cse.PoolingConfig` as a dict.
        training: training settings (batch size, processes, learning rate, steps, precision, ...).
        dev_evaluations: ``[{"step": s, "eval_stsb_spearman": v, ...}]``, the dev scores logged during training.
        final_dev: the dev scores of the saved model (the best evaluation with ``load_best_model_at_end``, else the
            last one); ``{}`` without evaluation.
        citations: BibTeX of every paper whose method the run used, deduplicated, objective first.
        lora: the LoRA settings when adapters were trained (then merged into the saved weights), else ``None``.
        encoder: the backbone's dropout fields, attention direction and weights as trained
            (:func:`~hf_cse.modeling.backbone.backbone_record`: ``{"dropout": {...}, "bidirectional": ...,
            "weights": {"dtype": ..., "quantization": ...}}``; records of earlier runs lack ``weights``), or ``None``
            (default) when unknown.
        versions: library versions of the run.
        inference_max_seq_length: the truncation length in effect at inference (``pooling["max_seq_length"]``, or
            when that is unset the tokenizer's limit capped by the position embeddings); ``None`` when unknown.
        settings_changes: each resume with changed settings (``--allow_changed_settings``), oldest first:
            ``[{"step": s, "changes": [{"setting": k, "before": v, "after": w}, ...]}]``
            (:class:`~hf_cse.training.record.run_settings.RunSettingsRecord`); the settings above are those after the
            last. ``[]`` (default): the whole run used the same settings.
        evaluator_results: the ``model-index`` entries of the saved model's dev scores, from the run's evaluator
            (:meth:`~hf_cse.evaluation.evaluators.Evaluator.model_index_entries`, ``EvalResult`` keyword dicts);
            ``None`` (default; a summary computed from a checkpoint's ``training_args.json``): the card reports the
            STS dev scores of ``final_dev``.
    """

    base_model: str | None
    train_data: str | None
    objective: str
    objective_config: dict[str, Any]
    auxiliary_losses: dict[str, dict[str, Any]] = field(default_factory=dict)
    view_augmentation: dict[str, Any] = field(default_factory=lambda: {"name": "dropout"})
    pooling: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    dev_evaluations: list[dict[str, Any]] = field(default_factory=list)
    final_dev: dict[str, Any] = field(default_factory=dict)
    citations: list[str] = field(default_factory=list)
    lora: dict[str, Any] | None = None
    encoder: dict[str, Any] | None = None
    versions: dict[str, str] = field(default_factory=dict)
    inference_max_seq_length: int | None = None
    settings_changes: list[dict[str, Any]] = field(default_factory=list)
    evaluator_results: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = TRAINING_SUMMARY_FILE) -> TrainingSummary:
        """The summary ``values`` hold (read from ``source``), each field type-checked: a wrong one is one line."""
        check_json_fields(cls, values, source)
        known = set(cls.__dataclass_fields__)
        return cls(**{key: value for key, value in values.items() if key in known})

    @classmethod
    def from_json_file(cls, path: str | Path) -> TrainingSummary:
        try:
            values = json.loads(Path(path).read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise UsageError(f"{path} is not valid JSON ({err}).") from None
        return cls.from_dict(values, str(path))

    @property
    def pooling_config(self) -> PoolingConfig:
        return PoolingConfig.from_dict(self.pooling) if self.pooling else PoolingConfig()


def describe_setting_change(change: Mapping[str, Any]) -> str:
    """``"setting: before -> after"`` of one changed setting (``{"setting", "before", "after"}``, the values as Python
    literals); ``unset`` for a side without the setting."""
    before, after = (repr(change[side]) if side in change else "unset" for side in ("before", "after"))
    return f"{change['setting']}: {before} -> {after}"


def describe_setting_changes(changes: Sequence[Mapping[str, Any]]) -> str:
    """The changed settings of one resume on one line: ``"objective: 'simcse' -> 'dcl'; temperature: 0.05 -> 0.1"``."""
    return "; ".join(describe_setting_change(change) for change in changes)


def jsonable(value: Any) -> Any:
    """Enums to their values, tuples to lists, non-finite floats to None, recursively."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
