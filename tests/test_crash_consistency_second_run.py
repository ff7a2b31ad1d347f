"""The crash-consistency sweep of tests/test_crash_consistency.py for a second invocation: a run finishes, then the
same command is run again with ``--resume_from_checkpoint true`` and saves its final model over the first one's. A
kill at every file operation of that final save must leave the folder holding a loadable final model (the first
one's or the new one, whole, never none), every checkpoint verifying, and the next invocation ending bit-equal to a
straight run.

Slow (a finished run, the faulted invocation and the resumed one per operation); in a file of its own so that
pytest-xdist's ``--dist loadfile`` runs it beside the other sweeps.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from common.crash_sweep import FINAL_AGAIN, operation_count, sweep


@pytest.mark.slow
def test_a_kill_at_every_operation_of_a_final_save_over_a_final_model_keeps_one(
    tiny_encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    straight_runs: dict[str, dict[str, torch.Tensor]],
) -> None:
    (tmp_path / "count").mkdir()
    count = operation_count(tiny_encoder_dir, tmp_path / "count", monkeypatch, "full", FINAL_AGAIN)
    assert count >= 10  # the second invocation saves its final model again
    sweep(tiny_encoder_dir, tmp_path, monkeypatch, "full", FINAL_AGAIN, "SIGKILL", count, straight_runs["full"])
