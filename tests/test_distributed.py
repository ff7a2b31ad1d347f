"""gather_with_grad in two real gloo processes: one process's gradients over the global batch, and no warnings."""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from conftest import free_port

from hf_cse.training.distributed import gather_with_grad

GLOBAL_BATCH, HIDDEN, PROCESSES = 8, 5, 2


def global_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """Two views of the global batch, the same on every process (fixed seed)."""
    generator = torch.Generator().manual_seed(0)
    return tuple(torch.randn(GLOBAL_BATCH, HIDDEN, generator=generator) for _ in range(2))


def contrastive_loss(anchors: torch.Tensor, candidates: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
    """InfoNCE of ``anchors`` against every candidate, positives at ``positives`` (their global rows); each row
    weighted by its global row so that a gradient landing on the wrong row or process cannot go unnoticed."""
    logits = anchors @ candidates.T
    weights = 1.0 + positives.to(anchors.dtype)
    return (weights * torch.nn.functional.cross_entropy(logits, positives, reduction="none")).sum()


def _worker(rank: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=PROCESSES)
    first, second = global_inputs()
    local = GLOBAL_BATCH // PROCESSES
    mine = [view[rank * local : (rank + 1) * local].clone().requires_grad_() for view in (first, second)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (gathered_first, gathered_second), rows = gather_with_grad(mine)
        # Each process's loss: its own anchors against the candidates of every process, as the trainer's objectives.
        contrastive_loss(gathered_first[rows], gathered_second, rows).backward()
    result = {
        "rows": rows.tolist(),
        "gathered_first": gathered_first.tolist(),
        "grads": [view.grad.tolist() for view in mine],
        "warnings": [f"{w.category.__name__}: {w.message} ({w.filename})" for w in caught],
    }
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result), encoding="utf-8")
    dist.barrier()
    dist.destroy_process_group()


def test_two_process_gather_gives_each_process_the_global_gradient_of_its_rows(tmp_path: Path) -> None:
    """The gradient each process receives for its rows is the sum of every process's loss's gradient for them: the
    gradient of one process's summed loss over the global batch (DDP then averages, as one process's mean would)."""
    context = mp.start_processes(_worker, args=(free_port(), str(tmp_path)), nprocs=PROCESSES, join=False)
    deadline = time.monotonic() + 120
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail("the two gloo processes did not finish in 120 s")

    first, second = global_inputs()
    first.requires_grad_()
    second.requires_grad_()
    everything = torch.arange(GLOBAL_BATCH)
    contrastive_loss(first, second, everything).backward()
    local = GLOBAL_BATCH // PROCESSES
    for rank in range(PROCESSES):
        result = json.loads((tmp_path / f"rank{rank}.json").read_text(encoding="utf-8"))
        assert result["warnings"] == []
        mine = slice(rank * local, (rank + 1) * local)
        assert result["rows"] == everything[mine].tolist()
        assert torch.equal(torch.tensor(result["gathered_first"]), first.detach())
        for got, expected in zip(result["grads"], (first.grad[mine], second.grad[mine]), strict=True):
            assert torch.allclose(torch.tensor(got), expected, atol=1e-6)
