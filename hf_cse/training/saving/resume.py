"""Where ``CSETrainer.train`` starts from: the checkpoint to resume (verified, its run settings checked), or a run
that already finished, whose checkpoint is loaded without training; and, after a resume with changed settings, the
learning-rate schedule that the run's settings give (:class:`ScheduleRealignment`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch.optim.lr_scheduler import LambdaLR
from transformers import TrainerCallback, TrainerState
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import TrainOutput

from . import resolve_resume_checkpoint
from .checkpoints import ends_the_run, saved_steps

if TYPE_CHECKING:
    from ..trainer import CSETrainer

logger = logging.getLogger(__name__)


def start_run(trainer: CSETrainer, resume_from_checkpoint: str | bool | None) -> tuple[str | None, TrainOutput | None]:
    """Choose where ``trainer``'s run starts (under the output folder's lock, after the writer's recovery).

    Args:
        resume_from_checkpoint: ``train()``'s argument: a checkpoint folder, which must verify, ``True``/``"true"``
            for the newest verified ``checkpoint-N`` of ``output_dir``, or ``None``/``False`` to start afresh.

    Returns:
        ``(checkpoint, None)``: train, from ``checkpoint`` (``None``: afresh), the input providers' states restored
        from it; ``(checkpoint, output)``: the checkpoint is at ``max_steps``, so the run already finished: its
        weights are loaded (:func:`load_finished_run`) and ``output`` is what ``train()`` returns.

    Raises:
        UsageError, CheckpointError: :func:`~hf_cse.training.saving.resolve_resume_checkpoint`'s; and the resume
            contract's (:meth:`~hf_cse.training.record.run_settings.RunSettingsRecord.check_resume`).
    """
    checkpoint = resolve_resume_checkpoint(resume_from_checkpoint, trainer.args.output_dir)
    if checkpoint is None:
        return None, None
    saved = saved_steps(checkpoint)
    trainer.run_settings.check_resume(Path(checkpoint), saved[0])
    if ends_the_run(saved, trainer.args.max_steps):
        return checkpoint, load_finished_run(trainer, checkpoint)
    for provider in trainer.input_providers.values():
        provider.load_state(Path(checkpoint))
    return checkpoint, None


def load_finished_run(trainer: CSETrainer, checkpoint: str) -> TrainOutput:
    """Load the weights (the best checkpoint's with ``load_best_model_at_end``) and state of a run whose
    ``checkpoint`` is at ``max_steps``, without training."""
    trainer.state = TrainerState.load_from_json(str(Path(checkpoint) / TRAINER_STATE_NAME))
    logger.warning(
        "%s is at step %d of %d: this run already finished; nothing is trained.",
        checkpoint,
        trainer.state.global_step,
        trainer.state.max_steps,
    )
    best = trainer.state.best_model_checkpoint
    use_best = trainer.args.load_best_model_at_end and best is not None and Path(best).is_dir()
    # The Trainer's own loading (weights, sharded or not, or a peft adapter), as a resumed train() would call it; a
    # private method, which tests/test_checkpoint_commit.py checks on every transformers release.
    trainer._load_from_checkpoint(best if use_best else checkpoint)
    # The metrics of the invocation that trained, when it got as far as saving them; else what the state holds.
    saved = Path(trainer.args.output_dir) / "train_results.json"
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    training_loss = sum(losses) / len(losses) if losses else 0.0
    metrics = (
        json.loads(saved.read_text(encoding="utf-8"))
        if saved.is_file()
        else {"epoch": trainer.state.epoch, "total_flos": trainer.state.total_flos, "train_loss": training_loss}
    )
    return TrainOutput(trainer.state.global_step, training_loss, metrics)


class ScheduleRealignment(TrainerCallback):
    """After a resume with changed settings, the learning rate follows this run's schedule from the resumed step on.

    ``Trainer.train`` builds the scheduler for this run (its length, warm-up, type and learning rate) and then loads
    the checkpoint's optimizer and scheduler states over it: the parameter groups' ``lr`` (the rate of the first
    resumed step) and the scheduler's ``base_lrs`` (the peak rate of every later step) are the checkpoint's. Once they
    are loaded (``on_train_begin``), this sets the peak to this run's ``learning_rate`` (the checkpoint's peaks scaled
    by the ratio of the two runs' learning rates, so that groups keep their proportions) and the current rate to this
    run's schedule at the resumed step, and says what changed. A scheduler that is not a ``LambdaLR`` (every one
    ``lr_scheduler_type`` builds but ``reduce_lr_on_plateau``) keeps the checkpoint's state, with a warning.

    Args:
        step: the step resumed at.
        recorded_learning_rate: the ``learning_rate`` the checkpoint was trained with.
    """

    def __init__(self, step: int, recorded_learning_rate: Any) -> None:
        self.step = step
        self.recorded_learning_rate = recorded_learning_rate
        self.done = False

    def on_train_begin(
        self, args: Any, state: Any, control: Any, optimizer: Any = None, lr_scheduler: Any = None, **kwargs: Any
    ) -> None:
        if self.done or optimizer is None or lr_scheduler is None:
            return
        self.done = True
        scheduler = getattr(lr_scheduler, "scheduler", lr_scheduler)  # accelerate's wrapper, where there is one
        if not isinstance(scheduler, LambdaLR):
            logger.warning(
                "Resumed at step %d with changed settings: the %s scheduler keeps the state the checkpoint saved.",
                self.step,
                type(scheduler).__name__,
            )
            return
        recorded = self.recorded_learning_rate
        scale = args.learning_rate / recorded if isinstance(recorded, int | float) and recorded > 0 else 1.0
        groups = optimizer.param_groups
        loaded = [group["lr"] for group in groups]
        scheduler.base_lrs = [base * scale for base in scheduler.base_lrs]
        for group, base, factor in zip(groups, scheduler.base_lrs, scheduler.lr_lambdas, strict=True):
            group["initial_lr"] = base
            group["lr"] = base * factor(scheduler.last_epoch)
        scheduler._last_lr = [group["lr"] for group in groups]
        if scheduler._last_lr != loaded:
            logger.warning(
                "Resumed at step %d with changed settings: the learning rate follows this run's schedule (%s, peak "
                "%g, %d steps in all) from this step on: %.6g, where the checkpoint's schedule had %.6g.",
                self.step,
                args.lr_scheduler_type,
                args.learning_rate,
                state.max_steps,
                scheduler._last_lr[0],
                loaded[0],
            )
