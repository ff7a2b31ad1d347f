"""A checkpoint verifies only when it holds what its kind needs to be resumed from, whatever its manifest says, and
only when every file resuming unpickles loads as plain tensors (:mod:`hf_cse.training.saving.manifest`).

The class, for each kind of checkpoint a run writes (the whole model; a LoRA run's adapter): each file that
:func:`~hf_cse.training.saving.manifest.required_files` names, taken out of the folder and out of the manifest
together (a manifest rewritten to vouch for the folder as it is), or left in the folder and out of the manifest;
a manifest that lists no files; an RNG state short for a run of several processes; and each file resuming
unpickles, replaced by a pickle that would run code, the manifest rewritten to match. Each fails verification
naming the file, resuming from it by name is one line (exit 1) before anything is loaded, and ``true`` skips it.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from common.commands import run_unsup_argv
from conftest import HANG_GUARD_S, REPO_ROOT

from hf_cse.atomic_files import MANIFEST_FILE, manifest_entry, read_manifest, write_manifest_file
from hf_cse.errors import CheckpointError
from hf_cse.training.record.run_arguments import TRAINING_ARGS_FILE
from hf_cse.training.record.run_settings import RUN_SETTINGS_FILE
from hf_cse.training.saving import newest_verified_checkpoint, resolve_resume_checkpoint, verification_problem
from hf_cse.training.saving.checkpoints import check_named_checkpoint
from hf_cse.training.saving.manifest import MODEL_KINDS, required_files, unpickled_files

sys.path.insert(0, str(REPO_ROOT))
import run_unsup  # noqa: E402

KINDS = {"model": {}, "adapter": {"lora_r": 4, "lora_alpha": 8}}
"""The kinds of checkpoint, by the ``run_unsup.py`` flags of a run that writes one."""


def run_argv(encoder_dir: Path, work: Path, kind: str) -> list[str]:
    return run_unsup_argv(encoder_dir, work, max_steps=4, save_steps=2, disable_tqdm="true", **KINDS[kind])


@pytest.fixture(scope="module")
def runs(tiny_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A finished run of each kind (checkpoint-2 and checkpoint-4)."""
    folders = {}
    for kind in KINDS:
        work = tmp_path_factory.mktemp(kind)
        run_unsup.main(run_argv(tiny_encoder_dir, work, kind))
        folders[kind] = work
    return folders


def copy_run(runs: dict[str, Path], kind: str, tmp_path: Path) -> Path:
    work = Path(shutil.copytree(runs[kind], tmp_path / kind, symlinks=True))
    assert verification_problem(work / "out" / "checkpoint-4") is None
    return work


def rewrite_manifest(folder: Path, drop: str | None = None) -> None:
    """The manifest rewritten to vouch for ``folder`` as it is now (``drop``: left out of it)."""
    files = {
        path.relative_to(folder).as_posix(): manifest_entry(path)
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MANIFEST_FILE and path.relative_to(folder).as_posix() != drop
    }
    write_manifest_file(folder, files)


