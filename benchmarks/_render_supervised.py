"""The ``BENCHMARKS.md`` section of ``supervised_quality.py``: supervised SimCSE on SICK's labelled pairs, with and
without hard negatives, against unsupervised SimCSE on the same sentences."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _render_format import TASK_HEADERS, code_block, count, machine_line, mean_std, not_run, num, table

HEADING = "## Labelled pairs and hard negatives: supervised SimCSE on SICK (CPU proxy)"


def render_supervised_quality(data: dict[str, Any] | None, path: Path, commands: list[str]) -> str:
    lines = [HEADING, ""]
    if data is None:
        return "\n".join([*lines, not_run(commands, path)])
    lines += protocol_lines(data)
    arms = data.get("arms") or []
    if not arms:
        lines += ["", "**Not measured yet**: no run has finished. Run:", "", code_block(commands)]
    else:
        lines += ["", *arm_table(data), *comparison_table(data)]
    pending = data.get("pending") or {}
    if pending:
        runs = "; ".join(f"`{arm}`: {', '.join(f'`{name}`' for name in names)}" for arm, names in pending.items())
        lines += [
            "",
            f"Still to run ({sum(map(len, pending.values()))}, by arm; the same command resumes them): {runs}.",
        ]
    if arms:
        invocations = data.get("invocations") or []
        run_commands = [run.get("command") for run in invocations if run.get("command")] or [commands[0]]
        summary_command = data.get("command") or commands[-1]
        lines += ["", "Commands:", "", code_block([*dict.fromkeys(run_commands), summary_command]), ""]
        for run in invocations:
            end = run.get("finished_at") or (
                f"stopped at {run['stopped_at']}" if run.get("stopped_at") else "not finished"
            )
            lines.append(machine_line(run.get("environment"), f"{run.get('started_at', '?')} to {end}"))
    return "\n".join(lines)


def protocol_lines(data: dict[str, Any]) -> list[str]:
    """What was trained on what, how it was selected and scored, and why SICK-R is left out."""
    protocol = data.get("protocol", {})
    manifest = data.get("data") or {}
    settings = manifest.get("settings") or {}
    counts = manifest.get("counts") or {}
    seeds = ", ".join(map(str, protocol.get("seeds", []))) or "?"
    flags = " ".join(protocol.get("run_flags", []))
    lines = [
        f"Every arm: `{protocol.get('config', '?')}` as the unsupervised study runs it (`"
        f"{settings.get('model_name_or_path', '?')}`, {settings.get('pooler', '?')} pooling, "
        f"{settings.get('max_steps', '?')} steps of batch {settings.get('per_device_train_batch_size', '?')}, "
        f"learning rate {settings.get('learning_rate', '?')}, temperature {settings.get('temperature', '?')}, "
        f"max_seq_length {settings.get('max_seq_length', '?')}; extra flags `{flags}`), only the training file "
        f"changed; `--objective simcse` trains SimCSE's supervised loss on pairs and triplets. Seeds {seeds}.",
        f"Selection: {protocol.get('selection', '?')}; test scores never choose. Test: {protocol.get('test', '?')}.",
    ]
    if counts:
        n = {key: count(value) for key, value in counts.items()}
        lines.append(
            f"Data, from `{manifest.get('sick_train', '?')}`: its {n.get('entailment_rows', '?')} ENTAILMENT rows as "
            f"{n.get('pairs', '?')} distinct pairs (anchor sentence_A, positive sentence_B; {n.get('anchors', '?')} "
            f"anchors). {n.get('triplets', '?')} of them ({n.get('triplet_anchors', '?')} anchors) have a "
            "CONTRADICTION of their anchor in the file, read both ways, the first one their hard negative: the "
            f"triplets ({n.get('pairs_with_contradiction_as_sentence_a', '?')} pairs, "
            f"{n.get('anchors_with_contradiction_as_sentence_a', '?')} anchors, with the anchor as sentence_A). The "
            f"unsupervised arm trains on the pairs' {n.get('sentences', '?')} distinct sentences. Mined negatives: "
            f"`{manifest.get('mine_command', 'not mined yet')}`, among all the pairs' positives; the triplets' rows "
            "take theirs from it."
        )
    sick = {key: count(value) for key, value in (manifest.get("sick_test") or {}).items()}
    if sick:
        lines.append(
            f"SICK-R is left out: {sick.get('trained_on', '?')} of the {sick.get('test_sentences', '?')} distinct "
            f"sentences of its test file are training sentences here, and {sick.get('pairs_with_a_trained_sentence')} "
            f"of its {sick.get('test_pairs', '?')} pairs hold one."
        )
    else:
        lines.append("SICK-R is left out: its test sentences are SICK's training sentences rewritten.")
    lines.append(
        "Cells: mean ± sample standard deviation over the seeds done (n); STS-B dev is the selected checkpoint's "
        "Spearman x 100, selected steps the step dev chose, one per seed; Avg. is the mean of the six test columns."
    )
    return lines


def epochs(rows: Any, settings: dict[str, Any]) -> str:
    """The passes over the training file that the run's steps x batch make."""
    steps, batch = settings.get("max_steps"), settings.get("per_device_train_batch_size")
    if not all(isinstance(value, int) and value > 0 for value in (rows, steps, batch)):
        return "-"
    return num(steps * batch / rows, 1)


