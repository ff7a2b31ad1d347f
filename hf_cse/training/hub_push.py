"""The card and the Hub: the :class:`~hf_cse.training.trainer.CSETrainer` methods that write the model card and push.

One-line errors when the Hub cannot be reached or refuses a request (before any training, for ``push_to_hub=True``),
the local card kept as it was unless an upload succeeds, and checkpoint pushes whose failures are reported: the
Trainer uploads each checkpoint in the background and never looks at the outcome.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import Trainer
from transformers.trainer_utils import TrainOutput

from ..export.hub import card_restored_on_failure, check_repo_id, describe_hub_error, hub_connection, hub_errors
from ..export.model_card import write_trainer_card

logger = logging.getLogger(__name__)


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
    """Overrides ``create_model_card`` (hf_cse's card), ``init_hf_repo``, ``push_to_hub``, and ``train`` /
    ``_push_from_checkpoint`` (checkpoint pushes that report their failures)."""

    model_card_kwargs: dict[str, Any]
    """Card keywords (``finetuned_from``, ``dataset``, ...) filling in what a ``create_model_card`` call omits."""

    checkpoint_pushes: CheckpointPushes | None = None
    """The checkpoint uploads of the current ``train()`` (``None`` before it starts)."""

    def train(self, *args: Any, **kwargs: Any) -> TrainOutput:
        """``Trainer.train`` (which waits for the last checkpoint upload at its end), then one line saying what
        became of the checkpoint uploads, also when training stopped with an error."""
        self.checkpoint_pushes = CheckpointPushes()
        try:
            return super().train(*args, **kwargs)
        finally:
            self._report_checkpoint_pushes()

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        """``Trainer._push_from_checkpoint``, whose uploads run in the background: a failed one (no network, a refused
        token) is logged as a warning naming the repository and the error, once; training goes on and the checkpoint
        stays on disk. An error in starting the uploads is reported the same way instead of stopping training."""
        pushes = self.checkpoint_pushes if self.checkpoint_pushes is not None else CheckpointPushes()
        self.checkpoint_pushes = pushes
        name = Path(checkpoint_folder).name
        in_progress = getattr(self, "push_in_progress", None)
        before = list(in_progress.jobs) if in_progress is not None else []
        try:
            super()._push_from_checkpoint(checkpoint_folder)
        except hub_errors() as err:
            pushes.started += 1
            self._push_failed(pushes, name, err)
            return
        in_progress = getattr(self, "push_in_progress", None)
        jobs = in_progress.jobs if in_progress is not None else []
        new_jobs = [job for job in jobs if not any(job is old for old in before)]
        # The Trainer starts the model files' upload, then (hub_strategy checkpoint/all_checkpoints) the folder's.
        labels = [f"the model files of {name}", f"{name} (training state)"]
        for label, job in zip(labels, new_jobs, strict=False):
            pushes.started += 1
            job.add_done_callback(lambda done, label=label: self._push_finished(pushes, label, done))

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

    def push_to_hub(self, *args: Any, **kwargs: Any) -> Any:
        """``Trainer.push_to_hub``; an unreachable Hub raises a one-line ``HubUnreachableError``, and the card this
        renders into ``output_dir`` is put back as it was unless the upload succeeds (with ``blocking=False``: starts).
        """
        card_kept = card_restored_on_failure(self.args.output_dir) if self.is_world_process_zero() else nullcontext()
        with hub_connection(self.hub_model_id or self.args.hub_model_id), card_kept:
            return super().push_to_hub(*args, **kwargs)
