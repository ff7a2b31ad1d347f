"""The card's per-dimension STS table of a Matryoshka run, rendered from the ``matryoshka_sts.json`` beside the model
(:mod:`hf_cse.evaluation.matryoshka`), at the end of training and by ``python -m hf_cse.push`` alike."""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...evaluation.sts_model_index import STS_DISPLAY
from ...markdown import code_block, table
from ...run_files import MATRYOSHKA_RESULTS_FILE
from .sts_results import STS_TEXT
from .summary import TrainingSummary

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MatryoshkaCardResults:
    """STS scores per embedding prefix, as :func:`~hf_cse.evaluation.matryoshka.evaluate_dimensions` saves them.

    Attributes:
        dims: the prefix sizes, in table order (the run's ``matryoshka_dims``).
        evaluations: ``[{"name": "dev" | "test", "splits": {task: split}, "text": ..., "scores": {str(d): {task:
            score, "avg": mean}}}]``, each a group of the table's columns.
    """

    dims: tuple[int, ...]
    evaluations: tuple[Mapping[str, Any], ...]

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> MatryoshkaCardResults:
        """Read the saved dict; ``ValueError`` naming what is malformed."""
        dims = values.get("dims")
        evaluations = values.get("evaluations")
        if not isinstance(dims, list) or not dims or not all(isinstance(dim, int) for dim in dims):
            raise ValueError(f"'dims' must be a non-empty list of integers, got {dims!r}")
        if not isinstance(evaluations, list):
            raise ValueError(f"'evaluations' must be a list, got {evaluations!r}")
        for evaluation in evaluations:
            splits, scores = evaluation.get("splits"), evaluation.get("scores")
            if not isinstance(splits, Mapping) or set(splits) - set(STS_DISPLAY):
                raise ValueError(f"'splits' must map STS tasks to splits, got {splits!r}")
            if not isinstance(scores, Mapping) or sorted(scores) != sorted(str(dim) for dim in dims):
                raise ValueError(f"'scores' must have one entry per dimension {dims}, got {sorted(scores or {})}")
        return cls(dims=tuple(dims), evaluations=tuple(evaluations))


def read_matryoshka_results(directory: str | Path, summary: TrainingSummary) -> MatryoshkaCardResults | None:
    """The per-dimension scores saved in ``directory`` for the run ``summary`` describes; ``None`` without the file,
    for a run without ``matryoshka_dims``, or for a file whose dimensions are not the run's (an earlier run's in
    the same folder) or that cannot be read, which is logged: the card then has no table rather than a wrong one."""
    path = Path(directory) / MATRYOSHKA_RESULTS_FILE
    dims = summary.objective_config.get("matryoshka_dims")
    if not path.is_file() or not dims:
        return None
    try:
        results = MatryoshkaCardResults.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, AttributeError) as err:  # JSONDecodeError is a ValueError
        logger.warning("The card leaves out the per-dimension STS table: %s is malformed: %s", path, err)
        return None
    if list(results.dims) != list(dims):
        logger.warning(
            "The card leaves out the per-dimension STS table: %s has dims %s, the run trained %s.",
            path,
            list(results.dims),
            list(dims),
        )
        return None
    return results


def _label(task: str, split: str) -> str:
    """``STS12`` for the test-only tasks, else the task and its split (``STS-B dev``, ``SICK-R trial``)."""
    name = STS_DISPLAY[task][0]
    return name if task.startswith("sts1") else f"{name} {split}"


def _cell(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "-"


def matryoshka_section(results: MatryoshkaCardResults, model_name_or_path: str) -> list[str]:
    """``### Matryoshka dimensions``: one row per dimension, the Spearman ×100 of every task the run scored (dev
    sets, then test sets, each with their average when there are several), and the ``hf_cse.eval`` commands that
    recompute each group of columns; one string per line."""
    header, columns = ["dim"], []  # columns: (evaluation index, task or "avg")
    for index, evaluation in enumerate(results.evaluations):
        for task, split in evaluation["splits"].items():
            header.append(_label(task, split))
            columns.append((index, task))
        if len(evaluation["splits"]) > 1:
            header.append(f"Avg. ({evaluation['name']})")
            columns.append((index, "avg"))
    rows = [
        [str(dim), *(_cell(results.evaluations[i]["scores"][str(dim)].get(key)) for i, key in columns)]
        for dim in results.dims
    ]
    lines = [
        "### Matryoshka dimensions",
        "",
        "Trained so that the first *d* dimensions of the embedding are an embedding too (`matryoshka_dims`). "
        "Spearman ×100 of the cosine similarity of the first *d* dimensions, the saved model scored at the end of "
        "training (load it with `SentenceTransformer(..., truncate_dim=d)`, or keep `embeddings[:, :d]`):",
        "",
        table(header, rows, "r" * len(header)),
    ]
    tests = [evaluation for evaluation in results.evaluations if evaluation.get("name") == "test"]
    if tests and tests[0].get("text"):
        text = STS_TEXT.get(tests[0]["text"], "not recorded")  # hf_cse's own words only: no user string to escape
        lines += ["", f"Test sets: STS12-16 in the 'all' setting; text: {text}."]
    commands = [_eval_command(group["splits"], results.dims, model_name_or_path) for group in results.evaluations]
    if commands:
        lines += ["", "Each group of columns, recomputed:", "", code_block("\n".join(commands), "bash")]
    return lines


def _eval_command(splits: Mapping[str, str], dims: Sequence[int], model_name_or_path: str) -> str:
    """``python -m hf_cse.eval`` on the tasks and splits of ``splits`` at every dimension."""
    options = ["--tasks", *splits]
    if "stsb" in splits:
        options += ["--stsb_split", splits["stsb"]]
    if "sickr" in splits:
        options += ["--sickr_split", splits["sickr"]]
    return (
        f"python -m hf_cse.eval --model_name_or_path {shlex.quote(model_name_or_path)} --sts_dir STS_DIR "
        + " ".join(shlex.quote(str(option)) for option in options)
        + " --truncate_dim "
        + " ".join(str(dim) for dim in dims)
    )
