"""``sweep.json`` and ``sweep.md``: every run's scores, and each setting's mean and spread over its seeds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..evaluation.paper_comparison import TASK_LABELS
from ..markdown import code_block, code_span, markdown_text, table
from .aggregate import STS_TEST_COLUMNS, column_stats, format_mean_std, has_test_scores
from .arguments import SELECTION_METRIC
from .grid import Setting, run_name

PENDING = "pending"
COLUMN_LABELS = {**TASK_LABELS, "avg": "Avg."}


def run_entry(
    name: str, setting: dict[str, Any], seed: int, status: str, record: dict[str, Any] | None, **extra: Any
) -> dict[str, Any]:
    """A run as ``sweep.json`` lists it: its setting, seed and status, and when it is done its folder, log, the
    selected checkpoint's dev score and step, and its test scores."""
    entry = {"name": name, "setting": setting, "seed": seed, "status": status, **extra}
    if record is not None:
        dev = record["dev"]
        entry.update(
            run_dir=record["run_dir"],
            log=record["log"],
            dev={SELECTION_METRIC: dev[SELECTION_METRIC], "step": dev["step"], "checkpoint": dev["checkpoint"]},
            test=record["test"],
        )
    return entry


def is_complete_record(record: Any) -> bool:
    """Whether ``record`` (a run's ``results/NAME.json``, as read) holds a finished run's dev selection score and every
    test column."""
    if not isinstance(record, dict):
        return False
    dev, test = record.get("dev"), record.get("test")
    return isinstance(dev, dict) and isinstance(dev.get(SELECTION_METRIC), (int, float)) and has_test_scores(test)


def setting_summary(
    setting: Setting, values: dict[str, Any], seeds: Sequence[int], runs: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """One setting's runs done (``runs``), their seeds, the failed ones, and the mean and sample standard deviation
    (n - 1; ``None`` for one run) over seeds of the dev score and of each test task and ``avg``.

    Args:
        setting: the grid point; its runs are those of ``runs`` named ``run_name(setting, seed)`` for a seed of
            ``seeds``.
        values: the setting's values, as the summary shows them.
        runs: run entries (:func:`run_entry`), of any setting.
    """
    names = {run_name(setting, seed) for seed in seeds}
    mine = [run for run in runs if run["name"] in names]
    done = [run for run in mine if "test" in run]
    dev_mean, dev_std = column_stats((run["dev"] for run in done), [SELECTION_METRIC])
    test_mean, test_std = column_stats((run["test"] for run in done), STS_TEST_COLUMNS)
    return {
        "name": setting.name,
        "setting": values,
        "runs": len(done),
        "seeds": [run["seed"] for run in done],
        "failed": [run["seed"] for run in mine if run["status"] == "failed"],
        "dev": {"mean": dev_mean.get(SELECTION_METRIC), "std": dev_std.get(SELECTION_METRIC)},
        "test": {column: {"mean": test_mean.get(column), "std": test_std.get(column)} for column in STS_TEST_COLUMNS},
    }


def sweep_markdown(sweep: dict[str, Any]) -> str:
    """``sweep.md``: the command, the protocol in one sentence, one row per setting (mean ± std over its runs),
    and the runs that failed."""
    keys = list(sweep["grid"])
    header = [
        *(markdown_text(key) for key in keys),
        "runs",
        "STS-B dev",
        *(COLUMN_LABELS[col] for col in STS_TEST_COLUMNS),
    ]
    rows = []
    for summary in sweep["settings"]:
        row = [code_span(_text(summary["setting"][key]), in_table=True) for key in keys]
        row += [str(summary["runs"]), format_mean_std(summary["dev"]["mean"], summary["dev"]["std"])]
        row += [format_mean_std(summary["test"][c]["mean"], summary["test"][c]["std"]) for c in STS_TEST_COLUMNS]
        rows.append(row)
    eval_steps = " or ".join(str(steps) for steps in sweep["eval_steps"])
    seeds = ", ".join(str(seed) for seed in sweep["seeds"])
    lines = [
        "# Sweep",
        "",
        code_block(sweep["command"], "bash"),
        "",
        f"Each run keeps the checkpoint with the best STS-B dev Spearman (scored every {eval_steps} steps), scored "
        "once on the STS test sets (Spearman × 100 of cosine similarity; STS12-16 'all', STS-B test, SICK-R test). "
        f"Cells: mean ± sample standard deviation over the seeds done ({seeds} asked for).",
        "",
        table(header, rows, align="l" * len(keys) + "r" * (len(header) - len(keys))),
    ]
    failed = [run for run in sweep["runs"] if run["status"] == "failed"]
    if failed:
        lines += ["", "Failed (rerun the same command to retry):", ""]
        lines += [
            f"- {code_span(run['name'])}: {markdown_text(run['error'])} (log: {code_span(run['log'])})"
            for run in failed
        ]
    return "\n".join(lines) + "\n"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
