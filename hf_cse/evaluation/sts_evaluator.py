"""Score an embedding function on the STS benchmarks: cosine similarity of each pair vs. the gold score.

The numbers follow SentEval/SimCSE and MTEB:

* ``all``: Spearman x 100 over the pairs of all subsets of a task concatenated. SimCSE's default ("all"
  setting) for STS12-16, and what MTEB reports for STS12-16 (its Hub copies are already concatenated).
* ``wmean``: the per-subset Spearman values averaged with the subset sizes as weights (SentEval's ``wmean``).
* per-subset Spearman and Pearson.

For single-subset tasks (STS-B, SICK-R on one split) ``all`` and ``wmean`` coincide.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .metric import sts_correlation
from .sts_data import STS_TASKS, STSSubset, load_sts_task, normalize_task_name

logger = logging.getLogger(__name__)

#: ``encode(sentences) -> embeddings``: float embeddings ``[N, D]`` of ``N`` sentences, in input order.
EncodeFn = Callable[[list[str]], torch.Tensor]

#: Tasks with a development split, and that split (:func:`load_sts_dev_sets`, :func:`evaluate_sts_dev`).
STS_DEV_SPLITS: dict[str, str] = {"stsb": "dev", "sickr": "trial"}


@dataclass
class STSSubsetResult:
    """Correlations of one subset (x 100)."""

    name: str
    num_pairs: int
    spearman: float
    pearson: float


@dataclass
class STSTaskResult:
    """Correlations of one task (x 100).

    Attributes:
        task: canonical task name.
        split: the split evaluated (``"test"`` for STS12-16).
        all: Spearman over all subsets' pairs concatenated (the main number).
        all_pearson: Pearson over all subsets' pairs concatenated.
        wmean: per-subset Spearman averaged with subset sizes as weights.
        wmean_pearson: per-subset Pearson averaged with subset sizes as weights.
        subsets: per-subset results, in loading order.
    """

    task: str
    split: str
    all: float
    all_pearson: float
    wmean: float
    wmean_pearson: float
    subsets: list[STSSubsetResult] = field(default_factory=list)

    @property
    def num_pairs(self) -> int:
        return sum(subset.num_pairs for subset in self.subsets)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``all``, ``wmean``, their Pearson twins, ``num_pairs``, ``split`` and ``subsets``."""
        return {
            "all": self.all,
            "wmean": self.wmean,
            "all_pearson": self.all_pearson,
            "wmean_pearson": self.wmean_pearson,
            "num_pairs": self.num_pairs,
            "split": self.split,
            "subsets": {
                s.name: {"spearman": s.spearman, "pearson": s.pearson, "num_pairs": s.num_pairs} for s in self.subsets
            },
        }


@dataclass
class STSResults:
    """Results of :func:`evaluate_sts`, keyed by task in evaluation order.

    ``results["sts12"].all`` is a task's main number; :attr:`avg` averages ``all`` over the tasks.
    """

    tasks: dict[str, STSTaskResult]
    settings: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, task: str) -> STSTaskResult:
        return self.tasks[normalize_task_name(task)]

    def __contains__(self, task: object) -> bool:
        try:
            return normalize_task_name(task) in self.tasks  # type: ignore[arg-type]
        except ValueError:
            return False

    def __iter__(self) -> Iterator[STSTaskResult]:
        return iter(self.tasks.values())

    @property
    def avg(self) -> float:
        """Mean of the tasks' ``all`` Spearman (x 100)."""
        return float(np.mean([result.all for result in self.tasks.values()])) if self.tasks else math.nan

    def summary(self) -> dict[str, float]:
        """``{task: all Spearman x 100, ..., "avg": mean}``, the numbers papers report."""
        return {**{task: result.all for task, result in self.tasks.items()}, "avg": self.avg}

    def to_dict(self) -> dict[str, Any]:
        """:meth:`summary` plus ``"details"``: per-task ``wmean``/Pearson/per-subset numbers and the settings."""
        details: dict[str, Any] = {task: result.to_dict() for task, result in self.tasks.items()}
        details["settings"] = dict(self.settings)
        return {**self.summary(), "details": details}

    def format_table(self) -> str:
        """Plain-text table: task, split, pairs, ``all`` and ``wmean`` Spearman x 100, then the average."""
        rows = [(task, r.split, str(r.num_pairs), f"{r.all:.2f}", f"{r.wmean:.2f}") for task, r in self.tasks.items()]
        header, total = ("task", "split", "pairs", "all", "wmean"), ("avg", "", "", f"{self.avg:.2f}", "")
        return plain_table([header, *rows, total], text_columns=2, total=True)  # task, split


