"""The floor sections of ``BENCHMARKS.md``: the least time a BERT-base SimCSE step can take on an H100
(``flops.py``), and the GPU throughput of the four variants that ``gpu_session.py`` runs (eager, compiled, CUDA
graphs, CUDA graphs over one padded shape), each step beside its floor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _render_format import code_block, count, file_date, load_json, machine_line, not_run, num, rel, table
from _render_speed import compile_text, floor_ms, mfu_cell, model_text, times_floor
from gpu_session import build_stages

# 52 steps/s at batch 64: a 1M-sentence epoch in 5 minutes (issue 40's target).
TARGET_STEPS_PER_S = 52.0


def render_step_floor(data: dict[str, Any] | None, path: Path, commands: list[str]) -> str:
    lines = ["## Floor of a BERT-base SimCSE step on an H100", ""]
    if data is None:
        return "\n".join([*lines, not_run(commands, path)])
    step = data.get("simcse_bert_base") or {}
    ceilings = data.get("ceilings") or {}
    model = step.get("model") or {}
    tflops = ceilings.get("bf16_flops_per_s", 0) / 1e12
    tbytes = ceilings.get("bytes_per_s", 0) / 1e12
    lines += [
        f"One hf_cse SimCSE step (`[CLS]` pooling and its MLP head) of BERT-base ({count(model.get('parameters'))} "
        f"weights, {count(model.get('trainable_parameters'))} trained) at batch {step.get('batch_size', '?')} x "
        f"{step.get('max_seq_length', '?')} tokens, every row at full length: one trained forward over the two "
        "views' stacked rows, its backward and an AdamW step. FLOPs: the matrix products (6N per token plus "
        "attention); bytes: the fewest a step moves (weights read by the forward and again by the backward, layer "
        "outputs and their gradients written and read once, AdamW's 8 element sizes per trained weight). The floor "
        f"is the larger of the FLOPs at {num(tflops, 0)} TFLOP/s and the bytes at {num(tbytes, 1)} TB/s, the two "
        f"ceilings measured on this workplace's H100 ({ceilings.get('device', '?')}): no implementation of this step "
        "runs faster.",
        "",
    ]
    floor_s = step.get("floor_s")
    target_ms = 1e3 / TARGET_STEPS_PER_S
    rows = [
        ["tokens per step", count(step.get("tokens_per_step"))],
        ["model FLOPs per step (TFLOP)", num((step.get("model_flops_per_step") or 0) / 1e12, 3)],
        ["bytes per step (GB)", num((step.get("bytes_per_step") or 0) / 1e9, 3)],
        ["compute floor (ms)", num(1e3 * (step.get("compute_floor_s") or 0), 2)],
        ["memory floor (ms)", num(1e3 * (step.get("memory_floor_s") or 0), 2)],
        [f"floor (ms, {step.get('bound', '?')}-bound)", num(1e3 * floor_s, 2) if floor_s else "-"],
        ["most steps/s", num(step.get("max_steps_per_s"), 0)],
        ["a 1M-sentence epoch at the floor (min)", num(step.get("minutes_per_1m_sentences"), 2)],
        [
            f"target {num(TARGET_STEPS_PER_S, 0)} steps/s (a 1M-sentence epoch in 5 min): step budget (ms)",
            num(target_ms, 1) + (f" = {num(target_ms / (1e3 * floor_s), 1)} × the floor" if floor_s else ""),
        ],
    ]
    lines.append(table(["quantity", "value"], rows))
    env = data.get("environment") or {}
    lines += ["", "Command:", "", code_block([data.get("command") or commands[0]]), ""]
    lines.append(machine_line(env, env.get("date") or file_date(path), "counted, not timed"))
    return "\n".join(lines)


# The four variants of issue 40 by the ``gpu_session.py`` stage that runs each (the eager one is the GPU throughput
# run); their JSON files' names are the stages' own.
GPU_VARIANT_STAGES = {
    "throughput_eager": "eager",
    "throughput_compile": "torch.compile",
    "throughput_cudagraphs": "torch.compile + CUDA graphs",
    "throughput_static_cudagraphs": "CUDA graphs, padded to max_seq_length",
}


def gpu_variant_files() -> list[tuple[str, str]]:
    """(label, JSON file name) of each variant, in the session's order."""
    stages = build_stages("gpu", Path("."))
    return [(GPU_VARIANT_STAGES[stage.name], stage.output) for stage in stages if stage.name in GPU_VARIANT_STAGES]


def render_gpu_variants(data: dict[str, Any] | None, path: Path, commands: list[str]) -> str:
    """One table over the variants' JSON files beside ``path`` (``data`` is the compiled variant's)."""
    lines = ["## Training throughput on a GPU: eager, compiled, CUDA graphs (bf16)", ""]
    variants = [(name, path.parent / file, load_json(path.parent / file)) for name, file in gpu_variant_files()]
    measured = [(name, file, result) for name, file, result in variants if result is not None]
    if len(measured) <= 1:  # the eager run alone has its own section
        return "\n".join([*lines, not_run(commands, path)])
    settings = measured[0][2].get("settings", {})
    lines += [
        f"{model_text(settings)}, batch {settings.get('batch_size', '?')}, max_seq_length "
        f"{settings.get('max_seq_length', '?')}: the same arms in four runs of `benchmarks/throughput.py`, each step "
        "beside its H100 floor (`benchmarks/flops.py`: FLOPs at 790 TFLOP/s or bytes at 3 TB/s, whichever is "
        "longer). End to end: `run_unsup.py` SimCSE with the run's flags, over its whole run (compilation "
        "included) and steady (after its warm-up steps).",
        "",
    ]
    rows = []
    for name, file, result in variants:
        if result is None:
            rows.append([name, *["-"] * 8, f"not run (no `{rel(file)}`)"])
            continue
        end_to_end = (result.get("end_to_end") or {}).get("hf_cse_simcse") or {}
        for index, row in enumerate(result.get("arms", [])):
            rows.append(
                [
                    name if index == 0 else "",
                    f"`{row.get('arm', '?')}`",
                    num(1e3 * row["median_step_s"], 2) if isinstance(row.get("median_step_s"), (int, float)) else "-",
                    num(row.get("time_vs_bare"), 3),
                    mfu_cell(row),
                    floor_ms(row),
                    times_floor(row),
                    num(end_to_end.get("steps_per_s"), 1) if index == 0 else "",
                    num(end_to_end.get("steady_steps_per_s"), 1) if index == 0 else "",
                    (compile_text(result.get("settings", {})).lstrip(", ") or "eager") if index == 0 else "",
                ]
            )
    header = ["variant", "arm", "step ms", "× bare", "MFU", "H100 floor ms", "× floor", "end to end steps/s",
              "steady steps/s", "run"]  # fmt: skip
    lines.append(table(header, rows, "llrrrrrrrl"))
    lines += ["", "Commands:", "", code_block([r.get("command", "?") for _, _, r in measured]), ""]
    env = measured[-1][2].get("environment") or {}
    lines.append(machine_line(env, env.get("date") or file_date(measured[-1][1])))
    return "\n".join(lines)
