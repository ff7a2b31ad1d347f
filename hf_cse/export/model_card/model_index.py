"""The ``model-index`` of a card's YAML front matter: one ``huggingface_hub.EvalResult`` per STS test score, dev score
and Matryoshka prefix score, with the structure the Hub expects; and the MTEB entries a card rendered anew keeps."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from huggingface_hub import EvalResult, ModelCard

from ...evaluation.sts_model_index import MTEB_SOURCE_NAME, sts_dev_entries, sts_entry
from ...json_types import is_finite_number
from ...run_files import TRAINING_SUMMARY_FILE
from .sts_results import STSCardResults
from .summary import TrainingSummary

if TYPE_CHECKING:
    from .matryoshka_results import MatryoshkaCardResults


def eval_results(
    summary: TrainingSummary, sts: STSCardResults | None, matryoshka: MatryoshkaCardResults | None = None
) -> list[EvalResult]:
    """One model-index result per STS score: task ``sentence-similarity``, the dataset (name, Hub type, split and,
    when known, ``config`` ``raw`` / ``tokenized`` for the text variant) and metric ``cosine_spearman`` (x 100; its
    ``config`` is ``all`` for STS12-16, the pairs of all subsets concatenated); then one per dev score of the saved
    model (``summary.final_dev``: STS-B dev, SICK-R trial); then, for a Matryoshka run, one per task and embedding
    prefix of its per-dimension table (metric ``args`` ``truncate_dim: d``). ``[]`` when there is none.

    The dev scores are the entries the run's evaluators recorded in ``summary.evaluator_results`` (each one's
    :meth:`~hf_cse.evaluation.evaluators.Evaluator.model_index_entries`: retrieval under task ``retrieval``), or for a
    summary without them (a checkpoint's ``training_args.json``) the STS dev scores of ``summary.final_dev``."""
    scores = sts.scores.items() if sts is not None else ()
    results = [EvalResult(**sts_entry(task, sts.split(task), value, sts.text)) for task, value in scores]
    if summary.evaluator_results is None:  # a summary without the evaluators' own entries: the STS dev scores
        results += [EvalResult(**entry) for entry in sts_dev_entries(summary.final_dev, prefix="eval_")]
    else:
        results += [EvalResult(**entry) for entry in summary.evaluator_results]
    for evaluation in matryoshka.evaluations if matryoshka is not None else ():
        for dim in matryoshka.dims:
            scores = evaluation["scores"][str(dim)]
            for task, split in evaluation["splits"].items():
                if is_finite_number(scores.get(task)):
                    dev = evaluation.get("name") != "test"
                    results.append(
                        EvalResult(**sts_entry(task, split, scores[task], evaluation.get("text"), dev, dim))
                    )
    return results


def recorded_mteb_results(directory: str | Path) -> list[EvalResult]:
    """The MTEB entries (source ``MTEB``) of the ``model-index`` of ``directory/README.md``, which
    ``python -m hf_cse.eval --mteb_tasks`` adds to an hf_cse card (one beside ``hf_cse_training.json``), so that a
    card rendered anew for the same model (``python -m hf_cse.push``) keeps them; ``[]`` without such a card."""
    card_path = Path(directory) / "README.md"
    if not card_path.is_file() or not (Path(directory) / TRAINING_SUMMARY_FILE).is_file():
        return []
    results = ModelCard.load(card_path).data.eval_results or []
    return [result for result in results if result.source_name == MTEB_SOURCE_NAME]
