"""STS scores of a Matryoshka model's embedding prefixes: the first ``d`` dimensions for each trained ``d``.

:func:`evaluate_dimensions` scores one model (one ``encode`` function, each sentence encoded once) at every
dimension on the dev sets a run evaluates and, when given, the STS test sets; its JSON-ready dict is what
``run_unsup.py`` saves beside the model as :data:`~hf_cse.run_files.MATRYOSHKA_RESULTS_FILE` and what the model
card's per-dimension table renders (at the end of training and again in ``python -m hf_cse.push``)::

    {"dims": [32, 16, 4],
     "evaluations": [
        {"name": "dev", "splits": {"stsb": "dev"}, "scores": {"32": {"stsb": 81.2, "avg": 81.2}, "16": {...}}},
        {"name": "test", "splits": {"sts12": "test", ..., "sickr": "test"}, "text": "tokenized",
         "scores": {"32": {"sts12": 68.4, ..., "avg": 76.1}, ...}}]}

Each ``scores[str(d)]`` is ``{task: 'all' Spearman x 100, ..., "avg": mean}``, the numbers (and the JSON) of
``python -m hf_cse.eval --truncate_dim d`` on the same splits.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .analysis import EmbeddingCache
from .sts_data import STS_TASKS
from .sts_evaluator import STS_DEV_SPLITS, EncodeFn, STSDevSets, evaluate_sts, score_sts_dev


def truncated(encode: Callable[[Sequence[str]], torch.Tensor], dim: int) -> Callable[[Sequence[str]], torch.Tensor]:
    """``encode`` keeping the first ``dim`` dimensions, ``[N, dim]``: cosine similarity renormalizes the prefix, as
    ``SentenceTransformer(..., truncate_dim=dim)`` does."""
    return lambda sentences: encode(sentences)[:, :dim]


def _summary(scores: dict[str, float]) -> dict[str, float]:
    """``{task: score, ..., "avg": mean}``, the shape of ``STSResults.summary()``."""
    return {**scores, "avg": sum(scores.values()) / len(scores)}


def evaluate_dimensions(
    encode: EncodeFn,
    dims: Sequence[int],
    dev_sets: STSDevSets | None = None,
    test_sts_dir: str | os.PathLike | None = None,
    *,
    test_tasks: Sequence[str] = STS_TASKS,
    sickr_split: str = "test",
    stsb_split: str = "test",
    text: str | None = None,
) -> dict[str, Any]:
    """STS Spearman x 100 of the first ``d`` dimensions of ``encode``'s embeddings, for every ``d`` in ``dims``.

    Args:
        encode: ``sentences -> [N, D]`` embeddings of the full size ``D >= max(dims)``; wrapped in an
            :class:`~hf_cse.evaluation.analysis.EmbeddingCache` here unless it is one, so that every dimension and
            both evaluations share one encoding of each sentence.
        dims: the prefix sizes, in the order of the table (a run's ``matryoshka_dims``).
        dev_sets: dev sets to score (STS-B dev, SICK-R trial), as a training run reads them; ``None``: none.
        test_sts_dir: SentEval-layout folder whose ``test_tasks`` are scored too; ``None``: no test sets.
        test_tasks, sickr_split, stsb_split: the test evaluation's tasks and splits (default: the 7 tasks, SimCSE's
            splits).
        text: ``"raw"`` or ``"tokenized"``, recorded with the test scores (the card says which text was scored).

    Returns:
        The JSON-ready dict of the module docstring; ``"evaluations"`` is empty when neither is given.
    """
    cache = encode if isinstance(encode, EmbeddingCache) else EmbeddingCache(encode)
    dims = [int(dim) for dim in dims]
    evaluations: list[dict[str, Any]] = []
    if dev_sets is not None and dev_sets.tasks:
        scores = {}
        for dim in dims:
            metrics = score_sts_dev(truncated(cache, dim), dev_sets)
            scores[str(dim)] = _summary({task: metrics[f"{task}_spearman"] for task in dev_sets.tasks})
        splits = {task: STS_DEV_SPLITS[task] for task in dev_sets.tasks}
        evaluations.append({"name": "dev", "splits": splits, "scores": scores})
    if test_sts_dir is not None:
        scores, splits = {}, {}
        for dim in dims:
            results = evaluate_sts(
                truncated(cache, dim), test_tasks, test_sts_dir, sickr_split=sickr_split, stsb_split=stsb_split
            )
            scores[str(dim)] = results.summary()
            splits = {task: result.split for task, result in results.tasks.items()}
        evaluations.append({"name": "test", "splits": splits, "text": text, "scores": scores})
    return {"dims": dims, "evaluations": evaluations}
