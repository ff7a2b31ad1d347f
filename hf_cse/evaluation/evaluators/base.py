"""The evaluator contract: what ``CSETrainer(evaluator=...)`` calls at every evaluation.

An evaluator scores an encode function (``list of N sentences -> [N, D]`` embeddings, :data:`~hf_cse.evaluation.
EncodeFn`) and returns named numbers. The trainer prefixes them with ``eval_``, logs them, and selects checkpoints
on :attr:`Evaluator.primary_metric` (it becomes ``metric_for_best_model`` unless the user set one). The card reports
the saved model's scores through :meth:`Evaluator.model_index_entries`.

A user's evaluator only needs ``__call__``, ``name`` and ``primary_metric``::

    class MyEvaluator(Evaluator):
        name, primary_metric = "mine", "accuracy"

        def __call__(self, encode):
            embeddings = encode(["a sentence", "another"])  # [2, D]
            return {"accuracy": ...}
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from ..sts_evaluator import EncodeFn


class Evaluator(ABC):
    """Scores the model's embeddings; one instance is called at every evaluation of a run.

    Attributes:
        name: short identifier; :class:`~hf_cse.evaluation.evaluators.SequentialEvaluator` prefixes this evaluator's
            metrics with ``name + "_"``, and the card names the data set after it unless
            :meth:`model_index_entries` says otherwise.
        primary_metric: the key of the returned dict that selects checkpoints.
        greater_is_better: whether a higher ``primary_metric`` is better (default ``True``).
        task_type, task_name: the Hub ``model-index`` task the scores belong to (default: sentence similarity).
    """

    name: str = "evaluator"
    primary_metric: str
    greater_is_better: bool = True
    task_type: str = "sentence-similarity"
    task_name: str = "Semantic Textual Similarity"

    @abstractmethod
    def __call__(self, encode: EncodeFn) -> dict[str, float]:
        """Score ``encode`` (``encode(list_of_N_sentences) -> [N, D]`` float embeddings in input order; it is called
        as is: eval mode and ``torch.inference_mode`` are the caller's business) and return ``{metric: value}``,
        ``primary_metric`` among the keys."""

    def model_index_entries(self, metrics: Mapping[str, float]) -> list[dict[str, Any]]:
        """The ``model-index`` results of the saved model's scores ``metrics`` (this evaluator's own keys, as
        ``__call__`` returned them): ``huggingface_hub.EvalResult`` keyword dicts, JSON-ready.

        Default: one result per finite number, task :attr:`task_type`, data set :attr:`name`, metric type the key.
        """
        return [
            {
                "task_type": self.task_type,
                "task_name": self.task_name,
                "dataset_type": self.name,
                "dataset_name": self.name,
                "metric_type": key,
                "metric_name": key,
                "metric_value": round(float(value), 4),
            }
            for key, value in metrics.items()
            if is_finite_number(value)
        ]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, primary_metric={self.primary_metric!r})"


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is an ``int``/``float`` (not a ``bool``) and finite."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_metrics(evaluator: Evaluator, metrics: Any) -> dict[str, float]:
    """``metrics`` as a ``{str: float}`` dict, after checking that ``evaluator`` returned one that holds its
    ``primary_metric``: a user's evaluator that forgot it fails at the first evaluation, in one line, instead of the
    Trainer's ``KeyError`` at the checkpoint choice.

    Raises:
        TypeError: not a mapping of names to numbers. KeyError: no ``primary_metric`` key.
    """
    if not isinstance(metrics, Mapping) or not all(isinstance(key, str) for key in metrics):
        raise TypeError(f"{evaluator!r} returned {type(metrics).__name__}; an evaluator returns {{name: number}}.")
    if evaluator.primary_metric not in metrics:
        raise KeyError(
            f"{evaluator!r} returned no {evaluator.primary_metric!r} (its primary_metric); it returned "
            f"{', '.join(metrics) or 'nothing'}."
        )
    return {key: float(value) for key, value in metrics.items()}