def plain_table(rows: Sequence[Sequence[str]], text_columns: int = 1, total: bool = False) -> str:
    """A plain-text table of ``rows``, the first the header, ruled off below it (and above the last row, a total,
    when ``total``): the first ``text_columns`` columns left-aligned, the others (numbers) right-aligned, two spaces
    apart, no trailing spaces."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if i < text_columns else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    rule = "-" * max(len(line) for line in lines)
    body = [*lines[1:-1], rule, lines[-1]] if total else lines[1:]
    return "\n".join([lines[0], rule, *body])


def encode_unique(
    encode: EncodeFn, sentences: Iterable[str], batch_size: int | None = None
) -> dict[str, torch.Tensor]:
    """Embed each distinct sentence once.

    Args:
        encode: ``encode(list_of_N_sentences) -> [N, D]`` float embeddings, in input order.
        sentences: sentences, duplicates allowed.
        batch_size: sentences per ``encode`` call; ``None`` (default) passes all distinct sentences in one call,
            which lets an encoder that sorts by length batch them best.

    Returns:
        ``{sentence: embedding [D] (float32, CPU)}``.
    """
    unique = list(dict.fromkeys(sentences))  # dedupe, keeping first-seen order (deterministic)
    if not unique:
        return {}
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be >= 1 or None, got {batch_size}.")
    step = batch_size or len(unique)
    chunks = []
    for start in range(0, len(unique), step):
        chunk = unique[start : start + step]
        embeddings = torch.as_tensor(encode(chunk))
        if embeddings.ndim != 2 or embeddings.shape[0] != len(chunk):
            raise ValueError(
                f"encode() must return embeddings of shape [N, D] for N={len(chunk)} sentences, "
                f"got shape {tuple(embeddings.shape)}."
            )
        chunks.append(embeddings.detach().to("cpu", torch.float32))
    return dict(zip(unique, torch.cat(chunks), strict=True))


def pair_cosine(embeddings1: torch.Tensor, embeddings2: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine similarity of ``[N, D]`` and ``[N, D]`` embeddings -> ``[N]``."""
    return (F.normalize(embeddings1.float(), dim=-1) * F.normalize(embeddings2.float(), dim=-1)).sum(-1)


def pair_similarities(
    table: dict[str, torch.Tensor], sentences1: Sequence[str], sentences2: Sequence[str]
) -> np.ndarray:
    """Cosine similarity ``[N]`` of each pair ``(sentences1[i], sentences2[i])``, their embeddings read from
    ``table`` (``{sentence: embedding [D]}``, as :func:`encode_unique` returns it); empty for no pairs."""
    if not sentences1:
        return np.zeros(0)
    return pair_cosine(
        torch.stack([table[s] for s in sentences1]), torch.stack([table[s] for s in sentences2])
    ).numpy()


def score_subsets(
    task: str, split: str, subsets: Sequence[STSSubset], table: dict[str, torch.Tensor]
) -> STSTaskResult:
    """Correlate cosine similarities with gold scores for the subsets of one task.

    Args:
        task: task name, stored in the result.
        split: split name, stored in the result.
        subsets: the task's subsets (each needs >= 2 pairs).
        table: ``{sentence: embedding [D]}`` covering every sentence of ``subsets``.

    Returns:
        The task's ``all``, ``wmean`` and per-subset correlations (x 100).
    """
    if not subsets:
        raise ValueError(f"Task {task!r} has no subsets to score.")
    sims, golds, results = [], [], []
    for subset in subsets:
        sim = pair_similarities(table, subset.sentences1, subset.sentences2)
        gold = np.asarray(subset.scores, dtype=np.float64)
        scores = sts_correlation(predictions=sim, references=gold)
        results.append(STSSubsetResult(subset.name, len(subset), scores["spearman"], scores["pearson"]))
        sims.append(sim)
        golds.append(gold)
    overall = sts_correlation(predictions=np.concatenate(sims), references=np.concatenate(golds))
    sizes = np.array([r.num_pairs for r in results], dtype=np.float64)
    return STSTaskResult(
        task=task,
        split=split,
        all=overall["spearman"],
        all_pearson=overall["pearson"],
        wmean=float(np.average([r.spearman for r in results], weights=sizes)),
        wmean_pearson=float(np.average([r.pearson for r in results], weights=sizes)),
        subsets=results,
    )


