"""The output folder of a run: one live run at a time, a new run only in an empty folder (or one set aside), and
whether a finished run left a complete final model.

A lock, ``OUTPUT/_hf_cse.lock`` (:class:`~hf_cse.folder_lock.FolderLock`), keeps a second live run out of the
folder. What a save writes into the folder, and how, is :mod:`hf_cse.training.saving`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transformers.trainer import TRAINER_STATE_NAME

from ...errors import UsageError
from ...folder_lock import FolderLock
from ...run_files import PREVIOUS_RUN_PREFIX
from ..arguments.checks import check_output_dir
from . import checkpoints_newest_first, resolve_resume_flag, run_entries, start_anew_hint
from .manifest import MODEL_KINDS

logger = logging.getLogger(__name__)


def incomplete_reason(folder: Path) -> str | None:
    """Why ``folder`` (a finished run's output folder) holds no complete final model (``None`` when it does): a
    missing or unreadable trainer state, no config or weights, or an empty file."""
    state = folder / TRAINER_STATE_NAME
    if not state.is_file():
        return f"no {TRAINER_STATE_NAME}"
    try:
        json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{TRAINER_STATE_NAME} is unreadable"
    if not any((folder / config).is_file() for config, _ in MODEL_KINDS.values()):  # a model's or an adapter's
        return "no config.json"
    if not any((folder / name).is_file() for _, weights in MODEL_KINDS.values() for name in weights):
        return "no model weights"
    empty = sorted(p.name for p in folder.iterdir() if p.is_file() and p.stat().st_size == 0)
    return f"empty file(s) {', '.join(empty)}" if empty else None


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


def check_output_dir_reuse(
    output_dir: str | Path,
    resume_from_checkpoint: str | bool | None,
    overwrite: bool,
    inputs: Mapping[str, str | Path | None] | None = None,
) -> None:
    """The convention of transformers' example scripts: a new run needs an empty (or absent) ``output_dir``; one
    that already holds a run is continued with ``--resume_from_checkpoint`` or replaced with
    ``--overwrite_output_dir``, which moves the earlier run aside (:func:`set_aside_previous_run`) rather than
    leaving its checkpoints beside the new run's. Only :func:`run_entries` count.

    ``inputs``: what the run reads, by argument name (:func:`run_inputs`): an entry that holds one of them (the
    corpus, the base model, ...) is never set aside, and a new run in such a folder is refused in one line.

    Raises:
        UsageError: ``output_dir`` holds a run and neither flag is given; or it holds one of ``inputs`` that a new
            run would set aside.
    """
    if resolve_resume_flag(resume_from_checkpoint) is not None:
        return
    entries = run_entries(output_dir)
    if not entries:
        return
    held = held_inputs(output_dir, entries, inputs or {})
    if held:
        shown = "; ".join(f"{name} {str(value)!r}" for name, value in held)
        raise UsageError(
            f"output_dir {str(output_dir)!r} holds this run's own input ({shown}): a new run there would set it aside "
            "with the earlier run's files (--overwrite_output_dir), and then not find it. Choose another "
            "--output_dir, or move the input out of it."
        )
    names = [path.name for path in entries]
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
    if checkpoints_newest_first(output_dir):
        options = "; pass --resume_from_checkpoint true to continue it,"
    else:  # --resume_from_checkpoint true would be refused
        options = " without a checkpoint-N folder to resume from; pass"
    raise UsageError(
        f"output_dir {str(output_dir)!r} already holds a run ({shown}){options} --overwrite_output_dir true to move "
        "it aside and train anew, or choose another --output_dir."
    )


def interrupted_run_hint(output_dir: str | Path) -> str:
    """What to do after a Ctrl-C stopped a run of ``output_dir``, for the folder as the run left it (its lock
    released): go on from its newest ``checkpoint-N``, or, with none (stopped before the first save, or a run that
    saves none), start anew (:func:`~hf_cse.training.saving.start_anew_hint`); resuming would be refused. Cheap:
    the folders are listed, not verified (the resume verifies the one it takes)."""
    sigterm = "SIGTERM, unlike Ctrl-C, saves a checkpoint after the current step before stopping"
    checkpoints = checkpoints_newest_first(output_dir)
    if checkpoints:
        return (
            f"the same command with --resume_from_checkpoint true goes on from {checkpoints[0].name}, the newest "
            f"checkpoint ({sigterm})"
        )
    return f"no checkpoint was saved, so there is nothing to resume: {start_anew_hint(output_dir)} ({sigterm})"


def held_inputs(
    output_dir: str | Path, entries: list[Path], inputs: Mapping[str, str | Path | None]
) -> list[tuple[str, str | Path]]:
    """``(name, path)`` of each of ``inputs`` that is ``output_dir`` itself or lies inside one of ``entries`` (the
    entries :func:`set_aside_previous_run` would move); a value that is no local path (a Hub id) holds nothing."""
    root = Path(output_dir).resolve()
    moved = [entry.resolve() for entry in entries]
    held = []
    for name, value in inputs.items():
        if value is None or str(value) == "":
            continue
        path = Path(value).expanduser()
        if not (path.exists() or path.is_symlink()):
            continue
        target = path.absolute().resolve()
        # A symbolic link inside the folder moves with it, wherever it points.
        link = path.absolute()
        if target == root or any(
            candidate == entry or entry in candidate.parents for candidate in (target, link) for entry in moved
        ):
            held.append((name, value))
    return held


def run_inputs(*arguments: Any, config: str | None = None) -> dict[str, str]:
    """The local paths a ``run_unsup.py`` run reads, by argument name, from its argument dataclasses: the base model,
    the corpus, the STS folder, the input providers' files and models (``input_kwargs``), each evaluator's file or
    folder, and the ``--config`` file. Values that are no path (Hub ids, ``pip:``, ``gensim:``) are kept:
    :func:`held_inputs` skips what does not exist."""
    inputs: dict[str, str] = {}
    for args in arguments:
        names = ("model_name_or_path", "train_file", "sts_dir")
        inputs.update({name: str(getattr(args, name)) for name in names if getattr(args, name, None)})
        # The input providers' settings: any text may be a path, after a "scheme:" prefix (tsv:FILE).
        for provider, settings in (getattr(args, "input_kwargs", None) or {}).items():
            for key, value in settings.items():
                if isinstance(value, str) and value:
                    scheme, colon, rest = value.partition(":")
                    inputs[f"input_kwargs {provider}.{key}"] = rest if colon and len(scheme) > 1 else value
        for spec in getattr(args, "evaluators", None) or ():
            kind, _, path = str(spec).partition(":")
            if path.strip():
                inputs[f"evaluators {kind}"] = path.strip()
    if config:
        inputs["config"] = config
    return inputs


def run_lock(output_dir: str | Path, is_main_process: bool) -> contextlib.AbstractContextManager:
    """The output folder's :class:`~hf_cse.folder_lock.FolderLock` on the process that saves, nothing on the others;
    an ``output_dir`` that is a file (or inside one) is one line first (:func:`check_output_dir`)."""
    check_output_dir(output_dir)
    return FolderLock(output_dir, "training run") if is_main_process else contextlib.nullcontext()
