"""Files that appear whole or not at all: a crash, Ctrl-C, SIGTERM, full disk or power cut mid-write never leaves a
partial file where a reader looks. Used by the model's ``save_pretrained``, the training run's saves and every file a
command writes (JSON, Markdown, the report's PNG plots); below both ``modeling`` and ``training`` so that neither
layer imports the other for it.

A folder's files are replaced together by a *staged publish* (:func:`staged_publish`): everything is written to a
hidden staging folder inside the target, a marker listing the entries is written last, and the entries are then
moved into the target one ``os.replace`` at a time (``config.json`` and the manifest last). A process killed while
moving leaves the marked staging folder behind; :func:`recover_staged_publishes`, run by the next invocation,
finishes the moves (roll-forward). A staging folder without the marker was never complete and is deleted
(roll-back).

**Manifest.** Every publish writes :data:`MANIFEST_FILE` into the folder: each file hf_cse wrote there, with its
size and SHA-256 (a checkpoint's manifest is written by :mod:`hf_cse.training.saving.manifest`, in the same format).
A folder that holds a manifest keeps it current: :func:`write_text_atomic` and :func:`open_atomic` add the file they
write to it (the entry is dropped before the file is replaced and added after, so that at every instant each listed
file matches its entry). What a push uploads is what the manifest lists and still matches
(:mod:`hf_cse.export.upload_list`): never a file that hf_cse did not write.

**Write failures.** A failed write is one line (:func:`~hf_cse.write_failures.write_errors_as_one_line`, where what
each library's error means is decided); the writers here raise it before their cleanup frees the space.

**Durability.** Each file is flushed to disk (``fsync``) before the rename or marker that publishes it, and each
folder whose entries changed is fsynced after: once :func:`write_text_atomic` or :func:`staged_publish` returns, a
power cut loses none of it. A power cut *during* one leaves the previous file or folder contents (a staging folder
whose marker was not yet on disk is deleted by the next invocation; one whose marker was is rolled forward, its files
on disk since before the marker). This holds where the filesystem honours ``fsync`` (local disks; some network
filesystems and disks with a volatile write cache without barriers do not).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from .links import link_target, refuse_link
from .run_files import MANIFEST_FILE, STAGING_PREFIX, TEMPORARY_SUFFIX
from .write_failures import write_errors_as_one_line

PUBLISH_MARKER = ".hf_cse-publish.json"
"""Written last into a staging folder: the entries to move into the target. Its presence means "complete"."""
MANIFEST_FORMAT = 1


_READ_BYTES = 1 << 20


def sha256_of(path: str | os.PathLike) -> str:
    """The SHA-256 (hex) of the file at ``path``, read in 1 MiB chunks: how downloads and checkpoint manifests
    check that a file is whole."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_READ_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------------------------------
# Durability
# --------------------------------------------------------------------------------------------------------------------


