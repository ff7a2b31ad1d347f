"""The numbers and paths a run is given, checked when the arguments are made: before the corpus, the model or any file
is read, a value out of range is one line naming it and what it may be.

Every numeric field of :class:`~hf_cse.training.training_args.CSETrainingArguments` (the Trainer's included) and of
``run_unsup.py``'s :mod:`~hf_cse.training.arguments.model_data` has a :class:`~hf_cse.number_ranges.NumberRange` here:
no NaN or infinity anywhere, and the bounds each setting has a meaning within (``gradient_accumulation_steps`` 0
divides by zero, ``max_grad_norm`` NaN turns clipping off without a word, ``learning_rate`` infinity trains to NaN).
Every range has an upper bound, said in the error: a value with a few digits too many (``--pad_to_multiple_of
1099511627776`` made an 8 TB tensor in the check against the model's positions) is refused in one line when the
arguments are made, before anything is sized from it. The bounds are far above any value a run uses
(:mod:`hf_cse.number_ranges`' limits), not tuned limits. ``tests/test_argument_checks.py`` enumerates the fields:
one without a range here, or a range without an upper bound, fails it.

The numeric flags of the ``python -m hf_cse.*`` commands take the same ranges through
:class:`~hf_cse.number_ranges.NumberFlag`, their parsers' ``type``: a value out of range is the parser's one-line
error, exit status 2, while the command line is parsed, before any model loads. ``tests/test_argument_checks.py``
walks every flag of every command parser, so a numeric flag typed plain ``int`` or ``float`` fails it.

The paths: ``output_dir`` when the arguments are made (:func:`check_output_dir`); the inputs that a run reads only
once its model has loaded, those the settings of the input providers it builds name (the complementary model, the
paraphrase TSV), by ``run_unsup.py`` before anything loads (:func:`check_input_paths`). The corpus, the base model
and the STS folder are checked as they are read, before the model loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import UsageError, echo
from ...inputs import InputSettings, run_input_providers, run_input_settings, setting_names
from ...number_ranges import (
    COUNT_LIMIT,
    PROBABILITY,
    PROCESS_LIMIT,
    SEED,
    SEED_LIMIT,
    SENTENCE_LIMIT,
    SENTENCES,
    TOKEN_LIMIT,
    UNSET,
    WIDTH_LIMIT,
    NumberRange,
)
from ...objectives import build_objective, build_weighted_auxiliary_losses
from ...objectives.base import MAX_TEMPERATURE
from ...registry import INPUT_PROVIDERS
from ...sources import file_kind


def check_numbers(arguments: Any, ranges: Mapping[str, NumberRange]) -> None:
    """Nothing when each field of ``arguments`` (a dataclass instance) that ``ranges`` names is in its range.

    Raises:
        UsageError: one line naming the first field out of range, its value and what it may be.
    """
    for name, valid in ranges.items():
        if not valid.accepts(value := getattr(arguments, name)):
            raise UsageError(f"{name} {echo(value)} is not valid: {name} takes {valid.describe()}.")


TRAINING_NUMBERS: dict[str, NumberRange] = {
    # hf_cse's own
    "temperature": NumberRange(low=0, low_open=True, high=MAX_TEMPERATURE),  # and check_temperature's range after
    "gradient_cache_chunk_size": NumberRange(low=1, high=SENTENCE_LIMIT, integer=True, special=UNSET),
    "num_hard_negatives": NumberRange(low=0, high=64, integer=True, special=UNSET),
    "max_seq_length": NumberRange(low=2, high=TOKEN_LIMIT, integer=True),
    "pad_to_multiple_of": NumberRange(low=1, high=TOKEN_LIMIT, integer=True, special=UNSET),
    # The Trainer's: the run's length (max_steps <= 0 and num_train_epochs <= 0 have check_training_length's words)
    "max_steps": NumberRange(low=1, high=COUNT_LIMIT, integer=True, special={-1: "unset: num_train_epochs sets it"}),
    "num_train_epochs": NumberRange(high=COUNT_LIMIT, note="above 0 unless max_steps is set, which overrides it"),
    "per_device_train_batch_size": SENTENCES,
    "per_device_eval_batch_size": SENTENCES,
    "gradient_accumulation_steps": SENTENCES,  # the Trainer fetches a step's micro-batches at once
    # the optimizer and its schedule: the highest learning rates in use are a few units (SGD). The bound is far
    # above (a run pushed to diverge on purpose, as the divergence guard's tests do, stays possible), not a tuned limit
    "learning_rate": NumberRange(low=0, low_open=True, high=1e6),
    "warmup_steps": NumberRange(low=0, high=COUNT_LIMIT, note="below 1: a share of the run's steps"),
    "weight_decay": NumberRange(low=0, high=10),
    "adam_beta1": PROBABILITY,
    "adam_beta2": PROBABILITY,
    "adam_epsilon": NumberRange(low=0, low_open=True, high=1),
    # A threshold far above the gradient norms of training (units to hundreds): above it clipping never acts.
    "max_grad_norm": NumberRange(low=0, high=1e6, note="0 turns gradient clipping off"),
    "label_smoothing_factor": NumberRange(low=0, high=0, note="hf_cse's contrastive objectives have no labels"),
    "neftune_noise_alpha": NumberRange(low=0, low_open=True, high=100, special=UNSET),  # the paper's: 5 to 15
    # logging, evaluation and saving
    "logging_steps": NumberRange(low=0, low_open=True, high=COUNT_LIMIT, note="below 1: a share of the run's steps"),
    "eval_steps": NumberRange(
        low=0, low_open=True, high=COUNT_LIMIT, special=UNSET, note="below 1: a share of the run's steps"
    ),
    "eval_delay": NumberRange(low=0, high=COUNT_LIMIT),
    "eval_accumulation_steps": NumberRange(low=1, high=COUNT_LIMIT, integer=True, special=UNSET),
    "save_steps": NumberRange(low=0, low_open=True, high=COUNT_LIMIT, note="below 1: a share of the run's steps"),
    "save_total_limit": NumberRange(low=1, high=COUNT_LIMIT, integer=True, special={None: "keep every checkpoint"}),
    "torch_empty_cache_steps": NumberRange(low=1, high=COUNT_LIMIT, integer=True, special=UNSET),
    # randomness, data loading, processes
    "seed": SEED,
    "data_seed": NumberRange(low=0, high=SEED_LIMIT, integer=True, special={None: "the seed"}),
    "dataloader_num_workers": NumberRange(low=0, high=PROCESS_LIMIT, integer=True),
    "dataloader_prefetch_factor": NumberRange(low=1, high=PROCESS_LIMIT, integer=True, special=UNSET),
    # MiB: 1 TiB, above any device's memory
    "ddp_bucket_cap_mb": NumberRange(low=1, high=2**20, integer=True, special=UNSET),
    "ddp_timeout": NumberRange(low=1, high=COUNT_LIMIT, integer=True, note="seconds"),
    "local_rank": NumberRange(low=-1, high=PROCESS_LIMIT, integer=True, note="set by the launcher"),
}
"""The range of every numeric field of ``CSETrainingArguments``, checked first in its ``__post_init__``."""

MODEL_NUMBERS: dict[str, NumberRange] = {
    "inference_max_seq_length": NumberRange(
        low=2,
        high=TOKEN_LIMIT,
        integer=True,
        special={None: "the base's sentence-transformers length, else the tokenizer's limit"},
    ),
    "dropout": NumberRange(low=0, high=1, high_open=True, special={None: "the checkpoint's"}),
    "lora_r": NumberRange(low=1, high=WIDTH_LIMIT, integer=True, special={None: "train every weight"}),
    "lora_alpha": NumberRange(low=1, high=WIDTH_LIMIT, integer=True),
    "lora_dropout": PROBABILITY,
}
"""``run_unsup.py``'s :class:`~hf_cse.training.arguments.model_data.ModelArguments`."""

