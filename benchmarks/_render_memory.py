"""The memory sections of ``BENCHMARKS.md``: DCLR's complementary cache and memory and start-up time against corpus
size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _render_format import code_block, count, file_date, machine_line, not_run, num, percent, rel, table


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
        f"--steps {data.get('steps', 10)} --output_json {rel(path)}"
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