class CodeOnUnpickle:
    """Pickles into a call of ``open(marker, "w")``: loading the pickle creates ``marker``, as hostile code would."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return open, (str(self.marker), "w")


def test_each_kind_requires_its_weights_and_the_training_state(runs: dict[str, Path]) -> None:
    """What each kind needs, as the Trainer loads it, is what is required: not what the manifest lists."""
    for kind, work in runs.items():
        checkpoint = work / "out" / "checkpoint-4"
        required, problem = required_files(checkpoint, {})  # an empty manifest changes nothing
        assert problem is None and required == required_files(checkpoint, read_manifest(checkpoint))[0]
        weights = ["config.json", "model.safetensors"] if kind == "model" else ["adapter_config.json"]
        weights += [] if kind == "model" else ["adapter_model.safetensors"]
        state = ["trainer_state.json", "optimizer.pt", "scheduler.pt", "training_args.bin", TRAINING_ARGS_FILE]
        assert required == [*weights, *state, RUN_SETTINGS_FILE, "rng_state.pth"], kind
        assert set(unpickled_files(read_manifest(checkpoint))) == {"optimizer.pt", "scheduler.pt", "rng_state.pth"}


@pytest.mark.parametrize("kind", KINDS)
def test_a_checkpoint_missing_a_required_file_fails_whatever_its_manifest_says(
    runs: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    work = copy_run(runs, kind, tmp_path)
    out = work / "out"
    required, _ = required_files(out / "checkpoint-4")
    for name in [*required, "(every one: the manifest lists no files)"]:
        checkpoint = out / "checkpoint-4"
        shutil.copytree(runs[kind] / "out" / "checkpoint-4", checkpoint, dirs_exist_ok=True)  # whole again
        rewrite_manifest(checkpoint)
        assert verification_problem(checkpoint) is None
        if name in required:
            (checkpoint / name).unlink()
            rewrite_manifest(checkpoint)  # the manifest vouches for the folder without it
            expected = f"{name}, which every checkpoint of its kind holds, is missing"
            if name in MODEL_KINDS[kind][1]:  # the weights: any one of their formats would do
                expected = f"no weights ({' or '.join(MODEL_KINDS[kind][1])}), which a {kind} checkpoint holds"
        else:
            write_manifest_file(checkpoint, {})
            expected = f"{required[0]}, which every checkpoint of its kind holds, is not in the manifest"
        assert verification_problem(checkpoint) == expected, name
        with pytest.raises(CheckpointError, match="fails verification: " + re.escape(expected)):
            check_named_checkpoint(str(checkpoint))
        with caplog.at_level(logging.WARNING, logger="hf_cse.training.saving"):
            assert newest_verified_checkpoint(out) == out / "checkpoint-2", name
        assert f"Skipping {checkpoint}: {expected}" in caplog.text
        caplog.clear()
    # Left in the folder but out of the manifest: unverified, so not trusted either.
    shutil.copytree(runs[kind] / "out" / "checkpoint-4", checkpoint, dirs_exist_ok=True)
    for name in required:
        rewrite_manifest(checkpoint, drop=name)
        expected = f"{name}, which every checkpoint of its kind holds, is not in the manifest"
        assert verification_problem(checkpoint) == expected, name


def test_a_run_of_several_processes_needs_each_processs_rng_state(runs: dict[str, Path], tmp_path: Path) -> None:
    checkpoint = copy_run(runs, "model", tmp_path) / "out" / "checkpoint-4"
    arguments = json.loads((checkpoint / TRAINING_ARGS_FILE).read_text(encoding="utf-8"))
    (checkpoint / TRAINING_ARGS_FILE).write_text(json.dumps({**arguments, "world_size": 2}), encoding="utf-8")
    shutil.copy(checkpoint / "rng_state.pth", checkpoint / "rng_state_0.pth")
    rewrite_manifest(checkpoint)
    assert verification_problem(checkpoint) == "rng_state_1.pth, which every checkpoint of its kind holds, is missing"
    shutil.copy(checkpoint / "rng_state.pth", checkpoint / "rng_state_1.pth")
    rewrite_manifest(checkpoint)
    assert verification_problem(checkpoint) is None


@pytest.mark.parametrize("kind", KINDS)
def test_a_pickle_that_would_run_code_is_refused_before_anything_loads_it(
    runs: dict[str, Path], tmp_path: Path, kind: str
) -> None:
    work = copy_run(runs, kind, tmp_path)
    checkpoint = work / "out" / "checkpoint-4"
    marker = tmp_path / "code-ran"
    for name in unpickled_files(read_manifest(checkpoint)):
        shutil.copytree(runs[kind] / "out" / "checkpoint-4", checkpoint, dirs_exist_ok=True)
        torch.save(CodeOnUnpickle(marker), checkpoint / name)
        rewrite_manifest(checkpoint)  # sizes and hashes match: only loading it tells
        problem = verification_problem(checkpoint)
        assert problem is not None and problem.startswith(f"{name} does not load as plain tensors"), name
        assert "\n" not in problem and not marker.exists(), name
        with pytest.raises(CheckpointError, match=f"fails verification: {name} does not load as plain tensors"):
            resolve_resume_checkpoint(str(checkpoint), work / "out")
        assert newest_verified_checkpoint(work / "out") == work / "out" / "checkpoint-2"
        assert not marker.exists(), name


def test_resuming_from_a_hostile_rng_state_is_one_line_before_the_corpus_is_read(
    runs: dict[str, Path], tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit's case end to end: ``rng_state.pth`` replaced, the manifest rewritten. One line and exit 1, no
    UnpicklingError traceback, the code never run; and said before the corpus is read or the model loaded."""
    work = copy_run(runs, "model", tmp_path)
    checkpoint = work / "out" / "checkpoint-4"
    marker = tmp_path / "code-ran"
    torch.save(CodeOnUnpickle(marker), checkpoint / "rng_state.pth")
    rewrite_manifest(checkpoint)
    argv = [*run_argv(tiny_encoder_dir, work, "model"), f"--resume_from_checkpoint={checkpoint}"]
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run_unsup.py"), *argv], capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error:" in line or "Traceback" in line]
    assert len(errors) == 1 and "fails verification: rng_state.pth does not load as plain tensors" in errors[0]
    assert not marker.exists()

    def read(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the corpus was read before the named checkpoint was verified")

    monkeypatch.setattr(run_unsup, "read_pairs", read)
    monkeypatch.setattr(run_unsup, "stream_sentences", read)
    with pytest.raises(CheckpointError, match="rng_state.pth does not load as plain tensors"):
        run_unsup.main(argv)
    assert not marker.exists()


def test_a_checkpoint_verified_once_is_hashed_again_only_when_a_file_changed(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run verifies a named checkpoint before its corpus loads and again as it resumes: one hashing, unless a file
    changed in between (a byte flipped in place, same size: its change time moves)."""
    import hf_cse.atomic_files

    checkpoint = copy_run(runs, "model", tmp_path) / "out" / "checkpoint-4"  # verified once by copy_run
    hashed = []
    sha256_of = hf_cse.atomic_files.sha256_of
    monkeypatch.setattr(hf_cse.atomic_files, "sha256_of", lambda path: hashed.append(path) or sha256_of(path))
    assert verification_problem(checkpoint) is None and hashed == []
    data = bytearray((checkpoint / "scheduler.pt").read_bytes())
    data[-1] ^= 0xFF
    (checkpoint / "scheduler.pt").write_bytes(bytes(data))
    assert verification_problem(checkpoint) == "scheduler.pt does not match its SHA-256 in the manifest"
    assert hashed
