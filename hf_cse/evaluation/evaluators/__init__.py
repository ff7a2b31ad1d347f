"""Evaluators: what a run scores at every evaluation and selects checkpoints on (``CSETrainer(evaluator=...)``,
``--evaluators``), one per module, like sentence-transformers' ``evaluation`` folder.

* :class:`Evaluator` (:mod:`.base`): the contract, ``__call__(encode) -> {metric: value}``, ``primary_metric``,
  ``greater_is_better``;
* :class:`STSEvaluator`: STS dev Spearman and alignment/uniformity, the default;
* :class:`ScoredPairsEvaluator`: a user's scored sentence pairs (TSV/CSV/JSONL), Spearman and Pearson;
* :class:`InformationRetrievalEvaluator`: queries, corpus and relevance judgments (or a BEIR/MTEB folder);
* :class:`SequentialEvaluator`: several at once, each metric prefixed by its evaluator's name;
* :func:`build_evaluator`: the evaluator of ``--evaluators`` specs (:mod:`.specs`), by the names registered in
  :data:`~hf_cse.registry.EVALUATORS` (``sts``, ``pairs``, ``ir``, and a user's, :func:`hf_cse.register_evaluator`).
"""

from ...registry import EVALUATORS, register_evaluator
from .base import Evaluator, EvaluatorSpec, SpecContext

# isort: off
# The import order is the registration order, which --evaluators' messages list: sts, pairs:PATH, ir:PATH.
from .sts import STSEvaluator
from .scored_pairs import ScoredPairsEvaluator
from .information_retrieval import InformationRetrievalEvaluator

# isort: on
from .sequential import SequentialEvaluator
from .specs import build_evaluator, parse_evaluator_spec, primary_metric_of_specs

__all__ = [
    "EVALUATORS",
    "Evaluator",
    "EvaluatorSpec",
    "InformationRetrievalEvaluator",
    "STSEvaluator",
    "ScoredPairsEvaluator",
    "SequentialEvaluator",
    "SpecContext",
    "build_evaluator",
    "parse_evaluator_spec",
    "primary_metric_of_specs",
    "register_evaluator",
]
