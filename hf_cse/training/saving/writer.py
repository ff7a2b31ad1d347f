"""The one save path of a training run: :class:`RunWriter` commits every checkpoint and writes the final model.

A checkpoint, in this order:

1. the **Trainer writes** ``OUTPUT/checkpoint-N`` where it normally does (model, optimizer, scheduler, scaler, RNG and
   trainer state; every process its own files), through public methods only: the model files come from the trainer's
   ``save_model`` (:meth:`RunWriter.save_model`), which first sets aside a ``checkpoint-N`` already there (a run that
   resumed from an earlier step saves step N again) as ``.checkpoint-N.old-*``;
2. then, in :meth:`RunWriter.on_save`, the **extra files**, in the order they were added
   (:meth:`RunWriter.add_checkpoint_file`): the stream position of a streaming run, the run's settings (the resume
   contract), the input providers' states;
3. the **manifest** (:mod:`~hf_cse.training.saving.manifest`), written last: the commit marker. A ``checkpoint-N``
   without one is a save that did not finish: never resumed from, never counted by the rotation, and deleted (its
   set-aside predecessor put back) at once when the save fails with an error, else by the next run's recovery
   (:func:`~hf_cse.training.saving.checkpoints.is_unfinished`);
4. the **rotation** of old checkpoints, hf_cse's own, after the manifest: the Trainer's runs inside its save, before
   step 3, and with ``save_total_limit`` 1 would delete the last verified checkpoint while the new one is unfinished,
   so the Trainer is given no limit (:class:`~hf_cse.training.training_args.CSETrainingArguments` keeps the user's as
   ``checkpoint_limit``). The Hub push of the committed folder follows, from ``on_save``
   (:class:`~hf_cse.training.saving.hub_push.HubPusher`).

A second write of the same step never damages the verified one: it was set aside in step 1 and is deleted only once
the new manifest is written (a kill in between: the next run puts it back).

The model files of a save (:meth:`RunWriter.save_model`, which the trainer's ``save_model`` hands over to) are the
Trainer's (``save_pretrained`` of the model and the tokenizer, ``training_args.bin``) plus hf_cse's
(``training_args.json``, the sentence-transformers files): :mod:`~hf_cse.training.saving.model_files`. The final model
goes through :func:`~hf_cse.atomic_files.staged_publish` (staged, listed in ``OUTPUT``'s manifest, marked complete,
then moved into ``OUTPUT`` file by file); the run's JSON files go through
:func:`~hf_cse.atomic_files.write_json_atomic`, which lists them in that manifest too, so that a push uploads what the
run wrote and nothing else. :meth:`RunWriter.recover`, run when a training run starts, finishes or undoes whatever a
killed save left. Every failure of the disk inside a save is one line naming the folder
(:class:`~hf_cse.errors.DiskFullError`, :class:`~hf_cse.errors.SaveFailedError`), whatever library raised it
(:func:`~hf_cse.write_failures.write_failure_errno`: an ``OSError``, safetensors' ``SafetensorError``, tokenizers'
``Exception``, torch's ``RuntimeError``), and non-finite weights are never saved.

**Durability.** Before step 3 every file and folder of the checkpoint is flushed to disk (``fsync``), the manifest is
flushed with its folder, and ``OUTPUT`` after it, before any older checkpoint is rotated away; the final model and the
JSON files are flushed the same way before their publish (:mod:`hf_cse.atomic_files`). So a power cut (or a kernel
crash) loses at most:

- the steps trained since the last checkpoint whose manifest reached the disk, as SIGKILL would;
- a save in progress: a checkpoint whose manifest did not reach the disk is unfinished, deleted by the next run; a
  final model whose publish marker did not reach the disk is the previous one (or none), one whose marker did is
  finished by the next run;
- a rotation in progress: a checkpoint being deleted may be deleted only in part, under a hidden name
  (``.checkpoint-N.deleting-*``), and the next run deletes the rest; the newer checkpoint is on disk by then.

It never leaves a ``checkpoint-N`` with a manifest or a final model with a file shorter than its manifest says,
provided the filesystem honours ``fsync`` (local filesystems do; some network filesystems and disks with a volatile
write cache and barriers off do not). A checkpoint that is damaged anyway fails verification and is skipped on resume.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import transformers
from transformers import TrainerCallback, TrainerControl, TrainerState
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ...atomic_files import fsync_path, fsync_tree, recover_staged_publishes, staged_publish, write_json_atomic
from ...errors import CSEError
from ...export.sentence_transformers_files import no_modules_json_line
from ...links import refuse_link
from ...write_failures import is_disk_full, write_errors_as_one_line
from ..step.divergence import check_finite_parameters
from .checkpoints import (
    checkpoints_newest_first,
    delete_checkpoint,
    discard_set_aside,
    recover_checkpoints,
    rotate_checkpoints,
    set_aside,
)
from .manifest import is_committed, write_manifest

if TYPE_CHECKING:
    from transformers import Trainer, TrainingArguments

logger = logging.getLogger(__name__)

CheckpointFile = Callable[[Path], None]
"""Writes one extra file into a ``checkpoint-N`` folder before its manifest (the folder is its argument)."""
ModelFilesWriter = Callable[..., None]
"""Writes a model into a folder: :func:`~hf_cse.training.saving.model_files.write_model_files`, whose arguments it
takes."""

SUBFOLDERS_WITH_SAVES = ("adapter",)
"""Folders inside ``OUTPUT`` that a run saves a model into (LoRA's adapter), and so may hold a killed save."""
RESUME = "resume with --resume_from_checkpoint true"
"""What a failed save tells the user to do once the disk is fixed, when the run folder holds a checkpoint."""
NO_CHECKPOINT = "run the command again (no checkpoint was saved to resume from)"
"""... and when it holds none (``--save_strategy no``, or a failure before the first checkpoint)."""
__all__ = ["RESUME", "RunWriter", "TrainerSaveError", "is_disk_full", "recover_run_folder", "save_errors_as_one_line"]


class TrainerSaveError(CSEError, RuntimeError):
    """The installed transformers saves checkpoints in a way hf_cse does not know: without the trainer's
    ``save_model``, or elsewhere than ``OUTPUT/checkpoint-N``. Nothing was committed (no manifest written)."""


def save_errors_as_one_line(what: str, folder: Path) -> contextlib.AbstractContextManager[None]:
    """Re-raise a failed write inside the block as one line naming ``what`` and ``folder`` and saying what to do
    (resume when ``folder`` holds a checkpoint, else run again):
    :func:`~hf_cse.write_failures.write_errors_as_one_line`, where what each library's error means is decided
    (:class:`~hf_cse.errors.DiskFullError` with the free space, :class:`~hf_cse.errors.SaveFailedError`). hf_cse's
    own errors pass through."""
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
    final model are rolled forward or deleted, unfinished checkpoints deleted and the ones they were replacing put
    back; each action is a warning."""
    actions = recover_checkpoints(root) + recover_staged_publishes(root)
    for name in SUBFOLDERS_WITH_SAVES:
        if not (root / name).is_symlink():  # hf_cse's own subfolder, linked elsewhere: not entered (its save refuses)
            actions += recover_staged_publishes(root / name)
    for action in actions:
        logger.warning("%s: a killed save was put right: %s.", root, action)


def _unknown_save(what: str) -> TrainerSaveError:
    return TrainerSaveError(
        f"transformers {transformers.__version__}: {what}, so hf_cse cannot commit it "
        "(hf_cse.training.saving.writer); install the transformers release setup.cfg names, or an hf_cse release "
        "made for this one."
    )


class RunWriter(TrainerCallback):
    """Writes a trainer's checkpoints and final model (see the module docstring); one per trainer, added to its
    callbacks before anything that reads a committed checkpoint (the Hub push).

    Args:
        trainer: the trainer whose saves this writes; its ``save_model`` hands over to :meth:`save_model`.
        write_model_files: writes the model's files into the folder :meth:`save_model` gives it.
    """

    def __init__(self, trainer: Trainer, write_model_files: ModelFilesWriter) -> None:
        self.trainer = trainer
        self.write_model_files = write_model_files
        self.checkpoint_files: list[CheckpointFile] = []
        self.unfinished: Path | None = None
        """The ``checkpoint-N`` folder the Trainer is writing, from its model's save until its manifest is written."""
        self._pooler_export_told = False
        """Whether a save has said (once per run, when it must) that the model's pooler gets no ``modules.json``."""

    def add_checkpoint_file(self, write: CheckpointFile) -> None:
        """Write one more file into every checkpoint, after the Trainer's files and before the manifest."""
        self.checkpoint_files.append(write)

    def recover(self) -> None:
        """:func:`recover_run_folder` of the output folder (main process, under the run's lock)."""
        recover_run_folder(Path(self.trainer.args.output_dir))

    # --- checkpoints ---------------------------------------------------------------------------------------------

    def _begin_checkpoint(self, folder: Path) -> None:
        """The Trainer starts writing ``folder`` (``OUTPUT/checkpoint-N``): one already there is set aside first, on
        the main process, before any process writes into the name."""
        self.unfinished = folder
        if self.trainer.args.should_save:
            with save_errors_as_one_line(folder.name, folder.parent):
                set_aside(folder)
        self.trainer.accelerator.wait_for_everyone()

    @contextlib.contextmanager
    def unfinished_checkpoint_removed(self) -> Iterator[None]:
        """Around ``Trainer.train``: an error while the Trainer writes a checkpoint is one line naming it
        (:func:`save_errors_as_one_line`), and the unfinished ``checkpoint-N`` is deleted at once, the one it was
        replacing put back (:func:`~hf_cse.training.saving.checkpoints.recover_checkpoints`; what cannot be is left to
        the next run's). Ctrl-C and a kill stop at once: the next run's recovery does it."""
        try:
            yield
        except Exception:
            folder, self.unfinished = self.unfinished, None
            if folder is None:
                raise
            try:
                with save_errors_as_one_line(folder.name, folder.parent):
                    raise
            finally:
                if self.trainer.args.should_save:
                    with contextlib.suppress(OSError):
                        if folder.is_dir() and not is_committed(folder):
                            delete_checkpoint(folder)
                        recover_checkpoints(folder.parent)

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        """Commit the checkpoint the Trainer just wrote: steps 2 to 4 of the module docstring."""
        folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if self.unfinished != folder:
            raise _unknown_save(f"the Trainer saved {folder.name} without the trainer's save_model")
        run_dir = folder.parent
        with save_errors_as_one_line(folder.name, run_dir):
            self.trainer.accelerator.wait_for_everyone()  # every process's files (e.g. rng_state_1.pth) are written
            if args.should_save:
                if not (folder / TRAINER_STATE_NAME).is_file():
                    raise _unknown_save(f"the Trainer wrote the trainer state of {folder.name} elsewhere")
                for write in self.checkpoint_files:
                    write(folder)
                fsync_tree(folder)  # every file on disk before the manifest that vouches for it
                write_manifest(folder)
                fsync_path(run_dir)  # the committed folder is on disk before anything older is deleted
            self.unfinished = None
            if args.should_save:
                discard_set_aside(folder)
                rotate_checkpoints(run_dir, args.checkpoint_limit, state.best_model_checkpoint, folder)
        self.trainer.accelerator.wait_for_everyone()  # no process goes on before the checkpoint is committed
        return control

    # --- models ----------------------------------------------------------------------------------------------------

    def save_model(self, output_dir: str | None = None, internal_call: bool = False) -> None:
        """Save the model into ``output_dir`` (default ``args.output_dir``): into ``checkpoint-N`` when the Trainer
        writes one (``internal_call``, into ``OUTPUT/checkpoint-{global_step}``), else written into a staging folder
        inside it that :func:`~hf_cse.atomic_files.staged_publish` lists in its manifest and moves into place.
        Refuses (on every process) non-finite weights.

        A checkpoint keeps every weight, to resume from; the model saved outside a checkpoint (``save_model()``, the
        push) is the exported one (:func:`~hf_cse.training.saving.model_files.write_model_files`).
        """
        trainer = self.trainer
        run_dir = Path(trainer.args.output_dir)
        folder = Path(output_dir) if output_dir is not None else run_dir
        checkpoint = internal_call and folder == run_dir / f"{PREFIX_CHECKPOINT_DIR}-{trainer.state.global_step}"
        what = folder.name if output_dir is not None else "the model"
        check_finite_parameters(trainer.model.named_parameters(), trainer.state.global_step, what)  # every process
        if checkpoint:
            self._begin_checkpoint(folder)
        state_dict = gathered_state_dict(trainer)  # on every process: a sharded model's weights are gathered
        if not trainer.args.should_save:
            return
        model = trainer.accelerator.unwrap_model(trainer.model, keep_torch_compile=False)
        # Once per run: every checkpoint and the final save lack the same files.
        if not self._pooler_export_told and (line := no_modules_json_line(model.pooling)) is not None:
            self._pooler_export_told = True
            logger.warning(line)
        write = functools.partial(
            self.write_model_files,
            model=model,
            tokenizer=trainer.processing_class,
            arguments=trainer.args,
            state_dict=state_dict,
            exported=not checkpoint,
        )
        if checkpoint:
            write(folder)
            return
        with save_errors_as_one_line("the model", folder), staged_publish(folder, "the model") as staging:
            write(staging)

    def save_metrics(self, split: str, metrics: dict[str, float], combined: bool = True) -> None:
        """Write ``SPLIT_results.json`` into the output folder and, with ``combined``, merge ``metrics`` into its
        ``all_results.json``, as ``Trainer.save_metrics`` does (main process only; call on any)."""
        if not self.trainer.is_world_process_zero():
            return
        root = Path(self.trainer.args.output_dir)
        self.write_json(root / f"{split}_results.json", metrics)
        if combined:
            path = root / "all_results.json"
            refuse_link(path)  # its file is neither read nor replaced
            merged = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
            self.write_json(path, {**merged, **metrics})

    def save_state(self) -> None:
        """Write the trainer state (``trainer_state.json``) into the output folder, as ``Trainer.save_state`` does
        (main process only; call on any)."""
        if self.trainer.is_world_process_zero():
            state = dataclasses.asdict(self.trainer.state)
            self.write_json(Path(self.trainer.args.output_dir) / TRAINER_STATE_NAME, state)

    def write_json(self, path: Path, data: Any) -> None:
        """Write a JSON file of the run (metrics, trainer state) whole or not at all, listed in the folder's manifest,
        with one-line disk errors."""
        with save_errors_as_one_line(path.name, path.parent):
            write_json_atomic(path, data)
