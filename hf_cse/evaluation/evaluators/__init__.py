"""Evaluators: what a run scores at every evaluation and selects checkpoints on (``CSETrainer(evaluator=...)``,
``--evaluators``), one per module, like sentence-transformers' ``evaluation`` folder.

* :class:`Evaluator` (:mod:`.base`): the contract, ``__call__(encode) -> {metric: value}``, ``primary_metric``,
  ``greater_is_better``;
* :class:`STSEvaluator`: STS dev Spearman and alignment/uniformity, the default;
* :class:`ScoredPairsEvaluator`: a user's scored sentence pairs (TSV/CSV/JSONL), Spearman and Pearson;
* :class:`InformationRetrievalEvaluator`: queries, corpus and relevance judgments (or a BEIR/MTEB folder);
* :class:`SequentialEvaluator`: several at once, each metric prefixed by its evaluator's name;
* :func:`build_evaluator`: the evaluator of ``--evaluators`` specs (:mod:`.specs`).
"""

from .base import Evaluator
from .information_retrieval import InformationRetrievalEvaluator
from .scored_pairs import ScoredPairsEvaluator
from .sequential import SequentialEvaluator
from .specs import EVALUATOR_KINDS, build_evaluator, parse_evaluator_spec, primary_metric_of_specs
from .sts import STSEvaluator

__all__ = [
    "EVALUATOR_KINDS",
    "Evaluator",
    "InformationRetrievalEvaluator",
    "STSEvaluator",
    "ScoredPairsEvaluator",
    "SequentialEvaluator",
    "build_evaluator",
    "parse_evaluator_spec",
    "primary_metric_of_specs",
]
