"""Checks on a trainer that several test files make."""

from __future__ import annotations

import torch

from hf_cse import CSETrainer


def changed_parameters(trainer: CSETrainer) -> tuple[int, int]:
    """Train ``trainer``; the number of its trainable parameters that changed, and of all its trainable ones."""
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    after = dict(trainer.model.named_parameters())
    return sum(not torch.equal(before[name], after[name]) for name in before), len(before)
