"""Where ``CSETrainer.train`` starts from: the checkpoint to resume (verified, its run settings checked), or a run
that already finished, whose checkpoint is loaded without training."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from transformers import TrainerState
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import TrainOutput

from .saving import resolve_resume_checkpoint
from .saving.checkpoints import ends_the_run, saved_steps

if TYPE_CHECKING:
    from .trainer import CSETrainer

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
            contract's (:meth:`~hf_cse.training.run_settings.RunSettingsRecord.check_resume`).
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
    # The Trainer's own loading (weights, sharded or not, or a peft adapter), as a resumed train() would call it.
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
