"""The output folder of a run: one live run at a time, checkpoints that appear whole, resume from a complete one.

Everything a save writes goes to a staging folder *inside* the output folder (same filesystem, so the final
rename works on a mount point or under a read-only parent) and is renamed into place only once complete:

- a checkpoint is written to ``OUTPUT/.checkpoint-N.partial/checkpoint-N/`` (model, optimizer, scheduler, RNG and
  trainer state) and then renamed to ``OUTPUT/checkpoint-N`` in one step, so ``checkpoint-N`` either exists
  complete or not at all;
- the final model is written to ``OUTPUT/.hf_cse-staging-*/`` and each file moved into ``OUTPUT`` with an atomic
  ``os.replace`` (``config.json`` last).

A lock, ``OUTPUT/_hf_cse.lock`` (:class:`~hf_cse.folder_lock.FolderLock`), keeps a second live run out of the
folder. JSON written beside
a run (STS results, paper comparisons, sweep records) goes through :func:`hf_cse.atomic_files.write_json_atomic`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from ..errors import DiskFullError, UsageError
from ..folder_lock import LOCK_FILE, FolderLock

logger = logging.getLogger(__name__)

CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
TRAINER_STATE_FILE = "trainer_state.json"
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "adapter_model.safetensors",
    "adapter_model.bin",
)
# torch.save reports a full disk as a RuntimeError from its zip writer, not as an OSError with ENOSPC.
_DISK_FULL_MESSAGES = ("unexpected pos", "PytorchStreamWriter failed", "No space left on device", "Disk quota")


def checkpoint_staging_root(run_dir: Path, name: str) -> Path:
    """Where ``name`` (``checkpoint-N``) is written before it is renamed to ``run_dir / name``. The same on every
    process, so each can write its own files (e.g. ``rng_state_1.pth``) into it."""
    return run_dir / f".{name}.partial"


def is_disk_full(err: BaseException) -> bool:
    """Whether ``err`` (or an exception it was raised from) says the disk or quota is full."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(seen, RuntimeError) and any(text in str(seen) for text in _DISK_FULL_MESSAGES):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@contextlib.contextmanager
def disk_full_as_error(what: str, folder: Path) -> Iterator[None]:
    """Re-raise a full-disk failure inside the block as one :class:`DiskFullError` naming ``what`` and ``folder``."""
    try:
        yield
    except (OSError, RuntimeError) as err:
        if not is_disk_full(err):
            raise
        try:
            free = f"{shutil.disk_usage(folder).free / 2**20:.0f} MiB free"
        except OSError:
            free = "free space unknown"
        raise DiskFullError(
            f"The disk is full: saving {what} in {folder} failed ({free}). Nothing was half-written: free some space "
            "or point --output_dir at a larger disk, then resume with --resume_from_checkpoint true."
        ) from err


def incomplete_reason(folder: Path) -> str | None:
    """Why ``folder`` is not a complete checkpoint (``None`` when it is): a missing or unreadable trainer state,
    no config or weights, or an empty file (what a kill during ``torch.save`` leaves)."""
    state = folder / TRAINER_STATE_FILE
    if not state.is_file():
        return f"no {TRAINER_STATE_FILE}"
    try:
        json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{TRAINER_STATE_FILE} is unreadable"
    if not ((folder / "config.json").is_file() or (folder / "adapter_config.json").is_file()):
        return "no config.json"
    if not any((folder / name).is_file() for name in WEIGHT_FILES):
        return "no model weights"
    empty = sorted(p.name for p in folder.iterdir() if p.is_file() and p.stat().st_size == 0)
    if empty:
        return f"empty file(s) {', '.join(empty)}"
    return None


def last_complete_checkpoint(output_dir: str | Path) -> Path | None:
    """The complete ``checkpoint-N`` of ``output_dir`` with the highest ``N``; incomplete ones are skipped with a
    warning naming them and why."""
    root = Path(output_dir)
    if not root.is_dir():
        return None
    steps = sorted(
        ((int(match.group(1)), path) for path in root.iterdir() if (match := CHECKPOINT_PATTERN.match(path.name))),
        reverse=True,
    )
    for _, path in steps:
        if not path.is_dir():
            continue
        reason = incomplete_reason(path)
        if reason is None:
            return path
        logger.warning("Skipping incomplete checkpoint %s (%s).", path, reason)
    return None


