"""The quality sections of ``BENCHMARKS.md``: the objectives' STS scores under the CPU proxy (``quality.py``) and the
tuned, dev-selected study (``quality_study.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _render_format import TASK_HEADERS, code_block, machine_line, mean_std, not_run, num, table

from hf_cse.sweeps.grid import BASE_SETTING_NAME

# What an arm swept over nothing is called on the page: the sweep names that setting "base".
SHIPPED_CONFIG = "shipped config"


def render_quality(data: dict[str, Any] | None, path: Path, commands: list[str]) -> str:
    lines = ["## STS quality of the objectives (CPU proxy)", ""]
    if data is None:
        return "\n".join([*lines, not_run(commands, path)])
    protocol = data.get("protocol", {})
    tasks = [*data.get("tasks", []), "avg"]
    lines += [
        f"Protocol: `{protocol.get('model', '?')}`, {protocol.get('steps', '?')} steps of batch "
        f"{protocol.get('batch_size', '?')}, learning rate {protocol.get('learning_rate', '?')}, max_seq_length "
        f"{protocol.get('max_seq_length', '?')}, on the 11,914-sentence wiki1m head; each arm's settings from its "
        "`examples/configs/*_minilm_wiki1m.yaml`; the final model is evaluated.",
        f"Evaluation: {protocol.get('evaluation', '?')}.",
        f"Cells: mean ± {protocol.get('std', 'std')}; n = seeds done. A single seed shows no ±.",
        "",
    ]
    rows = []
    for arm in data.get("arms", []):
        mean, std = arm.get("mean", {}), arm.get("std", {})
        cells = [mean_std(mean.get(task), std.get(task)) for task in tasks]
        seeds = ", ".join(str(s) for s in arm.get("seeds", []) if s is not None) or "-"
        rows.append([arm.get("label", arm.get("arm", "?")), *cells, str(arm.get("n", "-")), seeds])
    header = ["arm", *(TASK_HEADERS.get(task, task) for task in tasks), "n", "seeds"]
    lines.append(table(header, rows, "l" + "r" * (len(tasks) + 1) + "l") if rows else "No finished run yet.")
    lines += render_comparison(data)
    run_commands = data.get("run_commands") or [commands[0]]
    summary_command = data.get("command") or commands[-1]
    lines += ["", "Commands:", "", code_block([*run_commands, summary_command]), ""]
    environments = data.get("environments") or [None]
    finished = (data.get("first_finished_at"), data.get("last_finished_at"))
    date = f"{finished[0]} to {finished[1]}" if all(finished) else data.get("generated_at")
    lines += [machine_line(env, date) for env in environments]
    return "\n".join(lines)


def render_comparison(data: dict[str, Any]) -> list[str]:
    """The quality section's second table: each arm's average against the reference arm's (SimCSE)."""
    comparison = data.get("comparison") or {}
    if not comparison.get("arms"):
        return []
    labels = {arm.get("arm"): arm.get("label", arm.get("arm")) for arm in data.get("arms", [])}
    reference = comparison.get("reference", "?")
    low, high = comparison.get("reference_range", [None, None])
    rows = comparison_rows(comparison, labels)
    return [
        "",
        f"Against {labels.get(reference, reference)} (7-task average; its seeds range {num(low)} to {num(high)}). "
        "Beyond the seed spread means the seed ranges do not overlap: every seed of one arm scores above every seed "
        "of the other. Welch p: two-sided Welch t-test on the per-seed averages (few seeds: read it as a hint).",
        "",
        table(["arm", "Δ Avg.", "seed range", "beyond the seed spread", "Welch p"], rows, "lrrlr"),
    ]


def comparison_rows(comparison: dict[str, Any], labels: dict[str, str], with_setting: bool = False) -> list[list[str]]:
    """One row per compared arm: its label (and compared setting), Δ Avg., seed range, beyond the spread, Welch p."""
    rows = []
    for arm, row in comparison["arms"].items():
        lowest, highest = row.get("range") or (None, None)
        delta = row.get("delta_avg")
        rows.append(
            [
                labels.get(arm, arm),
                *(
                    [SHIPPED_CONFIG if row.get("setting") == BASE_SETTING_NAME else row.get("setting", "?")]
                    if with_setting
                    else []
                ),
                f"{delta:+.2f}" if isinstance(delta, (int, float)) else "-",
                f"{num(lowest)} to {num(highest)}",
                "**yes**" if row.get("beyond_spread") else "no",
                num(row.get("welch_p"), 3),
            ]
        )
    return rows


