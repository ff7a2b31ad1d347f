"""Build ``BENCHMARKS.md`` from the JSON files the benchmark scripts write. Every number comes from those files.

Sections, each read from its JSON under ``--results_dir`` (default ``benchmarks/results``):

- STS quality of the objectives: ``quality/quality_summary.json`` (``python benchmarks/quality.py --summarize``);
- does any objective beat SimCSE, tuned and selected on dev: ``quality_study.json``
  (``python benchmarks/quality_study.py --summarize``);
- evaluation speed: ``eval_speed.json`` (``benchmarks/eval_speed.py``);
- training throughput: ``throughput.json`` (``benchmarks/throughput.py``, float32 on CPU) and
  ``throughput_gpu_bf16.json`` (the same script with ``--bf16`` on a GPU);
- where a step's time goes: ``profile_step_cpu.json`` and ``profile_step_gpu_bf16.json``
  (``benchmarks/profile_step.py``);
- DCLR's complementary cache: ``complementary_cache.json`` (``benchmarks/complementary_cache.py``);
- memory and start-up time against corpus size: ``corpus_memory.json`` (``benchmarks/corpus_memory.py``).

A missing JSON gives a section that says "Not run yet" with the command that produces it. Each section names the
command that produced its numbers (recorded in the JSON, or rebuilt from the settings the JSON records) and the
machine and date it ran on (recorded in the JSON; the file's modification time when the JSON has no date).

    python benchmarks/render.py                   # writes BENCHMARKS.md at the repository root
    python benchmarks/render.py --results_dir /tmp/results --output /tmp/BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _common import REPO_ROOT, RESULTS_DIR, utc_now

from hf_cse.markdown import table as markdown_table

QUALITY_JSON = Path("quality") / "quality_summary.json"
QUALITY_STUDY_JSON = Path("quality_study.json")
EVAL_SPEED_JSON = Path("eval_speed.json")
THROUGHPUT_JSON = Path("throughput.json")
THROUGHPUT_GPU_JSON = Path("throughput_gpu_bf16.json")
PROFILE_CPU_JSON = Path("profile_step_cpu.json")
PROFILE_GPU_JSON = Path("profile_step_gpu_bf16.json")
COMPLEMENTARY_JSON = Path("complementary_cache.json")
CORPUS_MEMORY_JSON = Path("corpus_memory.json")

TASK_HEADERS = {
    "sts12": "STS12",
    "sts13": "STS13",
    "sts14": "STS14",
    "sts15": "STS15",
    "sts16": "STS16",
    "stsb": "STS-B",
    "sickr": "SICK-R",
    "avg": "Avg.",
}


def _rel(path: Path) -> str:
    """``path`` relative to the repository root when it is inside it (for commands a reader can paste)."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def default_commands(results_dir: Path) -> dict[str, list[str]]:
    """The commands that produce each JSON under ``results_dir``."""
    quality_dir = _rel(results_dir / QUALITY_JSON.parent)
    quality_flag = "" if quality_dir == "benchmarks/results/quality" else f" --output_dir {quality_dir}"
    return {
        "quality": [
            f"nohup python benchmarks/quality.py{quality_flag} > quality.log 2>&1 &   # hours; rerun to resume",
            f"python benchmarks/quality.py --summarize{quality_flag}",
        ],
        "quality_study": [
            "nohup python benchmarks/quality_study.py --work_dir ../quality_study > quality_study.log 2>&1 &  # hours",
            "python benchmarks/quality_study.py --work_dir ../quality_study --summarize",
        ],
        "eval_speed": [f"python benchmarks/eval_speed.py --output_json {_rel(results_dir / EVAL_SPEED_JSON)}"],
        "throughput": [
            f"python benchmarks/throughput.py --steps 10 --output_json {_rel(results_dir / THROUGHPUT_JSON)}"
        ],
        "throughput_gpu": [
            "python benchmarks/throughput.py --random_config bert-base --bf16 --steps 30 --warmup 5 "
            f"--end_to_end_steps 300 --output_json {_rel(results_dir / THROUGHPUT_GPU_JSON)}   # on a GPU"
        ],
        "profile_cpu": [
            "python benchmarks/profile_step.py --steps 3 --warmup 1 --output_json "
            f"{_rel(results_dir / PROFILE_CPU_JSON)}"
        ],
        "profile_gpu": [
            "python benchmarks/profile_step.py --random_config bert-base --bf16 --steps 10 --warmup 3 --output_json "
            f"{_rel(results_dir / PROFILE_GPU_JSON)}   # on a GPU"
        ],
        "complementary_cache": [
            "python benchmarks/complementary_cache.py --steps 10 --output_json "
            f"{_rel(results_dir / COMPLEMENTARY_JSON)}"
        ],
        "corpus_memory": [
            f"python benchmarks/corpus_memory.py --output_json {_rel(results_dir / CORPUS_MEMORY_JSON)}"
        ],
    }


