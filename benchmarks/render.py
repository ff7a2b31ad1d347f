"""Build ``BENCHMARKS.md`` from the JSON files the benchmark scripts write. Every number comes from those files.

Sections (their renderers in the ``_render_*.py`` modules beside this script), each read
from its JSON under ``--results_dir`` (default ``benchmarks/results``):

- STS quality of the objectives: ``quality/quality_summary.json`` (``python benchmarks/quality.py --summarize``);
- does any objective beat SimCSE, tuned and selected on dev: ``quality_study.json``
  (``python benchmarks/quality_study.py --summarize``);
- labelled pairs and hard negatives, supervised SimCSE on SICK: ``supervised_quality.json``
  (``python benchmarks/supervised_quality.py --summarize``);
- evaluation speed: ``eval_speed.json`` (``benchmarks/eval_speed.py``);
- training throughput: ``throughput.json`` (``benchmarks/throughput.py``, float32 on CPU) and
  ``throughput_gpu_bf16.json`` (the same script with ``--bf16`` on a GPU);
- where a step's time goes: ``profile_step_cpu.json`` and ``profile_step_gpu_bf16.json``
  (``benchmarks/profile_step.py``);
- DCLR's complementary cache: ``complementary_cache.json`` (``benchmarks/complementary_cache.py``);
- operators each loss runs outside the encoder: ``loss_ops.json`` (``benchmarks/loss_ops.py``);
- memory and start-up time against corpus size: ``corpus_memory.json`` (``benchmarks/corpus_memory.py``);
- the floor of a BERT-base SimCSE step on an H100: ``step_floor.json`` (``benchmarks/flops.py``);
- GPU throughput compiled and with CUDA graphs: ``throughput_gpu_bf16_compile.json``,
  ``throughput_gpu_bf16_cudagraphs.json`` and ``throughput_gpu_bf16_static_cudagraphs.json`` beside the eager
  ``throughput_gpu_bf16.json`` (all four from ``benchmarks/gpu_session.py``);
- a decoder backbone, full fine-tuning against LoRA: ``decoder_step_cpu.json`` and ``decoder_step_gpu_1b.json``
  (``benchmarks/decoder_step.py``).

A missing JSON gives a section that says "Not run yet" with the command that produces it (for a GPU measurement,
the command of the ``gpu_session.py`` stage that writes it, built from the stage's definition). Each section names the
command that produced its numbers (recorded in the JSON, or rebuilt from the settings the JSON records) and the
machine and date it ran on (recorded in the JSON; the file's modification time when the JSON has no date). Absolute
paths in what the JSON files record (a development machine's ``--work_dir /work/...``) are shown relative to the
repository root (``_common.portable_paths``).

    python benchmarks/render.py                   # writes BENCHMARKS.md at the repository root
    python benchmarks/render.py --results_dir /tmp/results --output /tmp/BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import REPO_ROOT, RESULTS_DIR, portable_paths, utc_now
from _render_decoder import cpu_decoder, gpu_decoder
from _render_floor import render_gpu_variants, render_step_floor
from _render_format import load_json, rel
from _render_memory import render_complementary, render_corpus_memory
from _render_quality import render_quality, render_quality_study
from _render_speed import (
    cpu_profile,
    gpu_profile,
    gpu_throughput,
    render_eval_speed,
    render_loss_ops,
    render_throughput,
)
from _render_supervised import render_supervised_quality
from gpu_session import build_stages, command_text

QUALITY_JSON = Path("quality") / "quality_summary.json"
QUALITY_STUDY_JSON = Path("quality_study.json")
SUPERVISED_QUALITY_JSON = Path("supervised_quality.json")
EVAL_SPEED_JSON = Path("eval_speed.json")
THROUGHPUT_JSON = Path("throughput.json")
THROUGHPUT_GPU_JSON = Path("throughput_gpu_bf16.json")
PROFILE_CPU_JSON = Path("profile_step_cpu.json")
PROFILE_GPU_JSON = Path("profile_step_gpu_bf16.json")
COMPLEMENTARY_JSON = Path("complementary_cache.json")
CORPUS_MEMORY_JSON = Path("corpus_memory.json")
LOSS_OPS_JSON = Path("loss_ops.json")
STEP_FLOOR_JSON = Path("step_floor.json")
GPU_VARIANTS_JSON = Path("throughput_gpu_bf16_compile.json")  # with its siblings (_render_floor.GPU_VARIANT_STAGES)
DECODER_CPU_JSON = Path("decoder_step_cpu.json")
DECODER_GPU_JSON = Path("decoder_step_gpu_1b.json")
GPU_SESSION = "python benchmarks/gpu_session.py --out $OUT   # on a GPU: every GPU measurement in one call"


def gpu_commands(results_dir: Path) -> dict[str, str]:
    """The GPU commands of ``gpu_session.py``'s stages, each writing its JSON under ``results_dir``, by the JSON's
    file name (e.g. ``decoder_step_gpu_1b.json``): the session's stage definitions are the one place that says what a
    GPU measurement runs, so a "Not run yet" section shows what the session would run."""
    stages = build_stages("gpu", Path(rel(results_dir)))
    return {
        stage.output: f"{command_text(stage)}   # on a GPU (gpu_session.py's {stage.name} stage)"
        for stage in stages
        if stage.output
    }


def default_commands(results_dir: Path) -> dict[str, list[str]]:
    """The commands that produce each JSON under ``results_dir``."""
    gpu = gpu_commands(results_dir)
    quality_dir = rel(results_dir / QUALITY_JSON.parent)
    quality_flag = "" if quality_dir == "benchmarks/results/quality" else f" --output_dir {quality_dir}"
    return {
        "quality": [
            f"nohup python benchmarks/quality.py{quality_flag} > quality.log 2>&1 &   # hours; rerun to resume",
            f"python benchmarks/quality.py --summarize{quality_flag}",
        ],
        "quality_study": [
            "nohup python benchmarks/quality_study.py --work_dir ../quality_study > quality_study.log 2>&1 &  "
            "# hours; rerun anywhere to resume",
            "python benchmarks/quality_study.py --work_dir ../quality_study --summarize  # keeps the finished runs' "
            "records in benchmarks/results/quality_study/",
        ],
        "supervised_quality": [
            "nohup python benchmarks/supervised_quality.py --work_dir ../supervised_quality > supervised_quality.log "
            "2>&1 &  # 2 to 3 hours on 2 CPU cores; rerun anywhere (same --work_dir) to resume",
            "python benchmarks/supervised_quality.py --work_dir ../supervised_quality --summarize  # keeps the "
            "finished runs' records in benchmarks/results/supervised_quality/",
        ],
        "eval_speed": [f"python benchmarks/eval_speed.py --output_json {rel(results_dir / EVAL_SPEED_JSON)}"],
        "throughput": [
            f"python benchmarks/throughput.py --steps 10 --output_json {rel(results_dir / THROUGHPUT_JSON)}"
        ],
        "throughput_gpu": [gpu[THROUGHPUT_GPU_JSON.name], GPU_SESSION],
        "profile_cpu": [
            "python benchmarks/profile_step.py --steps 3 --warmup 1 --output_json "
            f"{rel(results_dir / PROFILE_CPU_JSON)}"
        ],
        "profile_gpu": [gpu[PROFILE_GPU_JSON.name]],
        "complementary_cache": [
            "python benchmarks/complementary_cache.py --steps 10 --output_json "
            f"{rel(results_dir / COMPLEMENTARY_JSON)}"
        ],
        "corpus_memory": [f"python benchmarks/corpus_memory.py --output_json {rel(results_dir / CORPUS_MEMORY_JSON)}"],
        "loss_ops": [f"python benchmarks/loss_ops.py --output_json {rel(results_dir / LOSS_OPS_JSON)}"],
        "step_floor": [f"python benchmarks/flops.py --output_json {rel(results_dir / STEP_FLOOR_JSON)}"],
        "gpu_variants": [GPU_SESSION],
        "decoder_cpu": [f"python benchmarks/decoder_step.py --output_json {rel(results_dir / DECODER_CPU_JSON)}"],
        "decoder_gpu": [gpu[DECODER_GPU_JSON.name]],
    }


def as_committed(data: dict[str, Any] | None, path: Path) -> dict[str, Any] | None:
    """``data`` with its recorded command's ``--output_json`` naming ``path``, where the JSON is read from, when it
    named a folder outside the repository: a GPU stage writes under the device call's output folder (``$OUT``,
    recorded as ``../../root/out/...``), from which the file is copied here."""
    if data is not None and isinstance(data.get("command"), str):
        data["command"] = re.sub(
            r"(--output_json )([./]\S+)", lambda match: match.group(1) + rel(path), data["command"]
        )
    return data


def render(results_dir: str | Path = RESULTS_DIR, generated_at: str | None = None) -> str:
    """The Markdown of ``BENCHMARKS.md`` for the JSON files under ``results_dir``."""
    results_dir = Path(results_dir)
    commands = default_commands(results_dir)
    sections = [
        ("quality", QUALITY_JSON, render_quality),
        ("quality_study", QUALITY_STUDY_JSON, render_quality_study),
        ("supervised_quality", SUPERVISED_QUALITY_JSON, render_supervised_quality),
        ("eval_speed", EVAL_SPEED_JSON, render_eval_speed),
        ("throughput", THROUGHPUT_JSON, render_throughput),
        ("step_floor", STEP_FLOOR_JSON, render_step_floor),
        ("throughput_gpu", THROUGHPUT_GPU_JSON, gpu_throughput),
        ("gpu_variants", GPU_VARIANTS_JSON, render_gpu_variants),
        ("profile_cpu", PROFILE_CPU_JSON, cpu_profile),
        ("profile_gpu", PROFILE_GPU_JSON, gpu_profile),
        ("loss_ops", LOSS_OPS_JSON, render_loss_ops),
        ("complementary_cache", COMPLEMENTARY_JSON, render_complementary),
        ("corpus_memory", CORPUS_MEMORY_JSON, render_corpus_memory),
        ("decoder_cpu", DECODER_CPU_JSON, cpu_decoder),
        ("decoder_gpu", DECODER_GPU_JSON, gpu_decoder),
    ]
    header = [
        "# Benchmarks",
        "",
        f"Generated by `python benchmarks/render.py` on {generated_at or utc_now()} from the JSON files in "
        f"`{rel(results_dir)}/`. Do not edit by hand: rerun a benchmark, then this script. Timings taken on shared "
        "CPU machines are noisy; every script interleaves its arms and reports medians and ratios, which are steadier "
        "than absolute times.",
    ]
    body = [
        renderer(as_committed(load_json(results_dir / name), results_dir / name), results_dir / name, commands[key])
        for key, name, renderer in sections
    ]
    # The records keep the commands as they ran, on whatever machine: shown here relative to the repository.
    return portable_paths("\n\n".join(["\n".join(header), *body]) + "\n")


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
