"""tests/distributed_equivalence.py with a momentum queue (ESimCSE's, any objective's), for
tests/test_momentum_queue_ddp.py: the same runs, and each process also saves the queue and the momentum encoder's
weights it ends with, to ``OUT.json.run.rank{R}.pt`` (runs without a queue, SNCSE's, save nothing).

    accelerate launch --multi_gpu --num_processes 2 tests/distributed_momentum_queue.py \
        MODEL_DIR OUT.json esimcse-queue 8 [--then MODEL_DIR OUT2.json dclr-queue 8 ...]

With a global batch of 8 over 3 steps, 24 sentences enter a queue of 12: it ends holding the last two global batches
(each process gathers the batch before enqueuing).
"""

from __future__ import annotations

import sys
from pathlib import Path

import distributed_equivalence as equivalence
import torch

from hf_cse import CSETrainer

QUEUE = {"momentum_queue_size": 12, "momentum": 0.9, "temperature": 0.05}
"""A queue shorter than the 24 sentences of a run, so its oldest entries leave; a momentum far from 1, so the EMA
weights move visibly in 3 steps. The tiny random encoder's embeddings are nearly parallel (cosine > 0.99 with mean
pooling, > 0.99999 at [CLS]): at distributed_equivalence.py's temperature 1 every logit is the same and the loss is
log(B + Q) whatever the queue holds; mean pooling at 0.05 makes the queue's contents move the loss."""

equivalence.OBJECTIVES.update(
    {
        # dup_rate 0: no token is repeated, so that one process and two see the same views (the processes' RNGs
        # differ on purpose, see distributed_equivalence.py).
        "esimcse-queue": {"objective": "esimcse", "pooler": "avg", "objective_kwargs": {"dup_rate": 0.0, **QUEUE}},
        # ESimCSE's own word repetition: drawn per process, so only the two processes' queues are compared.
        "esimcse-repetition": {
            "objective": "esimcse",
            "pooler": "avg",
            "objective_kwargs": {"dup_rate": 0.32, **QUEUE},
        },
        # --mask_duplicates: the queue also keeps the gathered batch's text hashes, in the same rank order.
        "esimcse-queue-duplicates": {
            "objective": "esimcse",
            "pooler": "avg",
            "mask_duplicates": True,
            "objective_kwargs": {"dup_rate": 0.0, **QUEUE},
        },
        # The queue under another objective: DCLR's noise negatives and the queue's are both shared columns.
        "dclr-queue": {"objective": "dclr", "pooler": "avg", "objective_kwargs": {**equivalence.DCLR_KWARGS, **QUEUE}},
        # SNCSE (no queue): two templates' [MASK] states, and the BML over negations, per process as in its code.
        "sncse": {
            "objective": "sncse",
            "pooler": "mask",
            "input_kwargs": {"negations": {"negation_backend": "rules"}},
            "objective_kwargs": {"temperature": 0.05},
            "auxiliary_losses": {"bml": {"weight": 1.0}},
        },
    }
)


def queue_file(out_path: str | Path, rank: int) -> Path:
    """Where process ``rank`` of the run writing ``out_path`` saves its momentum queue's state."""
    return Path(f"{out_path}.run.rank{rank}.pt")


class QueueSavingTrainer(CSETrainer):
    """A :class:`~hf_cse.CSETrainer` that, after training, saves this process's ``{"queue": [Q, D], "model":
    momentum encoder state_dict}`` (and ``"text_hashes": [Q]`` under ``--mask_duplicates``) next to the run's output
    (``output_dir`` is ``OUT.json.run``)."""

    def train(self, *args, **kwargs):
        output = super().train(*args, **kwargs)
        if "momentum_queue" not in self.input_providers:
            return output
        state = self.input_providers["momentum_queue"].state
        saved = {"queue": state.queue.cpu(), "model": {k: v.cpu() for k, v in state.model.state_dict().items()}}
        if state.text_hashes is not None:
            saved["text_hashes"] = state.text_hashes.cpu()
        out_path = self.args.output_dir.removesuffix(".run")
        torch.save(saved, queue_file(out_path, self.args.process_index))
        return output


def run(argv: list[str]) -> None:
    """:func:`distributed_equivalence.run` with every trainer saving its queue; the module is restored after, so a
    test process that imports both keeps the plain script."""
    plain = equivalence.CSETrainer
    equivalence.CSETrainer = QueueSavingTrainer
    try:
        equivalence.run(argv)
    finally:
        equivalence.CSETrainer = plain


if __name__ == "__main__":
    run(sys.argv[1:])
