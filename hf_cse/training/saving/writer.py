"""The one save path of a training run: :class:`RunWriter` writes every checkpoint and the final model.

It owns, in this order for a checkpoint:

1. **staging**: the Trainer writes ``checkpoint-N`` (model, optimizer, scheduler, scaler, RNG and trainer state) into
   ``OUTPUT/.checkpoint-N.partial/``, every process its own files: while it writes, its ``args.output_dir`` is that
   staging folder (the one private Trainer method this relies on: :mod:`~hf_cse.training.saving.trainer_hook`);
2. **extra files**, in the order they were added (:meth:`RunWriter.add_checkpoint_file`): the stream position of a
   streaming run, the run's settings (the resume contract);
3. the **manifest** (:mod:`~hf_cse.training.saving.manifest`), written last;
4. **publishing**: one rename to ``OUTPUT/checkpoint-N`` (:mod:`~hf_cse.training.saving.checkpoints`), then the
   rotation of old checkpoints (the Hub push of the published folder follows, from ``on_save``:
   :class:`~hf_cse.training.hub_push.HubPusher`);
5. **cleanup**: the staging folder is deleted whatever happened.

The model files of a save (:meth:`RunWriter.save_model`, which the trainer's ``save_model`` hands over to) are the
Trainer's (``save_pretrained`` of the model and the tokenizer, ``training_args.bin``) plus hf_cse's
(``training_args.json``, the sentence-transformers files): :mod:`~hf_cse.training.model_files`. The training
arguments saved anywhere are those the user gave (:meth:`RunWriter.arguments_as_given`), not those a save or
``train()`` changes while it runs. The final model goes through :func:`~hf_cse.atomic_files.staged_publish` (staged,
listed in ``OUTPUT``'s manifest, marked complete, then moved into ``OUTPUT`` file by file); the run's JSON files go
through :func:`~hf_cse.atomic_files.write_json_atomic`, which lists them in that manifest too, so that a push uploads
what the run wrote and nothing else. :meth:`RunWriter.recover`, run when a training run starts, finishes or undoes
whatever a killed save left. Every failure of the disk inside a save is one line naming the folder
(:class:`~hf_cse.errors.DiskFullError`, :class:`~hf_cse.errors.SaveFailedError`), whatever library raised it
(:func:`~hf_cse.atomic_files.write_failure_errno`: an ``OSError``, safetensors' ``SafetensorError``, tokenizers'
``Exception``, torch's ``RuntimeError``), and non-finite weights are never saved.

**Durability.** Before step 3 every file and folder of the staged checkpoint is flushed to disk (``fsync``), the
manifest is flushed with its folder, and after step 4's rename ``OUTPUT`` is flushed, before any older checkpoint is
rotated away; the final model and the JSON files are flushed the same way before their publish
(:mod:`hf_cse.atomic_files`). So a power cut (or a kernel crash) loses at most:

- the steps trained since the last checkpoint that was published (its rename flushed), as SIGKILL would;
- a save in progress: a checkpoint whose rename did not reach the disk is absent, its staging folder deleted by the
  next run; a final model whose publish marker did not reach the disk is the previous one (or none), one whose marker
  did is finished by the next run;
- a rotation in progress: a checkpoint being deleted may be deleted only in part, under a hidden name
  (``.checkpoint-N.deleting-*``), and the next run deletes the rest; the newer checkpoint is on disk by then.

It never leaves a published ``checkpoint-N`` or final model with a file shorter than its manifest says, provided the
filesystem honours ``fsync`` (local filesystems do; some network filesystems and disks with a volatile write cache
and barriers off do not). A checkpoint that is damaged anyway fails verification and is skipped on resume.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import logging
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformers.trainer import TRAINER_STATE_NAME

from ...atomic_files import (
    fsync_tree,
    is_disk_full,
    recover_staged_publishes,
    staged_publish,
    write_errors_as_one_line,
    write_json_atomic,
)
from ...export.sentence_transformers_files import no_modules_json_line
from ...links import refuse_link, remove_tree
from ..divergence import check_finite_parameters
from .checkpoints import (
    checkpoint_staging_root,
    checkpoints_newest_first,
    publish_checkpoint,
    recover_checkpoints,
    rotate_checkpoints,
)
from .manifest import write_manifest
from .trainer_hook import check_staged

if TYPE_CHECKING:
    from transformers import Trainer, TrainingArguments

logger = logging.getLogger(__name__)

CheckpointFile = Callable[[Path], None]
"""Writes one extra file into a staged ``checkpoint-N`` folder (the folder is its argument)."""
ModelFilesWriter = Callable[..., None]
"""Writes a model into a folder: :func:`~hf_cse.training.model_files.write_model_files`, whose arguments it takes."""

SUBFOLDERS_WITH_SAVES = ("adapter",)
"""Folders inside ``OUTPUT`` that a run saves a model into (LoRA's adapter), and so may hold a killed save."""
RESUME = "resume with --resume_from_checkpoint true"
"""What a failed save tells the user to do once the disk is fixed, when the run folder holds a checkpoint."""
NO_CHECKPOINT = "run the command again (no checkpoint was saved to resume from)"
"""... and when it holds none (``--save_strategy no``, or a failure before the first checkpoint)."""
__all__ = ["RESUME", "RunWriter", "is_disk_full", "recover_run_folder", "save_errors_as_one_line"]


def save_errors_as_one_line(what: str, folder: Path) -> contextlib.AbstractContextManager[None]:
    """Re-raise a failed write inside the block as one line naming ``what`` and ``folder`` and saying what to do
    (resume when ``folder`` holds a checkpoint, else run again): :func:`~hf_cse.atomic_files.write_errors_as_one_line`,
    where what each library's error means is decided (:class:`~hf_cse.errors.DiskFullError` with the free space,
    :class:`~hf_cse.errors.SaveFailedError`). hf_cse's own errors pass through."""
    return write_errors_as_one_line(what, folder, then=RESUME if checkpoints_newest_first(folder) else NO_CHECKPOINT)


def gathered_state_dict(trainer: Trainer) -> dict[str, torch.Tensor] | None:
    """The full weights of a model sharded across processes (FSDP, DeepSpeed), gathered by accelerate as the Trainer's
    ``save_model`` gathers them; call on every process. ``None`` for a model each process holds whole: its
    ``save_pretrained`` reads its own weights."""
    if trainer.is_deepspeed_enabled:
        return trainer.accelerator.get_state_dict(trainer.model_wrapped)
    if trainer.is_fsdp_enabled:
        return trainer.accelerator.get_state_dict(trainer.model)
    return None


def recover_run_folder(root: Path) -> None:
    """Finish or undo what a killed save left in the run folder ``root`` (hold its lock): staged publishes of the
    final model are rolled forward or deleted, checkpoint renames finished or undone; each action is a warning."""
    actions = recover_checkpoints(root) + recover_staged_publishes(root)
    for name in SUBFOLDERS_WITH_SAVES:
        if not (root / name).is_symlink():  # hf_cse's own subfolder, linked elsewhere: not entered (its save refuses)
            actions += recover_staged_publishes(root / name)
    for action in actions:
        logger.warning("%s: a killed save was put right: %s.", root, action)


class RunWriter:
    """Writes a trainer's checkpoints and final model (see the module docstring); one per trainer.

    Args:
        trainer: the trainer whose saves this writes; its ``_save_checkpoint`` and ``save_model`` hand over to
            :meth:`save_checkpoint` and :meth:`save_model`.
        write_model_files: writes the model's files into the folder :meth:`save_model` gives it.
    """

    def __init__(self, trainer: Trainer, write_model_files: ModelFilesWriter) -> None:
        self.trainer = trainer
        self.write_model_files = write_model_files
        self.checkpoint_files: list[CheckpointFile] = []
        self.staging_root: Path | None = None
        """While a checkpoint is written: the folder the Trainer writes it under (``args.output_dir`` meanwhile)."""
        self.last_checkpoint: Path | None = None
        """The ``checkpoint-N`` folder this writer saved last (set on every process; published by the main one)."""
        self._given_arguments: list[dict[str, Any]] = []
        """The values the user gave of the training arguments changed meanwhile (:meth:`changed_arguments`)."""
        self._pooler_export_told = False
        """Whether the first save has said (when it must) that the model's pooler gets no ``modules.json``."""

    def add_checkpoint_file(self, write: CheckpointFile) -> None:
        """Write one more file into every checkpoint, after the Trainer's files and before the manifest."""
        self.checkpoint_files.append(write)

    def recover(self) -> None:
        """:func:`recover_run_folder` of the output folder (main process, under the run's lock)."""
        recover_run_folder(Path(self.trainer.args.output_dir))

    def check_finite(self, what: str) -> None:
        """Refuse, on every process, to save ``what`` when a weight is NaN or infinite."""
        check_finite_parameters(self.trainer.model.named_parameters(), self.trainer.state.global_step, what)

    @contextlib.contextmanager
    def changed_arguments(self, **values: Any) -> Iterator[None]:
        """Set training arguments to ``values`` inside the block (``train()`` turning the Trainer's data skip off for a
        stream, a checkpoint save pointing ``output_dir`` at its staging folder); the saved copies of the arguments
        keep the values the user gave (:meth:`arguments_as_given`)."""
        args = self.trainer.args
        given = {name: getattr(args, name) for name in values}
        self._given_arguments.append(given)
        for name, value in values.items():
            setattr(args, name, value)
        try:
            yield
        finally:
            for name, value in given.items():
                setattr(args, name, value)
            self._given_arguments.remove(given)

    def arguments_as_given(self) -> TrainingArguments:
        """A copy of the trainer's training arguments with the values the user gave where :meth:`changed_arguments`
        changed them: what ``training_args.bin`` and ``training_args.json`` record."""
        given = copy.copy(self.trainer.args)
        for values in reversed(self._given_arguments):  # the outermost block holds the user's value
            for name, value in values.items():
                setattr(given, name, value)
        return given

    def save_checkpoint(self, write_trainer_files: Callable[[], None]) -> None:
        """Write ``checkpoint-N`` whole under ``args.output_dir`` (steps 1 to 5 of the module docstring).

        Args:
            write_trainer_files: ``Trainer._save_checkpoint`` bound to its arguments; it writes under
                ``args.output_dir``, which is :attr:`staging_root` meanwhile, with ``push_to_hub`` off (the push
                follows the publish).

        Raises:
            TrainerHookError: the Trainer wrote the checkpoint somewhere else than the staging folder
                (:func:`~hf_cse.training.saving.trainer_hook.check_staged`).
        """
        trainer, args = self.trainer, self.trainer.args
        run_dir = Path(args.output_dir)
        name = f"checkpoint-{trainer.state.global_step}"
        staging_root = checkpoint_staging_root(run_dir, name)
        staged, target = staging_root / name, run_dir / name
        with save_errors_as_one_line(name, run_dir):
            if args.should_save:
                remove_tree(staging_root)  # left by a run killed while saving (a link there: only the link)
                staging_root.mkdir(parents=True)
            trainer.accelerator.wait_for_everyone()
            self.staging_root = staging_root
            try:
                # Inner: a library's error is told apart while the disk is as it left it (before the cleanup below
                # frees the space torch's cause-less error is judged by).
                with (
                    save_errors_as_one_line(name, run_dir),
                    self.changed_arguments(output_dir=str(staging_root), push_to_hub=False),
                ):
                    write_trainer_files()
                trainer.accelerator.wait_for_everyone()  # every process's files (e.g. rng_state_1.pth) are written
                if args.should_save:
                    check_staged(staged, target)
                    with save_errors_as_one_line(name, run_dir):
                        self._finish_staged_checkpoint(staged, target)
                        publish_checkpoint(staged, target)
            finally:
                self.staging_root = None
                if args.should_save:
                    shutil.rmtree(staging_root, ignore_errors=True)
            self.last_checkpoint = target
            if args.should_save:
                limit = self.arguments_as_given().save_total_limit  # train() hides it from the Trainer's own deletion
                rotate_checkpoints(run_dir, limit, trainer.state.best_model_checkpoint)
        trainer.accelerator.wait_for_everyone()  # no process resumes work on a checkpoint still being published

    def _finish_staged_checkpoint(self, staged: Path, target: Path) -> None:
        """The Trainer named the staged folder as the best checkpoint when it is: name the published one instead;
        then the extra files and the manifest."""
        state = self.trainer.state
        if state.best_model_checkpoint == str(staged):
            state.best_model_checkpoint = str(target)
            state.save_to_json(str(staged / TRAINER_STATE_NAME))
        for write in self.checkpoint_files:
            write(staged)
        fsync_tree(staged)  # every file on disk before the manifest that vouches for it
        write_manifest(staged)

    def save_model(self, output_dir: str | None = None) -> None:
        """Save the model into ``output_dir`` (default ``args.output_dir``): into the staged checkpoint while one is
        written, else published whole by :meth:`save_final`. Refuses (on every process) non-finite weights.

        A checkpoint keeps every weight, to resume from; the model saved outside a checkpoint (``save_model()``, the
        push) is the exported one (:func:`~hf_cse.training.model_files.write_model_files`).
        """
        trainer = self.trainer
        folder = Path(output_dir if output_dir is not None else trainer.args.output_dir)
        self.check_finite(folder.name if output_dir is not None else "the model")
        state_dict = gathered_state_dict(trainer)  # on every process: a sharded model's weights are gathered
        if not trainer.args.should_save:
            return
        model = trainer.accelerator.unwrap_model(trainer.model, keep_torch_compile=False)
        if not self._pooler_export_told:  # once per run: every checkpoint and the final save lack the same files
            self._pooler_export_told = True
            line = no_modules_json_line(model.pooling)
            if line is not None:
                logger.warning(line)
        write = functools.partial(
            self.write_model_files,
            model=model,
            tokenizer=trainer.processing_class,
            arguments=self.arguments_as_given(),
            state_dict=state_dict,
            exported=self.staging_root is None,
        )
        if self.staging_root is not None:
            write(folder)
        else:
            self.save_final(folder, write)

    def save_final(self, target: Path, write_files: Callable[[Path], None]) -> None:
        """Publish a model saved outside a checkpoint (``save_model()``): ``write_files(staging)`` writes it into a
        staging folder inside ``target``, which :func:`~hf_cse.atomic_files.staged_publish` lists in ``target``'s
        manifest and moves into place."""
        with save_errors_as_one_line("the model", target), staged_publish(target, "the model") as staging:
            write_files(staging)

    def save_metrics(self, split: str, metrics: dict[str, float], combined: bool = True) -> None:
        """Write ``SPLIT_results.json`` into the output folder and, with ``combined``, merge ``metrics`` into its
        ``all_results.json``, as ``Trainer.save_metrics`` does (main process only)."""
        root = Path(self.trainer.args.output_dir)
        self.write_json(root / f"{split}_results.json", metrics)
        if combined:
            path = root / "all_results.json"
            refuse_link(path)  # its file is neither read nor replaced
            merged = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
            self.write_json(path, {**merged, **metrics})

    def write_json(self, path: Path, data: Any) -> None:
        """Write a JSON file of the run (metrics, trainer state) whole or not at all, listed in the folder's manifest,
        with one-line disk errors."""
        with save_errors_as_one_line(path.name, path.parent):
            write_json_atomic(path, data)
