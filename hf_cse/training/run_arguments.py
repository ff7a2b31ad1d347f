"""The training arguments of a run as JSON (``training_args.json``), saved with every checkpoint.

``python -m hf_cse.push`` reads this file to describe a folder that has no ``hf_cse_training.json`` (e.g. a
``checkpoint-N`` folder). It never reads the Trainer's ``training_args.bin``: that file is a pickle, and unpickling
a downloaded folder's copy can run any code.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

TRAINING_ARGS_FILE = "training_args.json"


def write_training_arguments(args: Any, directory: str | Path) -> Path:
    """Write ``directory/training_args.json`` and return its path.

    Args:
        args: a ``TrainingArguments`` (``CSETrainingArguments`` for hf_cse runs).
        directory: the checkpoint folder.

    The file holds every init field as ``TrainingArguments.to_dict()`` serializes it (enums as values) minus the
    ``*_token`` fields (``hub_token``), plus ``world_size`` and ``mixed_precision``: not fields, but the model card
    reports them.
    """
    values = {key: value for key, value in args.to_dict().items() if not key.endswith("_token")}
    values.update(world_size=args.world_size, mixed_precision=getattr(args, "mixed_precision", None))
    path = Path(directory) / TRAINING_ARGS_FILE
    path.write_text(json.dumps(values, indent=2) + "\n", encoding="utf-8")
    return path


def read_training_arguments(directory: str | Path) -> SimpleNamespace:
    """The arguments saved by :func:`write_training_arguments`, as attributes (``args.objective``, ...).

    A namespace, not ``TrainingArguments``: rebuilding those would re-run their checks for this machine (a run
    trained in fp16 on a GPU could not be described on a CPU).
    """
    path = Path(directory) / TRAINING_ARGS_FILE
    return SimpleNamespace(**json.loads(path.read_text(encoding="utf-8")))
