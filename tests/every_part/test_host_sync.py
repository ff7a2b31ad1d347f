"""No host synchronization in a training step that does not log, evaluate or save (issue 31, item 1): every built-in
objective with its defaults, with Matryoshka and with gradient caching, in one process and in two.

On a GPU, reading a value back (``.item()``, ``bool(tensor)``, ...) makes the host wait for every queued kernel, and
so does copying Python data to the device (``torch.tensor(..., device=...)``); a step that never does either keeps
the device busy while Python prepares the next one. The calls are counted on CPU with ``tests/host_sync_probe.py``
(which names where each came from, so a failure says what to fix).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from common.step_runs import QUIET, STEP_RUNS, step_run_config
from conftest import HANG_GUARD_S, REPO_ROOT, free_port, run_unsup
from host_sync_probe import counting

from hf_cse import CSETrainer


@pytest.mark.parametrize("run", list(STEP_RUNS))
def test_a_training_step_never_waits_for_the_device(tiny_encoder_dir: Path, tmp_path: Path, run: str) -> None:
    with counting(CSETrainer) as counts:
        run_unsup.main(["--config", str(step_run_config(tmp_path, tiny_encoder_dir, run))])
    assert dict(counts) == {}


def copy_to_device(loss: torch.Tensor) -> None:
    """Python data copied to ``loss``'s device: by ``device=``, and by a device context."""
    torch.tensor([1.0], device=loss.device)
    torch.as_tensor([1.0], device=loss.device)
    with torch.device(loss.device):
        torch.tensor([1.0])


# What a step adds to its loss computation, by name: the synchronizations it makes, by counter name, per step.
SYNCHRONIZATIONS: dict[str, tuple[Callable[[torch.Tensor], object], dict[str, int]]] = {
    "reading the loss back": (lambda loss: loss.item(), {"item": 1}),
    "copying Python data to the loss's device": (copy_to_device, {"tensor": 2, "as_tensor": 1}),
}


@pytest.mark.parametrize("synchronization", list(SYNCHRONIZATIONS))
def test_the_probe_sees_a_synchronization(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch, synchronization: str
) -> None:
    """The probe is live: a step that reads its loss back, or copies Python data to a device, is counted, and named;
    tensors made on the host (no ``device``, or ``device=None``) are not."""
    compute_loss = CSETrainer.compute_loss
    synchronize, per_step = SYNCHRONIZATIONS[synchronization]

    def synchronizing(self: CSETrainer, *args: Any, **kwargs: Any) -> Any:
        loss = compute_loss(self, *args, **kwargs)
        torch.tensor([1.0])  # on the host: nothing to wait for
        torch.as_tensor([1.0], device=None)
        synchronize(loss)
        return loss

    monkeypatch.setattr(CSETrainer, "compute_loss", synchronizing)
    with counting(CSETrainer) as counts:
        run_unsup.main(["--config", str(step_run_config(tmp_path, tiny_encoder_dir, "simcse"))])
    steps_counted = QUIET["max_steps"] - 1  # the first step is a warm-up
    by_name = {name: sum(calls for key, calls in counts.items() if key.startswith(f"{name} at ")) for name in per_step}
    assert by_name == {name: calls * steps_counted for name, calls in per_step.items()}
    assert sum(counts.values()) == sum(by_name.values())
    assert all(key.split(" <- ")[0].split(" at ")[1].startswith("test_host_sync.py:") for key in counts), counts


@pytest.mark.slow  # two torchrun processes: ~1 min on 2 loaded cores
def test_two_processes_gathering_never_wait_for_the_device(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """DCLR (noise and weighting over the gathered batch) with Matryoshka and gradient caching, on 2 processes."""
    config = step_run_config(tmp_path, tiny_encoder_dir, "dclr-matryoshka", gradient_cache_chunk_size=2)
    counts_dir = tmp_path / "counts"
    counts_dir.mkdir()
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(free_port()),
    ]
    command = [*torchrun, "run_unsup.py", "--config", str(config), "--import_module", "host_sync_probe"]
    tests_dir = str(Path(__file__).resolve().parents[1])  # host_sync_probe.py
    env = {**os.environ, "HF_CSE_SYNC_COUNTS": str(counts_dir), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [tests_dir, os.environ.get("PYTHONPATH")]))}  # fmt: skip
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = {path.name: json.loads(path.read_text()) for path in sorted(counts_dir.glob("rank*.json"))}
    assert counts == {"rank0.json": {}, "rank1.json": {}}
