"""The card and the Hub: the :class:`~hf_cse.training.trainer.CSETrainer` methods that write the model card and push.

Pushes upload only the files hf_cse writes (:func:`~hf_cse.export.upload_list.build_upload_list`, given to
``upload_folder`` as ``allow_patterns``), where the Trainer uploads the whole output folder: never a symbolic link's
target, a stray secret, nor the pickled training arguments. One-line errors when the Hub cannot be reached or refuses
a request (before any training, for ``push_to_hub=True``), the local card kept as it was unless an upload succeeds,
and checkpoint pushes whose failures are reported: the Trainer uploads each checkpoint in the background and never
looks at the outcome.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import Trainer
from transformers.trainer_utils import HubStrategy, SaveStrategy
from transformers.utils import (
    ADAPTER_CONFIG_NAME,
    ADAPTER_SAFE_WEIGHTS_NAME,
    ADAPTER_WEIGHTS_NAME,
    CONFIG_NAME,
    GENERATION_CONFIG_NAME,
    SAFE_WEIGHTS_INDEX_NAME,
    SAFE_WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
    PushInProgress,
)

from ..atomic_files import staged_publish
from ..export.hub import card_restored_on_failure, check_repo_id, describe_hub_error, hub_connection, hub_errors
from ..export.upload_list import UploadList, build_upload_list
from .model_card import write_trainer_card

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


def checkpoint_model_files(checkpoint_folder: str | Path) -> list[str]:
    """The model files of ``checkpoint_folder`` that ``Trainer._push_from_checkpoint`` copies into the output folder
    before pushing it: config, weights (with an index: it and its shards) and peft adapter files, those present."""
    folder = Path(checkpoint_folder)
    names = [CONFIG_NAME, GENERATION_CONFIG_NAME, WEIGHTS_NAME, SAFE_WEIGHTS_NAME]
    names += [ADAPTER_CONFIG_NAME, ADAPTER_WEIGHTS_NAME, ADAPTER_SAFE_WEIGHTS_NAME]
    for index_name in (WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_INDEX_NAME):
        if (folder / index_name).is_file():
            index = json.loads((folder / index_name).read_text(encoding="utf-8"))
            names += [index_name, *sorted(set(index["weight_map"].values()))]
    return [name for name in names if (folder / name).is_file()]


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


class HubPushMixin(Trainer):
    """Overrides ``create_model_card`` (hf_cse's card), ``init_hf_repo``, ``push_to_hub`` (hf_cse's files only), and
    ``_push_from_checkpoint`` (checkpoint pushes of hf_cse's files, which report their failures: see
    :meth:`reporting_checkpoint_pushes`)."""

    model_card_kwargs: dict[str, Any]
    """Card keywords (``finetuned_from``, ``dataset``, ...) filling in what a ``create_model_card`` call omits."""

    checkpoint_pushes: CheckpointPushes | None = None
    """The checkpoint uploads of the current ``train()`` (``None`` before it starts)."""

    @contextlib.contextmanager
    def reporting_checkpoint_pushes(self) -> Iterator[None]:
        """Around ``Trainer.train`` (which waits for the last checkpoint upload at its end): count the checkpoint
        uploads, then say in one line what became of them, also when training stopped with an error."""
        self.checkpoint_pushes = CheckpointPushes()
        try:
            yield
        finally:
            self._report_checkpoint_pushes()

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        """``Trainer._push_from_checkpoint`` uploading only hf_cse's files (:meth:`_start_checkpoint_uploads`), in
        the background: a failed upload (no network, a refused token) is logged as a warning naming the repository
        and the error, once; training goes on and the checkpoint stays on disk. An error in starting the uploads is
        reported the same way instead of stopping training."""
        pushes = self.checkpoint_pushes if self.checkpoint_pushes is not None else CheckpointPushes()
        self.checkpoint_pushes = pushes
        name = Path(checkpoint_folder).name
        try:
            jobs = self._start_checkpoint_uploads(checkpoint_folder)
        except hub_errors() as err:
            pushes.started += 1
            self._push_failed(pushes, name, err)
            return
        for label, job in zip([f"the model files of {name}", f"{name} (training state)"], jobs, strict=False):
            pushes.started += 1
            job.add_done_callback(lambda done, label=label: self._push_finished(pushes, label, done))

    def _start_checkpoint_uploads(self, checkpoint_folder: str) -> list[Future]:
        """Start the uploads of a checkpoint as ``Trainer._push_from_checkpoint`` does, and return them: the model
        files, copied from ``checkpoint_folder`` into ``output_dir`` with the tokenizer, in an upload of
        ``output_dir``; with ``hub_strategy`` ``checkpoint`` / ``all_checkpoints``, the checkpoint folder too (as
        ``last-checkpoint`` / its own name). Each upload sends its :func:`~hf_cse.export.upload_list.build_upload_list`
        only (the checkpoint's with its training state). None on other processes than the main one, with
        ``hub_strategy`` ``end``, or while the previous checkpoint's uploads run (unless ``hub_always_push``)."""
        args = self.args
        in_progress: PushInProgress | None = getattr(self, "push_in_progress", None)
        if not self.is_world_process_zero() or args.hub_strategy == HubStrategy.END:
            return []
        if not args.hub_always_push and in_progress is not None and not in_progress.is_done():
            return []
        self.callback_handler.on_push_begin(args, self.state, self.control)
        # The checkpoint's weights are copied rather than saved again: no new synchronization of the model. They are
        # published together (staged, then moved into place): a kill mid-copy never leaves half a model in output_dir.
        with staged_publish(Path(args.output_dir)) as staging:
            for name in checkpoint_model_files(checkpoint_folder):
                shutil.copy(os.path.join(checkpoint_folder, name), staging / name)
            if self.processing_class is not None:
                self.processing_class.save_pretrained(staging)
        if args.save_strategy == SaveStrategy.STEPS:
            commit_message = f"Training in progress, step {self.state.global_step}"
        else:
            commit_message = f"Training in progress, epoch {int(self.state.epoch)}"
        common = {"token": args.hub_token, "revision": args.hub_revision, "run_as_future": True}
        jobs = [self._upload(build_upload_list(args.output_dir), commit_message=commit_message, **common)]
        if args.hub_strategy in (HubStrategy.CHECKPOINT, HubStrategy.ALL_CHECKPOINTS):
            # checkpoint: the latest one, to resume from, always in the same folder; all_checkpoints: each in its own.
            folder = "last-checkpoint" if args.hub_strategy == HubStrategy.CHECKPOINT else Path(checkpoint_folder).name
            checkpoint = build_upload_list(checkpoint_folder, checkpoint=True)
            jobs.append(
                self._upload(checkpoint, path_in_repo=folder, commit_message=f"{commit_message}, checkpoint", **common)
            )
        if in_progress is None or in_progress.is_done():
            self.push_in_progress = PushInProgress(jobs)
        else:
            in_progress.jobs.extend(jobs)
        return jobs

    def _upload(self, upload: UploadList, **kwargs: Any) -> Any:
        """``upload_folder`` of ``upload.folder`` to the run's repository, sending ``upload.files`` only; what it
        leaves out is named in one warning. ``kwargs``: the other ``upload_folder`` arguments."""
        upload.warn_left_out()
        return hub_api().upload_folder(
            repo_id=self.hub_model_id,
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
        message = describe_hub_error(error, self.hub_model_id)
        pushes.failures.append((what, message))
        logger.warning(
            "Uploading %s failed, training goes on and the checkpoint is kept in %s: %s",
            what,
            self.args.output_dir,
            message,
        )

    def _report_checkpoint_pushes(self) -> None:
        """One line: how many checkpoint uploads to the repository succeeded, and what to do about failed ones."""
        pushes = self.checkpoint_pushes
        if pushes is None or pushes.started == 0:
            return
        repo = self.hub_model_id or self.args.hub_model_id
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
            self.args.output_dir,
            self.args.output_dir,
            repo,
        )

    def create_model_card(self, **kwargs: Any) -> None:
        """Write ``README.md`` and ``hf_cse_training.json`` into ``args.output_dir`` (main process only).

        Takes the keywords of ``Trainer.create_model_card``, which ``push_to_hub`` forwards; ``self.model_card_kwargs``
        (e.g. ``finetuned_from``, ``dataset``) fill in what a call does not pass.
        """
        if self.is_world_process_zero():
            write_trainer_card(self, **{**self.model_card_kwargs, **kwargs})

    def init_hf_repo(self, token: str | None = None, private: bool | None = None) -> None:
        """``Trainer.init_hf_repo`` (run at construction with ``push_to_hub``), after checking ``hub_model_id`` by the
        Hub's rule; an unreachable Hub raises a one-line ``HubUnreachableError`` before any training."""
        if self.args.hub_model_id is not None:
            check_repo_id(self.args.hub_model_id)
        with hub_connection(self.args.hub_model_id or Path(self.args.output_dir).absolute().name):
            super().init_hf_repo(token=token, private=private)

    def push_to_hub(
        self,
        commit_message: str | None = "End of training",
        blocking: bool = True,
        token: str | None = None,
        revision: str | None = None,
        private: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """``Trainer.push_to_hub`` (save the model, write the card, upload ``output_dir``), uploading only the files
        hf_cse wrote (:func:`~hf_cse.export.upload_list.build_upload_list`); an unreachable Hub raises a one-line
        ``HubUnreachableError``, and the card this renders into ``output_dir`` is put back as it was unless the upload
        succeeds (with ``blocking=False``: starts).

        Args:
            commit_message: the commit's message.
            blocking: wait for the upload; ``False`` returns a future of it.
            token: the Hub token; default ``args.hub_token``.
            revision: the branch to push to; default ``args.hub_revision``.
            private: create the repository private (if it does not exist yet); default ``args.hub_private_repo``.
            **kwargs: :meth:`create_model_card` keywords (``model_name``, ``language``, ``tags``, ...).

        Returns:
            The ``CommitInfo`` (a future of it with ``blocking=False``); ``None`` on other processes than the main one.
        """
        self.callback_handler.on_push_begin(self.args, self.state, self.control)
        model_name = kwargs.pop("model_name", None)
        if model_name is None and self.args.should_save:
            hub_model_id = self.args.hub_model_id
            model_name = Path(self.args.output_dir).name if hub_model_id is None else hub_model_id.split("/")[-1]
        token = token if token is not None else self.args.hub_token
        if self.hub_model_id is None:  # called without push_to_hub=True: no repository yet
            self.init_hf_repo(token=token, private=private)
        self.save_model(_internal_call=True)  # on every process: some setups gather the weights
        if not self.is_world_process_zero():
            return None
        model_tags = getattr(self.model, "model_tags", None) or []
        if model_tags:  # the Trainer adds the model's own tags to the card's
            tags = kwargs.get("tags") or []
            tags = [tags] if isinstance(tags, str) else list(tags)
            kwargs["tags"] = tags + [tag for tag in model_tags if tag not in tags]
        with hub_connection(self.hub_model_id), card_restored_on_failure(self.args.output_dir):
            self.create_model_card(model_name=model_name, **kwargs)
            self._finish_current_push()  # a checkpoint's upload still running
            return self._upload(
                build_upload_list(self.args.output_dir),
                commit_message=commit_message,
                token=token,
                revision=revision if revision is not None else self.args.hub_revision,
                run_as_future=not blocking,
            )
