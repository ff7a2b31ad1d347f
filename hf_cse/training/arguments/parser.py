"""The argument parser of ``run_unsup.py``: an ``HfArgumentParser`` whose ``--help`` leads with hf_cse's flags.

``TrainingArguments`` has over a hundred fields. Parsed as one dataclass, ``CSETrainingArguments`` listed hf_cse's
own fields (objective, temperature, ...) after all of them, and the usage line named every flag. Here ``--help``
shows a short usage line, then the run's own options (``--config``, ``--import_module``, ``--help_all``), hf_cse's
groups (each argument dataclass's ``_argument_group_name``; ``CSETrainingArguments``' own fields in
:data:`TRAINING_GROUP`), and last the Trainer's most used flags (:data:`COMMON_TRAINER_FLAGS`); ``--help_all``
lists every Trainer flag. Parsing is ``HfArgumentParser``'s, whatever the help shows, but for the error of a value
that does not convert or is no choice: it repeats the value cut to a readable length (:func:`hf_cse.errors.echo`).

That is all it adds to ``HfArgumentParser`` (and :mod:`.config_file` what ``--config`` adds), because the library
lacks just that: its help lists a ``TrainingArguments`` subclass's fields in one group, the Trainer's hundred-odd
first, and argparse repeats a pasted value whole in its error (docs/development.md lists both;
``tests/test_config_file.py`` tests this parser's).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import typing
from collections.abc import Iterable
from typing import Any

from transformers import HfArgumentParser, TrainingArguments

from ...errors import ECHO_LIMIT, OneLineErrorParser, echo, shorten

#: ``TrainingArguments`` flags that ``--help`` lists; ``--help_all`` lists them all.
COMMON_TRAINER_FLAGS = (
    "output_dir",
    "per_device_train_batch_size",
    "per_device_eval_batch_size",
    "gradient_accumulation_steps",
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "weight_decay",
    "num_train_epochs",
    "max_steps",
    "bf16",
    "fp16",
    "logging_steps",
    "eval_strategy",
    "eval_steps",
    "save_strategy",
    "save_steps",
    "save_total_limit",
    "load_best_model_at_end",
    "metric_for_best_model",
    "resume_from_checkpoint",
    "seed",
    "use_cpu",
    "dataloader_drop_last",
    "disable_tqdm",
    "report_to",
    "push_to_hub",
    "hub_model_id",
    "hub_private_repo",
)

TRAINING_GROUP = "hf_cse: objective and training"
TRAINER_GROUP = "Trainer (transformers.TrainingArguments)"


class CSEArgumentParser(OneLineErrorParser, HfArgumentParser):
    """``HfArgumentParser`` with hf_cse's flags first in ``--help``, whose errors are one line
    (:class:`~hf_cse.errors.OneLineErrorParser`: a :class:`~hf_cse.errors.UsageError`, no usage block).

    Args:
        dataclass_types: the argument dataclasses. Each one's ``_argument_group_name`` names its help group (as in
            ``HfArgumentParser``); a ``TrainingArguments`` subclass is split in two groups: its own fields under
            :data:`TRAINING_GROUP`, then the inherited ones under :data:`TRAINER_GROUP`.
        show_all_trainer_flags: list every inherited ``TrainingArguments`` flag in ``--help``; otherwise only
            :data:`COMMON_TRAINER_FLAGS` (the others still parse).
        **kwargs: passed to ``HfArgumentParser`` (``prog``, ``usage``, ``epilog``, ...).
    """

    def __init__(
        self, dataclass_types: Iterable[type], *, show_all_trainer_flags: bool = False, **kwargs: Any
    ) -> None:
        self.show_all_trainer_flags = show_all_trainer_flags
        super().__init__(dataclass_types, **kwargs)

    # argparse repeats a value it cannot convert (or that is no choice) whole in its error: a pasted file would fill
    # the screen. These two private methods (unchanged since Python 3.2) raise those errors; the value is cut here.
    # tests/test_private_api.py fails, naming them, on the Python that renames or re-signs them.
    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError as err:
            raise argparse.ArgumentError(action, _cut_value(err.message, arg_string)) from None

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as err:
            raise argparse.ArgumentError(action, _cut_value(err.message, value)) from None

    def parse_args_into_dataclasses(self, args: list[str] | None = None, **kwargs: Any) -> tuple[Any, ...]:
        """``HfArgumentParser.parse_args_into_dataclasses``, but an argument no dataclass takes is argparse's error
        (``unrecognized arguments: --lerning_rate 3e-5``), not "Some specified arguments are not used by the
        HfArgumentParser: [...]" (a ValueError that names a class the user never wrote)."""
        if kwargs.get("return_remaining_strings"):
            return super().parse_args_into_dataclasses(args, **kwargs)
        *outputs, remaining = super().parse_args_into_dataclasses(args, **{**kwargs, "return_remaining_strings": True})
        if remaining:
            # Each flag once, as --help spells it (HfArgumentParser also accepts --max-steps for --max_steps).
            flags = [option for action in self._actions for option in action.option_strings if "-" not in option[2:]]
            near = [match for arg in remaining for match in difflib.get_close_matches(arg.split("=")[0], flags, n=2)]
            hint = f"; did you mean {' or '.join(dict.fromkeys(near))}?" if near else ""
            self.error(f"unrecognized arguments: {' '.join(remaining)}{hint}")
        return tuple(outputs)

    # HfArgumentParser adds each dataclass's flags in this method (private, but unchanged since transformers 4.0);
    # overriding it is what lets a TrainingArguments subclass be split into two help groups. It and
    # _parse_dataclass_field are checked by tests/test_private_api.py, which fails on the release that changes them.
    def _add_dataclass_arguments(self, dtype: type) -> None:
        if not (isinstance(dtype, type) and issubclass(dtype, TrainingArguments)):
            super()._add_dataclass_arguments(dtype)
            return
        inherited = {field.name for field in dataclasses.fields(TrainingArguments)}
        own_group = self.add_argument_group(TRAINING_GROUP)
        trainer_group = self.add_argument_group(
            TRAINER_GROUP,
            None
            if self.show_all_trainer_flags
            else "The most used ones; `--help_all` lists all of them, and every one of them is accepted.",
        )
        type_hints = typing.get_type_hints(dtype)  # resolved types, as HfArgumentParser._add_dataclass_arguments does
        for field in dataclasses.fields(dtype):
            if not field.init:
                continue
            field.type = type_hints[field.name]
            group = trainer_group if field.name in inherited else own_group
            first_action = len(self._actions)
            self._parse_dataclass_field(group, field)
            if group is trainer_group and not self.show_all_trainer_flags and field.name not in COMMON_TRAINER_FLAGS:
                for action in self._actions[first_action:]:  # the flag, and its --no_ twin for a boolean
                    action.help = argparse.SUPPRESS


def _cut_value(message: str, value: Any) -> str:
    """``message`` with a long string ``value`` in it, quoted (``invalid int value: '...'``) or not (a boolean's
    ``got ...``), cut to a readable length."""
    if not isinstance(value, str) or len(value) <= ECHO_LIMIT:
        return message
    return message.replace(repr(value), echo(value)).replace(value, shorten(value))
