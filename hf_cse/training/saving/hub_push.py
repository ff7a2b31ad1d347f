"""A training run's pushes to the Hub: :class:`HubPusher`, which the trainer holds.

Pushes upload only the files hf_cse writes (:func:`~hf_cse.export.upload_list.build_upload_list`, given to
``upload_folder`` as ``allow_patterns``), where the Trainer uploads the whole output folder: never a symbolic link's
target, a stray secret, nor the pickled training arguments. One-line errors when the Hub cannot be reached or refuses
a request (before any training, for ``push_to_hub=True``), the local card kept as it was unless an upload succeeds,
and checkpoint pushes whose failures are reported: the Trainer uploads each checkpoint in the background and never
looks at the outcome.

With ``push_to_hub``, a checkpoint is pushed once it is committed (``on_save``, after the run's writer wrote its
manifest): its model files become the output folder's current model (one staged publish), which is uploaded, and with
``hub_strategy`` ``checkpoint`` / ``all_checkpoints`` the checkpoint folder too. The Trainer's own checkpoint push,
which copies files into the output folder one by one, never runs: the Trainer is handed ``hub_strategy="end"``
(:class:`~hf_cse.training.training_args.CSETrainingArguments`).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, HubStrategy, SaveStrategy
from transformers.utils import PushInProgress

from ...atomic_files import staged_publish
from ...export.hub import card_restored_on_failure, check_repo_id, describe_hub_error, hub_connection, hub_errors
from ...export.upload_list import RUN_RECORD_FILES, UploadList, build_upload_list

if TYPE_CHECKING:
    from transformers import Trainer

logger = logging.getLogger(__name__)


def hub_api() -> Any:
    """The ``HfApi`` the Trainer's own Hub calls go through: transformers' shared one (transformers >= 5; the one
    ``Trainer.init_hf_repo`` creates the repository with), else huggingface_hub's module-level one (looked up at call
    time, so that tests can replace it)."""
    import transformers.trainer

    shared = getattr(transformers.trainer, "hf_api", None)
    if shared is not None:
        return shared()
    from huggingface_hub.hf_api import api

    return api


@dataclass
class CheckpointPushes:
    """What became of the background uploads of the checkpoints (each checkpoint is one or two uploads: the model
    files, and with ``hub_strategy`` ``checkpoint``/``all_checkpoints`` the checkpoint folder itself).

    Attributes:
        started: uploads started.
        succeeded: uploads that finished without an error.
        failures: ``(what, one-line error)`` of each upload that failed.
    """

    started: int = 0
    succeeded: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)


class HubPusher(TrainerCallback):
    """The Hub side of a training run: the repository's creation, the pushes of published checkpoints (``on_save``)
    and of the final model (:meth:`push_model`, which ``CSETrainer.push_to_hub`` hands over to).

    Args:
        trainer: the trainer whose run this pushes.
    """

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self.checkpoint_pushes: CheckpointPushes | None = None
        """The checkpoint uploads of the current ``train()`` (``None`` before it starts)."""
        self.in_progress: PushInProgress | None = None
        """The uploads of the last checkpoint pushed, while they may run."""

    @contextlib.contextmanager
    def reporting_checkpoint_pushes(self) -> Iterator[None]:
        """Around ``Trainer.train``: count the checkpoint uploads, then say in one line what became of them, also when
        training stopped with an error."""
        self.checkpoint_pushes = CheckpointPushes()
        try:
            yield
        finally:
            self._report_checkpoint_pushes()

    @contextlib.contextmanager
    def checked_repository(self, args: TrainingArguments) -> Iterator[None]:
        """Around the creation of the repository (``Trainer.init_hf_repo``: at the end of the trainer's construction
        with ``push_to_hub``, else from :meth:`push_model`): ``hub_model_id`` of the trainer's arguments ``args``
        (given: the trainer has none yet while it is built) checked by the Hub's rule first; an unreachable Hub
        raises a one-line ``HubUnreachableError`` (before any training)."""
        if args.hub_model_id is not None:
            check_repo_id(args.hub_model_id)
        with hub_connection(args.hub_model_id or Path(args.output_dir).absolute().name):
            yield

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if args.push_to_hub:
            self.push_checkpoint(Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        return control

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        self.wait()
        return control

    def wait(self) -> None:
        """Wait for the last checkpoint's uploads, if they still run."""
        if self.in_progress is not None and not self.in_progress.is_done():
            logger.info("Waiting for the current checkpoint push to finish.")
            self.in_progress.wait_until_done()

    def push_checkpoint(self, checkpoint_folder: Path) -> None:
        """Push the published ``checkpoint_folder`` (:meth:`_start_checkpoint_uploads`), in the background: a failed
        upload (no network, a refused token) is logged as a warning naming the repository and the error, once;
        training goes on and the checkpoint stays on disk. An error in starting the uploads is reported the same way
        instead of stopping training."""
        pushes = self.checkpoint_pushes = self.checkpoint_pushes or CheckpointPushes()
        name = checkpoint_folder.name
        try:
            jobs = self._start_checkpoint_uploads(checkpoint_folder)
        except hub_errors() as err:
            pushes.started += 1
            self._push_failed(pushes, name, err)
            return
        for label, job in zip([f"the model files of {name}", f"{name} (training state)"], jobs, strict=False):
            pushes.started += 1
            job.add_done_callback(lambda done, label=label: self._push_finished(pushes, label, done))

    def _start_checkpoint_uploads(self, checkpoint_folder: Path) -> list[Future]:
        """Start the uploads of a checkpoint and return them: its model, published into ``output_dir``, in an upload
        of ``output_dir``; with ``hub_strategy`` ``checkpoint`` / ``all_checkpoints``, the checkpoint folder too (as
        ``last-checkpoint`` / its own name). Each upload sends its :func:`~hf_cse.export.upload_list.build_upload_list`
        only (the checkpoint's with its training state). None on other processes than the main one, with
        ``hub_strategy`` ``end``, or while the previous checkpoint's uploads run (unless ``hub_always_push``)."""
        trainer, args = self.trainer, self.trainer.args
        strategy = args.checkpoint_hub_strategy  # the value given: the Trainer's is "end" (CSETrainingArguments)
        busy = not args.hub_always_push and self.in_progress is not None and not self.in_progress.is_done()
        if not trainer.is_world_process_zero() or strategy == HubStrategy.END or busy:
            return []
        trainer.callback_handler.on_push_begin(args, trainer.state, trainer.control)
        self._publish_checkpoint_model(checkpoint_folder)
        steps = args.save_strategy == SaveStrategy.STEPS
        progress = f"step {trainer.state.global_step}" if steps else f"epoch {int(trainer.state.epoch)}"
        commit_message = f"Training in progress, {progress}"
        common = {"token": args.hub_token, "revision": args.hub_revision, "run_as_future": True}
        jobs = [self._upload(build_upload_list(args.output_dir), commit_message=commit_message, **common)]
        if strategy in (HubStrategy.CHECKPOINT, HubStrategy.ALL_CHECKPOINTS):
            # checkpoint: the latest one, to resume from, always in the same folder; all_checkpoints: each in its own.
            folder = "last-checkpoint" if strategy == HubStrategy.CHECKPOINT else checkpoint_folder.name
            checkpoint = build_upload_list(checkpoint_folder, checkpoint=True)
            jobs.append(
                self._upload(checkpoint, path_in_repo=folder, commit_message=f"{commit_message}, checkpoint", **common)
            )
        if self.in_progress is None or self.in_progress.is_done():
            self.in_progress = PushInProgress(jobs)
        else:
            self.in_progress.jobs.extend(jobs)
        return jobs

    def _publish_checkpoint_model(self, checkpoint_folder: Path) -> None:
        """Copy the model of ``checkpoint_folder`` into ``output_dir``: the files its upload list sends from a run
        folder (model, tokenizer, sentence-transformers files), not its record (trainer state). Copied rather than
        saved again (no new synchronization of the model), and published together (staged, then moved into place):
        a kill mid-copy never leaves half a model in ``output_dir``."""
        model_files = [name for name in build_upload_list(checkpoint_folder).files if name not in RUN_RECORD_FILES]
        with staged_publish(Path(self.trainer.args.output_dir)) as staging:
            for name in model_files:
                (staging / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(checkpoint_folder / name, staging / name)

    def _upload(self, upload: UploadList, **kwargs: Any) -> Any:
        """``upload_folder`` of ``upload.folder`` to the run's repository, sending ``upload.files`` only; what it
        leaves out is named in one warning. ``kwargs``: the other ``upload_folder`` arguments."""
        upload.warn_left_out()
        return hub_api().upload_folder(
            repo_id=self.trainer.hub_model_id,
            folder_path=str(upload.folder),
            allow_patterns=upload.allow_patterns,  # exact paths: the list and nothing else
            **kwargs,
        )

    def _push_finished(self, pushes: CheckpointPushes, what: str, job: Future) -> None:
        """Count a finished upload; warn once if it failed (runs on the upload's thread)."""
        if job.cancelled():
            return
        error = job.exception()
        if error is None:
            pushes.succeeded += 1
        else:
            self._push_failed(pushes, what, error)

    def _push_failed(self, pushes: CheckpointPushes, what: str, error: BaseException) -> None:
        message = describe_hub_error(error, self.trainer.hub_model_id)
        pushes.failures.append((what, message))
        logger.warning(
            "Uploading %s failed, training goes on and the checkpoint is kept in %s: %s",
            what,
            self.trainer.args.output_dir,
            message,
        )

    def _report_checkpoint_pushes(self) -> None:
        """One line: how many checkpoint uploads to the repository succeeded, and what to do about failed ones."""
        pushes, args = self.checkpoint_pushes, self.trainer.args
        if pushes is None or pushes.started == 0:
            return
        repo = self.trainer.hub_model_id or args.hub_model_id
        unfinished = pushes.started - pushes.succeeded - len(pushes.failures)
        if not pushes.failures and not unfinished:
            logger.info("Checkpoint pushes to %r: all %d uploads succeeded.", repo, pushes.started)
            return
        logger.warning(
            "Checkpoint pushes to %r: %d of %d uploads failed%s (last error: %s). The checkpoints are kept in %s; "
            "once the Hub is reachable, upload the final model with `python -m hf_cse.push %s --repo_id %s`.",
            repo,
            len(pushes.failures),
            pushes.started,
            f", {unfinished} did not finish" if unfinished else "",
            pushes.failures[-1][1] if pushes.failures else "none",
            args.output_dir,
            args.output_dir,
            repo,
        )

    def push_model(
        self,
        commit_message: str | None = "End of training",
        blocking: bool = True,
        token: str | None = None,
        revision: str | None = None,
        private: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """What ``Trainer.push_to_hub`` does (save the model, write the card, upload ``output_dir``), uploading only
        the files hf_cse wrote (:func:`~hf_cse.export.upload_list.build_upload_list`); an unreachable Hub raises a
        one-line ``HubUnreachableError``, and the card this renders into ``output_dir`` is put back as it was unless
        the upload succeeds (with ``blocking=False``: starts).

        Args:
            commit_message: the commit's message.
            blocking: wait for the upload; ``False`` returns a future of it.
            token: the Hub token; default ``args.hub_token``.
            revision: the branch to push to; default ``args.hub_revision``.
            private: create the repository private (if it does not exist yet); default ``args.hub_private_repo``.
            **kwargs: the trainer's ``create_model_card`` keywords (``model_name``, ``language``, ``tags``, ...).

        Returns:
            The ``CommitInfo`` (a future of it with ``blocking=False``); ``None`` on other processes than the main one.
        """
        trainer, args = self.trainer, self.trainer.args
        trainer.callback_handler.on_push_begin(args, trainer.state, trainer.control)
        model_name = kwargs.pop("model_name", None)
        if model_name is None and args.should_save:
            model_name = Path(args.output_dir).name if args.hub_model_id is None else args.hub_model_id.split("/")[-1]
        token = token if token is not None else args.hub_token
        if trainer.hub_model_id is None:  # called without push_to_hub=True: no repository yet
            with self.checked_repository(args):
                trainer.init_hf_repo(token=token, private=private)
        trainer.save_model(_internal_call=True)  # on every process: some setups gather the weights
        if not trainer.is_world_process_zero():
            return None
        model_tags = getattr(trainer.model, "model_tags", None) or []
        if model_tags:  # the Trainer adds the model's own tags to the card's
            tags = kwargs.get("tags") or []
            tags = [tags] if isinstance(tags, str) else list(tags)
            kwargs["tags"] = tags + [tag for tag in model_tags if tag not in tags]
        with hub_connection(trainer.hub_model_id), card_restored_on_failure(args.output_dir):
            trainer.create_model_card(model_name=model_name, **kwargs)
            self.wait()  # a checkpoint's upload still running
            return self._upload(
                build_upload_list(args.output_dir),
                commit_message=commit_message,
                token=token,
                revision=revision if revision is not None else args.hub_revision,
                run_as_future=not blocking,
            )