def fsync_path(path: str | os.PathLike) -> None:
    """Flush the file or folder ``path`` to disk: a file's data, a folder's entries (its renames and new names)."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if os.path.isdir(path) else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: str | os.PathLike) -> None:
    """:func:`fsync_path` every file and folder under ``root`` (folders after what they hold), ``root`` last:
    before a marker or rename publishes what libraries wrote there without flushing it."""
    for current, _, filenames in os.walk(root, topdown=False):
        for name in filenames:
            path = os.path.join(current, name)
            if not os.path.islink(path):
                fsync_path(path)
        fsync_path(current)


# --------------------------------------------------------------------------------------------------------------------
# The manifest of a folder
# --------------------------------------------------------------------------------------------------------------------


def manifest_entry(path: str | os.PathLike) -> dict[str, Any]:
    """``{"size": bytes, "sha256": hex}`` of the file at ``path``."""
    return {"size": os.path.getsize(path), "sha256": sha256_of(path)}


def manifest_files(folder: Path) -> list[Path]:
    """The regular files under ``folder`` (sorted) that a manifest lists: not the manifest, a publish marker, a
    symbolic link, nor anything in a staging folder or a temporary file that a kill left."""

    def listed(path: Path) -> bool:
        relative = path.relative_to(folder).parts
        if any(part.startswith(STAGING_PREFIX) for part in relative[:-1]):
            return False
        name = relative[-1]
        if name in (MANIFEST_FILE, PUBLISH_MARKER) or (name.startswith(".") and name.endswith(TEMPORARY_SUFFIX)):
            return False
        return path.is_file() and not path.is_symlink()

    return sorted(path for path in folder.rglob("*") if listed(path))


def read_manifest(folder: str | os.PathLike) -> dict[str, dict[str, Any]] | None:
    """The ``files`` of ``folder``'s manifest (``{relative path: {"size", "sha256"}}``); ``None`` when there is none
    or it is unreadable (not JSON, not that shape)."""
    path = Path(folder) / MANIFEST_FILE
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
        return {name: {"size": int(entry["size"]), "sha256": str(entry["sha256"])} for name, entry in files.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def listed_file_problem(folder: Path, name: str, entry: dict[str, Any], hash_it: bool = True) -> str | None:
    """Why the file ``name`` of ``folder`` does not match its manifest ``entry`` (``None`` when it does): missing, a
    symbolic link, another size or (with ``hash_it``) another SHA-256."""
    path = folder / name
    if path.is_symlink() or not path.is_file():
        return f"{name} is missing" if not path.is_symlink() else f"{name} is a symbolic link"
    size = path.stat().st_size
    if size != entry["size"]:
        return f"{name} has {size} bytes, the manifest says {entry['size']}"
    if hash_it and sha256_of(path) != entry["sha256"]:
        return f"{name} does not match its SHA-256 in the manifest"
    return None


def write_manifest_file(folder: Path, files: dict[str, dict[str, Any]]) -> None:
    """Write ``folder``'s manifest listing ``files`` (whole or not at all, flushed to disk)."""
    record = {"format": MANIFEST_FORMAT, "files": dict(sorted(files.items()))}
    with _atomic_file(folder / MANIFEST_FILE) as f:
        f.write((json.dumps(record, indent=1) + "\n").encode())


def adopt_files(folder: Path, include: Callable[[str], bool]) -> list[str]:
    """Write a manifest for ``folder`` listing the files in it now (:func:`manifest_files`) whose relative path
    ``include`` accepts, and return those paths (sorted, ``/``-separated).

    A manifest is hf_cse's word that it wrote each file listed; a folder saved before hf_cse wrote manifests has none,
    and only its user can vouch for its files: this is for that user's explicit request (``python -m hf_cse.push
    --write_manifest``), never a default. A failed write is one line (:func:`write_errors_as_one_line`).
    """
    with write_errors_as_one_line(MANIFEST_FILE, folder):
        files = {
            relative: manifest_entry(path)
            for path in manifest_files(folder)
            if include(relative := path.relative_to(folder).as_posix())
        }
        write_manifest_file(folder, files)
    return sorted(files)


def _unlisted(path: Path) -> bool:
    """Drop ``path``'s entry from its folder's manifest, when it has one that lists it; whether the folder has a
    manifest (that is not ``path`` itself) to list the file again in."""
    files = read_manifest(path.parent)
    if files is None or path.name == MANIFEST_FILE:
        return False
    if files.pop(path.name, None) is not None:
        write_manifest_file(path.parent, files)
    return True


@contextlib.contextmanager
def _listed_after_write(path: Path) -> Iterator[None]:
    """Keep the manifest of ``path``'s folder, if it has one, true while the block replaces ``path``: its entry is
    dropped before, and the new file's added after."""
    listed = _unlisted(path)
    yield
    if listed:
        files = read_manifest(path.parent) or {}
        files[path.name] = manifest_entry(path)
        write_manifest_file(path.parent, files)


# --------------------------------------------------------------------------------------------------------------------
# Whole files
# --------------------------------------------------------------------------------------------------------------------


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


