"""Gradient caching on 2 CPU processes (gloo): every chunked run trains exactly as the same run without chunks.

One launch trains every run of RUNS one after the other (tests/distributed_gradient_cache.py over
tests/distributed_equivalence.py: dropout off, plain SGD, 3 steps, rank-dependent seeds, so that DCLR's noise only
agrees if it is shared). Equal losses, logged parts and parameters mean the replayed chunks' gradients, summed over
chunks and averaged by DDP once, are the uncached step's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from common.two_processes import assert_two_processes_equal_one
from conftest import launch_two_process_runs

# Run name -> the arguments of tests/distributed_equivalence.py after MODEL_DIR OUT.json.
RUNS = {
    "simcse": ["simcse", "8"],
    "simcse-chunked": ["simcse-chunked", "8"],
    "dclr": ["dclr", "8"],
    "dclr-chunked": ["dclr-chunked", "8"],
    "dclr-matryoshka": ["dclr-matryoshka", "8"],
    "dclr-matryoshka-chunked": ["dclr-matryoshka-chunked", "8"],
    # Local negatives and 2 accumulated micro-batches of 2 per process: the Trainer's own no_sync on the first.
    "simcse-accumulated": ["simcse", "8", "2"],
    "simcse-accumulated-chunked": ["simcse-chunk1", "8", "2"],
}


@pytest.fixture(scope="module")
def two_process_runs(tiny_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Every run of RUNS in one 2-process launch (``accelerate launch --multi_gpu`` starts gloo on a CPU machine)."""
    out_dir = tmp_path_factory.mktemp("gradient_cache_ddp")
    results, _ = launch_two_process_runs("distributed_gradient_cache.py", tiny_encoder_dir, out_dir, RUNS)
    return results


@pytest.mark.parametrize("run", ["simcse", "dclr", "dclr-matryoshka", "simcse-accumulated"])
def test_two_processes_with_gradient_cache_train_as_without_it(two_process_runs: dict[str, dict], run: str) -> None:
    """Losses, each logged loss part (per Matryoshka dimension too) and every parameter after 3 steps: the chunked
    run's equal the uncached one's, and both processes end with the same parameters (DDP all-reduced every step)."""
    uncached, chunked = two_process_runs[run], two_process_runs[f"{run}-chunked"]
    assert uncached["rank_spread"] == 0.0
    assert_two_processes_equal_one(uncached, chunked)
    moved = [name for name, values in chunked["parameters"].items() if values != chunked["initial_parameters"][name]]
    assert "bert.encoder.layer.1.output.dense.weight" in moved
