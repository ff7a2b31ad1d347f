"""The training arguments of a run as JSON (``training_args.json``), saved with every checkpoint.

``python -m hf_cse.push`` reads this file to describe a folder that has no ``hf_cse_training.json`` (e.g. a
``checkpoint-N`` folder). It never reads the Trainer's ``training_args.bin``: that file is a pickle, and unpickling
a downloaded folder's copy can run any code.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers.trainer_utils import HubStrategy

from ...errors import UsageError, echo
from ...json_types import describe_json_type, json_matches, json_type
from ...run_files import TRAINING_ARGS_FILE

if TYPE_CHECKING:
    from ..training_args import CSETrainingArguments


def training_arguments_record(args: CSETrainingArguments) -> dict[str, Any]:
    """``args`` as ``training_args.json`` holds them: every init field as ``TrainingArguments.to_dict()`` serializes
    it (enums as values) minus the ``*_token`` fields (``hub_token``), plus ``world_size`` and ``mixed_precision``:
    not fields, but the model card reports them. ``save_total_limit`` and ``hub_strategy`` are the values given
    (``checkpoint_limit``, ``checkpoint_hub_strategy``), not the ones the Trainer is handed.

    The model card's summary is computed from this record, at the end of training and by ``python -m hf_cse.push``
    from a checkpoint's file alike.
    """
    values = {key: value for key, value in args.to_dict().items() if not key.endswith("_token")}
    values.update(world_size=args.world_size, mixed_precision=getattr(args, "mixed_precision", None))
    values.update(save_total_limit=args.checkpoint_limit, hub_strategy=HubStrategy(args.checkpoint_hub_strategy).value)
    return values


def write_training_arguments(args: CSETrainingArguments, directory: str | Path) -> Path:
    """Write :func:`training_arguments_record` of ``args`` to ``directory/training_args.json`` (a checkpoint folder)
    and return its path."""
    path = Path(directory) / TRAINING_ARGS_FILE
    path.write_text(json.dumps(training_arguments_record(args), indent=2) + "\n", encoding="utf-8")
    return path


def read_training_arguments(directory: str | Path) -> dict[str, Any]:
    """The record :func:`write_training_arguments` saved in ``directory`` (``{"objective": ..., ...}``).

    A dict, not ``CSETrainingArguments``: rebuilding those would re-run their checks for this machine (a run trained
    in fp16 on a GPU could not be described on a CPU) and recompute ``world_size`` for this process. Its values are
    type-checked against the fields (:func:`check_training_arguments_record`).

    Raises:
        UsageError: the file is not JSON, or a value is not of its field's type; one line naming the file.
    """
    path = Path(directory) / TRAINING_ARGS_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise UsageError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start}).") from None
    except json.JSONDecodeError as err:
        raise UsageError(f"{path} is not valid JSON ({err.msg}, line {err.lineno}, column {err.colno}).") from None
    check_training_arguments_record(record, path)
    return record


EXTRA_FIELDS: dict[str, Any] = {"world_size": int, "mixed_precision": str | None}
"""Keys of ``training_args.json`` that are no ``CSETrainingArguments`` field (:func:`training_arguments_record`)."""


def check_training_arguments_record(record: Any, path: Path) -> None:
    """Refuse a ``training_args.json`` whose values are not of their field's type (a JSON object holding, for each
    ``CSETrainingArguments`` field and each of :data:`EXTRA_FIELDS` it has, a value of that type); keys of no field
    (a newer or older transformers' arguments) are left alone, as readers use ``get``.

    Raises:
        UsageError: one line naming the file, the key, the value and the type it must have.
    """
    from ..training_args import CSETrainingArguments

    if not isinstance(record, dict):
        raise UsageError(f"{path} holds a JSON {json_type(record)}, not an object of training arguments.")
    annotations = {**typing.get_type_hints(CSETrainingArguments), **EXTRA_FIELDS}
    for key, value in record.items():
        if key in annotations and not json_matches(value, annotations[key]):
            raise UsageError(
                f"{path}: {key} is {echo(value)} (a JSON {json_type(value)}); it must be "
                f"{describe_json_type(annotations[key])}."
            )
