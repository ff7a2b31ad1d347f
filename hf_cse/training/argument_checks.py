"""The numbers and paths a run is given, checked when the arguments are made: before the corpus, the model or any
file is read, a value out of range is one line naming it and what it may be.

Every numeric field of :class:`~hf_cse.training.training_args.CSETrainingArguments` (the Trainer's included) and of
``run_unsup.py``'s ``ModelArguments`` and ``DataArguments`` has a :class:`NumberRange` here: no NaN or infinity
anywhere, and the bounds each setting has a meaning within (``gradient_accumulation_steps`` 0 divides by zero,
``max_grad_norm`` NaN turns clipping off without a word, ``learning_rate`` infinity trains to NaN). Every range has
an upper bound, said in the error: a value with a few digits too many (``--pad_to_multiple_of 1099511627776`` made
an 8 TB tensor in the check against the model's positions) is refused in one line when the arguments are made,
before anything is sized from it. The bounds are far above any value a run uses (:data:`TOKEN_LIMIT`,
:data:`SENTENCE_LIMIT`, :data:`COUNT_LIMIT`, ...), not tuned limits. ``tests/test_argument_checks.py`` enumerates
the fields: one without a range here, or a range without an upper bound, fails it.

The numeric flags of the ``python -m hf_cse.*`` commands take the same ranges through :class:`NumberFlag`, their
parsers' ``type``: a value out of range is the parser's one-line error, exit status 2, while the command line is
parsed, before any model loads. ``tests/test_argument_checks.py`` walks every flag of every command parser, so a
numeric flag typed plain ``int`` or ``float`` fails it.

The paths: ``output_dir`` when the arguments are made (:func:`check_output_dir`); the inputs that a run reads only
once its model has loaded, those the settings of the input providers it builds name (the complementary model, the
paraphrase TSV), by ``run_unsup.py`` before anything loads (:func:`check_input_paths`). The corpus, the base model
and the STS folder are checked as they are read, before the model loads.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError, echo, shorten
from ..inputs import InputSettings, run_input_providers, run_input_settings, setting_names
from ..objectives import build_objective, build_weighted_auxiliary_losses
from ..objectives.base import MAX_TEMPERATURE
from ..registry import INPUT_PROVIDERS
from ..sources import file_kind

SEED_LIMIT = 2**32 - 1
"""numpy's ``random.seed`` (which ``set_seed`` calls) takes seeds in ``[0, 2**32 - 1]``."""
TOKEN_LIMIT = 2**20
"""Tokens in one sentence (``max_seq_length``, ``pad_to_multiple_of``, ``inference_max_seq_length``): 1,048,576,
above the context of every model hf_cse trains (BERT's 512 to Qwen3's 131,072). The check of a padded length against
the model's positions builds a row of that many token ids: 8 MiB at this bound."""
SENTENCE_LIMIT = 2**24
"""Sentences held in memory at once (a device's batch, a gradient-cache chunk, a step's accumulated micro-batches,
the shuffle buffer of a stream): 16,777,216, far above the largest contrastive batches in use (tens of thousands)."""
COUNT_LIMIT = 2**40
"""Steps, epochs, intervals, checkpoints, corpus lines and seconds: about 1.1e12, more than any run counts (a million
steps a day for three thousand years)."""
PROCESS_LIMIT = 1024
"""Processes of one machine (data-loading workers, a launcher's local rank), and batches each worker keeps ready:
more than a machine has cores."""
WIDTH_LIMIT = 2**16
"""A LoRA rank and alpha: 65,536, above any hidden size (a weight update's rank is at most its layer's width)."""


