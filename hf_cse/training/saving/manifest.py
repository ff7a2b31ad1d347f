"""Verified checkpoints: every ``checkpoint-N`` carries ``hf_cse_manifest.json`` (each file's size and SHA-256),
written last before the folder is published, and a checkpoint is trusted only when

1. it holds the files its kind requires (:func:`required_files`), each listed in the manifest: what resuming loads
   is never left to the manifest to vouch for (a manifest listing no files does not verify);
2. every listed file matches its size and SHA-256;
3. every file that resuming unpickles (:func:`unpickled_files`: optimizer, scheduler, scaler, RNG states, an input
   provider's state) loads with ``torch.load(weights_only=True)``: a pickle that would run code is refused here,
   before the Trainer reads it.

A truncated or overwritten weight file, a missing optimizer state, a hostile pickle or a folder that a kill left
half-deleted is then a named reason, found before the Trainer tries to load it. The manifest's format and hashing are
:mod:`hf_cse.atomic_files`'s, shared with the manifest of a published model.
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME, TRAINER_STATE_NAME, TRAINING_ARGS_NAME
from transformers.utils import (
    ADAPTER_CONFIG_NAME,
    ADAPTER_SAFE_WEIGHTS_NAME,
    ADAPTER_WEIGHTS_NAME,
    CONFIG_NAME,
    SAFE_WEIGHTS_INDEX_NAME,
    SAFE_WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
)

from ...atomic_files import (
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    listed_file_problem,
    manifest_entry,
    manifest_files,
    read_manifest,
    write_manifest_file,
)
from ...run_files import RUN_SETTINGS_FILE, TRAINING_ARGS_FILE

__all__ = [
    "MANIFEST_FILE",
    "MANIFEST_FORMAT",
    "is_committed",
    "required_files",
    "verification_problem",
    "write_manifest",
]

MODEL_KINDS = {
    "model": (CONFIG_NAME, (SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_NAME, WEIGHTS_INDEX_NAME)),
    "adapter": (ADAPTER_CONFIG_NAME, (ADAPTER_SAFE_WEIGHTS_NAME, ADAPTER_WEIGHTS_NAME)),
}
"""The kinds of checkpoint, by what the Trainer loads the weights from: ``(config, weight files, any one of)``. A
LoRA run's checkpoint holds its adapter (peft's files), every other run's the whole model."""
TRAINING_STATE_FILES = (TRAINER_STATE_NAME, OPTIMIZER_NAME, SCHEDULER_NAME, TRAINING_ARGS_NAME, TRAINING_ARGS_FILE)
"""What every checkpoint holds besides its weights, to resume from (plus the run settings and the RNG states)."""
_NEVER_UNPICKLED = (TRAINING_ARGS_NAME,)
"""Pickles in a checkpoint that nothing loads on resume (``training_args.bin``: hf_cse reads the JSON copy)."""


def write_manifest(folder: Path) -> None:
    """Write ``folder``'s manifest (flushed to disk), each file's ``{"size": bytes, "sha256": hex}`` by its relative
    path; call it after every other file of the checkpoint is written."""
    files = manifest_files(folder)
    write_manifest_file(folder, {path.relative_to(folder).as_posix(): manifest_entry(path) for path in files})


def is_committed(folder: Path) -> bool:
    """Whether ``folder``'s manifest is the one :func:`write_manifest` writes last, as a checkpoint's commit marker:
    it lists the trainer state. A manifest that does not is the one the model's own staged save leaves in the folder
    (:func:`~hf_cse.atomic_files.staged_publish`, the model files only): the checkpoint's save did not finish."""
    return TRAINER_STATE_NAME in (read_manifest(folder) or {})


