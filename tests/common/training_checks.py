"""Checks on a trainer that several test files make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import TrainerCallback

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


def add_to_every_trainer(monkeypatch: pytest.MonkeyPatch, callback: TrainerCallback) -> None:
    """``callback`` on every ``CSETrainer`` built until ``monkeypatch`` is undone (``run_unsup.py`` builds its own)."""
    init = CSETrainer.__init__

    def with_callback(self: CSETrainer, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.add_callback(callback)

    monkeypatch.setattr(CSETrainer, "__init__", with_callback)
