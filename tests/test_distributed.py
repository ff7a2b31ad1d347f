"""gather_with_grad in two real gloo processes: one process's gradients over the global batch, and no warnings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from conftest import REPO_ROOT, free_port
from distributed_gather import GLOBAL_BATCH, contrastive_loss, global_inputs

PROCESSES = 2


def test_two_process_gather_gives_each_process_the_global_gradient_of_its_rows(tmp_path: Path) -> None:
    """The gradient each process receives for its rows is the sum of every process's loss's gradient for them: the
    gradient of one process's summed loss over the global batch (DDP then averages, as one process's mean would)."""
    rendezvous = {"WORLD_SIZE": str(PROCESSES), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    script = [sys.executable, str(REPO_ROOT / "tests" / "distributed_gather.py"), str(tmp_path)]
    environments = [{**os.environ, **rendezvous, "RANK": str(rank)} for rank in range(PROCESSES)]
    workers = [subprocess.Popen(script, env=env, stderr=subprocess.PIPE, text=True) for env in environments]
    try:
        errors = [worker.communicate(timeout=120)[1] for worker in workers]
    finally:
        for worker in workers:
            worker.kill()  # only if one hung past the timeout: the other waits for it forever
    assert [worker.returncode for worker in workers] == [0] * PROCESSES, "\n".join(errors)

    first, second = (view.requires_grad_() for view in global_inputs())
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