def _weight_files(folder: Path, kind: str, listed: dict[str, dict]) -> tuple[list[str], str | None]:
    """The weight files of a ``kind`` checkpoint that resuming loads (an index with every shard it names), or why
    they cannot be told."""
    config, weights = MODEL_KINDS[kind]
    present = [name for name in weights if name in listed or (folder / name).is_file()]
    if not present:
        return [config], f"no weights ({' or '.join(weights)}), which a {kind} checkpoint holds"
    name = present[0]
    if not name.endswith(".index.json"):
        return [config, name], None
    try:
        shards = sorted(set(json.loads((folder / name).read_text(encoding="utf-8"))["weight_map"].values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return [config, name], f"{name} is unreadable"
    return [config, name, *(str(shard) for shard in shards)], None


def _rng_files(folder: Path) -> tuple[list[str], str | None]:
    """``rng_state.pth`` for a run of one process, ``rng_state_K.pth`` for each process K of a run of several (the
    number from ``training_args.json``)."""
    try:
        world_size = int(json.loads((folder / TRAINING_ARGS_FILE).read_text(encoding="utf-8"))["world_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return [], f"{TRAINING_ARGS_FILE} is missing or unreadable"
    if world_size < 1:
        return [], f"{TRAINING_ARGS_FILE} records world_size {world_size}"
    return (["rng_state.pth"] if world_size == 1 else [f"rng_state_{rank}.pth" for rank in range(world_size)]), None


def required_files(folder: Path, listed: dict[str, dict] | None = None) -> tuple[list[str], str | None]:
    """The files a checkpoint in ``folder`` needs to be resumed from, whatever its manifest (``listed``) says, and
    why they cannot be told (``None`` when they can).

    Its kind is an adapter (any of peft's files present or listed) or a whole model: the config and weights of that
    kind (with an index, every shard); then the trainer state, optimizer, scheduler, training arguments (pickled and
    JSON), the run settings, and an RNG state for each process of the run.
    """
    listed = listed or {}
    adapter_files = (ADAPTER_CONFIG_NAME, *MODEL_KINDS["adapter"][1])
    kind = "adapter" if any(name in listed or (folder / name).is_file() for name in adapter_files) else "model"
    weights, problem = _weight_files(folder, kind, listed)
    if problem is not None:
        return weights, problem
    rng, problem = _rng_files(folder)
    return [*weights, *TRAINING_STATE_FILES, RUN_SETTINGS_FILE, *rng], problem


def unpickled_files(listed: dict[str, dict]) -> list[str]:
    """The listed files that resuming loads with ``torch.load``: every ``.pt``, ``.pth`` and ``.bin`` but the
    training arguments."""
    return [
        name
        for name in sorted(listed)
        if name.endswith((".pt", ".pth", ".bin")) and Path(name).name not in _NEVER_UNPICKLED
    ]


def unpickling_problem(path: Path) -> str | None:
    """Why ``path`` does not load as plain tensors and containers (``torch.load(weights_only=True)``, with the numpy
    types the Trainer allows for RNG states; memory-mapped, so a large optimizer state is not read), ``None`` when it
    does. Nothing in the file runs."""
    import torch
    from transformers.trainer_pt_utils import safe_globals

    try:
        with safe_globals():
            torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # UnpicklingError for a forbidden global; RuntimeError for a file that is no zip
        cause = " ".join(str(err).split())[:160]
        return (
            f"{path.name} does not load as plain tensors (torch.load with weights_only=True refused it: "
            f"{type(err).__name__}: {cause}); it may hold code, and is not loaded"
        )
    return None


_VERIFIED: dict[Path, tuple] = {}
"""Checkpoints this process verified, with :func:`_signature` then: a run that verifies a named checkpoint before
its corpus loads, and again when it resumes, hashes it once."""


def _signature(folder: Path, listed: dict[str, dict]) -> tuple:
    """What changes when any file of ``folder`` does: the manifest's and each listed file's inode, size, and
    modification and change times (the change time cannot be set back from user space)."""

    def stat(path: Path) -> tuple:
        info = path.stat()
        return info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns

    return tuple(stat(folder / name) for name in (MANIFEST_FILE, *sorted(listed)))


def verification_problem(folder: Path) -> str | None:
    """Why ``folder`` is not a verified checkpoint (``None`` when it is): no or unreadable manifest; a file its kind
    requires that is missing or unlisted (:func:`required_files`); the first listed file that is missing or whose
    size or SHA-256 differs; a file that resuming unpickles that would not load as plain tensors. Sizes are compared
    first, so a truncated file is found without hashing; a checkpoint verified before by this process and unchanged
    since (:func:`_signature`) is not hashed again."""
    key = folder.absolute()
    verified = _VERIFIED.pop(key, None)  # back in only once verified anew
    if not folder.is_dir():
        return "not a folder"
    if not (folder / MANIFEST_FILE).is_file():
        return f"no {MANIFEST_FILE} (written by an older hf_cse, or its save did not finish)"
    listed = read_manifest(folder)
    if listed is None:
        return f"{MANIFEST_FILE} is unreadable"
    required, problem = required_files(folder, listed)
    for name in required:
        if name not in listed:
            state = "not in the manifest" if (folder / name).is_file() else "missing"
            return f"{name}, which every checkpoint of its kind holds, is {state}"
    if problem is not None:
        return problem
    for name, entry in listed.items():  # sizes first: a truncated file is named without hashing every other one
        if (problem := listed_file_problem(folder, name, entry, hash_it=False)) is not None:
            return problem
    signature = _signature(folder, listed)
    if verified != signature:
        for name, entry in listed.items():
            if (problem := listed_file_problem(folder, name, entry)) is not None:
                return problem
        for name in unpickled_files(listed):
            if (problem := unpickling_problem(folder / name)) is not None:
                return problem
    _VERIFIED[key] = signature
    return None