def normalize_task_list(
    tasks: Sequence[str] | str, normalize: Callable[[str], str], kind: str, valid: Sequence[str]
) -> list[str]:
    """The canonical names of ``tasks`` (one name or several), each through ``normalize``, which raises on an
    unknown task; ``kind`` ("STS", "transfer") and ``valid`` word the errors for an empty or duplicated list."""
    tasks = [tasks] if isinstance(tasks, str) else list(tasks)
    if not tasks:
        raise ValueError(f"No {kind} task given. Valid tasks: {', '.join(valid)}.")
    names = [normalize(task) for task in tasks]
    if len(set(names)) != len(names):
        raise ValueError(f"Duplicate {kind} tasks in {tasks}.")
    return names


def _score_tasks(
    encode: EncodeFn, loaded: dict[str, tuple[str, list[STSSubset]]], batch_size: int | None
) -> tuple[dict[str, STSTaskResult], int]:
    """Embed every distinct sentence of ``loaded`` ({task: (split, subsets)}) once, then score each task."""
    sentences = (s for _, subsets in loaded.values() for sub in subsets for s in (*sub.sentences1, *sub.sentences2))
    table = encode_unique(encode, sentences, batch_size=batch_size)
    logger.info("Encoded %d distinct sentences for STS tasks %s.", len(table), ", ".join(loaded))
    results = {name: score_subsets(name, split, subsets, table) for name, (split, subsets) in loaded.items()}
    return results, len(table)


def evaluate_sts(
    encode: EncodeFn,
    tasks: Sequence[str] = STS_TASKS,
    sts_dir: str | os.PathLike | None = None,
    *,
    sickr_split: str = "test",
    stsb_split: str = "test",
    batch_size: int | None = None,
) -> STSResults:
    """Evaluate an embedding function on STS tasks with cosine similarity.

    All requested tasks are loaded first and every distinct sentence among them is embedded exactly once
    (STS-B reuses many STS12-16 sentences, and SICK repeats its own), then each task is scored.

    Args:
        encode: ``encode(list_of_N_sentences) -> torch.Tensor [N, D]`` float embeddings in input order, e.g.
            ``functools.partial(encoder.encode, batch_size=128)`` for a ``SentenceEncoder``. It is called as is:
            eval mode and ``torch.inference_mode`` are the caller's business (``SentenceEncoder`` does both).
        tasks: task names from :data:`~hf_cse.evaluation.STS_TASKS` (default: all 7).
        sts_dir: SentEval-layout data folder; ``None`` loads MTEB's Hub copies (network needed; use
            ``sickr_split="all"`` then).
        sickr_split: SICK-R split: ``"test"`` (4,927 pairs, SentEval/SimCSE), ``"all"`` (9,927, MTEB),
            ``"train"`` or ``"trial"``.
        stsb_split: STS-B split: ``"test"`` (1,379 pairs), ``"dev"`` or ``"train"``.
        batch_size: sentences per ``encode`` call; ``None`` (default) encodes all distinct sentences in one call
            and leaves batching to the encoder.

    Returns:
        :class:`STSResults`; ``results.summary()`` gives ``{task: all Spearman x 100, "avg": ...}``.

    Raises:
        ValueError: unknown or duplicated task, unknown split, or embeddings of the wrong shape.
        FileNotFoundError: a data file is missing (the exact path is named).
    """
    names = normalize_task_list(tasks, normalize_task_name, "STS", STS_TASKS)
    splits = {name: {"stsb": stsb_split, "sickr": sickr_split}.get(name, "test") for name in names}
    loaded = {name: (splits[name], load_sts_task(name, sts_dir, splits[name])) for name in names}
    results, num_unique = _score_tasks(encode, loaded, batch_size)
    settings = {
        "sts_dir": None if sts_dir is None else str(sts_dir),
        "sickr_split": sickr_split if "sickr" in names else None,
        "stsb_split": stsb_split if "stsb" in names else None,
        "similarity": "cosine",
        "num_unique_sentences": num_unique,
    }
    return STSResults(tasks=results, settings=settings)