def load_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; ``None`` when the file is missing or not a JSON object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def file_date(path: Path) -> str:
    """The file's modification time, ISO 8601 in UTC."""
    stamp = datetime.fromtimestamp(os.path.getmtime(path), tz=timezone.utc).replace(microsecond=0)
    return stamp.isoformat()


def num(value: Any, digits: int = 2, suffix: str = "") -> str:
    """``value`` with ``digits`` decimals, or ``-`` when it is missing or not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    return f"{value:,.{digits}f}{suffix}"


def percent(share: Any) -> float | None:
    return 100.0 * share if isinstance(share, int | float) else None


def count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "-"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None) -> str:
    """A Markdown table; ``align`` is one character per column, ``l`` or ``r`` (default: first left, rest right)."""
    return markdown_table(header, rows, align or "l" + "r" * (len(header) - 1))


def code_block(commands: Sequence[str]) -> str:
    return "```bash\n" + "\n".join(commands) + "\n```"


def not_run(commands: Sequence[str], path: Path) -> str:
    return f"**Not run yet** (no `{_rel(path)}`). Run:\n\n{code_block(commands)}"


def machine_line(env: dict[str, Any] | None, date: str | None, fallback: str = "") -> str:
    """``Machine: CPU, N cores, torch X, T threads; GPU ...; date`` from a recorded environment."""
    env = env or {}
    parts = []
    if env.get("cpu"):
        parts.append(f"{env['cpu']}, {env.get('cpu_cores', '?')} cores")
    if env.get("gpu"):
        parts.append(f"GPU {env['gpu']}")
    if env.get("torch"):
        parts.append(f"torch {env['torch']}")
    if env.get("torch_threads") is not None:
        parts.append(f"{env['torch_threads']} torch threads")
    if fallback:
        parts.append(fallback)
    text = "; ".join(parts) if parts else "not recorded"
    return f"Machine: {text}. Date: {date or 'not recorded'}."


# ---------------------------------------------------------------------------------------------------------------------
# Sections


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
                *([row.get("setting", "?")] if with_setting else []),
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
        "all-MiniLM-L6-v2) with its key hyper-parameter swept (`python -m hf_cse.sweep`, extra flags "
        f"`{' '.join(protocol.get('run_flags', []))}`), seeds {', '.join(map(str, seeds)) or '?'}.",
        f"Selection: {protocol.get('selection', '?')}; test scores never choose. Test: {protocol.get('test', '?')}.",
        "Cells: mean ± sample standard deviation over the seeds done (n); dev is the selected checkpoint's STS-B dev "
        "Spearman x 100; the chosen value of each objective is in bold.",
        "",
    ]
    tasks = list(TASK_HEADERS)
    rows = []
    for arm in data.get("arms", []):
        for setting in arm.get("settings", []):
            chosen = setting.get("name") == arm.get("chosen")
            value = f"{arm.get('key')} = {setting.get('value')}" if arm.get("key") else "shipped config"
            dev = setting.get("dev", {})
            test = setting.get("test", {})
            rows.append(
                [
                    arm.get("label", arm.get("arm", "?")),
                    f"**{value}**" if chosen else value,
                    mean_std(dev.get("mean"), dev.get("std")),
                    *(mean_std(test.get(task, {}).get("mean"), test.get(task, {}).get("std")) for task in tasks),
                    str(setting.get("n", 0)),
                ]
            )
    header = ["objective", "setting", "STS-B dev", *TASK_HEADERS.values(), "n"]
    lines.append(table(header, rows, "ll" + "r" * (len(tasks) + 2)) if rows else "No finished run yet.")
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


def mean_std(mean: Any, std: Any) -> str:
    """``"72.00 ± 2.00"``; the mean alone without a deviation; ``"-"`` without a mean."""
    return num(mean) if std is None or num(mean) == "-" else f"{num(mean)} ± {num(std)}"


def render_eval_speed(data: dict[str, Any] | None, path: Path, commands: list[str]) -> str:
    lines = ["## Evaluation speed (`python -m hf_cse.eval`, 7 STS tasks)", ""]
    if data is None:
        return "\n".join([*lines, not_run(commands, path)])
    settings = data.get("settings", {})
    sentences = data.get("sentences", {})
    ratios = data.get("ratios", {})
    target = data.get("target_ratio")
    lines += [
        f"`{settings.get('model_name_or_path', '?')}` ({settings.get('pooler', '?')} pooling), batch "
        f"{settings.get('batch_size', '?')}, device {settings.get('device', '?')}, "
        f"{settings.get('repeats', '?')} interleaved repetitions after a warm-up; medians.",
        "",
    ]
    arm_text = {
        "eval_command": "the evaluation command, in-process (model load, data, tokenization, encoding, scoring)",
        "plain_sorted": "plain loop over the distinct sentences: tokenize once, sort by length, pad, forward",
        "plain_unsorted": "naive loop: tokenize and pad each batch in input order, forward",
        "load_model": "`SentenceEncoder.from_pretrained` alone",
    }
    rows = []
    for arm, values in data.get("arms", {}).items():
        times = ", ".join(num(t, 1) for t in values.get("times_s", []))
        rows.append(
            [
                f"`{arm}`",
                num(values.get("median_s"), 2),
                times,
                num(values.get("median_cpu_s"), 2),
                arm_text.get(arm, ""),
            ]
        )
    lines.append(table(["arm", "median s", "runs (s)", "median CPU s", "what"], rows, "lrrrl"))
    lines.append("")
    ratio_text = {
        "eval_command_vs_plain_sorted": "evaluation / plain sorted loop",
        "eval_without_model_load_vs_plain_sorted": "(evaluation - model load) / plain sorted loop",
        "plain_unsorted_vs_plain_sorted": "naive loop / plain sorted loop",
        "eval_command_vs_plain_unsorted": "evaluation / naive loop",
        "cpu_eval_command_vs_plain_sorted": "evaluation / plain sorted loop, process CPU time",
    }
    ratio_rows = [[ratio_text.get(name, name), num(value, 3)] for name, value in ratios.items()]
    lines.append(table(["ratio", "value"], ratio_rows))
    main_ratio = ratios.get("eval_command_vs_plain_sorted")
    if isinstance(main_ratio, (int, float)) and isinstance(target, (int, float)):
        verdict = "met" if main_ratio <= target else "NOT met"
        lines += [
            "",
            f"Target evaluation / plain sorted loop ≤ {num(target, 2)}×: **{verdict}** ({num(main_ratio, 3)}×).",
        ]
    tokenization = data.get("tokenization", {})
    lines += [
        "",
        f"Sentences: {count(sentences.get('slots'))} sentence slots over the 7 tasks, "
        f"{count(sentences.get('distinct'))} distinct, each encoded once.",
        f"Tokenization (counted during the warm-up): {count(tokenization.get('sentence_tokenizer_calls'))} tokenizer "
        f"call(s) for {count(tokenization.get('sentences_tokenized'))} sentences; "
        f"{count(tokenization.get('pad_calls'))} pad calls (padding only, no re-tokenization) for "
        f"{count(tokenization.get('batches'))} batches.",
    ]
    per_task = sentences.get("per_task", {})
    if per_task:
        task_rows = [
            [TASK_HEADERS.get(task, task), count(c.get("pairs")), count(c.get("slots")), count(c.get("distinct"))]
            for task, c in per_task.items()
        ]
        lines += ["", table(["task", "pairs", "sentence slots", "distinct"], task_rows)]
    overhead = data.get("overhead", {})
    if overhead:
        overhead_text = {
            "tokenize_once_s": "tokenize all distinct sentences (one call)",
            "pad_all_batches_s": "pad every batch (`tokenizer.pad` on token-id lists)",
            "evaluate_sts_zero_cost_encoder_with_cache_s": "`evaluate_sts` with a zero-cost encoder, wrapped in "
            "`EmbeddingCache` as the command does (data, de-duplication, scoring)",
            "evaluate_sts_zero_cost_encoder_s": "`evaluate_sts` with a zero-cost encoder, no cache",
        }
        rows = [[overhead_text.get(name, name), num(value, 3)] for name, value in overhead.items()]
        lines += ["", "Fixed costs inside the evaluation (medians of 3):", "", table(["step", "s"], rows)]
    diff = data.get("plain_sorted_vs_encoder_max_abs_diff")
    if isinstance(diff, (int, float)):
        lines += ["", f"The plain loop's embeddings match `SentenceEncoder.encode`: max abs difference {diff:.1e}."]
    lines += ["", "Command:", "", code_block([data.get("command") or commands[0]]), ""]
    env = data.get("environment")
    lines.append(machine_line(env, (env or {}).get("date") or file_date(path)))
    return "\n".join(lines)


# The throughput targets: (arm, reference arm, largest time ratio).
THROUGHPUT_TARGETS = (("simcse", "bare", 1.05), ("dclr_cached", "bare", 1.15), ("simcse", "st_mnrl", 1.0))


def throughput_verdicts(rows: list[dict[str, Any]]) -> list[str]:
    """One line per target whose two arms were measured: the ratio of median step times and met / NOT met."""
    medians = {row.get("arm"): row.get("median_step_s") for row in rows}
    lines = []
    for arm, reference, limit in THROUGHPUT_TARGETS:
        if isinstance(medians.get(arm), (int, float)) and isinstance(medians.get(reference), (int, float)):
            ratio = medians[arm] / medians[reference]
            verdict = "met" if ratio <= limit else "NOT met"
            lines.append(f"- `{arm}` / `{reference}` ≤ {limit:.2f}×: **{verdict}** ({ratio:.3f}×)")
    return lines


def render_throughput(
    data: dict[str, Any] | None, path: Path, commands: list[str], title: str = "Training throughput"
) -> str:
    lines = [f"## {title}", ""]
    if data is None:
        return "\n".join([*lines, not_run(commands, path)])
    settings = data.get("settings", {})
    memory = settings.get("memory") or "peak memory"
    lines += [
        f"{model_text(settings)}, batch {settings.get('batch_size', '?')}, max_seq_length "
        f"{settings.get('max_seq_length', '?')}, {settings.get('steps', '?')} timed steps after "
        f"{settings.get('warmup', '?')} warm-up steps, arms interleaved step by step; median step time"
        f"{', bf16 autocast' if settings.get('bf16') else ''}; memory: {memory}.",
        "",
    ]
    arms = data.get("arms", [])
    rows = [
        [
            f"`{row.get('arm', '?')}`",
            num(row.get("median_step_s"), 3),
            num(row.get("sentences_per_s"), 1),
            num(row.get("tokens_per_s"), 0),
            mfu_cell(row),
            num(row.get("minutes_per_1m_sentences"), 1),
            num(row.get("time_vs_bare"), 3),
            num(row.get("time_vs_st_mnrl"), 3),
            num(row.get("peak_memory_gib"), 2),
        ]
        for row in arms
    ]
    header = [
        "arm",
        "step s",
        "sentences/s",
        "tokens/s",
        "MFU",
        "min / 1M sentences",
        "× bare",
        "× ST MNRL",
        "peak GiB",
    ]
    lines.append(table(header, rows))
    notes = sorted({row["mfu_note"] for row in arms if row.get("mfu") is None and row.get("mfu_note")})
    if notes:
        lines += ["", "MFU n/a: " + "; ".join(notes) + "."]
    lines += [
        "",
        "tokens/s: real (non-padding) tokens of the sentences per second, all encoder forwards of the step counted; "
        "MFU: model FLOPs per step (6N per token plus attention, `benchmarks/flops.py`) over the step time and the "
        "GPU's dense bf16 peak.",
    ]
    lines += render_end_to_end(data.get("end_to_end"))
    verdicts = throughput_verdicts(arms)
    if verdicts:
        lines += ["", "Targets:", "", *verdicts]
    env = data.get("environment") or {}
    reading = (
        "Reading the table: every step ends with a CUDA synchronize, so a step time includes all the GPU work it "
        "queued. "
        if env.get("gpu")
        else "Reading the table: on a shared CPU the ratios move by a few percent between runs, so a ratio within "
        "about 5% of its target is parity, not a margin. On CPU one stacked forward pass over 2B rows costs what two "
        "passes over B rows cost, so against sentence-transformers hf_cse saves only the per-step tokenization. "
    )
    lines += [
        "",
        reading + "`dclr_uncached` pays a second (frozen) forward pass per step; OssCSE encodes its sentences inside "
        "a prompt template (its tokens added to every row), and with paraphrases also the negation and the "
        "paraphrase of every sentence (4B rows instead of 2B).",
    ]
    lines += ["", "Command:", "", code_block([data.get("command") or commands[0]]), ""]
    lines.append(machine_line(env, env.get("date") or file_date(path)))
    return "\n".join(lines)


def model_text(settings: dict[str, Any]) -> str:
    """The benchmarked model: its name and, when recorded, its config's size."""
    config = settings.get("model_config") or {}
    name = config.get("name") or settings.get("model_name_or_path", "?")
    if not config.get("hidden_size"):
        return f"`{name}`"
    return (
        f"`{name}` ({config.get('weights', '?')} weights; {config.get('model_type', '?')}, hidden "
        f"{config['hidden_size']}, {config.get('num_hidden_layers', '?')} layers, "
        f"{config.get('num_attention_heads', '?')} heads, feed-forward {config.get('intermediate_size', '?')}, "
        f"vocabulary {count(config.get('vocab_size'))})"
    )


