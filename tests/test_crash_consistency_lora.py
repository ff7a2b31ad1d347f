"""The crash-consistency sweep of tests/test_crash_consistency.py for a LoRA run, whose every save also writes the
adapter (``adapter/``; the final save publishes the merged model and the adapter together): the kill at every file
operation of a checkpoint save and of the final save, with the same invariants (every checkpoint verifies; no model
or adapter unless it holds the final weights; the next invocation ends bit-equal to a straight LoRA run's).

Slow (about 3 s per operation on 2 cores, a LoRA run being slower to build and save); in a file of its own so that
pytest-xdist's ``--dist loadfile`` runs it beside the full model's sweeps.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from common.crash_sweep import PHASES, sweep


@pytest.mark.slow
@pytest.mark.parametrize("phase", PHASES)
def test_a_kill_at_every_operation_of_a_lora_save_loses_nothing(
    tiny_encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    operation_counts: dict[tuple[str, str], int],
    straight_runs: dict[str, dict[str, torch.Tensor]],
    phase: str,
) -> None:
    count = operation_counts["lora", phase]
    sweep(tiny_encoder_dir, tmp_path, monkeypatch, "lora", phase, "SIGKILL", count, straight_runs["lora"])
