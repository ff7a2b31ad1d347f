"""The decoder-backbone sections of ``BENCHMARKS.md`` (``decoder_step.py``): full fine-tuning against LoRA, with and
without gradient checkpointing, on CPU and on a GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _render_format import code_block, count, file_date, machine_line, not_run, num, table
from _render_speed import floor_ms, mfu_cell


def render_decoder(data: dict[str, Any] | None, path: Path, commands: list[str], title: str) -> str:
    lines = [f"## {title}", ""]
    if data is None:
        return "\n".join([*lines, not_run(commands, path)])
    settings = data.get("settings", {})
    config = settings.get("model_config") or {}
    lora = settings.get("lora") or {}
    reference = settings.get("reference_arm", "full")
    lines += [
        f"A random {config.get('model_type', '?')} ({config.get('weights', '?')} weights; hidden "
        f"{config.get('hidden_size', '?')}, {config.get('num_hidden_layers', '?')} layers, "
        f"{config.get('num_attention_heads', '?')} heads ({config.get('num_key_value_heads', '?')} key-value), "
        f"feed-forward {config.get('intermediate_size', '?')}, vocabulary {count(config.get('vocab_size'))}, "
        f"attention dropout {config.get('attention_dropout', '?')}) trained by `CSETrainer` with "
        f"{settings.get('objective', '?')} and `{settings.get('pooler', '?')}` pooling, batch "
        f"{settings.get('batch_size', '?')} x {settings.get('max_seq_length', '?')} tokens (every batch padded to "
        f"that length: {count(settings.get('tokens_per_step'))} tokens per step, both views), weights "
        f"{settings.get('dtype', '?')}{', bf16 autocast' if settings.get('bf16') else ''}, device "
        f"{settings.get('device', '?')}. LoRA: rank {lora.get('r', '?')}, alpha {lora.get('lora_alpha', '?')}, "
        f"dropout {lora.get('lora_dropout', '?')} on {', '.join(lora.get('target_modules', []))}. Arms interleaved "
        f"step by step, {settings.get('steps', '?')} timed steps after {settings.get('warmup', '?')} warm-up steps; "
        f"median step time; ratios to `{reference}`.",
        "",
    ]
    rows = [
        [
            f"`{row.get('arm', '?')}`",
            "yes" if row.get("lora") else "no",
            "yes" if row.get("gradient_checkpointing") else "no",
            count(row.get("trainable_parameters")),
            num(row.get("median_step_s"), 3),
            num(row.get("time_vs_reference"), 3),
            num(row.get("peak_memory_gib"), 3),
            num(row.get("memory_vs_reference"), 3),
            num(row.get("tokens_per_s"), 0),
            mfu_cell(row),
            floor_ms(row),
        ]
        for row in data.get("arms", [])
    ]
    header = ["arm", "LoRA", "checkpointing", "trained weights", "step s", f"× {reference}", "peak GiB",
              f"memory × {reference}", "tokens/s", "MFU", "H100 floor ms"]  # fmt: skip
    lines.append(table(header, rows, "lllrrrrrrrr"))
    lines += lora_note(data.get("arms", []))
    notes = sorted({row["mfu_note"] for row in data.get("arms", []) if row.get("mfu") is None and row.get("mfu_note")})
    lines += [
        "",
        f"Memory: {settings.get('memory') or 'not measured'}. MFU: model FLOPs (a trained weight 6 per token, a "
        "frozen one 4: forward and its input's gradient; checkpointing's recomputed forward not counted) over the "
        "step time and the GPU's dense bf16 peak" + (f"; n/a: {'; '.join(notes)}" if notes else "") + ".",
    ]
    lines += training_runs(data.get("qlora_run"))
    lines += ["", "Command:", "", code_block([data.get("command") or commands[0]]), ""]
    env = data.get("environment") or {}
    load = [value for value in env.get("load_average_1min") or [] if isinstance(value, (int, float))]
    shared = f"1-minute load average {' to '.join(num(value, 1) for value in load)} while timing" if load else ""
    lines.append(machine_line(env, env.get("date") or file_date(path), shared))
    return "\n".join(lines)


def training_runs(qlora_run: dict[str, Any] | None) -> list[str]:
    """The ``run_unsup.py`` runs of ``--qlora_run_steps``: whether each trained and what its saved folder holds."""
    if not qlora_run or not qlora_run.get("runs"):
        return []
    settings = qlora_run.get("settings") or {}
    rows = []
    for name, run in qlora_run["runs"].items():
        gaps = run.get("embeddings") or {}
        losses = run.get("losses") or []
        rows.append([
            f"`{name}`",
            "yes" if "--load_in_4bit true" in run.get("command", "") else "no",
            str(run.get("returncode")) + (f": {run['error']}" if run.get("error") else ""),
            f"{num(losses[0], 3)} → {num(losses[-1], 3)}" if losses else "-",
            "yes" if run.get("losses_finite") else "no",
            f"{run.get('lora_B_moved', '-')} / {run.get('lora_B_matrices', '-')}",
            num(run.get("steps_per_s"), 2),
            ", ".join(f"{dtype} {n}" for dtype, n in (run.get("root_weight_dtypes") or {}).items()) or "-",
            "yes" if run.get("root_quantization_config") else "no",
            gaps.get("root_load_error") or num(gaps.get("root_vs_adapter"), 4),
            num(gaps.get("adapter_vs_base"), 3),
        ])  # fmt: skip
    header = ["run", "4-bit", "exit", "loss first → last", "finite", "LoRA B moved", "steps/s", "saved root's weights",
              "root quantized", "root vs adapter", "adapter vs base"]  # fmt: skip
    return [
        "",
        f"`run_unsup.py` itself, {settings.get('steps', '?')} steps of LoRA with and without "
        f"`--load_in_4bit true` on a smaller random Qwen3 (hidden {settings.get('hidden_size', '?')}, "
        f"{settings.get('num_hidden_layers', '?')} layers), learning rate {settings.get('learning_rate', '?')}. "
        f"The saved root (LoRA merged) and the saved adapter over the base embed "
        f"{settings.get('compared_sentences', '?')} sentences; each gap is the largest absolute difference over "
        "the adapter embeddings' largest component:",
        "",
        table(header, rows, "llllllrllrr"),
    ]


def lora_note(arms: list[dict[str, Any]]) -> list[str]:
    """When LoRA costs more time or memory than full fine-tuning (a small model), what it adds and what it saves."""
    rows = {row.get("arm"): row for row in arms}
    full, lora = rows.get("full"), rows.get("lora")
    if not full or not lora or not all(isinstance(row.get("trainable_parameters"), int) for row in (full, lora)):
        return []
    slower = (lora.get("time_vs_reference") or 0) > 1
    larger = (lora.get("memory_vs_reference") or 0) > 1
    if not slower and not larger:
        return []
    saved = 12 * (full["trainable_parameters"] - lora["trainable_parameters"]) / 2**20
    costs = " and ".join(word for word, flag in (("time", slower), ("memory", larger)) if flag)
    return [
        "",
        f"LoRA costs more {costs} than full fine-tuning at this size: each adapted projection adds two rank-r "
        "products and a dropout of its input (more operators, and that dropped input kept for the backward), while "
        "what it saves, the frozen weights' gradients and AdamW moments (12 bytes per weight in float32), comes to "
        f"{num(saved, 1)} MiB here. Where weights dominate activations (a ~1B model) the balance should turn; the "
        "GPU run of the ~1B model measures it.",
    ]


def cpu_decoder(data: dict[str, Any] | None, path: Path, commands: list[str]) -> str:
    return render_decoder(data, path, commands, "Decoder backbone: full fine-tuning against LoRA (CPU)")


def gpu_decoder(data: dict[str, Any] | None, path: Path, commands: list[str]) -> str:
    return render_decoder(data, path, commands, "Decoder backbone: a ~1B Qwen3 with LoRA on a GPU (bf16)")
