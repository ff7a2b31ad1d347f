"""No symbolic link is followed where hf_cse writes: every file or folder hf_cse creates, replaces or deletes inside
a folder it writes (a run's output folder, a sweep's, a report's, a push's) is either refused in one line when it is
a link (:func:`refuse_link`; ``O_NOFOLLOW`` where a file is opened) or handled on purpose: a link where hf_cse deletes
a folder of its own (a rotated-out ``checkpoint-N`` moved to another disk and linked back, a staging folder) is
removed as a link, never what it points to (:func:`remove_tree`).

A link planted at ``OUTPUT/_hf_cse.lock`` or ``OUTPUT/all_results.json`` would otherwise have hf_cse overwrite the
file it points to, outside the run; a linked ``checkpoint-N`` would have ``shutil.rmtree`` refuse it (a traceback
reported as a failed disk) half-way through a rotation. The folder a user names itself (``--output_dir``, a push's
folder) may be a link: that is the folder the user chose. ``tests/test_no_links_followed.py`` plants a link at every
place a run writes and walks the package's source for write sites.

Nothing here imports torch.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import IO

from .errors import UsageError, echo

logger = logging.getLogger(__name__)

NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)
"""``os.open`` flag: fail (``ELOOP``) rather than open the file a link at the path points to (0 on Windows, where
creating a link takes privileges a run does not have)."""


def link_target(path: Path) -> str:
    """What the link ``path`` points to, as stored (``?`` when it cannot be read)."""
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def link_refused(path: str | os.PathLike) -> UsageError:
    """The one-line error for a symbolic link found at ``path``, where hf_cse writes."""
    path = Path(path)
    return UsageError(
        f"{echo(str(path))} is a symbolic link (to {echo(link_target(path))}): hf_cse never writes, replaces or "
        "deletes through a link where it writes; remove the link (the file it points to stays as it is), then run "
        "the command again."
    )


def refuse_link(path: str | os.PathLike) -> None:
    """Raise :func:`link_refused`'s one line when ``path`` is a symbolic link (a broken one included)."""
    if os.path.islink(path):
        raise link_refused(path)


def remove_tree(path: Path, why: str = "") -> bool:
    """Delete the folder ``path`` with everything in it; when ``path`` is a symbolic link, delete the link only, never
    what it points to, and log that (``why``: what the folder was, for that line). Returns whether anything was
    there."""
    if path.is_symlink():
        target = link_target(path)
        path.unlink()
        logger.warning(
            "%s is a symbolic link (to %s)%s: removed the link only; what it points to is left as it was (delete it "
            "yourself when you no longer need it).",
            path,
            target,
            f", {why}" if why else "",
        )
        return True
    if not path.exists():
        return False
    shutil.rmtree(path)
    return True


_OPEN_FLAGS = {"w": os.O_TRUNC, "a": os.O_APPEND}


def open_no_follow(path: Path, mode: str = "a") -> IO:
    """``path`` opened for writing, created if absent, never through a symbolic link: ``mode`` is ``"a"`` (append
    text, UTF-8: a log a run adds to over several attempts), ``"w"``, or either with ``"b"`` (bytes: a download's
    ``FILE.part``, written from the start or resumed).

    Raises:
        UsageError: ``path`` is a symbolic link (:func:`link_refused`).
    """
    descriptor = open_descriptor_no_follow(path, os.O_WRONLY | os.O_CREAT | _OPEN_FLAGS[mode.replace("b", "")])
    return os.fdopen(descriptor, mode) if "b" in mode else os.fdopen(descriptor, mode, encoding="utf-8")


def open_descriptor_no_follow(path: Path, flags: int) -> int:
    """``os.open(path, flags | O_NOFOLLOW, 0o666)``: the descriptor of ``path``, never of what a link there points to.

    Raises:
        UsageError: ``path`` is a symbolic link (:func:`link_refused`).
    """
    try:
        return os.open(path, flags | NO_FOLLOW, 0o666)
    except OSError as err:
        if os.path.islink(path):  # ELOOP, as O_NOFOLLOW says so
            raise link_refused(path) from err
        raise