@contextlib.contextmanager
def _atomic_file(path: Path) -> Iterator[IO[bytes]]:
    """A temporary file beside ``path`` (binary) to write into: when the block ends normally it is flushed to disk,
    moved to ``path`` and the folder flushed; when it raises, it is removed and ``path`` is left as it was. A symbolic
    link at ``path`` is refused in one line (:func:`~hf_cse.links.refuse_link`), never replaced."""
    refuse_link(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp_name, 0o666 & ~_current_umask())  # mkstemp creates 0600; give the file the usual permissions
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    fsync_path(path.parent)


@contextlib.contextmanager
def open_atomic(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """A binary file to write ``path``'s new contents into (``savefig(f, format="png")``): it replaces ``path`` when
    the block ends normally (flushed to disk, then one ``os.replace``), and is removed, ``path`` left as it was, when
    the block raises. Added to the folder's manifest if it has one; a failed write is one line
    (:func:`write_errors_as_one_line`), and so is a symbolic link at ``path`` (:func:`~hf_cse.links.refuse_link`),
    which is never written through nor replaced."""
    path = Path(path)
    refuse_link(path)  # before the manifest is touched
    with write_errors_as_one_line(path.name, path.parent), _listed_after_write(path), _atomic_file(path) as f:
        yield f


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` whole or not at all (:func:`open_atomic`)."""
    with open_atomic(path) as f:
        f.write(data)
    return Path(path)


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` so that a crash never leaves a partial file there: written to a temporary
    file in the same folder, flushed to disk, and moved into place with ``os.replace`` (atomic on POSIX and
    Windows), the folder flushed after. On any error the temporary file is removed and ``path`` is left as it was;
    a failed write is one line (:func:`write_errors_as_one_line`). Added to the folder's manifest if it has one."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def remove_file(path: str | os.PathLike) -> None:
    """Delete the file ``path`` (if there) and its entry in the folder's manifest, the entry first: at every instant
    each listed file matches its entry. A failed write is one line (:func:`write_errors_as_one_line`), and so is a
    symbolic link at ``path`` (:func:`~hf_cse.links.refuse_link`)."""
    path = Path(path)
    refuse_link(path)
    with write_errors_as_one_line(path.name, path.parent):
        _unlisted(path)
        path.unlink(missing_ok=True)


def write_json_atomic(path: str | os.PathLike, data: Any) -> Path:
    """Write ``data`` as JSON to ``path`` with :func:`write_text_atomic`; serialized first, so a value that is not
    JSON-serializable fails before anything is written."""
    return write_text_atomic(path, json.dumps(data, indent=2, allow_nan=True) + "\n")


# --------------------------------------------------------------------------------------------------------------------
# Whole folders
# --------------------------------------------------------------------------------------------------------------------


def replace_entry(source: Path, destination: Path) -> None:
    """Move the file or folder ``source`` to ``destination``, replacing what is there. Idempotent under a kill at
    any point: a folder in the way is deleted first (a half-deleted one is deleted again by the next call), and
    ``source`` stays until the final ``os.replace``. A symbolic link at ``destination`` is refused in one line
    (:func:`~hf_cse.links.refuse_link`)."""
    refuse_link(destination)
    if destination.is_dir():
        shutil.rmtree(destination)
    os.replace(source, destination)


def _publish_order(name: str) -> int:
    """The manifest moves last (a reader that finds it finds every file it lists), ``config.json`` just before (a
    reader that finds the new config finds the new weights)."""
    return {"config.json": 1, MANIFEST_FILE: 2}.get(name, 0)


def roll_forward(staging: Path, target: Path) -> None:
    """Move the entries named by ``staging``'s :data:`PUBLISH_MARKER` that are still there into ``target``
    (``config.json`` and the manifest last), flush ``target``'s entries to disk, then delete ``staging``."""
    names = json.loads((staging / PUBLISH_MARKER).read_text(encoding="utf-8"))["entries"]
    for name in sorted(names, key=_publish_order):
        if (staging / name).exists() or (staging / name).is_symlink():
            replace_entry(staging / name, target / name)
    fsync_path(target)
    shutil.rmtree(staging)


def _publish_manifest(staging: Path, target: Path) -> None:
    """The manifest of ``target`` once ``staging``'s entries replace its own: every file the publish holds, and the
    entries of ``target``'s manifest outside the publish (files hf_cse wrote there before, which stay)."""
    entries = {path.name for path in staging.iterdir()} - {MANIFEST_FILE}
    kept = {
        name: entry for name, entry in (read_manifest(target) or {}).items() if name.split("/", 1)[0] not in entries
    }
    files = {path.relative_to(staging).as_posix(): manifest_entry(path) for path in manifest_files(staging)}
    write_manifest_file(staging, {**kept, **files})


@contextlib.contextmanager
def staged_publish(target: Path, what: str = "the files") -> Iterator[Path]:
    """A fresh hidden staging folder inside ``target`` (created if needed) to write into; when the block ends
    normally, its entries replace ``target``'s (:func:`roll_forward`), with ``target``'s manifest.

    In order: the block writes; every file and folder of the staging folder is flushed to disk; the manifest
    (:func:`_publish_manifest`) and then the marker are written and flushed; the entries move. A failure inside the
    block deletes the staging folder (and ``target`` too when this call created it and it is still empty), a failed
    write one line (:func:`write_errors_as_one_line`, ``what`` naming the save). A failure while the entries move
    leaves the marked staging folder for the next invocation's :func:`recover_staged_publishes`. Created with
    ``mkdir``, so it and what is moved out of it follow the umask. An entry of ``target`` that the publish would
    replace and that is a symbolic link is refused in one line before anything moves
    (:func:`~hf_cse.links.refuse_link`).
    """
    with write_errors_as_one_line(what, target):
        created = not target.exists()
        target.mkdir(parents=True, exist_ok=True)
        staging = target / f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}"
        staging.mkdir()
        try:
            with write_errors_as_one_line(what, target):  # classified before the cleanup below frees the space
                yield staging
                for entry in staging.iterdir():  # nothing moves until no entry it replaces is a link
                    refuse_link(target / entry.name)
                follow_umask(staging)
                fsync_tree(staging)
                _publish_manifest(staging, target)
                entries = sorted(path.name for path in staging.iterdir())
                with _atomic_file(staging / PUBLISH_MARKER) as f:
                    f.write(json.dumps({"entries": entries}).encode())
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            if created:  # a failed first save leaves no empty folder behind
                with contextlib.suppress(OSError):
                    target.rmdir()
            raise
        roll_forward(staging, target)
        if created:  # the new folder's own entry
            fsync_path(target.parent)


def recover_staged_publishes(folder: Path) -> list[str]:
    """Finish or undo what a killed :func:`staged_publish` or :func:`write_text_atomic` left in ``folder``: a marked
    staging folder is rolled forward, an unmarked one and a temporary file are deleted; a symbolic link of such a
    name, which hf_cse never makes, is removed as a link, never followed. Returns one line per action.
    """
    actions = []
    if not folder.is_dir():
        return actions
    for path in sorted(folder.iterdir()):
        staging = path.name.startswith(STAGING_PREFIX)
        temporary = path.name.startswith(".") and path.name.endswith(TEMPORARY_SUFFIX)
        if (staging or temporary) and path.is_symlink():
            target = link_target(path)
            path.unlink()
            actions.append(f"removed the link {path} (to {target}), left where hf_cse writes")
        elif staging and path.is_dir():
            if (path / PUBLISH_MARKER).is_file():
                roll_forward(path, folder)
                actions.append(f"finished publishing {path.name} into {folder}")
            else:
                shutil.rmtree(path)
                actions.append(f"deleted the incomplete save {path}")
        elif temporary and path.is_file():
            path.unlink()
            actions.append(f"deleted the temporary file {path}")
    return actions
