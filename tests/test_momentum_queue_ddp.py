"""The momentum queue on 2 CPU processes (gloo): every process enqueues the gathered global batch, so both hold the
same queue and the same momentum-encoder weights, and the run trains as one process over the global batch.

One launch trains every run of RUNS (tests/distributed_momentum_queue.py over tests/distributed_equivalence.py:
dropout off, plain SGD, 3 steps of a global batch of 8, rank-dependent seeds); the same runs in this process give the
one-process reference. A queue built from each process's own rows only would differ between the processes (each
would hold its 4 sentences of every batch), and from the second step the losses would differ from one process's.
The same launch trains SNCSE (issue 29's other method here, without a queue) on 2 processes against one.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from common.two_processes import assert_two_processes_equal_one
from conftest import launch_two_process_runs
from rounding import assert_equal_up_to_float64_rounding

# Run name -> the arguments of tests/distributed_momentum_queue.py after MODEL_DIR OUT.json.
RUNS = {
    "esimcse-queue": ["esimcse-queue", "8"],
    "dclr-queue": ["dclr-queue", "8"],
    "esimcse-repetition": ["esimcse-repetition", "8"],
    "esimcse-queue-duplicates": ["esimcse-queue-duplicates", "8"],
    "sncse": ["sncse", "8"],  # no queue: SNCSE's two templates and BML on 2 processes, in the same launch
}
QUEUE_RUNS = ["esimcse-queue", "dclr-queue", "esimcse-repetition", "esimcse-queue-duplicates"]
QUEUE_SIZE = 12  # tests/distributed_momentum_queue.py's QUEUE


def load_queues(out_path: Path, ranks: int) -> list[dict]:
    import distributed_momentum_queue

    return [torch.load(distributed_momentum_queue.queue_file(out_path, rank)) for rank in range(ranks)]


@pytest.fixture(scope="module")
def two_process_runs(tiny_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    """Each run's results and its two processes' saved queues, from one 2-process launch."""
    out_dir = tmp_path_factory.mktemp("momentum_queue_ddp")
    results, _ = launch_two_process_runs("distributed_momentum_queue.py", tiny_encoder_dir, out_dir, RUNS)
    return {
        run: (result, load_queues(out_dir / f"{run}.json", 2) if run in QUEUE_RUNS else None)
        for run, result in results.items()
    }


def one_process_run(model_dir: Path, tmp_path: Path, run: str) -> tuple[dict, dict]:
    """The run ``run`` in this process (one process over the global batch): its results and its saved queue."""
    import distributed_momentum_queue

    out = tmp_path / f"{run}-single.json"
    distributed_momentum_queue.run([str(model_dir), str(out), *RUNS[run]])
    result = json.loads(out.read_text())
    assert result["world_size"] == 1
    return result, load_queues(out, 1)[0] if run in QUEUE_RUNS else None


@pytest.mark.parametrize("run", QUEUE_RUNS)
def test_both_processes_hold_the_same_full_queue_and_momentum_encoder(two_process_runs: dict, run: str) -> None:
    result, (first, second) = two_process_runs[run]
    assert result["rank_spread"] == 0.0
    # 3 steps x 8 sentences entered a queue of 12: it is full, of finite, distinct embeddings.
    assert first["queue"].shape[0] == QUEUE_SIZE and torch.isfinite(first["queue"]).all()
    assert torch.unique(first["queue"], dim=0).shape[0] == QUEUE_SIZE
    assert torch.equal(first["queue"], second["queue"])
    assert first["model"].keys() == second["model"].keys()
    for name, value in first["model"].items():
        assert torch.equal(value, second["model"][name]), name
    if run == "esimcse-queue-duplicates":  # the queued sentences' hashes, one per distinct sentence, alike too
        assert torch.unique(first["text_hashes"]).shape == (QUEUE_SIZE,)
        assert torch.equal(first["text_hashes"], second["text_hashes"])


@pytest.mark.parametrize("run", ["esimcse-queue", "dclr-queue", "esimcse-queue-duplicates"])
def test_two_processes_with_a_queue_train_as_one_over_the_global_batch(
    two_process_runs: dict, tiny_encoder_dir: Path, tmp_path: Path, run: str
) -> None:
    """Losses (the queue is a negative from step 2 on), logged parts and parameters equal one process's, and so do
    the queue (the global batch in rank order, as one process's batch) and the momentum encoder's weights."""
    two, (queue, _) = two_process_runs[run]
    single, single_queue = one_process_run(tiny_encoder_dir, tmp_path, run)
    # Not every logit equal (a loss of log(8 + queued) whatever the queue held): the queue's contents count.
    queued = [min(8 * step, QUEUE_SIZE) for step in range(3)]
    assert all(abs(loss - math.log(8 + q)) > 0.01 for loss, q in zip(single["losses"], queued, strict=True))
    assert_two_processes_equal_one(single, two)
    # float64 runs (tests/rounding.py): the queue is float64 for a float64 model, as are the EMA weights.
    assert_equal_up_to_float64_rounding({"queue": queue["queue"]}, {"queue": single_queue["queue"]}, "queues")
    if run == "esimcse-queue-duplicates":  # the gathered hashes in rank order: one process's over the global batch
        assert torch.equal(queue["text_hashes"], single_queue["text_hashes"])
    floating = {name: value for name, value in single_queue["model"].items() if value.is_floating_point()}
    assert all(
        torch.equal(queue["model"][name], value)
        for name, value in single_queue["model"].items()
        if name not in floating
    )
    assert_equal_up_to_float64_rounding(
        {name: queue["model"][name] for name in floating}, floating, "momentum encoder weights"
    )


def test_sncse_on_two_processes_trains_as_one(two_process_runs: dict, tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """The objective over the gathered views of both templates, the BML per process over its own rows (as the code):
    with every sentence negated, the mean over processes of their BML is one process's, and so is every step."""
    two, _ = two_process_runs["sncse"]
    single, _ = one_process_run(tiny_encoder_dir, tmp_path, "sncse")
    assert_two_processes_equal_one(single, two)
    assert all(parts["loss_bml"] > 0 for parts in single["loss_parts"])