def render_quality_study(data: dict[str, Any] | None, path: Path, commands: list[str]) -> str:
    lines = ["## Does any objective beat SimCSE? Tuned, selected on STS-B dev (CPU proxy)", ""]
    if data is None:
        return "\n".join([*lines, not_run(commands, path)])
    protocol = data.get("protocol", {})
    seeds = protocol.get("seeds", [])
    lines += [
        f"Each objective's proxy config (`{protocol.get('configs', '?')}`, 150 steps of batch 64 from "
        "all-MiniLM-L6-v2) with one or two key hyper-parameters swept, a second one changed alone from the shipped "
        "config (`python -m hf_cse.sweep`, extra flags "
        f"`{' '.join(protocol.get('run_flags', []))}`), seeds {', '.join(map(str, seeds)) or '?'}.",
        f"Selection: {protocol.get('selection', '?')}; test scores never choose. Test: {protocol.get('test', '?')}.",
        "Cells: mean ± sample standard deviation over the seeds done (n); dev is the selected checkpoint's STS-B dev "
        "Spearman x 100, and selected steps the steps dev chose, one per seed; the chosen value of each objective is "
        "in bold.",
        "",
    ]
    tasks = list(TASK_HEADERS)
    rows = []
    for arm in data.get("arms", []):
        for setting in arm.get("settings", []):
            chosen = setting.get("name") == arm.get("chosen")
            value = f"{setting.get('key')} = {setting.get('value')}" if setting.get("key") else SHIPPED_CONFIG
            dev = setting.get("dev", {})
            test = setting.get("test", {})
            rows.append(
                [
                    arm.get("label", arm.get("arm", "?")),
                    f"**{value}**" if chosen else value,
                    mean_std(dev.get("mean"), dev.get("std")),
                    *(mean_std(test.get(task, {}).get("mean"), test.get(task, {}).get("std")) for task in tasks),
                    ", ".join(str(run.get("step", "?")) for run in setting.get("runs", [])) or "-",
                    str(setting.get("n", 0)),
                ]
            )
    header = ["objective", "setting", "STS-B dev", *TASK_HEADERS.values(), "selected steps", "n"]
    lines.append(table(header, rows, "ll" + "r" * (len(tasks) + 3)) if rows else "No finished run yet.")
    comparison = data.get("comparison") or {}
    if comparison.get("arms"):
        labels = {arm.get("arm"): arm.get("label", arm.get("arm")) for arm in data.get("arms", [])}
        low, high = comparison.get("reference_range", [None, None])
        reference = comparison.get("reference", "?")
        lines += [
            "",
            f"Each objective's chosen setting against {labels.get(reference, reference)}'s "
            f"({comparison.get('reference_setting', '?')}; 7-task test average, its seeds range {num(low)} to "
            f"{num(high)}). Beyond the seed spread: every seed of one scores above every seed of the other. Welch p: "
            "two-sided Welch t-test on the per-seed averages (3 seeds: a hint, not a verdict).",
            "",
            table(["objective", "chosen setting", "Δ Avg.", "seed range", "beyond the seed spread", "Welch p"],
                  comparison_rows(comparison, labels, with_setting=True), "llrrlr"),
        ]  # fmt: skip
    pending = data.get("pending") or {}
    if pending:
        runs = "; ".join(f"`{arm}`: {', '.join(f'`{name}`' for name in names)}" for arm, names in pending.items())
        count = sum(map(len, pending.values()))
        lines += ["", f"Still to run ({count}, by arm; the same command resumes them): {runs}."]
    invocations = data.get("invocations") or []
    run_commands = [run.get("command") for run in invocations if run.get("command")] or [commands[0]]
    lines += ["", "Commands:", "", code_block([*dict.fromkeys(run_commands), data.get("command") or commands[-1]]), ""]
    for run in invocations:
        env = run.get("environment") or {}
        end = run.get("finished_at") or (
            f"stopped at {run['stopped_at']}" if run.get("stopped_at") else "not finished"
        )
        lines.append(machine_line(env, f"{run.get('started_at', '?')} to {end}"))
    return "\n".join(lines)