@dataclass(frozen=True)
class NumberRange:
    """The values a numeric setting takes: a finite number (an integer with ``integer``) between ``low`` and
    ``high`` (each bound inclusive unless ``*_open``; ``None``: unbounded), or one of ``special`` (a value outside
    the range with a meaning of its own, e.g. ``{None: "unset"}``, ``{-1: "unset"}``)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    special: Mapping[Any, str] = field(default_factory=dict)
    note: str = ""
    """Said after the range, e.g. what 0 means."""

    def accepts(self, value: Any) -> bool:
        if any(value is key or (value == key and type(value) is type(key)) for key in self.special):
            return True
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def describe(self) -> str:
        """``an integer >= 1``, ``a finite number in [0, 1)``, ``-1 (unset) or an integer >= 1``, ..."""
        kind = "an integer" if self.integer else "a finite number"
        if self.low is not None and self.high is not None:
            if self.low == self.high:
                bounds = _number(self.low)
                kind = ""
            else:
                bounds = (
                    f"in {'(' if self.low_open else '['}{_number(self.low)}, {_number(self.high)}"
                    f"{')' if self.high_open else ']'}"
                )
        elif self.low is not None:
            bounds = f"{'>' if self.low_open else '>='} {_number(self.low)}"
        elif self.high is not None:
            bounds = f"{'<' if self.high_open else '<='} {_number(self.high)}"
        else:
            bounds = ""
        text = " ".join(part for part in (kind, bounds) if part)
        specials = [
            ("unset" if key is None else _number(key)) + (f" ({meaning})" if meaning else "")
            for key, meaning in self.special.items()
        ]
        described = " or ".join([*specials, text])
        return f"{described} ({self.note})" if self.note else described


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def check_number(name: str, value: Any, valid: NumberRange) -> None:
    """Nothing when ``valid`` accepts ``value``.

    Raises:
        UsageError: one line naming ``name``, the value and what it may be.
    """
    if not valid.accepts(value):
        raise UsageError(f"{name} {echo(value)} is not valid: {name} takes {valid.describe()}.")


def check_numbers(arguments: Any, ranges: Mapping[str, NumberRange]) -> None:
    """:func:`check_number` of each field of ``arguments`` (a dataclass instance) that ``ranges`` names."""
    for name, valid in ranges.items():
        check_number(name, getattr(arguments, name), valid)


class NumberFlag:
    """The ``type`` of a numeric command-line flag (``parser.add_argument("--kfold", type=NumberFlag(...))``): the
    text read as an ``int`` (``valid.integer``) or a ``float``, then checked against ``valid`` (which must have an
    upper bound, said in the error). Text that is no number is argparse's own ``invalid int value: 'x'``; a number
    out of range, ``argument --kfold: 1 is not valid: it takes an integer in [2, 16777216].``"""

    def __init__(self, valid: NumberRange) -> None:
        if valid.high is None:
            raise ValueError(f"a flag's range has an upper bound; got {valid}.")
        self.valid = valid
        # argparse names the type in "invalid int value"; the reference's type column reads it too
        self.__name__ = "int" if valid.integer else "float"

    def __call__(self, text: str) -> int | float:
        value = int(text) if self.valid.integer else float(text)
        if not self.valid.accepts(value):
            given = shorten(text.strip())
            raise argparse.ArgumentTypeError(f"{given} is not valid: it takes {self.valid.describe()}.")
        return value

    def __repr__(self) -> str:
        return f"NumberFlag({self.valid!r})"


UNSET: dict[Any, str] = {None: ""}
PROBABILITY = NumberRange(low=0, high=1, high_open=True)
SEED = NumberRange(low=0, high=SEED_LIMIT, integer=True)
SENTENCES = NumberRange(low=1, high=SENTENCE_LIMIT, integer=True)

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
"""``run_unsup.py``'s ``ModelArguments``."""

DATA_NUMBERS: dict[str, NumberRange] = {
    "max_train_samples": NumberRange(low=1, high=COUNT_LIMIT, integer=True, special={None: "every sentence"}),
    "shuffle_buffer_size": NumberRange(low=0, high=SENTENCE_LIMIT, integer=True, note="0 or 1: corpus order"),
}
"""``run_unsup.py``'s ``DataArguments``."""


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
    (``CSETrainingArguments``; ``input_kwargs`` or a deprecated flag) give them. The providers are those the trainer
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
        values.check_inputs(setting_names(INPUT_PROVIDERS[name], arguments))
    return settings
