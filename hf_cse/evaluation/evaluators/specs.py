"""Evaluators named on the command line or in a config (``--evaluators sts pairs:my.tsv ir:beir/scifact``).

A spec is ``KIND`` or ``KIND:PATH``:

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
from dataclasses import dataclass
from pathlib import Path

from ...errors import UsageError, echo
from ..sts_evaluator import STSDevSets
from .base import Evaluator
from .information_retrieval import InformationRetrievalEvaluator
from .scored_pairs import ScoredPairsEvaluator
from .sequential import SequentialEvaluator
from .sts import STSEvaluator

#: The kinds of evaluator a spec names, and whether they take a path.
EVALUATOR_KINDS = {"sts": False, "pairs": True, "ir": True}

_PRIMARY = {"pairs": ScoredPairsEvaluator.primary_metric, "ir": InformationRetrievalEvaluator.primary_metric}


@dataclass(frozen=True)
class EvaluatorSpec:
    """One parsed spec: ``kind``, ``path`` (``None`` for ``sts``), ``name`` (the metric prefix in a sequence) and,
    for ``ir``, the qrels ``split``."""

    kind: str
    path: Path | None
    name: str
    split: str | None = None

    def primary_metric(self, sts_tasks: Sequence[str]) -> str:
        """The evaluator's primary metric, without reading its files."""
        return f"{sts_tasks[0]}_spearman" if self.kind == "sts" else _PRIMARY[self.kind]


def parse_evaluator_spec(spec: str) -> EvaluatorSpec:
    """Parse ``KIND`` or ``KIND:PATH`` (see the module docstring); files are not read.

    Raises:
        UsageError: an unknown kind (the valid ones are listed), a path missing or given where none belongs, or an
            ``ir`` path to a file that is not ``qrels/SPLIT.tsv``.
    """
    kind, colon, path = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in EVALUATOR_KINDS:
        valid = ", ".join(f"{name}:PATH" if takes_path else name for name, takes_path in EVALUATOR_KINDS.items())
        raise UsageError(f"Unknown evaluator {echo(spec)}; valid evaluators are: {valid}.")
    if not EVALUATOR_KINDS[kind]:
        if colon:
            raise UsageError(f"Evaluator {echo(spec)}: {kind} takes no path (its data is sts_dir / eval_sts_tasks).")
        return EvaluatorSpec(kind, None, kind)
    if not path.strip():
        raise UsageError(f"Evaluator {echo(spec)} needs a path: {kind}:PATH.")
    location = Path(path.strip())
    if kind == "pairs":
        return EvaluatorSpec(kind, location, location.stem)
    if location.suffix == ".tsv":  # ir:FOLDER/qrels/SPLIT.tsv
        if location.parent.name != "qrels":
            raise UsageError(
                f"Evaluator {echo(spec)}: an ir file must be a BEIR folder's qrels/SPLIT.tsv; or give the folder."
            )
        folder = location.parent.parent
        return EvaluatorSpec(kind, folder, folder.resolve().name, location.stem)
    return EvaluatorSpec(kind, location, location.resolve().name, "test")


def parse_evaluator_specs(specs: Sequence[str]) -> list[EvaluatorSpec]:
    """Each spec parsed; names must differ when there are several (they prefix the metrics)."""
    parsed = [parse_evaluator_spec(spec) for spec in specs]
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
    if not parsed:
        raise UsageError("No evaluator given; valid evaluators are: sts, pairs:PATH, ir:PATH.")
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
    evaluation from ``sts_dir``).

    Raises:
        UsageError / FileNotFoundError: as :func:`parse_evaluator_spec` and the evaluators' file readers.
    """
    evaluators: list[Evaluator] = []
    for spec in parse_evaluator_specs(specs):
        if spec.kind == "sts":
            evaluators.append(STSEvaluator(dev_sets, sts_dir=sts_dir, tasks=sts_tasks, name=spec.name))
        elif spec.kind == "pairs":
            evaluators.append(ScoredPairsEvaluator.from_file(spec.path, name=spec.name))
        else:
            evaluators.append(InformationRetrievalEvaluator.from_beir(spec.path, spec.split or "test", name=spec.name))
    if not evaluators:
        raise UsageError("No evaluator given; valid evaluators are: sts, pairs:PATH, ir:PATH.")
    return evaluators[0] if len(evaluators) == 1 else SequentialEvaluator(evaluators)
