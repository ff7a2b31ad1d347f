"""One process at a time in a folder: the lock of a training run's output folder, of a sweep's and of a benchmark's.

The lock is ``fcntl.flock`` on ``FOLDER/_hf_cse.lock``. The kernel releases it when its holder exits, however it
exits (a crash, ``kill -9``, a machine that reboots), so a killed run never leaves a lock that blocks the next one;
a PID file would have to guess whether its PID is still the same process. A forked child (a DataLoader worker, a
``datasets.map`` process) closes its copy of the descriptor as it starts (:func:`_close_inherited_locks`): a flock
lasts while any descriptor of it is open, so a worker that outlived a killed run would otherwise hold the lock in
the name of a dead process. The file also holds a record of its holder (what it is, host, PID, start time), read
only for the messages.

Why not the ``filelock`` library (installed with huggingface_hub), whose ``FileLock`` is this flock: it takes the
lock, and it keeps the lock to its process as above, but hf_cse's lock does more than locking, and filelock leaves
that to its caller (docs/development.md, "Third-party behaviour hf_cse works around", lists each):

- *Who holds the folder.* A refused ``FileLock`` raises ``Timeout: The file lock '...' could not be acquired``,
  naming no process. hf_cse's message names the training run, sweep or benchmark, its host, PID and start time,
  from the record in the lock file; the record of a holder that died names it as the lock is taken over. Nor can
  the lock file carry such a record across the releases huggingface_hub accepts (``filelock>=3.10``): measured,
  3.10 truncates it as it merely tries the lock, erasing the holder's record, and 4.0 and 4.2 as they win it; 4.3.1
  keeps it.
- *No lock file left behind.* ``FileLock`` leaves its file in place on release, on purpose; hf_cse removes it while
  still holding the lock (a process that locked the unlinked file sees so and starts over), and removes the folder
  it created when nothing else was written there: a run that fails before its first save leaves nothing.
- *One lock per folder and process*, however many ``FolderLock`` objects take it (``train()`` inside
  ``run_unsup.main``): filelock's re-entrancy is per lock object (a second ``FileLock`` on the same path in the same
  process is refused).
- *One-line errors*: an unwritable folder, a full disk at the lock's record.

Wrapping ``FileLock`` for these would keep all of this module but the ``flock`` call and the retry, and tie it to
filelock's newest releases.

Nothing here imports torch: the sweeps' batch logic and the benchmarks use it too.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
import stat
import time
from pathlib import Path
from typing import Any, ClassVar

from .errors import OutputDirLockedError, UsageError
from .links import NO_FOLLOW, open_descriptor_no_follow
from .run_files import LOCK_FILE
from .write_failures import write_error

logger = logging.getLogger(__name__)

# flock on a filesystem that does not support it (some network filesystems) fails with one of these.
_LOCKING_UNSUPPORTED = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)
_RECORD_BYTES = 1 << 16
"""At most this much of a lock file is read for its holder's record (a few hundred bytes): a big file put there
is never read whole."""


class FolderLock:
    """Holds an exclusive lock on ``folder`` while the ``with`` block runs; re-entrant within one process.

    Entering creates the folder (which also proves it writable before any work starts) and takes the lock; a second
    process is refused with :class:`~hf_cse.errors.OutputDirLockedError` naming what holds the folder. A lock file
    left by a process that died is taken over, with a warning naming that process. Leaving removes the lock file,
    and the folder too when this lock created it and nothing else was written.

    Without ``fcntl`` (Windows), or on a filesystem without ``flock``, nothing is locked and a warning says so.

    Args:
        folder: the folder to lock.
        holder: what holds it, for the message a second process gets (e.g. ``"python -m hf_cse.sweep"``).
    """

    _held: ClassVar[dict[Path, tuple[int | None, int]]] = {}
    """Per locked lock file of this process: its open descriptor (``None`` when nothing could be locked) and how
    many ``with`` blocks hold it (a training run's ``train()`` inside ``run_unsup.main``)."""

    def __init__(self, folder: str | os.PathLike, holder: str = "run") -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_FILE
        self.holder = holder

    def __enter__(self) -> FolderLock:
        key = self.path.absolute()
        if key in self._held:
            descriptor, depth = self._held[key]
            self._held[key] = (descriptor, depth + 1)
            return self
        self.created_folder = not self.folder.exists()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            descriptor = self._acquire()
        except PermissionError as err:
            raise UsageError(
                f"{str(self.folder)!r} is not writable ({err.strerror}); choose a folder you can write to."
            ) from err
        except OSError as err:  # a full disk (the lock's record) or an I/O error: one line, as every save's
            if self.created_folder:
                with contextlib.suppress(OSError):
                    self.folder.rmdir()
            error = write_error(err, f"the lock file {LOCK_FILE}", self.folder)
            if error is None:
                raise
            raise error from err
        self._held[key] = (descriptor, 1)
        return self

    def __exit__(self, *exc_info: object) -> None:
        key = self.path.absolute()
        if key not in self._held:  # a forked child leaving the block: the lock is its parent's, not its own
            return
        descriptor, depth = self._held[key]
        if depth > 1:
            self._held[key] = (descriptor, depth - 1)
            return
        del self._held[key]
        if descriptor is not None:
            # Removed while still locked: a process waiting on this file finds it unlinked and retries (_acquire).
            _unlink_if_same(self.path, descriptor)
            os.close(descriptor)
        if self.created_folder:  # a run that failed before writing anything leaves no empty folder behind
            with contextlib.suppress(OSError):
                self.folder.rmdir()

    def _acquire(self) -> int | None:
        """Lock the lock file and write our record into it; return its descriptor (``None``: nothing lockable)."""
        try:
            import fcntl
        except ImportError:
            logger.warning("%s is not locked: this platform has no fcntl.flock.", self.folder)
            return None
        while True:
            descriptor = _open_lock_file(self.path)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(descriptor)
                raise OutputDirLockedError(self._in_use_message(_read_record(self.path))) from None
            except OSError as err:
                os.close(descriptor)
                if err.errno not in _LOCKING_UNSUPPORTED:
                    raise
                logger.warning("%s is not locked: its filesystem does not support flock (%s).", self.folder, err)
                return None
            # The holder we waited for may have removed the file as it left: then we locked an orphan; start over.
            if _is_same_file(self.path, descriptor):
                break
            os.close(descriptor)
        previous = _read_record(self.path)
        if previous:  # its holder died without removing it; the kernel released its lock
            logger.warning(
                "Taking over the lock %s of a %s that is no longer running (pid %s on %s, since %s).",
                self.path,
                previous.get("holder", "process"),
                previous.get("pid"),
                previous.get("host"),
                previous.get("started"),
            )
        record = {
            "holder": self.holder,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        try:
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, (json.dumps(record) + "\n").encode("utf-8"), 0)
        except BaseException:  # a full disk: let go of the lock as __exit__ does, never hold it on
            _unlink_if_same(self.path, descriptor)
            os.close(descriptor)
            raise
        return descriptor

    def _in_use_message(self, holder: dict[str, Any]) -> str:
        who = "process"  # without a record: it took the lock a moment ago and has not written its record yet
        if holder:
            who = f"{holder.get('holder', 'process')} (pid {holder.get('pid')} on {holder.get('host')}, since "
            who += f"{holder.get('started')})"
        return f"{str(self.folder)!r} is in use by another {who}; wait for it to finish or choose another folder."


def _close_inherited_locks() -> None:
    """In a child just forked: close the child's copies of the held locks' descriptors, without unlocking (that would
    unlock the parent's too), so that each lock ends with the process that took it."""
    for descriptor, _ in FolderLock._held.values():
        if descriptor is not None:
            with contextlib.suppress(OSError):
                os.close(descriptor)
    FolderLock._held.clear()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork (nor flock)
    os.register_at_fork(after_in_child=_close_inherited_locks)


def _open_lock_file(path: Path) -> int:
    """Open (create) the lock file ``path`` for reading and writing, never through a symbolic link: a link planted
    there would have the lock's record overwrite the file it points to, outside the folder.

    Raises:
        UsageError: ``path`` is a symbolic link, or no regular file (a folder, a FIFO), in one line.
    """
    try:
        descriptor = open_descriptor_no_follow(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK)
    except IsADirectoryError:
        descriptor = None
    if descriptor is None or not stat.S_ISREG(os.fstat(descriptor).st_mode):
        if descriptor is not None:
            os.close(descriptor)
        raise UsageError(
            f"{str(path)!r} is not a regular file: hf_cse keeps its lock there; move it out of the folder, then run "
            "the command again."
        )
    return descriptor


def _is_same_file(path: Path, descriptor: int) -> bool:
    """Whether the entry ``path`` (not what a link there points to) is the file open as ``descriptor``."""
    try:
        return os.lstat(path).st_ino == os.fstat(descriptor).st_ino
    except FileNotFoundError:
        return False


def _unlink_if_same(path: Path, descriptor: int) -> None:
    """Remove the lock file ``path`` if it is still the file open as ``descriptor``: never another process's lock
    file, nor a link put there meanwhile."""
    if _is_same_file(path, descriptor):
        path.unlink(missing_ok=True)


def _read_record(path: Path) -> dict[str, Any]:
    """The holder record in the lock file ``path`` (``{}`` when missing, empty, unreadable or a link: a link's file
    is never read)."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | NO_FOLLOW), "rb") as file:
            record = json.loads(file.read(_RECORD_BYTES).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}
