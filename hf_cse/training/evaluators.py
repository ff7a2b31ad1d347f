"""How :class:`~hf_cse.training.trainer.CSETrainer` uses an evaluator (:mod:`hf_cse.evaluation.evaluators`): which one
a run has, the STS dev sets it reads, the checkpoint metric it selects on, the encode function it scores, and the card
entries of the saved model's scores. Kept out of the trainer so that ``CSETrainer.evaluate`` is a few lines.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from transformers import IntervalStrategy, Trainer

from ..errors import TrainingDivergedError
from ..evaluation import STSDevSets, load_sts_dev_sets
from ..evaluation.evaluators import Evaluator, STSEvaluator, build_evaluator, parse_evaluator_spec
from ..evaluation.evaluators.base import check_metrics
from ..modeling.encoder import SentenceEncoder
from .training_args import CSETrainingArguments

if TYPE_CHECKING:
    from .trainer import CSETrainer

logger = logging.getLogger(__name__)


def evaluates_during_training(args: CSETrainingArguments) -> bool:
    """Whether the Trainer evaluates while training (``eval_strategy`` other than ``no``, or ``eval_on_start``)."""
    return IntervalStrategy(args.eval_strategy) != IntervalStrategy.NO or bool(args.eval_on_start)


def load_training_dev_sets(args: CSETrainingArguments) -> STSDevSets | None:
    """The STS dev sets that the evaluations during training score (``eval_sts_tasks``, from ``sts_dir``, else from
    the Hub), or ``None`` for a run that does not evaluate during training (``eval_strategy`` no, no
    ``eval_on_start``) or whose ``evaluators`` have no ``sts``. ``CSETrainer`` reads them once, when built;
    ``run_unsup.py`` before even the corpus and the model, so that dev sets that cannot be read (the Hub offline
    without ``sts_dir``) are a one-line error at once.

    Raises:
        UsageError: the Hub cannot be reached for a dev set (the message says to pass ``--sts_dir``).
        FileNotFoundError: a file of ``sts_dir`` is missing.
    """
    if not evaluates_during_training(args):
        return None
    if args.evaluators and all(parse_evaluator_spec(spec).kind != "sts" for spec in args.evaluators):
        return None  # the run's evaluators score no STS dev set
    return load_sts_dev_sets(args.sts_dir, args.eval_sts_tasks)


def evaluator_from_arguments(args: CSETrainingArguments, dev_sets: STSDevSets | None = None) -> Evaluator:
    """The evaluator ``args`` name: ``args.evaluators`` specs (``sts``, ``pairs:FILE``, ``ir:FOLDER``), or without
    any the STS dev evaluator of ``eval_sts_tasks`` / ``sts_dir``; ``dev_sets``: the STS dev sets already read."""
    specs = args.evaluators or ["sts"]
    return build_evaluator(specs, sts_dir=args.sts_dir, sts_tasks=args.eval_sts_tasks, dev_sets=dev_sets)


def training_evaluator(
    args: CSETrainingArguments, evaluator: Evaluator | None, eval_dataset: Any
) -> tuple[Evaluator | None, Any]:
    """The evaluator of a new trainer and the ``eval_dataset`` handed to the Trainer.

    With evaluation during training, the evaluator (``evaluator``, else :func:`evaluator_from_arguments`, its files
    read now: a bad file fails before training) and, when the user's evaluator is a new one, its primary metric made
    ``metric_for_best_model``. Without, ``evaluator`` as given (``None``: built at the
    first ``evaluate()``).

    ``eval_dataset``: the STS dev sets (read here unless given, as before evaluators); when there are none, the
    evaluator stands in, since the Trainer refuses an evaluation strategy without an ``eval_dataset``.
    """
    if eval_dataset is None and evaluator is None:
        eval_dataset = load_training_dev_sets(args)
    if evaluator is None and evaluates_during_training(args):
        evaluator = evaluator_from_arguments(args, eval_dataset if isinstance(eval_dataset, STSDevSets) else None)
    # Its primary metric selects checkpoints, unless the user set metric_for_best_model (CSETrainingArguments records
    # whether the value is its own default).
    if evaluator is not None and (
        getattr(args, "metric_for_best_model_is_default", False)
        or (args.metric_for_best_model is None and evaluates_during_training(args))
    ):
        args.metric_for_best_model = evaluator.primary_metric
        args.greater_is_better = evaluator.greater_is_better
        args.metric_for_best_model_is_default = True
    if eval_dataset is None and evaluates_during_training(args):
        eval_dataset = evaluator
    return evaluator, eval_dataset


def evaluator_for_call(trainer: CSETrainer, eval_dataset: Any) -> Evaluator:
    """What ``trainer.evaluate(eval_dataset)`` scores: ``eval_dataset`` when it is an evaluator, STS dev sets scored
    by :class:`STSEvaluator`, else the trainer's evaluator (built from its arguments on first use: the trainer's
    ``evaluator`` is ``None`` until then)."""
    if isinstance(eval_dataset, Evaluator):
        return eval_dataset
    if isinstance(eval_dataset, STSDevSets):
        return STSEvaluator(eval_dataset)
    if eval_dataset is not None:
        raise TypeError(
            f"CSETrainer.evaluate takes an Evaluator or STSDevSets, got {type(eval_dataset).__name__}; pass "
            "evaluator=... to CSETrainer for another evaluation."
        )
    if trainer.evaluator is None:
        dev_sets = trainer.eval_dataset if isinstance(trainer.eval_dataset, STSDevSets) else None
        trainer.evaluator = evaluator_from_arguments(trainer.args, dev_sets)
    return trainer.evaluator


def model_encode(trainer: Trainer) -> Callable[..., Any]:
    """The trainer's current model's ``sentences -> embeddings``: :meth:`SentenceEncoder.encode` in batches of
    ``per_device_eval_batch_size``, with the Trainer's evaluation bar (main process only, hidden by
    ``disable_tqdm``)."""
    encoder = SentenceEncoder(trainer.accelerator.unwrap_model(trainer.model), trainer.processing_class)
    show_progress_bar = not trainer.args.disable_tqdm and trainer.is_world_process_zero()
    batch_size = trainer.args.per_device_eval_batch_size
    return functools.partial(encoder.encode, batch_size=batch_size, show_progress_bar=show_progress_bar)


def score_model(trainer: Trainer, evaluator: Evaluator) -> dict[str, float]:
    """``evaluator``'s metrics for the trainer's current model, unprefixed: it encodes with
    :meth:`SentenceEncoder.encode` in batches of ``per_device_eval_batch_size``, with the Trainer's evaluation bar
    (main process only, hidden by ``disable_tqdm``, erased when done while the training bar runs). No cache spans
    the call: an evaluator caches what it reuses (:class:`STSEvaluator` does), so a retrieval corpus is not kept.

    A primary metric that is not finite is logged as a warning outside training.

    Raises:
        TrainingDivergedError: during training, a primary metric that is not finite.
    """
    metrics = check_metrics(evaluator, evaluator(model_encode(trainer)))
    score = metrics[evaluator.primary_metric]
    if math.isfinite(score):
        return metrics
    what = f"scored {evaluator.primary_metric} = {score} (constant or non-finite embeddings score NaN)"
    if trainer.is_in_train:
        # The Trainer's checkpoint choice compares scores: a NaN is neither better nor worse than any, so the first
        # one would stay the best metric for the rest of the run and be the model loaded at the end.
        raise TrainingDivergedError(
            f"The evaluation at step {trainer.state.global_step} {what}: no checkpoint can be chosen on it; training "
            "stopped, the checkpoints saved before it are kept."
        )
    logger.warning("The evaluation %s.", what)
    return metrics


def evaluator_model_index(evaluator: Evaluator | None, final_dev: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The card's ``model-index`` entries of the saved model's scores ``final_dev`` (``{"eval_...": value}``) by the
    run's ``evaluator``; ``None`` when the run had no evaluator or no evaluation (the card then reads
    ``final_dev``)."""
    if evaluator is None or not final_dev:
        return None
    own = {key.removeprefix("eval_"): value for key, value in final_dev.items() if key.startswith("eval_")}
    return evaluator.model_index_entries(own)