def mfu_cell(row: dict[str, Any]) -> str:
    value = row.get("mfu")
    return f"{100 * value:.1f}%" if isinstance(value, (int, float)) else "n/a"


END_TO_END_TEXT = {
    "hf_cse_simcse": "`run_unsup.py`, SimCSE",
    "st_mnrl": "sentence-transformers trainer, MNRL",
}


def render_end_to_end(entries: dict[str, Any] | None) -> list[str]:
    """The end-to-end runs (data loading and logging included) recorded with ``--end_to_end_steps``."""
    if not entries:
        return []
    rows = []
    for name, entry in entries.items():
        if entry.get("skipped"):
            rows.append([END_TO_END_TEXT.get(name, name), "-", "-", "-", "-", f"skipped: {entry['skipped']}"])
            continue
        rows.append(
            [
                END_TO_END_TEXT.get(name, name),
                count(entry.get("steps")),
                num(entry.get("steps_per_s"), 2),
                num(entry.get("sentences_per_s"), 1),
                num(entry.get("minutes_per_1m_sentences"), 1),
                "",
            ]
        )
    header = ["end to end", "steps", "steps/s", "sentences/s", "min / 1M sentences", "note"]
    return [
        "",
        "End to end (the trainer's `train_runtime`: data loading, logging every 10 steps, first steps included):",
        "",
        table(header, rows, "lrrrrl"),
    ]


