"""The crash-consistency sweep (tests/test_crash_consistency.py and its LoRA and second-run files): a short
``run_unsup.py`` run with a fault armed at the k-th file operation of a save (tests/fault_injection.py), the
invariants checked on what the fault left, and the next invocation that must end as a straight run."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import run_unsup
from fault_injection import FileOperations, SimulatedKill
from safetensors.torch import load_file
from transformers import AutoModel

from common.commands import SAVING_RUN, run_unsup_argv
from common.commands import SHORT_RUN_STEPS as MAX_STEPS
from hf_cse import CSETrainer
from hf_cse.atomic_files import STAGING_PREFIX, TEMPORARY_SUFFIX
from hf_cse.errors import DiskFullError, SaveFailedError
from hf_cse.training.saving import checkpoints_newest_first, is_committed, verification_problem
from hf_cse.training.saving.writer import RunWriter

PHASES = ("checkpoint", "final")
FINAL_AGAIN = "final-again"
"""A further phase: the final save of a second invocation (``--resume_from_checkpoint true``) into a folder whose
finished run already holds the final model, which no fault may take away."""
RUNS: dict[str, dict[str, Any]] = {"full": {}, "lora": {"lora_r": 4, "lora_alpha": 8}}
"""The ways a run saves, by name: their extra ``run_unsup.py`` arguments."""
ADAPTER_WEIGHTS = Path("adapter") / "adapter_model.safetensors"
EXPECTED_ERROR = {"ENOSPC": DiskFullError, "EIO": SaveFailedError, "SIGINT": KeyboardInterrupt}


def argv(encoder_dir: Path, work: Path, output_dir: Path, run: str) -> list[str]:
    return run_unsup_argv(encoder_dir, work, output_dir=output_dir, **SAVING_RUN, **RUNS[run])


def final_weights(output_dir: Path) -> dict[str, torch.Tensor]:
    """The root model's weights and, for a LoRA run, the adapter's (keys prefixed ``adapter/``)."""
    weights = load_file(output_dir / "model.safetensors")
    if (output_dir / ADAPTER_WEIGHTS).is_file():
        weights |= {f"adapter/{key}": value for key, value in load_file(output_dir / ADAPTER_WEIGHTS).items()}
    return weights


def straight_runs(encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Each run's final weights without a fault (``conftest.py``'s fixture of that name)."""
    weights = {}
    for run in RUNS:
        work = tmp_path_factory.mktemp(f"straight-{run}")
        run_unsup.main(argv(encoder_dir, work, work / "out", run))
        weights[run] = final_weights(work / "out")
    assert any(key.startswith("adapter/") for key in weights["lora"])
    return weights


def run_with_fault(
    encoder_dir: Path,
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    run: str,
    phase: str,
    fail_at: int | None,
    fault: str,
) -> tuple[FileOperations, BaseException | None, Path]:
    """Invocation 1 with the fault armed in ``phase``; returns the operations, what ended the invocation, and the
    output folder as the fault left it (the snapshot, for a kill)."""
    output_dir = work / "out"
    command = argv(encoder_dir, work, output_dir, run)
    if phase == FINAL_AGAIN:  # a finished run first; then the same command again, resuming
        run_unsup.main(command)
        command.append("--resume_from_checkpoint=true")
    ops = FileOperations(output_dir, fail_at, fault, snapshot=work / "killed")
    save_model, on_save, train = RunWriter.save_model, RunWriter.on_save, CSETrainer.train

    def armed_save_model(writer: RunWriter, output_dir: str | None = None, internal_call: bool = False) -> None:
        # The Trainer's checkpoint save at MAX_STEPS begins with the model's save into checkpoint-N ...
        if phase == "checkpoint" and internal_call and writer.trainer.state.global_step == MAX_STEPS:
            ops.armed = True
        return save_model(writer, output_dir, internal_call)

    def commit_then_disarm(writer: RunWriter, *args: Any, **kwargs: Any) -> Any:
        try:  # ... and ends with its commit: the manifest, then the rotation of the older checkpoint
            return on_save(writer, *args, **kwargs)
        finally:
            if phase == "checkpoint":
                ops.armed = False

    def train_then_arm(trainer: CSETrainer, *args: Any, **kwargs: Any) -> Any:
        output = train(trainer, *args, **kwargs)
        if phase in ("final", FINAL_AGAIN):
            ops.armed = True  # from here to the end of run_unsup.main: the final model, metrics, state, card
        return output

    ended: BaseException | None = None
    with monkeypatch.context() as patches:
        patches.setattr(RunWriter, "save_model", armed_save_model)
        patches.setattr(RunWriter, "on_save", commit_then_disarm)
        patches.setattr(CSETrainer, "train", train_then_arm)
        with ops.installed(patches):
            try:
                run_unsup.main(command)
            except (Exception, KeyboardInterrupt, SimulatedKill) as err:
                ended = err
            finally:
                ops.armed = False
    return ops, ended, (work / "killed" if fault == "SIGKILL" and ops.fired else output_dir)


