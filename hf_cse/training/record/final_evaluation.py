"""Scores of a run's final model saved beside it, which the model card renders: a paper config's comparison with the
paper (:func:`compare_with_the_paper`: ``sts_results.json`` and :data:`~hf_cse.run_files.PAPER_COMPARISON_FILE`) and
the per-dimension STS table of a Matryoshka run (:data:`~hf_cse.run_files.MATRYOSHKA_RESULTS_FILE`).

``run_unsup.py`` calls them on the main process after the final save, sharing one :func:`final_model_encode`; with
:class:`~hf_cse.training.trainer.CSETrainer` in Python, call them the same way before ``trainer.create_model_card()``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...atomic_files import write_json_atomic
from ...evaluation import (
    STS_TASKS,
    EmbeddingCache,
    EncodeFn,
    STSDevSets,
    detect_sts_text,
    evaluate_sts,
    load_sts_dev_sets,
)
from ...evaluation.matryoshka import evaluate_dimensions
from ...evaluation.paper_comparison import PAPER_SPLITS, PaperResults, compare_with_paper
from ...modeling.encoder import SentenceEncoder
from ...run_files import MATRYOSHKA_RESULTS_FILE, PAPER_COMPARISON_FILE, STS_RESULTS_FILE
from ..evaluators import model_encode

if TYPE_CHECKING:
    from ..trainer import CSETrainer

logger = logging.getLogger(__name__)


def final_model_encode(trainer: CSETrainer) -> EmbeddingCache:
    """The trained model's ``sentences -> [N, D]`` (float32, CPU), cached: every score of the final model (the paper
    comparison, each Matryoshka dimension) encodes a sentence once. Batches of ``per_device_eval_batch_size``, with
    the evaluation's progress bar unless ``disable_tqdm`` (:func:`~hf_cse.training.evaluators.model_encode`)."""
    return EmbeddingCache(model_encode(trainer))


def write_matryoshka_scores(
    trainer: CSETrainer,
    encode: EmbeddingCache | None = None,
    test_sts_dir: str | Path | None = None,
) -> dict[str, Any] | None:
    """Score the final model's first ``d`` dimensions for each ``d`` of ``args.matryoshka_dims`` and save them as
    ``output_dir/matryoshka_sts.json`` (:func:`~hf_cse.evaluation.matryoshka.evaluate_dimensions`'s dict, returned).

    What is scored is what the run evaluates: its dev sets (those read for evaluation during training, else
    ``args.eval_sts_tasks`` from ``args.sts_dir``), and the 7 STS test sets of ``test_sts_dir`` when the run scores
    them (a paper config's comparison). A run with neither (no ``sts_dir``, no evaluation: the dev sets would come
    from the Hub) gets no table, which is logged, and an earlier run's file in the folder is removed: it would
    describe another model. Call it on the main process only.

    Args:
        trainer: the trainer after training (its model is the final one).
        encode: the final model's cached encode function (:func:`final_model_encode`); default: a new one.
        test_sts_dir: SentEval-layout folder whose 7 test sets are scored too (SimCSE's splits).
    """
    args = trainer.args
    if not args.matryoshka_dims:
        return None
    path = Path(args.output_dir) / MATRYOSHKA_RESULTS_FILE
    dev_sets = trainer.eval_dataset if isinstance(trainer.eval_dataset, STSDevSets) else None
    if dev_sets is None and args.sts_dir is not None:
        dev_sets = load_sts_dev_sets(args.sts_dir, args.eval_sts_tasks)
    if dev_sets is None and test_sts_dir is None:
        path.unlink(missing_ok=True)
        logger.warning(
            "No sts_dir and no evaluation: the model card has no per-dimension STS table. `python -m hf_cse.eval "
            "--truncate_dim %s` scores the saved model's dimensions.",
            " ".join(str(dim) for dim in args.matryoshka_dims),
        )
        return None
    results = evaluate_dimensions(
        encode if encode is not None else final_model_encode(trainer),
        args.matryoshka_dims,
        dev_sets,
        test_sts_dir,
        text=None if test_sts_dir is None else detect_sts_text(test_sts_dir),
    )
    write_json_atomic(path, results)
    for evaluation in results["evaluations"]:
        logger.info("STS %s scores per Matryoshka dimension: %s", evaluation["name"], evaluation["scores"])
    return results


def skipped_comparison_message(paper: PaperResults, problem: str) -> str:
    """The one log line of a paper config's run whose final model cannot be scored on the STS test sets."""
    return (
        f"The final model will not be scored on the 7 STS test sets, so there is no comparison with {paper.method} "
        f"({paper.source}): {problem}"
    )


def compare_with_the_paper(
    trainer: CSETrainer, paper: PaperResults, base_model: str, encode: EncodeFn | None = None
) -> None:
    """Score the final model on the 7 STS test sets in the papers' setting (STS12-16 'all', STS-B test, SICK-R test,
    from ``sts_dir``), print the scores beside ``paper``'s, save ``sts_results.json`` (the ``hf_cse.eval`` JSON,
    which ``python -m hf_cse.push`` reuses) and ``paper_comparison.json``, and hand both to the model card.
    ``base_model``: the model the run started from (the table says when it is not the paper's); ``encode``: the final
    model's (:func:`final_model_encode`, the default), shared with other scores."""
    args = trainer.args
    encoder = SentenceEncoder(trainer.accelerator.unwrap_model(trainer.model), trainer.processing_class)
    # Minutes on a CPU: the evaluation's progress bar, as during training (this runs on the main process only).
    encode = encode if encode is not None else final_model_encode(trainer)
    results = evaluate_sts(
        encode, STS_TASKS, args.sts_dir, sickr_split=PAPER_SPLITS["sickr"], stsb_split=PAPER_SPLITS["stsb"]
    )
    # The settings of `python -m hf_cse.eval`'s JSON; the folder by name only (the JSON may be uploaded with the run).
    results.settings.update(
        sts_dir=Path(args.sts_dir).name,
        pooler=encoder.model.pooling.pooler,
        max_seq_length=encoder.sentence_tokenizer.max_seq_length,
        tasks=list(results.tasks),
        batch_size=args.per_device_eval_batch_size,
    )
    text = detect_sts_text(args.sts_dir)
    comparison = compare_with_paper(results, paper, text, base_model)
    print(comparison.format_table())
    sts_results = {**results.to_dict(), "text": text}
    output_dir = Path(args.output_dir)
    write_json_atomic(output_dir / STS_RESULTS_FILE, sts_results)
    write_json_atomic(output_dir / PAPER_COMPARISON_FILE, comparison.to_dict())
    trainer.model_card_kwargs.update(sts_results=sts_results, paper_comparison=comparison)