@dataclass
class STSDevSets:
    """Development sets read once, to be scored at every evaluation of a training run (:func:`score_sts_dev`).

    Attributes:
        subsets: ``{task: subsets}`` for STS-B dev and/or SICK-R trial.
        sts_dir: the folder they were read from (``None``: the Hub).
    """

    subsets: dict[str, list[STSSubset]]
    sts_dir: str | None = None

    @property
    def tasks(self) -> list[str]:
        return list(self.subsets)

    def __len__(self) -> int:
        """Number of scored pairs over all dev sets."""
        return sum(len(subset) for subsets in self.subsets.values() for subset in subsets)


def load_sts_dev_sets(sts_dir: str | os.PathLike | None, tasks: Sequence[str] | str = ("stsb",)) -> STSDevSets:
    """Read the development sets of ``tasks``: STS-B ``dev`` (1,500 pairs) and/or SICK-R ``trial`` (500 pairs).

    Args:
        sts_dir: SentEval-layout data folder; ``None`` reads MTEB's Hub copy (network needed; STS-B only, the Hub
            copy of SICK-R has no trial split).
        tasks: any of ``"stsb"``, ``"sickr"`` (see :data:`STS_DEV_SPLITS`).

    Raises:
        ValueError: a task without a development split (the valid ones are listed) or a duplicated task.
        FileNotFoundError: a data file is missing (the exact path is named).
    """
    names = normalize_task_list(tasks, normalize_task_name, "STS", tuple(STS_DEV_SPLITS))
    for name in names:
        if name not in STS_DEV_SPLITS:
            raise ValueError(
                f"STS task {name!r} has no development split. Valid dev tasks: {', '.join(STS_DEV_SPLITS)}."
            )
    subsets = {name: load_sts_task(name, sts_dir, STS_DEV_SPLITS[name]) for name in names}
    return STSDevSets(subsets=subsets, sts_dir=None if sts_dir is None else str(sts_dir))


def score_sts_dev(encode: EncodeFn, dev_sets: STSDevSets, *, batch_size: int | None = None) -> dict[str, float]:
    """Spearman (x 100) of ``encode`` on dev sets loaded by :func:`load_sts_dev_sets`.

    Args:
        encode: ``encode(list_of_N_sentences) -> torch.Tensor [N, D]``, as in :func:`evaluate_sts`.
        dev_sets: the dev sets.
        batch_size: sentences per ``encode`` call (``None``: all distinct sentences at once).

    Returns:
        ``{"stsb_spearman": float, "sickr_spearman": float}`` for the tasks in ``dev_sets`` (keys ready for an
        ``eval_`` prefix), plus ``"avg_spearman"`` (their mean) when there is more than one.
    """
    loaded = {name: (STS_DEV_SPLITS[name], subsets) for name, subsets in dev_sets.subsets.items()}
    if not loaded:
        raise ValueError(f"No STS dev set to score. Valid dev tasks: {', '.join(STS_DEV_SPLITS)}.")
    results, _ = _score_tasks(encode, loaded, batch_size)
    metrics = {f"{name}_spearman": result.all for name, result in results.items()}
    if len(metrics) > 1:
        metrics["avg_spearman"] = float(np.mean(list(metrics.values())))
    return metrics


def evaluate_sts_dev(
    encode: EncodeFn,
    sts_dir: str | os.PathLike | None,
    tasks: Sequence[str] | str = ("stsb",),
    *,
    batch_size: int | None = None,
) -> dict[str, float]:
    """Development-set Spearman for model selection (STS-B dev, optionally SICK-R trial); test sets untouched.

    One-shot form of ``score_sts_dev(encode, load_sts_dev_sets(sts_dir, tasks))``; a training loop that scores
    every ``eval_steps`` should load the dev sets once and call :func:`score_sts_dev`.

    Returns:
        ``{"stsb_spearman": 81.2, "sickr_spearman": ...}`` (x 100) for the tasks asked for, plus
        ``"avg_spearman"`` when there is more than one.
    """
    return score_sts_dev(encode, load_sts_dev_sets(sts_dir, tasks), batch_size=batch_size)
