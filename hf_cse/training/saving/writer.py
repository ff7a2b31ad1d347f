"""The one save path of a training run: :class:`RunWriter` writes every checkpoint and the final model.

It owns, in this order for a checkpoint:

1. **staging**: the Trainer writes ``checkpoint-N`` (model, optimizer, scheduler, scaler, RNG and trainer state) into
   ``OUTPUT/.checkpoint-N.partial/``, every process its own files;
2. **extra files**, in the order they were added (:meth:`RunWriter.add_checkpoint_file`): the stream position of a
   streaming run, the run's settings (the resume contract);
3. the **manifest** (:mod:`~hf_cse.training.saving.manifest`), written last;
4. **publishing**: one rename to ``OUTPUT/checkpoint-N`` (:mod:`~hf_cse.training.saving.checkpoints`), then the Hub
   push of the published folder and the rotation of old checkpoints;
5. **cleanup**: the staging folder is deleted whatever happened.

The final model goes through :func:`~hf_cse.atomic_files.staged_publish` (staged, marked complete, then moved into
``OUTPUT`` file by file). :meth:`RunWriter.recover`, run when a training run starts, finishes or undoes whatever a
killed save left. Every failure of the disk inside a save is one line naming the folder
(:class:`~hf_cse.errors.DiskFullError`, :class:`~hf_cse.errors.SaveFailedError`), and non-finite weights are never
saved.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers.trainer import TRAINER_STATE_NAME

from ...atomic_files import recover_staged_publishes, staged_publish, write_json_atomic
from ...errors import CSEError, DiskFullError, SaveFailedError
from ..divergence import check_finite_parameters
from .checkpoints import checkpoint_staging_root, publish_checkpoint, recover_checkpoints, rotate_checkpoints
from .manifest import write_manifest

if TYPE_CHECKING:
    from transformers import Trainer

logger = logging.getLogger(__name__)

CheckpointFile = Callable[[Path], None]
"""Writes one extra file into a staged ``checkpoint-N`` folder (the folder is its argument)."""

# torch.save reports a full disk as a RuntimeError from its zip writer, not as an OSError with ENOSPC.
_DISK_FULL_MESSAGES = ("unexpected pos", "PytorchStreamWriter failed", "No space left on device", "Disk quota")
SUBFOLDERS_WITH_SAVES = ("adapter",)
"""Folders inside ``OUTPUT`` that a run saves a model into (LoRA's adapter), and so may hold a killed save."""


def is_disk_full(err: BaseException) -> bool:
    """Whether ``err`` (or an exception it was raised from) says the disk or quota is full."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(seen, RuntimeError) and any(text in str(seen) for text in _DISK_FULL_MESSAGES):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@contextlib.contextmanager
def save_errors_as_one_line(what: str, folder: Path) -> Iterator[None]:
    """Re-raise a failure of the disk inside the block as one line naming ``what`` and ``folder``: a full disk as
    :class:`DiskFullError` (with the free space), any other ``OSError`` (an I/O error, a permission) as
    :class:`SaveFailedError`. hf_cse's own errors pass through."""
    try:
        yield
    except CSEError:  # already one line
        raise
    except (OSError, RuntimeError) as err:
        if is_disk_full(err):
            try:
                free = f"{shutil.disk_usage(folder).free / 2**20:.0f} MiB free"
            except OSError:
                free = "free space unknown"
            raise DiskFullError(
                f"The disk is full: saving {what} in {folder} failed ({free}). Nothing was half-written: free some "
                "space or point --output_dir at a larger disk, then resume with --resume_from_checkpoint true."
            ) from err
        if not isinstance(err, OSError):
            raise
        raise SaveFailedError(
            f"Saving {what} in {folder} failed: {err}. Nothing was half-written and earlier checkpoints are intact; "
            "fix the disk, then resume with --resume_from_checkpoint true."
        ) from err


def recover_run_folder(root: Path) -> None:
    """Finish or undo what a killed save left in the run folder ``root`` (hold its lock): staged publishes of the
    final model are rolled forward or deleted, checkpoint renames finished or undone; each action is a warning."""
    actions = recover_checkpoints(root) + recover_staged_publishes(root)
    for name in SUBFOLDERS_WITH_SAVES:
        actions += recover_staged_publishes(root / name)
    for action in actions:
        logger.warning("%s: a killed save was put right: %s.", root, action)


class RunWriter:
    """Writes a trainer's checkpoints and final model (see the module docstring); one per trainer.

    Args:
        trainer: the trainer whose saves this writes; its ``_save_checkpoint`` and ``_save`` call
            :meth:`save_checkpoint` and :meth:`save_final`.
    """

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self.checkpoint_files: list[CheckpointFile] = []
        self.staging_root: Path | None = None
        """While a checkpoint is written: the folder the Trainer writes it under (its ``_get_output_dir``)."""
        self.borrowed_arguments: dict[str, Any] = {}
        """Training arguments that ``train()`` changed while it runs, with the values the user gave: a checkpoint's
        ``training_args.bin`` records the user's."""

    def add_checkpoint_file(self, write: CheckpointFile) -> None:
        """Write one more file into every checkpoint, after the Trainer's files and before the manifest."""
        self.checkpoint_files.append(write)

    def recover(self) -> None:
        """:func:`recover_run_folder` of the output folder (main process, under the run's lock)."""
        recover_run_folder(Path(self.trainer.args.output_dir))

    def check_finite(self, what: str) -> None:
        """Refuse, on every process, to save ``what`` when a weight is NaN or infinite."""
        check_finite_parameters(self.trainer.model.named_parameters(), self.trainer.state.global_step, what)

    def save_checkpoint(self, write_trainer_files: Callable[[], None], run_dir: Path) -> None:
        """Write ``checkpoint-N`` whole under ``run_dir`` (steps 1 to 5 of the module docstring).

        Args:
            write_trainer_files: ``Trainer._save_checkpoint`` bound to its arguments; it writes into
                :attr:`staging_root` (the trainer's ``_get_output_dir`` returns it meanwhile).
            run_dir: the folder the checkpoint belongs in.
        """
        trainer, args = self.trainer, self.trainer.args
        name = f"checkpoint-{trainer.state.global_step}"
        staging_root = checkpoint_staging_root(run_dir, name)
        staged, target = staging_root / name, run_dir / name
        with save_errors_as_one_line(name, run_dir):
            if args.should_save:
                shutil.rmtree(staging_root, ignore_errors=True)  # left by a run killed while saving
                staging_root.mkdir(parents=True)
            trainer.accelerator.wait_for_everyone()
            self.staging_root = staging_root
            try:
                with self._arguments_as_given():
                    write_trainer_files()
                trainer.accelerator.wait_for_everyone()  # every process's files (e.g. rng_state_1.pth) are written
                if args.should_save:
                    self._finish_staged_checkpoint(staged, target)
                    publish_checkpoint(staged, target)
            finally:
                self.staging_root = None
                if args.should_save:
                    shutil.rmtree(staging_root, ignore_errors=True)
            if args.push_to_hub:  # from the published folder
                trainer._push_from_checkpoint(str(target))
            if args.should_save:
                rotate_checkpoints(run_dir, args.save_total_limit, trainer.state.best_model_checkpoint)
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
        write_manifest(staged)

    @contextlib.contextmanager
    def _arguments_as_given(self) -> Iterator[None]:
        args = self.trainer.args
        in_training = {name: getattr(args, name) for name in self.borrowed_arguments}
        for name, value in self.borrowed_arguments.items():
            setattr(args, name, value)
        try:
            yield
        finally:
            for name, value in in_training.items():
                setattr(args, name, value)

    def save_final(self, target: Path, write_files: Callable[[Path], None]) -> None:
        """Publish a model saved outside a checkpoint (``save_model()``): ``write_files(staging)`` writes it into a
        staging folder inside ``target``, which :func:`~hf_cse.atomic_files.staged_publish` moves into place."""
        with save_errors_as_one_line("the model", target), staged_publish(target) as staging:
            write_files(staging)

    def write_json(self, path: Path, data: Any) -> None:
        """Write a JSON file of the run (metrics, trainer state) whole or not at all, with one-line disk errors."""
        with save_errors_as_one_line(path.name, path.parent):
            write_json_atomic(path, data)
