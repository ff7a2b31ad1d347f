"""Checks on a trainer that several test files make."""

from __future__ import annotations

from pathlib import Path

import torch

from hf_cse import CSETrainer


def changed_parameters(trainer: CSETrainer) -> tuple[int, int]:
    """Train ``trainer``; the number of its trainable parameters that changed, and of all its trainable ones."""
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    after = dict(trainer.model.named_parameters())
    return sum(not torch.equal(before[name], after[name]) for name in before), len(before)


def check_resumes_to_the_same_weights(straight: CSETrainer, resumed: CSETrainer, checkpoint: Path) -> None:
    """Train ``resumed`` from ``checkpoint`` (one of ``straight``'s, already trained): every parameter ends
    bit-equal to ``straight``'s (the failing one named)."""
    resumed.train(resume_from_checkpoint=str(checkpoint))
    for (name, expected), got in zip(straight.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(expected, got), name