def gpu_throughput(data: dict[str, Any] | None, path: Path, commands: list[str]) -> str:
    return render_throughput(data, path, commands, title="Training throughput on a GPU (bf16)")


def render_complementary(data: dict[str, Any] | None, path: Path, commands: list[str]) -> str:
    lines = ["## DCLR: complementary-embedding cache", ""]
    if data is None:
        return "\n".join([*lines, not_run(commands, path)])
    medians = data.get("median_step_s", {})
    lines += [
        f"Full DCLR training step (forward, loss, backward, optimizer), batch {data.get('batch_size', '?')}, "
        f"{data.get('steps', '?')} timed steps per arm, arms interleaved; corpus of "
        f"{count(data.get('corpus_sentences'))} sentences.",
        "",
    ]
    rows = [
        ["median step, cache (s)", num(medians.get("cached"), 3)],
        ["median step, no cache (s)", num(medians.get("uncached"), 3)],
        ["no cache / cache", num(data.get("uncached_over_cached"), 3)],
        ["building the cache, model load included (s)", num(data.get("cache_build_s_including_model_load"), 1)],
        [
            "in-batch negatives masked by absolute phi 0.9 (%)",
            num(percent(data.get("absolute_phi_0.9_masked_share")), 3),
        ],
        ["median similarity threshold of quantile phi 0.99", num(data.get("quantile_0.99_median_threshold"), 4)],
    ]
    lines.append(table(["measure", "value"], rows))
    command = data.get("command") or (
        f"python benchmarks/complementary_cache.py --batch_size {data.get('batch_size', 64)} "
        f"--steps {data.get('steps', 10)} --output_json {_rel(path)}"
    )
    lines += ["", "Command:", "", code_block([command]), ""]
    env = data.get("environment") or {"torch_threads": data.get("torch_threads")}
    device = data.get("device")
    lines.append(machine_line(env, env.get("date") or file_date(path), f"device {device}" if device else ""))
    return "\n".join(lines)


