"""Verified checkpoints: every ``checkpoint-N`` carries ``hf_cse_manifest.json`` (each file's size and SHA-256),
written last before the folder is published, and a checkpoint is trusted only when every listed file matches it.

A truncated or overwritten weight file, a missing optimizer state or a folder that a kill left half-deleted is then
a named reason, found before the Trainer tries to load it.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...atomic_files import sha256_of

MANIFEST_FILE = "hf_cse_manifest.json"
MANIFEST_FORMAT = 1


def checkpoint_files(folder: Path) -> list[Path]:
    """The regular files under ``folder`` (sorted), the manifest itself left out."""
    return sorted(
        path for path in folder.rglob("*") if path.is_file() and not path.is_symlink() and path.name != MANIFEST_FILE
    )


def manifest_record(folder: Path) -> dict:
    """``{"format": 1, "files": {relative path: {"size": bytes, "sha256": hex}}}`` of ``folder``'s files."""
    files = {
        path.relative_to(folder).as_posix(): {"size": path.stat().st_size, "sha256": sha256_of(path)}
        for path in checkpoint_files(folder)
    }
    return {"format": MANIFEST_FORMAT, "files": files}


def write_manifest(folder: Path) -> None:
    """Write ``folder``'s manifest; call it after every other file of the checkpoint is written."""
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest_record(folder), indent=1) + "\n", encoding="utf-8")


def verification_problem(folder: Path) -> str | None:
    """Why ``folder`` is not a verified checkpoint (``None`` when it is): no or unreadable manifest, or the first
    listed file that is missing or whose size or SHA-256 differs. Sizes are compared first, so a truncated file is
    found without hashing."""
    path = folder / MANIFEST_FILE
    if not folder.is_dir():
        return "not a folder"
    if not path.is_file():
        return f"no {MANIFEST_FILE} (written by an older hf_cse, or its save did not finish)"
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
        expected = {name: (int(entry["size"]), str(entry["sha256"])) for name, entry in files.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return f"{MANIFEST_FILE} is unreadable"
    for name, (size, _) in expected.items():
        file = folder / name
        if not file.is_file():
            return f"{name} is missing"
        if file.stat().st_size != size:
            return f"{name} has {file.stat().st_size} bytes, the manifest says {size}"
    for name, (_, sha256) in expected.items():
        if sha256_of(folder / name) != sha256:
            return f"{name} does not match its SHA-256 in the manifest"
    return None
