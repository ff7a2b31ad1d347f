"""Evaluators named on the command line or in a config (``--evaluators sts pairs:my.tsv ir:beir/scifact``).

A spec is ``KIND`` or ``KIND:PATH``, ``KIND`` a name in :data:`~hf_cse.registry.EVALUATORS`: a user's evaluator
registered with :func:`hf_cse.register_evaluator` is named as the built-in ones are once its module is imported
(``run_unsup.py --import_module``; :mod:`.base` says how a class reads its spec). The built-in kinds:

* ``sts``: :class:`STSEvaluator` on ``eval_sts_tasks`` from ``sts_dir`` (the default when no spec is given);
* ``pairs:FILE``: :class:`ScoredPairsEvaluator` on a ``.tsv``/``.csv``/``.jsonl`` file of scored pairs, named after
  the file (``pairs:data/legal_pairs.tsv`` -> ``legal_pairs``);
* ``ir:FOLDER``: :class:`InformationRetrievalEvaluator` on a BEIR/MTEB folder's ``test`` judgments, named after the
  folder; ``ir:FOLDER/qrels/dev.tsv`` takes another split (select checkpoints on ``dev`` where there is one: the
  test judgments should score the final model only).

One spec gives that evaluator, whose metrics keep their own names (``eval_ndcg@10``); several give a
:class:`SequentialEvaluator`, each metric prefixed by its evaluator's name (``eval_sts_stsb_spearman``,
``eval_scifact_ndcg@10``), the first one's primary metric selecting checkpoints.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ...errors import UsageError, echo
from ...registry import EVALUATORS
from ..sts_evaluator import STSDevSets
from .base import Evaluator, EvaluatorSpec, SpecContext
from .sequential import SequentialEvaluator


def valid_evaluators() -> str:
    """The registered kinds as specs write them, in registration order: ``sts, pairs:PATH, ir:PATH`` and a user's."""
    return ", ".join(f"{kind}:PATH" if cls.takes_path else kind for kind, cls in EVALUATORS.items())


def evaluator_class(spec: str, kind: str) -> type[Evaluator]:
    """The evaluator class registered as ``kind`` (of ``spec``, for messages).

    Raises:
        UsageError: no evaluator of that name (one line listing the registered ones), or a registered class that is
            no :class:`Evaluator`.
    """
    if kind not in EVALUATORS:
        raise UsageError(f"Unknown evaluator {echo(spec)}; valid evaluators are: {valid_evaluators()}.")
    cls = EVALUATORS[kind]
    if not (isinstance(cls, type) and issubclass(cls, Evaluator)):
        raise UsageError(
            f"Evaluator {kind!r} is registered as {cls.__module__}.{cls.__qualname__}, which is no subclass of "
            "hf_cse.Evaluator: register_evaluator takes an Evaluator."
        )
    return cls


def parse_evaluator_spec(spec: str) -> EvaluatorSpec:
    """Parse ``KIND`` or ``KIND:PATH`` (see the module docstring) with the registered class's
    :meth:`~Evaluator.parse_spec`; files are not read.

    Raises:
        UsageError: an unknown kind (the registered ones are listed), a path missing or given where none belongs, or
            a path the kind refuses (an ``ir`` path to a file that is not ``qrels/SPLIT.tsv``).
    """
    kind, colon, path = spec.partition(":")
    kind = kind.strip().lower()
    return evaluator_class(spec, kind).parse_spec(kind, path if colon else None, spec)


def parse_evaluator_specs(specs: Sequence[str]) -> list[EvaluatorSpec]:
    """Each spec parsed; at least one, and names must differ when there are several (they prefix the metrics)."""
    parsed = [parse_evaluator_spec(spec) for spec in specs]
    if not parsed:
        raise UsageError(f"No evaluator given; valid evaluators are: {valid_evaluators()}.")
    names = [spec.name for spec in parsed]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if len(parsed) > 1 and duplicated:
        raise UsageError(
            f"Evaluators {echo(list(specs))} share the name {', '.join(map(repr, duplicated))} (the file or folder "
            "name), which prefixes their metrics: rename one."
        )
    return parsed


def primary_metric_of_specs(specs: Sequence[str], sts_tasks: Sequence[str]) -> str:
    """The ``metric_for_best_model`` that :func:`build_evaluator` of ``specs`` selects on (files not read)."""
    parsed = parse_evaluator_specs(specs)
    primary = parsed[0].primary_metric(sts_tasks)
    return primary if len(parsed) == 1 else f"{parsed[0].name}_{primary}"


def build_evaluator(
    specs: Sequence[str],
    *,
    sts_dir: str | os.PathLike | None = None,
    sts_tasks: Sequence[str] = ("stsb",),
    dev_sets: STSDevSets | None = None,
) -> Evaluator:
    """The evaluator of ``specs``, its files read (``sts`` dev sets: ``dev_sets`` when given, else read at the first
    evaluation from ``sts_dir``): each one by its registered class's :meth:`~Evaluator.from_spec`.

    Raises:
        UsageError / FileNotFoundError: as :func:`parse_evaluator_spec` and the evaluators' file readers.
    """
    context = SpecContext(sts_dir=sts_dir, sts_tasks=tuple(sts_tasks), dev_sets=dev_sets)
    evaluators = [EVALUATORS[spec.kind].from_spec(spec, context) for spec in parse_evaluator_specs(specs)]
    return evaluators[0] if len(evaluators) == 1 else SequentialEvaluator(evaluators)