def render_corpus_memory(data: dict[str, Any] | None, path: Path, commands: list[str]) -> str:
    lines = ["## Memory and start-up time against corpus size", ""]
    if data is None:
        return "\n".join([*lines, not_run(commands, path)])
    settings = data.get("settings", {})
    model = settings.get("model", {})
    runs = data.get("runs", [])
    lines += [
        "One fresh process per arm loads the corpus, builds `CSETrainer` (tokenization; for DCLR, the complementary "
        "model's pass over the whole corpus) and stops at the first training step. Peak RSS: the process's "
        "`ru_maxrss`. Time: from its start to the first step. Model: random BERT, hidden size "
        f"{model.get('hidden_size', '?')}, {model.get('num_hidden_layers', '?')} transformer layers (the data path "
        f"is measured, not the encoder's compute), {model.get('vocabulary', '?')} vocabulary; batch "
        f"{settings.get('batch_size', '?')}, max_seq_length {settings.get('max_seq_length', '?')}; corpus: "
        f"{settings.get('corpus', '?')}. An arm a run did not measure shows `not run`.",
        "",
    ]
    streamed = [run["label"] for run in runs if run.get("streaming")]
    if streamed:  # their children read, tokenize and encode batch by batch during training: nothing before step 1
        lines[-1:-1] = [f"Streamed (`--streaming`, no tokenization or encoding before step 1): {', '.join(streamed)}."]
    measured = {(run["label"], arm["objective"], arm["sentences"]): arm for run in runs for arm in run.get("arms", [])}
    arms = sorted({(objective, sentences) for _, objective, sentences in measured})
    header = ["objective", "sentences"]
    header += [f"peak RSS (GiB), {run['label']}" for run in runs]
    header += [f"to first step (s), {run['label']}" for run in runs]
    rows = []
    for objective, sentences in arms:
        cells = [measured.get((run["label"], objective, sentences)) for run in runs]
        rows.append(
            [objective, count(sentences)]
            + [num(arm["peak_rss_gib"], 2) if arm else "not run" for arm in cells]
            + [num(arm["time_to_first_step_s"], 0) if arm else "not run" for arm in cells]
        )
    lines += [table(header, rows), ""]
    for run in runs:
        env = run.get("environment") or {}
        lines.append(
            f"- {run['label']}: hf_cse at `{run.get('code_commit') or 'unknown'}`; `{run.get('command', '?')}`. "
            + machine_line(env, env.get("date") or file_date(path))
        )
    return "\n".join(lines)


