"""One process of the gather_with_grad check in tests/test_distributed.py; rank and rendezvous from the environment.

    RANK=r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=p python tests/distributed_gather.py OUT_DIR

Writes OUT_DIR/rank{r}.json: its rows, the gathered first view, the gradients of its two local views, and every
warning raised while gathering and back-propagating.

It loads hf_cse.distributed without running ``hf_cse/__init__.py``: the package pulls in
transformers, peft, scipy and evaluate (about 10 s per process on the team's 2-core machines), and the module
needs torch and two small hf_cse modules only.
"""

from __future__ import annotations

import importlib
import json
import sys
import types
import warnings
from pathlib import Path

import torch
import torch.distributed as dist

GLOBAL_BATCH, HIDDEN = 8, 5


def global_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """Two views of the global batch, the same on every process (fixed seed); float64, so that the gradients of two
    processes and of one differ only by float64 rounding (tests/rounding.py)."""
    generator = torch.Generator().manual_seed(0)
    first, second = (torch.randn(GLOBAL_BATCH, HIDDEN, generator=generator, dtype=torch.float64) for _ in range(2))
    return first, second


def contrastive_loss(anchors: torch.Tensor, candidates: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
    """InfoNCE of ``anchors`` against every candidate, positives at ``positives`` (their global rows); each row
    weighted by its global row so that a gradient landing on the wrong row or process cannot go unnoticed."""
    logits = anchors @ candidates.T
    weights = 1.0 + positives.to(anchors.dtype)
    return (weights * torch.nn.functional.cross_entropy(logits, positives, reduction="none")).sum()


def load_distributed_module() -> types.ModuleType:
    """``hf_cse.distributed`` and the few hf_cse modules it imports, without running ``hf_cse/__init__.py``: the
    package is registered as an empty namespace over its folder, so relative imports resolve as usual."""
    package = types.ModuleType("hf_cse")
    package.__path__ = [str(Path(__file__).resolve().parents[1] / "hf_cse")]
    sys.modules["hf_cse"] = package
    return importlib.import_module("hf_cse.distributed")


def main(out_dir: str) -> None:
    gather_with_grad = load_distributed_module().gather_with_grad
    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment
    rank, local = dist.get_rank(), GLOBAL_BATCH // dist.get_world_size()
    mine = [view[rank * local : (rank + 1) * local].clone().requires_grad_() for view in global_inputs()]
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


if __name__ == "__main__":
    main(sys.argv[1])
