"""Which training arguments the resume contract compares (:mod:`hf_cse.training.record.run_settings`), by one rule.

Every field of the run's ``CSETrainingArguments`` counts, as ``TrainingArguments.to_dict()`` serializes it (a field a
later transformers or hf_cse adds, or a subclass's, included), except:

- the operational ones (:data:`OPERATIONAL_ARGUMENTS`): those that decide only where and how often the run writes,
  logs, evaluates or publishes, how its processes are started and talk, or how fast and in how much memory it
  computes the same steps (compilation, activation checkpointing, gradient caching, padding, data-loader workers).
  A resume may change them freely;
- the ones a part records in its own serialization (:data:`RECORDED_BY_PARTS`: the objective's
  ``get_config_dict()``, the view augmentation's hyper-parameters, each input provider's ``record()``), which the run
  settings hold in that form, defaults filled in.

So a new field is compared on resume unless it is declared operational: the safe direction, since a wrong refusal
is one ``--allow_changed_settings`` away and a wrong silence trains something other than the checkpoint's run.

Each counting field is recorded at its value, not as a difference from ``TrainingArguments``' defaults: a key a
checkpoint lacks means a setting its hf_cse did not record (which is not compared), and the defaults move between
transformers releases. A few keep the form checkpoints recorded before this rule (:func:`argument_settings`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..training_args import CSETrainingArguments

OPERATIONAL_ARGUMENTS = frozenset(
    {
        # Where the run writes and what it resumes from.
        *("output_dir", "overwrite_output_dir", "resume_from_checkpoint", "allow_changed_settings"),
        *("do_train", "do_eval", "do_predict"),
        # Logging and progress.
        *("logging_strategy", "logging_steps", "logging_first_step", "log_on_each_node", "logging_nan_inf_filter"),
        *("include_num_input_tokens_seen", "log_level", "log_level_replica", "disable_tqdm", "skip_memory_metrics"),
        *("report_to", "run_name", "project", "trackio_space_id", "trackio_bucket_id", "trackio_static_space_id"),
        "debug",
        # Evaluation cadence and batching (what it scores is recorded by content: evaluation_content_sha256).
        *("eval_strategy", "eval_steps", "eval_delay", "eval_on_start", "per_device_eval_batch_size", "sts_dir"),
        *("prediction_loss_only", "eval_do_concat_batches", "eval_use_gather_object", "eval_accumulation_steps"),
        *("include_for_metrics", "batch_eval_metrics"),
        # Saving cadence and publishing.
        *("save_strategy", "save_steps", "save_on_each_node", "save_total_limit", "save_only_model"),
        "enable_jit_checkpoint",
        *("push_to_hub", "hub_token", "hub_private_repo", "hub_model_id", "hub_strategy", "hub_always_push"),
        "hub_revision",
        # Processes: who this one is and how they talk.
        *("local_rank", "ddp_find_unused_parameters", "ddp_bucket_cap_mb", "ddp_broadcast_buffers"),
        *("ddp_static_graph", "ddp_backend", "ddp_timeout"),
        # Speed and memory for the same steps.
        *("torch_compile", "torch_compile_backend", "torch_compile_mode", "torch_empty_cache_steps", "use_cache"),
        *("gradient_checkpointing", "gradient_checkpointing_kwargs"),
        *("activation_checkpointing", "activation_checkpointing_kwargs"),
        *("gradient_cache_chunk_size", "pad_to_multiple_of", "pad_to_max_seq_length"),
        *("dataloader_num_workers", "dataloader_pin_memory", "dataloader_persistent_workers"),
        *("dataloader_prefetch_factor", "dataloader_multiprocessing_context"),
    }
)
"""Training arguments that do not change what the resumed steps compute (the module's docstring gives the rule)."""

RECORDED_BY_PARTS = frozenset(
    {
        *("objective", "temperature", "objective_kwargs", "matryoshka_dims", "matryoshka_weights"),
        *("auxiliary_losses", "view_augmentation", "view_augmentation_kwargs", "input_kwargs"),
    }
)
"""Training arguments that build a part which records its own settings (the objective, the auxiliary terms, the view
augmentation, the input providers): recorded as the part serializes them, not as given."""

RECORDED_TOGETHER = {
    "optimizer": ("optim", "optim_args", "adam_beta1", "adam_beta2", "adam_epsilon"),
    "precision": ("bf16", "fp16"),
}
"""Fields recorded under one key, as checkpoints have recorded them: the optimizer's own hyper-parameters, and the
mixed precision (``bf16``, ``fp16`` or ``fp32``)."""


def argument_settings(args: CSETrainingArguments) -> dict[str, Any]:
    """The training arguments the resume contract compares: every field of ``args.to_dict()`` but
    :data:`OPERATIONAL_ARGUMENTS` and :data:`RECORDED_BY_PARTS`, :data:`RECORDED_TOGETHER` under their keys, and
    ``world_size`` (a property, part of the batch geometry). As checkpoints recorded them before: ``num_train_epochs``
    ``None`` beside ``max_steps`` (the schedule is built for ``max_steps`` then), ``lr_scheduler_type`` as
    ``str()`` of its enum, ``lr_scheduler_kwargs`` ``None`` when empty."""
    skipped = (
        OPERATIONAL_ARGUMENTS | RECORDED_BY_PARTS | {name for names in RECORDED_TOGETHER.values() for name in names}
    )
    values = {key: value for key, value in args.to_dict().items() if key not in skipped}
    values.update(
        world_size=args.world_size,
        num_train_epochs=args.num_train_epochs if args.max_steps <= 0 else None,
        lr_scheduler_type=str(args.lr_scheduler_type),
        lr_scheduler_kwargs=args.lr_scheduler_kwargs or None,
        optimizer={
            "optim": str(getattr(args.optim, "value", args.optim)),
            **{name: getattr(args, name) for name in RECORDED_TOGETHER["optimizer"][1:]},
        },
        precision="bf16" if args.bf16 else "fp16" if args.fp16 else "fp32",
    )
    return values