def resolve_resume_checkpoint(value: str | bool | None, output_dir: str | Path) -> str | None:
    """The checkpoint folder to resume from, or ``None`` to start afresh.

    ``value``: ``None``/``False``/``"false"`` (start afresh), ``True``/``"true"`` (the latest complete checkpoint
    in ``output_dir``), or a checkpoint folder, which must be complete.

    Raises:
        UsageError: ``true`` with no complete checkpoint, or a folder that is missing or incomplete.
    """
    value = resolve_resume_flag(value)
    if value is None:
        return None
    if value is True:
        checkpoint = last_complete_checkpoint(output_dir)
        if checkpoint is None:
            raise UsageError(
                f"--resume_from_checkpoint true: output_dir {str(output_dir)!r} holds no complete checkpoint-N "
                "folder; start without it or name a checkpoint folder."
            )
        logger.info("Resuming from %s, the latest complete checkpoint.", checkpoint)
        return str(checkpoint)
    folder = Path(value)
    if not folder.is_dir():
        raise UsageError(f"--resume_from_checkpoint {value!r} is not a folder; give a checkpoint-N folder or 'true'.")
    reason = incomplete_reason(folder)
    if reason is not None:
        raise UsageError(
            f"--resume_from_checkpoint {value!r} is an incomplete checkpoint ({reason}); use an earlier one or 'true' "
            "for the latest complete one."
        )
    return str(folder)


PREVIOUS_RUN_PREFIX = "_previous-run-"
"""Where ``--overwrite_output_dir`` moves an earlier run (``OUTPUT/_previous-run-TIME/``): inside the output folder
(the same filesystem, so each move is one atomic rename, also on a mount point) and with a leading ``_``, so that
neither a Hub push nor ``python -m hf_cse.push`` uploads it."""


def run_entries(output_dir: str | Path) -> list[Path]:
    """The entries of ``output_dir`` that belong to a run (sorted by name): all but hidden ones (staging folders),
    the lock and runs set aside by ``--overwrite_output_dir``. Empty when the folder is absent."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    return sorted(
        path
        for path in root.iterdir()
        if not path.name.startswith(".") and path.name != LOCK_FILE and not path.name.startswith(PREVIOUS_RUN_PREFIX)
    )


def set_aside_previous_run(output_dir: str | Path) -> Path | None:
    """Move every :func:`run_entries` entry of ``output_dir`` into a new ``OUTPUT/_previous-run-TIME/`` folder, each
    with one atomic rename, and return that folder (``None`` when there was nothing to move).

    Nothing is deleted: a new run must not find (and resume from, select or rotate) an older run's ``checkpoint-N``,
    nor mix its files with the older model's, but the older run is the user's to delete. A crash in the middle
    leaves every entry either in place or in the new folder; a second call moves the rest.
    """
    entries = run_entries(output_dir)
    if not entries:
        return None
    aside = Path(output_dir) / f"{PREVIOUS_RUN_PREFIX}{time.strftime('%Y%m%d-%H%M%S')}"
    if aside.exists():  # two overwrites within a second
        aside = aside.with_name(f"{aside.name}-{uuid.uuid4().hex[:6]}")
    aside.mkdir()
    for entry in entries:
        os.replace(entry, aside / entry.name)
    return aside


def check_output_dir_reuse(output_dir: str | Path, resume_from_checkpoint: str | bool | None, overwrite: bool) -> None:
    """The convention of transformers' example scripts: a new run needs an empty (or absent) ``output_dir``; one
    that already holds a run is continued with ``--resume_from_checkpoint`` or replaced with
    ``--overwrite_output_dir``, which moves the earlier run aside (:func:`set_aside_previous_run`) rather than
    leaving its checkpoints beside the new run's. Only :func:`run_entries` count.

    Raises:
        UsageError: ``output_dir`` holds a run and neither flag is given.
    """
    if resolve_resume_flag(resume_from_checkpoint) is not None:
        return
    names = [path.name for path in run_entries(output_dir)]
    if not names:
        return
    if overwrite:
        aside = set_aside_previous_run(output_dir)
        logger.warning(
            "--overwrite_output_dir: moved the earlier run in %s (%d entries) to %s; delete it when you no longer "
            "need it.",
            output_dir,
            len(names),
            aside,
        )
        return
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    raise UsageError(
        f"output_dir {str(output_dir)!r} already holds a run ({shown}); pass --resume_from_checkpoint true to "
        "continue it, --overwrite_output_dir true to move it aside and train anew, or choose another --output_dir."
    )


def resolve_resume_flag(value: str | bool | None) -> str | bool | None:
    """``None`` for the values that mean "start afresh" (``None``, ``False``, ``""``, ``"false"``), ``True`` for
    ``True``/``"true"``, else the folder given."""
    if value is None or value is False or (isinstance(value, str) and value.strip().lower() in ("", "false")):
        return None
    if value is True or (isinstance(value, str) and value.strip().lower() == "true"):
        return True
    return value


def run_lock(output_dir: str | Path, is_main_process: bool) -> contextlib.AbstractContextManager:
    """The output folder's :class:`~hf_cse.folder_lock.FolderLock` on the process that saves, nothing on the others."""
    return FolderLock(output_dir, "training run") if is_main_process else contextlib.nullcontext()