def arm_table(data: dict[str, Any]) -> list[str]:
    settings = (data.get("data") or {}).get("settings") or {}
    tasks = [*data.get("protocol", {}).get("tasks", []), "avg"]
    rows = []
    for arm in data.get("arms", []):
        test = arm.get("test", {})
        dev = arm.get("dev", {})
        rows.append(
            [
                arm.get("label", arm.get("arm", "?")),
                count(arm.get("rows")),
                epochs(arm.get("rows"), settings),
                mean_std(dev.get("mean"), dev.get("std")),
                *(mean_std(test.get(task, {}).get("mean"), test.get(task, {}).get("std")) for task in tasks),
                ", ".join(str(run.get("step", "?")) for run in arm.get("runs", [])) or "-",
                str(arm.get("n", 0)),
            ]
        )
    header = ["arm", "rows", "epochs", "STS-B dev", *(TASK_HEADERS.get(task, task) for task in tasks)]
    return [table([*header, "selected steps", "n"], rows, "l" + "r" * (len(header) + 1))]


def comparison_table(data: dict[str, Any]) -> list[str]:
    comparisons = data.get("comparisons") or []
    if not comparisons:
        return []
    labels = {arm.get("arm"): arm.get("label", arm.get("arm")) for arm in data.get("arms", [])}
    rows = []
    for row in comparisons:
        per_seed = ", ".join(
            f"{seed}: {difference:+.2f}"
            for seed, difference in zip(row.get("seeds", []), row.get("differences", []), strict=False)
        )
        mean = row.get("mean")
        arm, reference = (labels.get(row.get(key), row.get(key)) for key in ("arm", "reference"))
        rows.append(
            [
                f"{arm} − {reference}",
                row.get("question", ""),
                "-" if mean is None else f"{mean:+.2f}" + ("" if row.get("std") is None else f" ± {row['std']:.2f}"),
                per_seed or "-",
                "-" if row.get("same_sign") is None else "**yes**" if row["same_sign"] else "no",
                num(row.get("paired_p"), 3),
            ]
        )
    return [
        "",
        "Differences of the 6-task average, seed by seed (the runs of one seed paired). Same sign: every seed's "
        "difference is on the same side of 0. Paired p: two-sided paired t-test over the seeds (3 seeds: a hint, not "
        "a verdict).",
        "",
        table(["arms", "question", "Δ Avg.", "per seed", "same sign", "paired p"], rows, "llrlll"),
    ]
