"""Files that appear whole or not at all: a crash, Ctrl-C or full disk mid-write never leaves a partial file where
a reader looks. Used by the model's ``save_pretrained``, the training run's saves and every JSON written beside a
run; below both ``modeling`` and ``training`` so that neither layer imports the other for it.

A folder's files are replaced together by a *staged publish* (:func:`staged_publish`): everything is written to a
hidden staging folder inside the target, a marker listing the entries is written last, and the entries are then
moved into the target one ``os.replace`` at a time (``config.json`` last). A process killed while moving leaves the
marked staging folder behind; :func:`recover_staged_publishes`, run by the next invocation, finishes the moves
(roll-forward). A staging folder without the marker was never complete and is deleted (roll-back).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STAGING_PREFIX = ".hf_cse-staging-"
PUBLISH_MARKER = ".hf_cse-publish.json"
"""Written last into a staging folder: the entries to move into the target. Its presence means "complete"."""
TEMPORARY_SUFFIX = ".tmp"
"""Suffix of :func:`write_text_atomic`'s temporary files (``.NAME.XXXX.tmp``), which a kill can leave behind."""


_READ_BYTES = 1 << 20


def sha256_of(path: str | os.PathLike) -> str:
    """The SHA-256 (hex) of the file at ``path``, read in 1 MiB chunks: how downloads and checkpoint manifests
    check that a file is whole."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_READ_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def follow_umask(root: Path) -> None:
    """Give ``root`` and everything under it the modes a plain ``open``/``mkdir`` would (0644/0755 under umask
    022): some writers (transformers' safetensors shards) go through temporary files created 0600."""
    mask = _current_umask()
    for path in (root, *root.rglob("*")):
        if path.is_symlink():
            continue
        path.chmod((0o777 if path.is_dir() else 0o666) & ~mask)


def replace_entry(source: Path, destination: Path) -> None:
    """Move the file or folder ``source`` to ``destination``, replacing what is there. Idempotent under a kill at
    any point: a folder in the way is deleted first (a half-deleted one is deleted again by the next call), and
    ``source`` stays until the final ``os.replace``."""
    if destination.is_dir() and not destination.is_symlink():
        shutil.rmtree(destination)
    os.replace(source, destination)


def roll_forward(staging: Path, target: Path) -> None:
    """Move the entries named by ``staging``'s :data:`PUBLISH_MARKER` that are still there into ``target``
    (``config.json`` last, so a reader that finds the new config finds the new weights), then delete ``staging``."""
    names = json.loads((staging / PUBLISH_MARKER).read_text(encoding="utf-8"))["entries"]
    for name in sorted(names, key=lambda name: name == "config.json"):
        if (staging / name).exists() or (staging / name).is_symlink():
            replace_entry(staging / name, target / name)
    shutil.rmtree(staging)


@contextlib.contextmanager
def staged_publish(target: Path) -> Iterator[Path]:
    """A fresh hidden staging folder inside ``target`` (created if needed) to write into; when the block ends
    normally, its entries replace ``target``'s (:func:`roll_forward`).

    A failure inside the block deletes the staging folder (and ``target`` too when this call created it and it is
    still empty). A failure while the entries move leaves the marked staging folder for the next invocation's
    :func:`recover_staged_publishes`. Created with ``mkdir``, so it and what is moved out of it follow the umask.
    """
    created = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    staging = target / f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}"
    staging.mkdir()
    try:
        yield staging
        follow_umask(staging)
        entries = sorted(path.name for path in staging.iterdir())
        write_json_atomic(staging / PUBLISH_MARKER, {"entries": entries})
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if created:  # a failed first save leaves no empty folder behind
            with contextlib.suppress(OSError):
                target.rmdir()
        raise
    roll_forward(staging, target)


def recover_staged_publishes(folder: Path) -> list[str]:
    """Finish or undo what a killed :func:`staged_publish` or :func:`write_text_atomic` left in ``folder``: a marked
    staging folder is rolled forward, an unmarked one and a temporary file are deleted. Returns one line per action.
    """
    actions = []
    if not folder.is_dir():
        return actions
    for path in sorted(folder.iterdir()):
        if path.name.startswith(STAGING_PREFIX) and path.is_dir() and not path.is_symlink():
            if (path / PUBLISH_MARKER).is_file():
                roll_forward(path, folder)
                actions.append(f"finished publishing {path.name} into {folder}")
            else:
                shutil.rmtree(path)
                actions.append(f"deleted the incomplete save {path}")
        elif path.name.startswith(".") and path.name.endswith(TEMPORARY_SUFFIX) and path.is_file():
            path.unlink()
            actions.append(f"deleted the temporary file {path}")
    return actions


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` so that a crash never leaves a partial file there: written to a temporary
    file in the same folder, flushed to disk, and moved into place with ``os.replace`` (atomic on POSIX and
    Windows). On any error the temporary file is removed and ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp_name, 0o666 & ~_current_umask())  # mkstemp creates 0600; give the file the usual permissions
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    return path


def write_json_atomic(path: str | os.PathLike, data: Any) -> Path:
    """Write ``data`` as JSON to ``path`` with :func:`write_text_atomic`; serialized first, so a value that is not
    JSON-serializable fails before anything is written."""
    return write_text_atomic(path, json.dumps(data, indent=2, allow_nan=True) + "\n")
