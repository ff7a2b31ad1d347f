"""Saving that never loses a run: the :class:`~hf_cse.training.trainer.CSETrainer` methods that write checkpoints
and the final model.

Every checkpoint is written whole into ``OUTPUT/.checkpoint-N.partial/`` and renamed into place; the final model is
staged inside ``output_dir`` and each file moved into place; non-finite weights are never saved; a full disk is one
:class:`~hf_cse.errors.DiskFullError`; the output folder is locked against a second run while training.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, TrainOutput, rotate_checkpoints

from ..atomic_files import publish_checkpoint, publish_files, staging_folder
from ..export.sentence_transformers_files import write_sentence_transformers_files
from ..modeling.modeling_cse import CSEModel
from ..text import SentenceTokenizer
from .divergence import check_finite_parameters
from .output_dir import checkpoint_staging_root, disk_full_as_error, resolve_resume_checkpoint, run_lock
from .run_arguments import write_training_arguments


class StagedSavingMixin(Trainer):
    """Overrides ``train`` (output-folder lock, ``resume_from_checkpoint="true"``), ``save_model`` (no non-finite
    weights), ``_save_checkpoint`` / ``_get_output_dir`` / ``_push_from_checkpoint`` (whole checkpoints renamed into
    place, then pushed) and ``_save`` (staged saves with sentence-transformers files)."""

    _checkpoint_staging_root: Path | None = None
    """Set while a checkpoint is being written: the Trainer's output folder for that save."""

    def train(self, resume_from_checkpoint: str | bool | None = None, trial: Any = None, **kwargs: Any) -> TrainOutput:
        """``Trainer.train`` holding the output folder's lock (see :class:`~hf_cse.folder_lock.FolderLock`).

        ``resume_from_checkpoint``: a checkpoint folder, or ``True``/``"true"`` for the latest *complete*
        ``checkpoint-N`` of ``output_dir`` (incomplete ones are skipped with a warning).
        """
        resume = resolve_resume_checkpoint(resume_from_checkpoint, self.args.output_dir)
        with run_lock(self.args.output_dir, self.args.should_save):
            return super().train(resume_from_checkpoint=resume, trial=trial, **kwargs)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """``Trainer.save_model``, refusing (on every process) to save non-finite weights."""
        what = Path(output_dir).name if output_dir is not None else "the model"
        check_finite_parameters(self.model.named_parameters(), self.state.global_step, what)
        super().save_model(output_dir, _internal_call)

    def _get_output_dir(self, trial: Any) -> str:
        # While a checkpoint is being saved, the Trainer writes it under the staging root (see _save_checkpoint).
        if self._checkpoint_staging_root is not None:
            return str(self._checkpoint_staging_root)
        return super()._get_output_dir(trial)

    def _save_checkpoint(self, model: torch.nn.Module, trial: Any) -> None:
        """The Trainer's checkpoint (model, optimizer, scheduler, scaler, RNG and trainer state), written whole into
        ``OUTPUT/.checkpoint-N.partial/checkpoint-N`` and then renamed to ``OUTPUT/checkpoint-N``; a full disk is
        one :class:`~hf_cse.errors.DiskFullError`."""
        run_dir = Path(self._get_output_dir(trial))
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        staging_root = checkpoint_staging_root(run_dir, name)
        if self.args.should_save:
            shutil.rmtree(staging_root, ignore_errors=True)  # left by a run killed while saving
            staging_root.mkdir(parents=True)
        self.accelerator.wait_for_everyone()
        self._checkpoint_staging_root = staging_root
        try:
            with disk_full_as_error(name, run_dir):
                super()._save_checkpoint(model, trial)
                self.accelerator.wait_for_everyone()  # every process's files (e.g. rng_state_1.pth) are written
                if self.args.should_save:
                    if self.state.best_model_checkpoint == str(staging_root / name):
                        self.state.best_model_checkpoint = str(run_dir / name)
                        self.state.save_to_json(str(staging_root / name / TRAINER_STATE_NAME))
                    publish_checkpoint(staging_root / name, run_dir / name)
        finally:
            self._checkpoint_staging_root = None
            if self.args.should_save:
                shutil.rmtree(staging_root, ignore_errors=True)
        if self.args.push_to_hub:  # from the published folder: the staged one is gone, its upload would fail
            super()._push_from_checkpoint(str(run_dir / name))
        if self.args.should_save:  # the Trainer rotated the staging root; rotate the real folder
            rotate_checkpoints(
                output_dir=str(run_dir),
                save_total_limit=self.args.save_total_limit,
                best_model_checkpoint=self.state.best_model_checkpoint,
                use_mtime=True,
            )

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        # Trainer._save_checkpoint calls this while the checkpoint is still staged; _save_checkpoint pushes it once
        # published.
        if self._checkpoint_staging_root is None:
            super()._push_from_checkpoint(checkpoint_folder)

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        """Save into a staging folder inside ``output_dir``, add sentence-transformers files, then move each file
        into place (see :func:`~hf_cse.atomic_files.publish_files`).

        A checkpoint keeps every weight, to resume from; the model saved outside a checkpoint (``save_model()``, the
        push) is the exported one, without a training-only head (:meth:`CSEModel.inference_state_dict`).
        """
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        model = self.accelerator.unwrap_model(self.model)
        if isinstance(model, CSEModel) and self._checkpoint_staging_root is None:
            state_dict = model.inference_state_dict(state_dict)
        if not self.args.should_save:
            return super()._save(output_dir, state_dict)
        target = Path(output_dir)
        with disk_full_as_error("the model", target), staging_folder(target) as staging:
            super()._save(str(staging), state_dict)  # its training_args.bin has no token (see CSETrainingArguments)
            write_training_arguments(self.args, staging)  # the pickle-free copy that python -m hf_cse.push reads
            if isinstance(model, CSEModel):
                max_seq_length = SentenceTokenizer(self.processing_class, model.pooling).max_seq_length
                write_sentence_transformers_files(staging, model, max_seq_length)
            publish_files(staging, target)
