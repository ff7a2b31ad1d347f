"""The ``checkpoint-N`` folders of a run: which ones are committed, how one being replaced is set aside, how old ones
are rotated away, which one a run resumes from, and how what a killed save left behind is put right.

The Trainer writes ``OUTPUT/checkpoint-N`` in place; its manifest (:mod:`~hf_cse.training.saving.manifest`), written
last by :class:`~hf_cse.training.saving.writer.RunWriter`, commits it. Every other change to the set of checkpoints is
a rename, so that at any moment a ``checkpoint-N`` with a manifest is a whole, verified one:

- a ``checkpoint-N`` already there when the Trainer saves step N again is renamed to ``OUTPUT/.checkpoint-N.old-XXXX``
  first (:func:`set_aside`), and deleted once the new one is committed (:func:`discard_set_aside`);
- a rotated-out checkpoint is renamed to ``OUTPUT/.checkpoint-N.deleting-XXXX`` before it is deleted.

:func:`recover_checkpoints` finishes or undoes each of these steps for a run killed in the middle of one.

A ``checkpoint-N`` that is a symbolic link to a folder (moved to another disk to save space, linked back) is a
checkpoint: it is resumed from, verified and rotated like the others, and rotating it away removes the link, never
what it points to, with a warning saying so (:func:`~hf_cse.links.remove_tree`). Any other entry of these names
that is a link (the leftovers above, ``.checkpoint-N.partial`` as an older hf_cse staged checkpoints, a rotated link
an older hf_cse renamed) is removed as a link.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import uuid
from pathlib import Path

from transformers.trainer import TRAINER_STATE_NAME

from ...atomic_files import fsync_path
from ...errors import CheckpointError, UsageError
from ...links import remove_tree
from ...run_files import LOCK_FILE, PREVIOUS_RUN_PREFIX
from .manifest import MANIFEST_FILE, is_committed, verification_problem

logger = logging.getLogger(__name__)

CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
_PARTIAL = re.compile(r"^\.(checkpoint-\d+)\.partial$")
_OLD = re.compile(r"^\.(checkpoint-\d+)\.old-[0-9a-f]+$")
_DELETING = re.compile(r"^\.checkpoint-\d+\.deleting-[0-9a-f]+$")


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


def start_anew_hint(output_dir: str | Path, in_place_of_resume: bool = False) -> str:
    """How the same command starts a run anew in ``output_dir``, which holds no checkpoint to resume, for the folder
    as it is: as it stands when the folder holds nothing of a run (a Ctrl-C before the first save leaves it so), else
    with ``--overwrite_output_dir true`` (``run_unsup.py`` refuses a new run in a folder that holds one) or another
    folder. ``in_place_of_resume``: the command has ``--resume_from_checkpoint``, which must go."""
    if not run_entries(output_dir):
        without = " without --resume_from_checkpoint" if in_place_of_resume else ""
        return f"the same command{without} starts the run anew"
    instead = " in place of --resume_from_checkpoint" if in_place_of_resume else ""
    return (
        f"the same command with --overwrite_output_dir true{instead} starts the run anew (it moves what "
        f"{str(output_dir)!r} holds into {PREVIOUS_RUN_PREFIX}TIME/), or choose another --output_dir"
    )


def checkpoints_newest_first(run_dir: str | Path) -> list[Path]:
    """The ``checkpoint-N`` folders of ``run_dir``, highest ``N`` first."""
    root = Path(run_dir)
    if not root.is_dir():
        return []
    steps = [(int(m.group(1)), path) for path in root.iterdir() if (m := CHECKPOINT_PATTERN.match(path.name))]
    return [path for _, path in sorted(steps, reverse=True) if path.is_dir()]


def set_aside(folder: Path) -> None:
    """Rename ``folder`` (``checkpoint-N``, about to be written again), when there is one, to
    ``.checkpoint-N.old-XXXX``, flushed: the name is free for the new save, and the old checkpoint stays whole
    until the new one is committed (:func:`discard_set_aside`), or comes back when it is not
    (:func:`recover_checkpoints`)."""
    if os.path.lexists(folder):  # a link there too, even one to nothing
        os.replace(folder, folder.with_name(f".{folder.name}.old-{uuid.uuid4().hex[:8]}"))
        fsync_path(folder.parent)


def discard_set_aside(folder: Path) -> None:
    """Delete what :func:`set_aside` kept of ``folder`` (``checkpoint-N``), now committed anew."""
    for old in folder.parent.glob(f".{folder.name}.old-*"):
        remove_tree(old, f"the {folder.name} this save replaced")


def delete_checkpoint(folder: Path) -> None:
    """Delete ``folder`` so that no half-deleted ``checkpoint-N`` is ever seen: renamed away first, then deleted.
    A ``folder`` that is a symbolic link is removed as a link (one atomic ``unlink``), never what it points to, and a
    warning says so."""
    if folder.is_symlink():
        remove_tree(folder, "a checkpoint rotated away (save_total_limit)")
        fsync_path(folder.parent)
        return
    doomed = folder.with_name(f".{folder.name}.deleting-{uuid.uuid4().hex[:8]}")
    os.replace(folder, doomed)
    shutil.rmtree(doomed)


def is_unfinished(checkpoint: Path) -> bool:
    """Whether ``checkpoint`` is a save of this hf_cse that did not finish, and so is deleted by recovery: it has no
    commit manifest (:func:`~hf_cse.training.saving.manifest.is_committed`) and either no trainer state (the Trainer
    writes it last) or the manifest the model's own save leaves. A folder with a trainer state and no manifest at all
    (an hf_cse from before manifests, or a save killed after the trainer state) is left as it is: never resumed from
    (it does not verify), and replaced whole when its step is saved again."""
    if is_committed(checkpoint):
        return False
    return (checkpoint / MANIFEST_FILE).is_file() or not (checkpoint / TRAINER_STATE_NAME).is_file()


def rotate_checkpoints(run_dir: Path, limit: int | None, best_model_checkpoint: str | None, newest: Path) -> None:
    """Keep at most ``limit`` (the user's ``save_total_limit``) verified checkpoints, as the Trainer's rotation does
    but counting only checkpoints that verify: ``newest`` (just committed) and the best are always kept, and one
    without a verifying manifest is neither counted nor deleted. Deletes with :func:`delete_checkpoint`."""
    if limit is None or limit <= 0:
        return
    checkpoints = [
        path
        for path in checkpoints_newest_first(run_dir)
        if path == newest or verification_problem(path) is None  # each verified once per process (manifest.py)
    ]
    protected = {newest}
    if best_model_checkpoint is not None:
        protected.add(Path(best_model_checkpoint))
    surplus = max(len(checkpoints) - max(limit, len(protected)), 0)
    for checkpoint in [path for path in reversed(checkpoints) if path not in protected][:surplus]:  # oldest first
        delete_checkpoint(checkpoint)


def recover_checkpoints(run_dir: Path) -> list[str]:
    """Put right what a killed checkpoint save or rotation left in ``run_dir``; returns one line per action.

    - an unfinished ``checkpoint-N`` (:func:`is_unfinished`): deleted;
    - ``.checkpoint-N.old-*``: deleted when ``checkpoint-N`` is committed; else its new save did not finish: that
      ``checkpoint-N`` is deleted, and the old one renamed back when it verifies (else deleted);
    - ``.checkpoint-N.deleting-*``: deleted (a rotation was under way);
    - ``.checkpoint-N.partial`` (how an older hf_cse staged a checkpoint): its ``checkpoint-N`` renamed into place when
      it verifies and none is there, then deleted.

    Each of these that is a symbolic link is removed as a link (:func:`~hf_cse.links.remove_tree`), never followed.
    """
    actions = []
    if not run_dir.is_dir():
        return actions
    for path in checkpoints_newest_first(run_dir):
        if is_unfinished(path):
            delete_checkpoint(path)
            actions.append(
                f"deleted the unfinished {path.name} (its {MANIFEST_FILE} was never written: its save did not finish)"
            )
    entries = sorted(run_dir.iterdir())
    for path in entries:
        if (match := _PARTIAL.match(path.name)) is None:
            continue
        if path.is_symlink():
            remove_tree(path, "where an older hf_cse staged a checkpoint in a folder of its own")
            actions.append(f"removed the link {path.name}")
            continue
        staged, target = path / match.group(1), run_dir / match.group(1)
        if not os.path.lexists(target) and verification_problem(staged) is None:
            os.replace(staged, target)
            actions.append(f"finished publishing {target.name}")
        shutil.rmtree(path)
        actions.append(f"deleted the unfinished save {path.name}")
    for path in entries:
        if (match := _OLD.match(path.name)) is not None:
            target = run_dir / match.group(1)
            if os.path.lexists(target) and not is_committed(target):  # the save replacing it did not finish
                delete_checkpoint(target)
                actions.append(f"deleted the unfinished {target.name}")
            if not os.path.lexists(target) and verification_problem(path) is None:
                os.replace(path, target)  # a link is renamed back as a link: the checkpoint it was
                actions.append(f"restored {target.name}")
            else:
                remove_tree(path, f"a {match.group(1)} replaced by a later save")
                actions.append(f"deleted the replaced {match.group(1)}")
        elif _DELETING.match(path.name) is not None:
            remove_tree(path, "a checkpoint rotated away (save_total_limit)")
            actions.append(f"finished deleting {path.name}")
    if actions:
        fsync_path(run_dir)
    return actions


def newest_verified_checkpoint(run_dir: str | Path) -> Path | None:
    """The verified ``checkpoint-N`` of ``run_dir`` with the highest ``N``; each newer one that fails verification
    is skipped with a warning naming it and why."""
    for path in checkpoints_newest_first(run_dir):
        problem = verification_problem(path)
        if problem is None:
            return path
        logger.warning("Skipping %s: %s.", path, problem)
    return None


def resolve_resume_checkpoint(value: str | bool | None, output_dir: str | Path) -> str | None:
    """The checkpoint folder to resume from, or ``None`` to start afresh.

    ``value``: ``None``/``False``/``"false"`` (start afresh), ``True``/``"true"`` (the newest verified checkpoint in
    ``output_dir``), or a checkpoint folder, which must verify (one written by an hf_cse without manifests is taken
    with a warning).

    Raises:
        UsageError: ``true`` with no verified checkpoint, or a path that is no folder.
        CheckpointError: the folder named fails verification (the message names the bad file).
    """
    value = resolve_resume_flag(value)
    if value is None:
        return None
    if value is True:
        checkpoint = newest_verified_checkpoint(output_dir)
        if checkpoint is None:
            raise UsageError(
                f"--resume_from_checkpoint true: output_dir {str(output_dir)!r} holds no verified checkpoint-N "
                f"folder, so there is nothing to resume: {start_anew_hint(output_dir, in_place_of_resume=True)}."
            )
        logger.info("Resuming from %s, the newest verified checkpoint.", checkpoint)
        return str(checkpoint)
    folder = Path(value)
    if not folder.is_dir():
        raise UsageError(f"--resume_from_checkpoint {value!r} is not a folder; give a checkpoint-N folder or 'true'.")
    check_named_checkpoint(value)  # a folder with a manifest verifies
    if not (folder / MANIFEST_FILE).exists():
        logger.warning("Resuming from %s without verifying it: %s.", folder, verification_problem(folder))
    return str(folder)


def check_named_checkpoint(value: str | bool | None) -> None:
    """Raise :class:`~hf_cse.errors.CheckpointError` when ``value`` (``--resume_from_checkpoint``) names a folder
    with a manifest that fails verification. ``true``, ``false``, a path that is no folder and a folder of an hf_cse
    without manifests pass: :func:`resolve_resume_checkpoint` decides those, after recovery. Read-only: a run calls
    it before its corpus and model load, so that a damaged checkpoint is named in seconds, not after tokenizing."""
    value = resolve_resume_flag(value)
    if not isinstance(value, str) or not Path(value).is_dir() or not (Path(value) / MANIFEST_FILE).exists():
        return
    problem = verification_problem(Path(value))
    if problem is not None:
        raise CheckpointError(
            f"--resume_from_checkpoint {value!r} fails verification: {problem}; use an earlier checkpoint or 'true' "
            "for the newest verified one."
        )


def resolve_resume_flag(value: str | bool | None) -> str | bool | None:
    """``None`` for the values that mean "start afresh" (``None``, ``False``, ``""``, ``"false"``), ``True`` for
    ``True``/``"true"``, else the folder given."""
    if value is None or value is False or (isinstance(value, str) and value.strip().lower() in ("", "false")):
        return None
    if value is True or (isinstance(value, str) and value.strip().lower() == "true"):
        return True
    return value


def saved_steps(checkpoint: str | Path) -> tuple[int, int]:
    """``(global_step, max_steps)`` recorded in ``checkpoint``'s trainer state (``(0, 0)`` when unreadable)."""
    try:
        state = json.loads((Path(checkpoint) / TRAINER_STATE_NAME).read_text(encoding="utf-8"))
        return int(state["global_step"]), int(state["max_steps"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0, 0


def ends_the_run(saved: tuple[int, int], max_steps: int) -> bool:
    """Whether a checkpoint whose :func:`saved_steps` are ``saved`` ends its run: its step reaches ``max_steps`` when
    that is set (> 0), else the ``max_steps`` its own trainer state recorded. Resuming such a checkpoint would let the
    Trainer run extra steps past the end."""
    step, recorded_max = saved
    end = max_steps if max_steps > 0 else recorded_max
    return 0 < end <= step
