"""hf_cse's sentence-transformers loss on several processes, for tests/test_st_loss.py: each process takes its half
of a fixed batch of 8 pairs, computes ``CSELoss(..., gather_across_devices=True)`` and its gradients, and averages
the gradients over the processes as DDP does; one process over the whole batch must give the same.

    accelerate launch --multi_gpu --num_processes 2 tests/distributed_st_loss.py MODEL_DIR OUT.json OBJECTIVE \
        [--then MODEL_DIR OUT2.json OBJECTIVE ...]

OBJECTIVE: ``simcse`` or ``dclr`` (noise negatives and complementary weighting over the global batch). OUT.json (from
the main process): the loss averaged over the processes, the averaged gradient of every weight, ``world_size``.
Dropout is off (eval mode): the processes' RNGs would otherwise draw different masks than one process does. The
models are float64, so that one process and two differ only by float64 rounding (tests/rounding.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from accelerate import PartialState
from common.tiny_sentence_transformer import features, tiny_st
from conftest import SENTENCES, split_runs

from hf_cse.distributed import leave_process_group, world_size
from hf_cse.integrations import CSELoss

ANCHORS, POSITIVES = SENTENCES[:8], SENTENCES[4:12]
OBJECTIVES = {
    "simcse": {"temperature": 0.05},
    "dclr": {"temperature": 0.05, "phi": 0.75, "phi_mode": "quantile", "k": 1.0},
}


def loss_and_gradients(model_dir: str, objective: str) -> dict:
    """This process's share of the batch through the loss; the loss and gradients averaged over the processes."""
    torch.manual_seed(0)
    model = tiny_st(Path(model_dir)).double().eval()
    complementary = tiny_st(Path(model_dir)).double() if objective == "dclr" else None
    loss = CSELoss(model, objective, complementary_model=complementary, gather_across_devices=True,
                   **OBJECTIVES[objective])  # fmt: skip
    size, rank = world_size(), (torch.distributed.get_rank() if world_size() > 1 else 0)
    rows = slice(rank * len(ANCHORS) // size, (rank + 1) * len(ANCHORS) // size)
    torch.manual_seed(1)  # DCLR's noise: drawn by the main process, the same draw as one process's
    value = loss([features(model, ANCHORS[rows]), features(model, POSITIVES[rows])], None)
    value.backward()
    gradients = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    if size > 1:  # what DDP does to the gradients, and the mean of the processes' losses
        for grad in [*gradients.values(), value]:
            torch.distributed.all_reduce(grad)
            grad /= size
    return {
        "world_size": size,
        "dtype": str(value.dtype),
        "loss": value.item(),
        "gradients": {name: grad.tolist() for name, grad in gradients.items()},
    }


def run(argv: list[str]) -> None:
    """Each run of the arguments (``MODEL_DIR OUT.json OBJECTIVE``, ``--then`` between runs), one after the other."""
    state = PartialState()  # joins the process group accelerate launch set up
    for model_dir, out_path, objective in split_runs(argv):
        result = loss_and_gradients(model_dir, objective)
        if state.is_main_process:
            Path(out_path).write_text(json.dumps(result), encoding="utf-8")
    leave_process_group()


if __name__ == "__main__":
    run(sys.argv[1:])