PROFILE_REGIONS = ("data", "forward+loss", "forward", "backward", "optimizer")


def render_profile(data: dict[str, Any] | None, path: Path, commands: list[str], title: str) -> str:
    """The ``benchmarks/profile_step.py`` breakdown: seconds per step in each region, host and device."""
    lines = [f"## {title}", ""]
    if data is None:
        return "\n".join([*lines, not_run(commands, path)])
    settings = data.get("settings", {})
    env = data.get("environment") or {}
    cuda = settings.get("device") == "cuda"
    lines += [
        f"{model_text(settings)}, batch {settings.get('batch_size', '?')}, max_seq_length "
        f"{settings.get('max_seq_length', '?')}, {settings.get('steps', '?')} profiled steps after "
        f"{settings.get('warmup', '?')} warm-up steps (and one more counting synchronizations)"
        f"{', bf16 autocast' if settings.get('bf16') else ''}; device {settings.get('device', '?')}. Seconds per step "
        "from `torch.profiler` regions: `data` collates and moves the batch, `forward+loss` is `compute_loss` "
        "(views, encoder, objective; `forward` is the encoder alone, inside it), `backward`, `optimizer` (AdamW "
        "step and zeroing). Host: CPU time of the region; device: the CUDA kernels it launched.",
        "",
    ]
    header = ["arm", "step s", *(f"{region} host s" for region in PROFILE_REGIONS)]
    if cuda:
        header += [*(f"{region} device s" for region in PROFILE_REGIONS), "host only s", "syncs / step"]
    rows = []
    for arm in data.get("arms", []):
        regions = arm.get("regions", {})
        row = [f"`{arm.get('arm', '?')}`", num(arm.get("median_step_s"), 3)]
        row += [num(regions.get(region, {}).get("host_s"), 3) for region in PROFILE_REGIONS]
        if cuda:
            row += [num(regions.get(region, {}).get("device_s"), 3) for region in PROFILE_REGIONS]
            row += [num(arm.get("host_only_s"), 3), count(arm.get("syncs_per_step"))]
        rows.append(row)
    lines.append(table(header, rows))
    if not cuda:
        lines += [
            "",
            "On CPU there is no device: host time is the whole step, and host-device synchronizations (counted with "
            "`torch.cuda.set_sync_debug_mode` on a GPU) do not exist.",
        ]
    top = [
        [f"`{arm.get('arm', '?')}`", f"`{op.get('op', '?')}`", num(op.get("host_s"), 3)]
        for arm in data.get("arms", [])
        for op in arm.get("top_ops", [])[:3]
    ]
    if top:
        lines += ["", "Most host time by operator (self time), per arm:", "", table(["arm", "op", "host s"], top)]
    lines += ["", "Command:", "", code_block([data.get("command") or commands[0]]), ""]
    lines.append(machine_line(env, env.get("date") or file_date(path)))
    return "\n".join(lines)


