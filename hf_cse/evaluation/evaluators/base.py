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

Registered by name (:func:`hf_cse.register_evaluator`), it is also a ``KIND`` of ``--evaluators`` specs, as the
built-in ``sts``, ``pairs`` and ``ir`` are: once its module is imported (``run_unsup.py --import_module my_evals``),
``--evaluators mine`` builds ``MyEvaluator()``. With ``takes_path = True`` the spec is ``mine:PATH`` and builds
``MyEvaluator(PATH)`` (a :class:`~pathlib.Path`), named after the file; the classmethods :meth:`Evaluator.parse_spec`,
:meth:`Evaluator.spec_primary_metric` and :meth:`Evaluator.from_spec` change how a spec is named and built::

    @register_evaluator("mine")
    class MyEvaluator(Evaluator):
        primary_metric = "accuracy"  # a class attribute: checkpoints are chosen before the evaluator is built
        takes_path = True

        def __init__(self, path):
            self.questions = path.read_text().splitlines()

        def __call__(self, encode):
            ...
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ...errors import UsageError, echo
from ...json_types import is_finite_number
from ...registry import EVALUATORS
from ..sts_evaluator import EncodeFn, STSDevSets


@dataclass(frozen=True)
class EvaluatorSpec:
    """One parsed ``--evaluators`` spec: ``kind`` (the registered name), ``path`` (``None`` for a kind that takes
    none), ``name`` (the metric prefix in a sequence) and, for ``ir``, the qrels ``split``."""

    kind: str
    path: Path | None
    name: str
    split: str | None = None

    def primary_metric(self, sts_tasks: Sequence[str]) -> str:
        """The evaluator's primary metric, without reading its files (:meth:`Evaluator.spec_primary_metric`)."""
        return EVALUATORS[self.kind].spec_primary_metric(self, sts_tasks)


@dataclass(frozen=True)
class SpecContext:
    """What a run gives the evaluators its specs build, besides their path: the STS settings (``sts_dir``,
    ``eval_sts_tasks``) and the STS dev sets when already read."""

    sts_dir: str | os.PathLike | None = None
    sts_tasks: Sequence[str] = ("stsb",)
    dev_sets: STSDevSets | None = None


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
    takes_path: ClassVar[bool] = False
    """Whether an ``--evaluators`` spec of this registered evaluator is ``KIND:PATH`` (``True``) or ``KIND``."""

    @classmethod
    def parse_spec(cls, kind: str, path: str | None, spec: str) -> EvaluatorSpec:
        """The spec ``spec`` (as written, for messages) of this evaluator registered as ``kind``, ``path`` the text
        after its colon (``None`` without one); files are not read. Default: ``kind`` alone, named ``kind``, or with
        ``takes_path`` ``kind:PATH``, named after the file without its suffix. Override to name it otherwise.

        Raises:
            UsageError: a path missing or given where none belongs, in one line naming ``spec``.
        """
        if not cls.takes_path:
            if path is not None:
                raise UsageError(f"Evaluator {echo(spec)}: {kind} takes no path.")
            return EvaluatorSpec(kind, None, kind)
        if path is None or not path.strip():
            raise UsageError(f"Evaluator {echo(spec)} needs a path: {kind}:PATH.")
        location = Path(path.strip())
        return EvaluatorSpec(kind, location, location.stem)

    @classmethod
    def spec_primary_metric(cls, spec: EvaluatorSpec, sts_tasks: Sequence[str]) -> str:
        """The primary metric of the evaluator ``spec`` builds, without building it (it becomes
        ``metric_for_best_model`` when the arguments are parsed). Default: the class attribute ``primary_metric``.

        Raises:
            UsageError: the class has no ``primary_metric`` attribute (it sets one in ``__init__`` only).
        """
        metric = getattr(cls, "primary_metric", None)
        if not isinstance(metric, str):
            raise UsageError(
                f"Evaluator {spec.kind!r} ({cls.__module__}.{cls.__qualname__}) has no class attribute "
                "primary_metric, which selects checkpoints before the evaluator is built: set one on the class."
            )
        return metric

    @classmethod
    def from_spec(cls, spec: EvaluatorSpec, context: SpecContext) -> Evaluator:
        """The evaluator of ``spec``, its files read: ``cls(spec.path)`` (``takes_path``) or ``cls()``, named
        ``spec.name``. ``context``: the run's STS settings and dev sets (unused here)."""
        evaluator = cls(spec.path) if cls.takes_path else cls()  # type: ignore[call-arg]
        evaluator.name = spec.name
        return evaluator

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
