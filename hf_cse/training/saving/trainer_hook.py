"""The one private ``Trainer`` method hf_cse overrides, ``_save_checkpoint``, and the checks that fail loudly when a
transformers release changes it.

Why a private method: a checkpoint must be written into a staging folder and published by one rename
(:mod:`~hf_cse.training.saving.writer`), so that a kill never leaves half a ``checkpoint-N``. The Trainer's public
hooks come too late or too early for that: ``TrainerCallback.on_save`` runs after ``checkpoint-N`` was written in
place, ``save_model`` writes the model only (not the optimizer, scheduler, scaler, RNG and trainer state). The
Trainer calls ``_save_checkpoint(model, trial)`` whenever it saves, and it writes every file of the checkpoint under
``args.output_dir`` (through the also private ``_get_output_dir``), so :class:`~hf_cse.training.trainer.CSETrainer`
overrides it to call the Trainer's own inside :meth:`~hf_cse.training.saving.writer.RunWriter.save_checkpoint`, with
``args.output_dir`` pointing at the staging folder.

What a transformers release could change, and what then fails (``tests/test_trainer_hook.py`` runs each case):

- the method is renamed or takes other arguments: :func:`check_checkpoint_hook`, when a trainer is built;
- the Trainer saves a checkpoint without calling it: :class:`CheckpointHookCallback`, at that save's ``on_save``;
- it writes the checkpoint somewhere else than under ``args.output_dir``: :func:`check_staged`, before the publish.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Protocol

import transformers
from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer import TRAINER_STATE_NAME

from ...errors import CSEError

CHECKPOINT_HOOK = "_save_checkpoint"
"""The name of the private Trainer method hf_cse overrides."""
CHECKPOINT_HOOK_PARAMETERS = ["self", "model", "trial"]
"""Its parameters, as hf_cse calls it."""


class TrainerHookError(CSEError, RuntimeError):
    """The installed transformers saves checkpoints in a way hf_cse does not know; nothing unstaged was published."""


def _incompatible(what: str) -> TrainerHookError:
    return TrainerHookError(
        f"transformers {transformers.__version__}: {what}. hf_cse stages every checkpoint through "
        f"Trainer.{CHECKPOINT_HOOK}(model, trial) (hf_cse.training.saving.trainer_hook); install the transformers "
        "release setup.cfg names, or an hf_cse release made for this one."
    )


def check_checkpoint_hook() -> None:
    """Raise :class:`TrainerHookError` when ``Trainer`` has no ``_save_checkpoint(self, model, trial)``."""
    hook = getattr(Trainer, CHECKPOINT_HOOK, None)
    if hook is None:
        raise _incompatible(f"Trainer has no method {CHECKPOINT_HOOK}")
    parameters = list(inspect.signature(hook).parameters)
    if parameters != CHECKPOINT_HOOK_PARAMETERS:
        raise _incompatible(f"Trainer.{CHECKPOINT_HOOK} takes ({', '.join(parameters)})")


def check_staged(staged: Path, target: Path) -> None:
    """Raise :class:`TrainerHookError` when the Trainer's write left no trainer state in ``staged`` (the staging
    folder of ``target``, ``checkpoint-N``): it wrote the checkpoint somewhere else, unstaged."""
    if not (staged / TRAINER_STATE_NAME).is_file():
        raise _incompatible(
            f"Trainer.{CHECKPOINT_HOOK} wrote {target.name} outside the staging folder {staged.parent}, not under "
            "args.output_dir"
        )


class CheckpointWriter(Protocol):
    """What :class:`CheckpointHookCallback` reads of the trainer's writer
    (:class:`~hf_cse.training.saving.writer.RunWriter`, which calls :func:`check_staged` of this module)."""

    last_checkpoint: Path | None
    """The ``checkpoint-N`` folder the writer saved last; ``None`` before its first."""


class CheckpointHookCallback(TrainerCallback):
    """Fails the save of a checkpoint that did not go through the writer (``on_save``, run after every save).

    Args:
        writer: the trainer's :class:`~hf_cse.training.saving.writer.RunWriter`.
    """

    def __init__(self, writer: CheckpointWriter) -> None:
        self.writer = writer

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: object
    ) -> TrainerControl:
        saved = self.writer.last_checkpoint
        if saved is None or saved.name != f"checkpoint-{state.global_step}":
            raise _incompatible(
                f"the Trainer saved checkpoint-{state.global_step} without calling Trainer.{CHECKPOINT_HOOK}, so "
                "without staging it"
            )
        return control