DATA_NUMBERS: dict[str, NumberRange] = {
    "max_train_samples": NumberRange(low=1, high=COUNT_LIMIT, integer=True, special={None: "every sentence"}),
    "shuffle_buffer_size": NumberRange(low=0, high=SENTENCE_LIMIT, integer=True, note="0 or 1: corpus order"),
}
"""``run_unsup.py``'s :class:`~hf_cse.training.arguments.model_data.DataArguments`."""


def check_training_length(max_steps: int, num_train_epochs: float) -> None:
    """Refuse a length that trains no step, or that the Trainer would read as another: ``max_steps`` below -1 (the
    Trainer took any negative value for "unset" and trained ``num_train_epochs`` epochs) or 0, and
    ``num_train_epochs`` of 0 or less without ``max_steps``.

    Raises:
        UsageError: naming the value and the valid ones.
    """
    if max_steps == 0 or max_steps < -1:
        raise UsageError(
            f"max_steps {max_steps} is no number of steps: give a positive number of optimizer steps, or -1 (the "
            "default: unset) to train num_train_epochs epochs."
        )
    if max_steps == -1 and num_train_epochs <= 0:
        raise UsageError(
            f"num_train_epochs {num_train_epochs:g} trains no step: give a number of epochs above 0 (a fraction "
            "trains part of one), or a positive max_steps, which overrides it."
        )