def leftovers(output_dir: Path) -> list[str]:
    """Staging folders, set-aside checkpoints and temporary files anywhere in the run folder."""
    return sorted(
        str(path.relative_to(output_dir))
        for path in output_dir.rglob("*")
        if path.name.startswith((STAGING_PREFIX, ".checkpoint-"))
        or (path.name.startswith(".") and path.name.endswith(TEMPORARY_SUFFIX))
    )


def check_invariants(output_dir: Path, straight: dict[str, torch.Tensor]) -> None:
    """Invariants 2 and 3 of the module docstring, on the folder as a fault left it."""
    for checkpoint in checkpoints_newest_first(output_dir):
        assert not is_committed(checkpoint) or verification_problem(checkpoint) is None, checkpoint
    if (output_dir / "config.json").exists():
        AutoModel.from_pretrained(output_dir)  # loads
        assert all(torch.equal(straight[k], v) for k, v in final_weights(output_dir).items())
    if (output_dir / "adapter" / "adapter_config.json").exists():  # an adapter is published whole, or not at all
        adapter = load_file(output_dir / ADAPTER_WEIGHTS)
        assert all(torch.equal(straight[f"adapter/{k}"], v) for k, v in adapter.items())


def check_next_invocation(
    encoder_dir: Path, work: Path, output_dir: Path, run: str, straight: dict[str, torch.Tensor]
) -> None:
    """Invariant 4: resume, then everything is complete, clean and equal to the straight run."""
    run_unsup.main([*argv(encoder_dir, work, output_dir, run), "--resume_from_checkpoint=true"])
    assert leftovers(output_dir) == []
    state = json.loads((output_dir / "trainer_state.json").read_text(encoding="utf-8"))
    assert state["global_step"] == MAX_STEPS
    AutoModel.from_pretrained(output_dir)
    resumed = final_weights(output_dir)
    assert resumed.keys() == straight.keys()
    assert all(torch.equal(straight[key], resumed[key]) for key in straight)
    check_invariants(output_dir, straight)


def operation_count(encoder_dir: Path, work: Path, monkeypatch: pytest.MonkeyPatch, run: str, phase: str) -> int:
    ops, ended, _ = run_with_fault(encoder_dir, work, monkeypatch, run, phase, None, "ENOSPC")
    assert ended is None
    return ops.count


def operation_counts(encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], int]:
    """``(run, phase) -> `` the number of file operations of that save (``conftest.py``'s fixture of that name)."""
    counts = {}
    with pytest.MonkeyPatch.context() as monkeypatch:
        for run in RUNS:
            for phase in PHASES:
                work = tmp_path_factory.mktemp(f"{run}-{phase}")
                counts[run, phase] = operation_count(encoder_dir, work, monkeypatch, run, phase)
    return counts


def sweep(
    encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run: str,
    phase: str,
    fault: str,
    count: int,
    straight: dict[str, torch.Tensor],
) -> list[str]:
    """Every injection point of ``run``'s ``phase`` with ``fault``; returns the operations faulted (for the
    report)."""
    # accelerate's free_memory() runs gc.collect() at the end of every train(): 0.3 s of each invocation in a test
    # process's large heap, twice per injection point, for nothing these tiny CPU runs need.
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    faulted = []
    for k in range(1, count + 1):
        work = tmp_path / f"{run}-{phase}-{fault}-{k}"
        work.mkdir()
        ops, ended, left = run_with_fault(encoder_dir, work, monkeypatch, run, phase, k, fault)
        assert ops.fired is not None, f"operation {k} of {count} never ran"
        context = f"{fault} at operation {k}/{count} ({ops.fired})"
        if fault == "SIGKILL":
            assert isinstance(ended, SimulatedKill), context
        elif ended is not None:  # None: the caller absorbed the error (makedirs(exist_ok=True) on an existing folder)
            assert isinstance(ended, EXPECTED_ERROR[fault]), f"{context}: ended with {ended!r}"
            if fault != "SIGINT":
                assert "\n" not in str(ended), context
        if phase == FINAL_AGAIN:  # the finished run's final model is never taken away, only replaced whole
            assert (left / "config.json").is_file(), f"{context}: the earlier final model is gone"
        check_invariants(left, straight)
        check_next_invocation(encoder_dir, work, left, run, straight)
        faulted.append(ops.fired)
    return faulted
