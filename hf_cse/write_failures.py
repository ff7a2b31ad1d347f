"""Write failures: what each library's error means when a write fails, decided here and nowhere else
(:func:`write_failure_errno`), and the one-line errors they become (:func:`write_errors_as_one_line`).

An ``OSError``'s errno; the ``(os error N)`` of the Rust libraries (safetensors' ``SafetensorError``, tokenizers'
``Exception``); torch's zip writer, which gives no cause (``unexpected pos``), by whether the filesystem has a free
block left. :func:`write_errors_as_one_line` turns them into :class:`~hf_cse.errors.DiskFullError` or
:class:`~hf_cse.errors.SaveFailedError`, one line naming what was being saved and where; the writers of
:mod:`hf_cse.atomic_files` do so themselves, before their cleanup frees the space, and an enclosing
:func:`write_errors_as_one_line` (the training run's) names the save and says what to do.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from .errors import CSEError, DiskFullError, SaveFailedError, shorten

DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
"""The errnos of a full disk: no space left (``ENOSPC``) and the user's quota used up (``EDQUOT``), which freeing space
or a larger disk fixes: :class:`~hf_cse.errors.DiskFullError`, with the free space. Every other errno of a failed
write is :class:`~hf_cse.errors.SaveFailedError` naming its cause: ``EIO`` (the disk failed), ``EROFS`` (mounted
read-only), ``EACCES``, and ``EFBIG``, a file over the filesystem's or the process's size limit (``ulimit -f``),
which freeing space does not fix."""
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")
"""How Rust's ``std::io::Error`` ends its message: safetensors raises ``SafetensorError: Error while serializing: I/O
error: No space left on device (os error 28)``, tokenizers a plain ``Exception: No space left on device (os error
28)``."""
_TORCH_WRITE_FAILED = ("unexpected pos", "PytorchStreamWriter failed", "basic_ios::clear")
"""torch.save's zip writer after a short or failed write, a ``RuntimeError`` that gives no cause: ``unexpected pos
576 vs 534`` (a write cut short) and the C++ stream's own ``basic_ios::clear: iostream error`` (the last bytes,
flushed as the file closes), both met on a full tmpfs, and ``PytorchStreamWriter failed writing file ...``."""


def _existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (the folder of a failed save may be gone)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def _free_bytes(folder: str | os.PathLike) -> int | None:
    """The bytes a user may still write on ``folder``'s filesystem (``statvfs``' ``f_bavail``); ``None``: unknown."""
    try:
        return shutil.disk_usage(_existing(Path(folder))).free
    except OSError:
        return None


def write_failure_errno(err: BaseException, folder: str | os.PathLike) -> int | None:
    """The errno of the failed write that ``err`` (or an exception it was raised from) reports, however the library
    raising it says so; ``None`` when it reports no failed write.

    - an ``OSError``: its errno (``EIO`` when it has none);
    - safetensors' ``SafetensorError`` and tokenizers' ``Exception``: the ``(os error N)`` of Rust's I/O error;
    - torch.save's ``RuntimeError`` (``unexpected pos``, ``PytorchStreamWriter failed``, ``basic_ios::clear``),
      which gives no cause:
      ``ENOSPC`` when the filesystem of ``folder`` has no free block left (call this before a cleanup frees any),
      else ``EIO``.
    """
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, CSEError):
            return None
        if isinstance(seen, OSError):
            return seen.errno if isinstance(seen.errno, int) else errno.EIO
        text = str(seen)
        if (match := _RUST_OS_ERROR.search(text)) is not None:
            return int(match.group(1))
        if isinstance(seen, RuntimeError) and any(marker in text for marker in _TORCH_WRITE_FAILED):
            return errno.ENOSPC if _free_bytes(folder) == 0 else errno.EIO
        seen = seen.__cause__ or seen.__context__
    return None


def is_disk_full(err: BaseException, folder: str | os.PathLike = ".") -> bool:
    """Whether ``err`` says the disk or the quota is full (:func:`write_failure_errno`)."""
    return write_failure_errno(err, folder) in DISK_FULL_ERRNOS


RUN_AGAIN = "run the command again"
"""What :func:`write_errors_as_one_line` tells the user to do once the disk is fixed, unless told otherwise."""

_SAVE = contextvars.ContextVar[tuple[str, Path, str] | None]("hf_cse_save", default=None)
"""``(what, folder, then)`` of the outermost :func:`write_errors_as_one_line` in effect: the save a message names."""


def write_error(err: BaseException, what: str, folder: str | os.PathLike, then: str = RUN_AGAIN) -> CSEError | None:
    """The one-line error for ``err`` raised while saving ``what`` in ``folder``: :class:`DiskFullError` (with the free
    space), :class:`SaveFailedError` for any other failed write, ``None`` when ``err`` is no failed write."""
    folder = Path(folder)
    code = write_failure_errno(err, folder)
    if code is None:
        return None
    if code in DISK_FULL_ERRNOS:
        free = _free_bytes(folder)
        space = "free space unknown" if free is None else f"{free / 2**20:.0f} MiB free"
        return DiskFullError(
            f"The disk is full: saving {what} in {folder} failed ({space}). Nothing was half-written: "
            f"free some space or write to a larger disk, then {then}."
        )
    cause = " ".join(f"{type(err).__name__}: {err}".split())
    return SaveFailedError(
        f"Saving {what} in {folder} failed: {shorten(cause)}. Nothing was half-written and what was saved before is "
        f"intact; fix the disk, then {then}."
    )


@contextlib.contextmanager
def write_errors_as_one_line(what: str, folder: str | os.PathLike, then: str = RUN_AGAIN) -> Iterator[None]:
    """Re-raise a failed write inside the block (:func:`write_failure_errno`) as :func:`write_error`'s one line;
    hf_cse's own errors and every other exception pass through.

    Nested, the outermost names the save: an inner block (a file writer here) raises the error early, before its
    cleanup frees the space it measures, with the ``what``, ``folder`` and ``then`` of the block around it (the
    training run's "resume with --resume_from_checkpoint true").
    """
    outer = _SAVE.get()
    context = outer or (what, Path(folder), then)
    token = _SAVE.set(context)
    try:
        yield
    except Exception as err:
        error = write_error(err, *context)
        if error is None:
            raise
        raise error from err
    finally:
        _SAVE.reset(token)
