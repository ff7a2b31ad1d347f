"""A run's STS test scores beside a paper's: the ``paper_results`` block of the paper configs.

Every file in ``examples/configs/paper/`` carries the test scores its paper reports, as printed (Spearman x 100)::

    paper_results:
      method: DCLR, BERT-base
      source: Zhou et al. 2022 (DCLR), Table 1, row BERT-base +DCLR (Ours)
      sts12: 70.81
      ...
      sickr: 71.59
      avg: 77.22

``method`` says whose numbers they are and ``source`` which table holds them; the task keys are those of
:data:`~hf_cse.evaluation.STS_TASKS` (a paper that reports fewer tasks lists fewer); ``avg`` is the paper's printed
average and is required exactly when all 7 tasks are given. The block is no training argument: the config reader
(:mod:`hf_cse.training.arguments.config_file`) checks it here and leaves it out of the arguments.

Where the paper's table could not be read, a block records what could be checked, a stated gain, and says so: no
task scores, ``avg_gain`` (the gain in the STS average the paper states) and ``gain_over`` (the baseline it is
measured from), with ``source`` saying where the gain is stated::

    paper_results:
      method: SimCSE++, BERT-base
      source: Xu et al. 2023 (SimCSE++), abstract (a stated gain; the per-task table was not read)
      avg_gain: 1.8
      gain_over: unsupervised SimCSE, BERT-base

A comparison then shows the run's scores with no paper column to subtract, and states the gain beside them.

Two places compare against it, both through :func:`compare_with_paper`: ``python -m hf_cse.eval --compare_to FILE``
and ``run_unsup.py --config FILE`` at the end of training. Both evaluate the setting the papers report: STS12-16
'all', STS-B test and SICK-R test (4,927 pairs), on SentEval's Moses-tokenized, lower-cased copy of STS12-16 and
STS-B (SICK-R as SentEval reads it).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..run_files import PAPER_COMPARISON_FILE
from ..sources import public_name
from .sts_data import STS_TASKS, TASK_LABELS, load_sts_task
from .sts_evaluator import STSResults, plain_table

#: The top-level key of a config file that holds the paper's numbers.
PAPER_RESULTS_KEY = "paper_results"

#: The splits the papers report: STS-B test and SICK-R test (SentEval's, not MTEB's 9,927 pairs).
PAPER_SPLITS: dict[str, str] = {"stsb": "test", "sickr": "test"}

_TEXT_NOTES = {
    "tokenized": "SentEval's tokenized copy, as the papers",
    "raw": "raw text, where the papers used SentEval's tokenized copy (scores of cased models move)",
}


@dataclass(frozen=True)
class PaperResults:
    """The STS test scores a paper reports for one method (Spearman x 100, as printed).

    Attributes:
        method: whose numbers these are, e.g. ``"DCLR, BERT-base"``.
        source: where they are printed, e.g. ``"Zhou et al. 2022 (DCLR), Table 1"``.
        scores: ``{task: score}`` in :data:`STS_TASKS` order.
        avg: the paper's printed average of the 7 tasks; ``None`` when it reports fewer.
        origin: the file the block was read from (for messages).
        base_model: the model the paper trained, as its config names it (``model_name_or_path``); ``None`` unknown.
        avg_gain: the gain in the STS average the paper states over ``gain_over``, recorded instead of ``scores``
            where its table could not be read; ``None`` for a block of scores.
        gain_over: the baseline ``avg_gain`` is measured from, e.g. ``"unsupervised SimCSE, BERT-base"``.
    """

    method: str
    source: str
    scores: dict[str, float]
    avg: float | None = None
    origin: str = ""
    base_model: str | None = None
    avg_gain: float | None = None
    gain_over: str | None = None

    @classmethod
    def from_mapping(cls, block: Any, origin: str, base_model: str | None = None) -> PaperResults:
        """Read and check a ``paper_results`` block; ``origin`` names its file in the error messages, ``base_model``
        is the model the paper trained (the config's ``model_name_or_path``).

        Raises:
            UsageError: not a mapping, an unknown key, ``method``/``source`` missing or not text, a score that is
                no number in [-100, 100], ``avg`` missing with all 7 tasks (or given with fewer), or ``avg_gain``
                without ``gain_over`` (or the reverse), or beside task scores.
        """
        where = f"{origin}: {PAPER_RESULTS_KEY}"
        if not isinstance(block, Mapping):
            raise UsageError(f"{where} must be a mapping of method, source, task scores and avg; got {block!r}.")
        unknown = sorted(set(block) - {"method", "source", "avg", "avg_gain", "gain_over", *STS_TASKS})
        if unknown:
            raise UsageError(
                f"{where} has unknown keys {unknown}; valid keys: method, source, {', '.join(STS_TASKS)}, avg, "
                "avg_gain, gain_over."
            )
        for key in ("method", "source"):
            if not isinstance(block.get(key), str) or not block[key].strip():
                raise UsageError(f"{where}.{key} must be a non-empty text, got {block.get(key)!r}.")
        scores = {task: _score(block[task], f"{where}.{task}") for task in STS_TASKS if task in block}
        avg, avg_gain, gain_over = block.get("avg"), block.get("avg_gain"), block.get("gain_over")
        if "avg_gain" in block or "gain_over" in block:  # a stated gain, recorded where no table could be read
            if scores or "avg" in block:
                given = [key for key in [*STS_TASKS, "avg"] if key in block]
                raise UsageError(
                    f"{where}.avg_gain records a stated gain where no table could be read; drop it or the scores "
                    f"({', '.join(given)})."
                )
            if not isinstance(gain_over, str) or not gain_over.strip():
                raise UsageError(
                    f"{where}.gain_over must name the baseline avg_gain is measured from, got {gain_over!r}."
                )
            if "avg_gain" not in block:
                raise UsageError(f"{where}.gain_over needs avg_gain, the gain in the STS average the paper states.")
            avg_gain, gain_over = _score(avg_gain, f"{where}.avg_gain"), " ".join(gain_over.split())
        elif not scores:
            raise UsageError(
                f"{where} holds no task score; give any of {', '.join(STS_TASKS)} (or avg_gain and gain_over, a "
                "gain the paper states)."
            )
        elif len(scores) == len(STS_TASKS) and avg is None:
            raise UsageError(f"{where}.avg is missing: give the paper's printed average of the 7 tasks.")
        elif len(scores) < len(STS_TASKS) and avg is not None:
            missing = [task for task in STS_TASKS if task not in scores]
            raise UsageError(f"{where}.avg needs all 7 task scores; missing: {', '.join(missing)}.")
        avg = None if avg is None else _score(avg, f"{where}.avg")
        method, source = block["method"].strip(), " ".join(block["source"].split())
        return cls(method, source, scores, avg, origin, base_model, avg_gain=avg_gain, gain_over=gain_over)

    @property
    def stated_gain(self) -> str | None:
        """The stated gain in words (``"a gain of +1.80 in the STS average over X"``); ``None`` for a block of
        scores."""
        if self.avg_gain is None:
            return None
        return f"a gain of {self.avg_gain:+.2f} in the STS average over {self.gain_over}"

    def to_dict(self) -> dict[str, Any]:
        """The block as a config holds it (``method``, ``source``, the scores, ``avg`` when given; ``avg_gain`` and
        ``gain_over`` for a stated gain)."""
        avg = {} if self.avg is None else {"avg": self.avg}
        gain = {} if self.avg_gain is None else {"avg_gain": self.avg_gain, "gain_over": self.gain_over}
        return {"method": self.method, "source": self.source, **self.scores, **avg, **gain}


def _score(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not -100 <= value <= 100:
        raise UsageError(f"{name} must be a Spearman correlation x 100 (a number in [-100, 100]), got {value!r}.")
    return float(value)


def paper_results_in(values: Mapping[str, Any], origin: str) -> PaperResults | None:
    """The checked ``paper_results`` block of a parsed config mapping, or ``None`` when it has none."""
    if PAPER_RESULTS_KEY not in values:
        return None
    base_model = values.get("model_name_or_path")
    return PaperResults.from_mapping(
        values[PAPER_RESULTS_KEY], origin, base_model if isinstance(base_model, str) else None
    )


def _model_name(name: str) -> str:
    """What two spellings of one model share: ``google-bert/bert-base-uncased``, ``/models/bert-base-uncased`` and
    ``bert-base-uncased (local)`` are all ``bert-base-uncased``."""
    name = name.strip().removesuffix(" (local)").rstrip("/\\")
    return re.split(r"[/\\:]", name)[-1].lower().replace("_", "-")


def paper_test_sets_problem(sts_dir: str | os.PathLike | None) -> str | None:
    """Why the 7 STS test sets cannot be read from ``sts_dir`` in the papers' setting, or ``None`` when they can.

    A run checks this before training, so that a folder without (say) SICK is reported at the start, not after the
    last step; the files are small (about 10 MB for all 7 tasks).
    """
    if sts_dir is None:
        return (
            "no sts_dir is set (the papers scored SentEval's local copy; MTEB's Hub copy of SICK-R has all 9,927 "
            "pairs, not the test split)"
        )
    for task in STS_TASKS:
        try:
            load_sts_task(task, sts_dir, PAPER_SPLITS.get(task))
        except (FileNotFoundError, ValueError) as err:
            return str(err)
    return None


def check_paper_setting(tasks: Sequence[str], stsb_split: str, sickr_split: str) -> None:
    """Refuse to compare with a paper's test scores in a setting it did not report: STS-B or SICK-R on another
    split than test (``--stsb_split dev``, MTEB's ``--sickr_split all``).

    Raises:
        UsageError: naming the split and the flag that chose it.
    """
    for task, split, flag in (("stsb", stsb_split, "--stsb_split"), ("sickr", sickr_split, "--sickr_split")):
        if task in tasks and split != PAPER_SPLITS[task]:
            raise UsageError(
                f"--compare_to compares with the papers' {TASK_LABELS[task]} test scores, but {flag} is {split!r}: "
                f"use {flag} {PAPER_SPLITS[task]}"
                + (" (with --sts_dir) or leave sickr out of --tasks." if task == "sickr" else ".")
            )


@dataclass
class PaperComparison:
    """A run's STS test scores beside a paper's, with the differences (run minus paper).

    Attributes:
        paper: the paper's scores.
        run: the run's ``{task: 'all' Spearman x 100}``.
        text: the STS text the run was scored on, ``"tokenized"`` (SentEval's copy, as the papers) or ``"raw"``;
            ``None`` if unknown.
        base_model: the model the run started from, as it was named; ``None`` if unknown.
    """

    paper: PaperResults
    run: dict[str, float]
    text: str | None = None
    base_model: str | None = None

    @property
    def base_model_caveat(self) -> str | None:
        """One line when the run started from another model than the paper's, or from one not known (then the
        differences may measure the base model as much as the method); ``None`` when both are the same, or when the
        paper's is unknown."""
        ours, theirs = self.base_model, self.paper.base_model
        if theirs is None or (ours is not None and _model_name(ours) == _model_name(theirs)):
            return None
        if ours is None:  # a model hf_cse did not train (its record names the base), e.g. one from the Hub
            return (
                f"Base model unknown: the paper's numbers are for {theirs}, and hf_cse knows the base model only of "
                "the models it trained, so the differences may compare base models as well as the method."
            )
        return (
            f"Not the paper's base model: this run started from {ours}, the paper's numbers are for {theirs}, so the "
            "differences compare base models as well as the method."
        )

    @property
    def tasks(self) -> list[str]:
        """The tasks of either side, in :data:`STS_TASKS` order."""
        return [task for task in STS_TASKS if task in self.run or task in self.paper.scores]

    @property
    def run_avg(self) -> float | None:
        """The run's mean over the 7 tasks, when it has all 7 (the only average papers print)."""
        if all(task in self.run for task in STS_TASKS):
            return sum(self.run[task] for task in STS_TASKS) / len(STS_TASKS)
        return None

    def _sides(self, task: str) -> tuple[float | None, float | None]:
        """``(run, paper)`` for ``task`` (or ``"avg"``); ``None`` for a side that lacks it."""
        return (self.run_avg, self.paper.avg) if task == "avg" else (self.run.get(task), self.paper.scores.get(task))

    def difference(self, task: str) -> float | None:
        """Run minus paper for ``task`` (or ``"avg"``); ``None`` when either side lacks it."""
        run, paper = self._sides(task)
        return None if run is None or paper is None else run - paper

    def rows(self) -> list[tuple[str, str, str, str]]:
        """``(label, run, paper, difference)`` per task, then ``Avg.`` when the paper prints one; ``-`` for a
        value a side lacks."""
        keys = [*self.tasks, "avg"] if self.paper.avg is not None else self.tasks
        return [
            (TASK_LABELS.get(key, "Avg."), *map(_cell, self._sides(key)), _cell(self.difference(key), "+.2f"))
            for key in keys
        ]

    def describe_setting(self) -> str:
        """One line: the scores' unit and setting, and the STS text the run was scored on."""
        text = _TEXT_NOTES.get(self.text or "", "STS text unknown")
        return f"Spearman x 100 of cosine similarity; STS12-16 'all', STS-B test, SICK-R test; {text}."

    def format_table(self) -> str:
        """The comparison as plain text: the paper's method and source, the setting, and the table."""
        table = plain_table([("task", "run", "paper", "diff"), *self.rows()], total=self.paper.avg is not None)
        gain = self.paper.stated_gain and self.stated_gain_line()
        lines = [f"{self.paper.method}, as reported in {self.paper.source}:", self.describe_setting()]
        return "\n".join(line for line in [*lines, self.base_model_caveat, table, gain] if line)

    def stated_gain_line(self) -> str:
        """For a paper block that records a stated gain instead of scores: the gain, and how to check it against
        this run's average."""
        average = "(not all 7 tasks were scored)" if self.run_avg is None else f"{self.run_avg:.2f}"
        return (
            f"The paper states {self.paper.stated_gain} (a gain, not per-task scores): to check it, compare this "
            f"run's average, {average}, with that baseline's in the same setting."
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``paper`` (its block), ``run``, ``run_avg``, ``difference`` per task (and ``avg``), ``text``,
        and both base models (``paper_base_model``, ``base_model``; a local path by its last component)."""
        differences = {task: self.difference(task) for task in [*self.tasks, "avg"]}
        return {
            # The config's file name only: the JSON is uploaded with a run folder, where a local path means nothing.
            "paper": {**self.paper.to_dict(), "origin": Path(self.paper.origin).name},
            "run": dict(self.run),
            "run_avg": self.run_avg,
            "difference": {task: value for task, value in differences.items() if value is not None},
            "text": self.text,
            "paper_base_model": self.paper.base_model,
            "base_model": public_name(self.base_model),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PaperComparison:
        """Read :meth:`to_dict`'s output back (``paper_comparison.json`` of a run folder)."""
        block = dict(data["paper"])
        origin = str(block.pop("origin", "") or "")
        run = {task: float(value) for task, value in data["run"].items() if task in STS_TASKS}
        paper = PaperResults.from_mapping(block, origin or PAPER_COMPARISON_FILE, data.get("paper_base_model"))
        return cls(paper, run, data.get("text"), data.get("base_model"))


def _cell(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def compare_with_paper(
    results: STSResults | Mapping[str, Any],
    paper: PaperResults,
    text: str | None = None,
    base_model: str | None = None,
) -> PaperComparison:
    """The run's scores beside ``paper``'s.

    Args:
        results: an :class:`~hf_cse.evaluation.STSResults`, the ``python -m hf_cse.eval`` JSON (``sts_results.json``
            of a run folder, whose ``details.settings`` give the splits and ``text`` the STS text), or a plain
            ``{task: score}`` mapping.
        paper: the paper's scores.
        text: ``"tokenized"`` or ``"raw"``, the STS text of the run; default: the JSON's ``text``, if any.
        base_model: the model the run started from (the comparison then says when it is not the paper's).

    Raises:
        ValueError: the results scored STS-B or SICK-R on another split than the papers' test split.
    """
    if isinstance(results, STSResults):
        run = {task: float(result.all) for task, result in results.tasks.items()}
        splits = {task: result.split for task, result in results.tasks.items()}
    else:
        run = {task: float(results[task]) for task in STS_TASKS if isinstance(results.get(task), int | float)}
        run = {task: value for task, value in run.items() if not math.isnan(value)}
        settings = (results.get("details") or {}).get("settings") or {}
        splits = {task: settings.get(f"{task}_split") for task in PAPER_SPLITS}
        text = text or results.get("text")
    for task, expected in PAPER_SPLITS.items():
        split = splits.get(task)
        if task in run and split is not None and split != expected:
            raise ValueError(f"{TASK_LABELS[task]} was scored on its {split!r} split; the papers report {expected!r}.")
    return PaperComparison(paper, run, text, base_model)
