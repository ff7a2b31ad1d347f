"""Crash consistency as an invariant, tested by enumeration (tests/fault_injection.py): a short ``run_unsup.py`` run
gets a fault at the k-th file operation of a checkpoint save, or of the final save, for every k and every fault
(ENOSPC, EIO, SIGINT, SIGKILL), for each way a run saves (:data:`RUNS`: the full model; LoRA, whose saves also
write the adapter in ``adapter/``). After each:

1. the invocation ended as the fault says: a one-line ``DiskFullError`` / ``SaveFailedError``, a
   ``KeyboardInterrupt``, or the kill;
2. every ``checkpoint-N`` that holds its commit manifest verifies against it (one without is the Trainer's
   unfinished write: never resumed, deleted by the next invocation);
3. the output folder holds no model (``config.json``) unless ``AutoModel`` loads it with the final weights, and no
   adapter (``adapter/adapter_config.json``) unless it holds the final adapter weights;
4. the next invocation (``--resume_from_checkpoint true``) finishes or undoes what was left, leaves no staging
   folder or temporary file, and ends with weights (and adapter) bit-equal to a straight run's and
   ``global_step == max_steps``.

The default suite sweeps every operation of the full model's saves with the kill (the fault that leaves the most
behind: no cleanup runs); the other faults at every operation are marked slow (about 2 s per operation and fault on
2 cores), and so is the LoRA run's sweep (tests/test_crash_consistency_lora.py, a file of its own so that
pytest-xdist's ``--dist loadfile`` runs it beside this one).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from common.crash_sweep import PHASES, RUNS, sweep
from fault_injection import FAULTS


def test_the_save_path_has_operations_to_inject_into(operation_counts: dict[tuple[str, str], int]) -> None:
    # The sweeps below are only as good as the operations they see: both saves write, rename and delete, and a
    # LoRA run's final save also writes its adapter (its checkpoints hold the adapter instead of the full model).
    for run in RUNS:
        assert operation_counts[run, "checkpoint"] >= 20 and operation_counts[run, "final"] >= 10
    assert operation_counts["lora", "final"] > operation_counts["full", "final"]


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize(
    "fault", [fault if fault == "SIGKILL" else pytest.param(fault, marks=pytest.mark.slow) for fault in FAULTS]
)
def test_a_fault_at_every_operation_of_a_save_loses_nothing(
    tiny_encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    operation_counts: dict[tuple[str, str], int],
    straight_runs: dict[str, dict[str, torch.Tensor]],
    phase: str,
    fault: str,
) -> None:
    count = operation_counts["full", phase]
    sweep(tiny_encoder_dir, tmp_path, monkeypatch, "full", phase, fault, count, straight_runs["full"])