# --- paths --------------------------------------------------------------------------------------------------------


def check_output_dir(output_dir: str | Path) -> None:
    """Refuse an ``output_dir`` that cannot become a folder: an existing file, FIFO, device or broken link, or one
    inside such a path. (An absent folder is created when the run starts; an unwritable one is refused then.)

    Raises:
        UsageError: naming the path and what it is.
    """
    path = Path(output_dir)
    for candidate in (path, *path.parents):
        kind = file_kind(candidate)
        if kind == "absent":
            continue
        if kind != "a folder":
            where = "" if candidate == path else f" is inside {echo(str(candidate))}, which"
            raise UsageError(
                f"output_dir {echo(str(output_dir))}{where} is {kind}, not a folder: give a folder for the run (it is "
                "created when absent)."
            )
        return


def check_input_paths(args: Any) -> dict[str, InputSettings]:
    """The models and files that the settings of the input providers a run builds name (DCLR's complementary model,
    OssCSE's paraphrase TSV), which the run reads only once its model has loaded, checked before anything loads: each
    provider checks its own (:meth:`~hf_cse.inputs.InputSettings.check_inputs`), as the run's arguments ``args``
    (``CSETrainingArguments``' ``input_kwargs``) give them. The providers are those the trainer
    builds (:func:`~hf_cse.inputs.run_input_providers`, from the objective and auxiliary terms ``args`` name); a
    provider the run does not build is not checked, and a setting given for one is refused.

    Returns:
        ``{provider: settings}`` of every provider the run builds, checked, holding what a check read (the paraphrase
        TSV's table): for ``CSETrainer(input_settings=...)``, so that the run reads each file once.

    Raises:
        UsageError: one line: a setting for a provider the run does not build (naming it and those it builds), or
            one that names a model or file that cannot be read (naming the setting as given); a bad objective or
            auxiliary term setting.
    """
    # Matryoshka's wrapper requires what the objective requires: the plain objective decides the providers.
    objective = build_objective(args.objective, **args.objective_hparams())
    terms = build_weighted_auxiliary_losses(objective.default_auxiliary_losses, args.auxiliary_losses)
    arguments = vars(args)
    settings = run_input_settings(run_input_providers(objective, terms, arguments), arguments)
    for name, values in settings.items():
        values.check_inputs(setting_names(INPUT_PROVIDERS[name]))
    return settings