def cpu_profile(data: dict[str, Any] | None, path: Path, commands: list[str]) -> str:
    return render_profile(data, path, commands, "Where a training step's time goes (CPU)")


def gpu_profile(data: dict[str, Any] | None, path: Path, commands: list[str]) -> str:
    return render_profile(data, path, commands, "Where a training step's time goes (GPU, bf16)")


def render(results_dir: str | Path = RESULTS_DIR, generated_at: str | None = None) -> str:
    """The Markdown of ``BENCHMARKS.md`` for the JSON files under ``results_dir``."""
    results_dir = Path(results_dir)
    commands = default_commands(results_dir)
    sections = [
        ("quality", QUALITY_JSON, render_quality),
        ("quality_study", QUALITY_STUDY_JSON, render_quality_study),
        ("eval_speed", EVAL_SPEED_JSON, render_eval_speed),
        ("throughput", THROUGHPUT_JSON, render_throughput),
        ("throughput_gpu", THROUGHPUT_GPU_JSON, gpu_throughput),
        ("profile_cpu", PROFILE_CPU_JSON, cpu_profile),
        ("profile_gpu", PROFILE_GPU_JSON, gpu_profile),
        ("complementary_cache", COMPLEMENTARY_JSON, render_complementary),
        ("corpus_memory", CORPUS_MEMORY_JSON, render_corpus_memory),
    ]
    header = [
        "# Benchmarks",
        "",
        f"Generated by `python benchmarks/render.py` on {generated_at or utc_now()} from the JSON files in "
        f"`{_rel(results_dir)}/`. Do not edit by hand: rerun a benchmark, then this script. Timings taken on shared "
        "CPU machines are noisy; every script interleaves its arms and reports medians and ratios, which are steadier "
        "than absolute times.",
    ]
    body = [
        renderer(load_json(results_dir / name), results_dir / name, commands[key]) for key, name, renderer in sections
    ]
    return "\n\n".join(["\n".join(header), *body]) + "\n"


def main(argv: Sequence[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--results_dir", default=str(RESULTS_DIR), help="Folder of the JSON files (default: benchmarks/results)."
    )
    parser.add_argument(
        "--output", default=str(REPO_ROOT / "BENCHMARKS.md"), help="Markdown file to write (default: BENCHMARKS.md)."
    )
    args = parser.parse_args(argv)
    output = Path(args.output)
    output.write_text(render(args.results_dir), encoding="utf-8")
    print(f"Wrote {output}")
    return output


if __name__ == "__main__":
    main()
