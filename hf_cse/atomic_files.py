"""Files that appear whole or not at all: a crash, Ctrl-C or full disk mid-write never leaves a partial file where
a reader looks. Used by the model's ``save_pretrained``, the training run's checkpoints and every JSON written beside
a run; below both ``modeling`` and ``training`` so that neither layer imports the other for it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STAGING_PREFIX = ".hf_cse-staging-"


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


def publish_checkpoint(staged: Path, target: Path) -> None:
    """Rename the complete folder ``staged`` to ``target``; an existing ``target`` is set aside first and deleted
    after, so at every moment ``target`` is either the old complete checkpoint, absent, or the new one."""
    follow_umask(staged)
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(target, old)
    os.replace(staged, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def publish_files(staging: Path, target: Path) -> None:
    """Move every entry of ``staging`` into ``target`` with ``os.replace`` (``config.json`` last, so a reader that
    finds the new config finds the new weights)."""
    follow_umask(staging)
    names = sorted(p.name for p in staging.iterdir())
    names.sort(key=lambda name: name == "config.json")
    for name in names:
        destination = target / name
        if destination.is_dir() and not destination.is_symlink():
            shutil.rmtree(destination)
        os.replace(staging / name, destination)


@contextlib.contextmanager
def staging_folder(target: Path) -> Iterator[Path]:
    """A fresh hidden folder inside ``target`` (created if needed) that is removed on exit, whatever happens (and
    ``target`` too when this call created it and a failure left it empty).

    Created with ``mkdir``, so it and what is moved out of it follow the user's umask (``tempfile.mkdtemp`` would
    give 0700).
    """
    created = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    staging = target / f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}"
    staging.mkdir()
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if created:  # a failed first save leaves no empty folder behind
            with contextlib.suppress(OSError):
                target.rmdir()
        raise
    shutil.rmtree(staging, ignore_errors=True)


def write_json_atomic(path: str | os.PathLike, data: Any) -> Path:
    """Write ``data`` as JSON to ``path`` so that a crash never leaves a partial file there.

    The JSON is serialized first (a value that is not JSON-serializable fails before anything is written), written
    to a temporary file in the same folder, flushed to disk, and moved into place with ``os.replace`` (atomic on
    POSIX and Windows). On any error the temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    text = json.dumps(data, indent=2, allow_nan=True) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
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
