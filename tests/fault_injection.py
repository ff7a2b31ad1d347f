"""Fault injection at every file operation of a save: the harness of tests/test_crash_consistency.py.

:class:`FileOperations` wraps the functions through which hf_cse, transformers, torch and safetensors change files
(create, write, rename, delete, chmod; ``torch.save`` and safetensors' ``save_file`` as one operation each, since
they write from C++). While *armed*, it counts each call whose path lies under a root folder; with ``fail_at=k`` the
k-th such call gets a fault instead of running:

- ``ENOSPC`` / ``EIO``: the call raises what the library making it raises for that errno (:func:`library_error`):
  Python's file functions an ``OSError``; safetensors a ``SafetensorError`` (``Error while serializing: I/O error:
  No space left on device (os error 28)``); tokenizers' Rust writer a plain ``Exception`` (``No space left on device
  (os error 28)``); torch.save a ``RuntimeError`` without the errno (``unexpected pos 576 vs 534``). A bulk write
  leaves half its bytes first, as a disk that fills mid-write does; after ``ENOSPC`` the filesystem reports no free
  block (``os.statvfs``), as a full disk does;
- ``SIGINT``: the call raises ``KeyboardInterrupt``, what Python makes of Ctrl-C;
- ``SIGKILL``: the root folder is copied as it is at that instant (a bulk write's half file included) to
  ``snapshot``, which is exactly what a process killed there leaves on disk, and :class:`SimulatedKill` (a
  ``BaseException``) ends the invocation; the test then carries on with the snapshot, never with the folder that the
  unwinding process went on to clean.

Operations on the run's lock file are not counted: the lock belongs to the process, not to the save path.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import io
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import safetensors
import safetensors.torch
import tokenizers
import torch
import transformers.modeling_utils

from hf_cse.folder_lock import LOCK_FILE

FAULTS = ("ENOSPC", "EIO", "SIGINT", "SIGKILL")
_ERRNO = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


TORCH_WRITE_FAILURES = (
    "[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534",
    "PytorchStreamWriter failed writing file data/0: file write failed",
    "basic_ios::clear: iostream error",
)
"""What torch.save raises (a ``RuntimeError``) when a write of its zip writer fails, whatever the cause: a write cut
short and the stream's last flush, both met on a full tmpfs (tests/test_full_filesystem.py), and a record that
failed (torch's inline_container.cc). The harness raises the first; tests/test_reliability.py tells each apart."""


def library_error(library: str, code: int) -> BaseException:
    """The exception ``library`` raises when a write fails with ``code`` (an errno), as measured on a full tmpfs."""
    reason = f"{os.strerror(code)} (os error {code})"  # how Rust's std::io::Error ends its message
    if library == "safetensors":
        return safetensors.SafetensorError(f"Error while serializing: I/O error: {reason}")
    if library == "tokenizers":
        return Exception(reason)
    if library == "torch":
        return RuntimeError(TORCH_WRITE_FAILURES[0])
    raise ValueError(library)


class SimulatedKill(BaseException):
    """Ends an invocation where SIGKILL would have: nothing the process does after it reaches the disk we check."""


class FileOperations:
    """Counts, and at ``fail_at`` faults, the file operations under ``root`` while armed.

    Args:
        root: only operations on paths inside it count.
        fail_at: the 1-based index of the operation that gets ``fault`` (``None``: count only).
        fault: one of :data:`FAULTS`.
        snapshot: where ``SIGKILL`` copies ``root``.
    """

    def __init__(
        self,
        root: Path,
        fail_at: int | None = None,
        fault: str = "ENOSPC",
        snapshot: Path | None = None,
        observe: Callable[[], None] | None = None,
    ):
        self.observe = observe
        """Called before each counted operation runs (e.g. to measure the disk's use as a save goes)."""
        self.root = root.resolve()
        self.fail_at, self.fault, self.snapshot = fail_at, fault, snapshot
        self.armed = False
        self.count = 0
        self.fired: str | None = None
        """``"operation path"`` of the faulted call, once it happened."""
        self.operations: list[str] = []

    @contextlib.contextmanager
    def arm(self) -> Iterator[None]:
        self.armed = True
        try:
            yield
        finally:
            self.armed = False

    def _counts(self, path: Any) -> bool:
        if not self.armed or self.fired is not None or not isinstance(path, (str, os.PathLike)):
            return False
        resolved = Path(os.path.abspath(path))
        return resolved.name != LOCK_FILE and resolved.is_relative_to(self.root)

    def _before(
        self, name: str, path: Any, partial: Callable[[], None] | None = None, library: str | None = None
    ) -> None:
        """Count the call; on the chosen one, leave ``partial``'s half-done effect and apply the fault, raised as
        ``library`` raises it (``None``: Python's ``OSError``)."""
        if not self._counts(path):
            return
        self.count += 1
        self.operations.append(f"{name} {Path(path).relative_to(self.root) if Path(path).is_absolute() else path}")
        if self.observe is not None:
            self.observe()
        if self.count != self.fail_at:
            return
        self.fired = self.operations[-1]
        if partial is not None:
            partial()
        if self.fault == "SIGKILL":
            shutil.copytree(self.root, self.snapshot, symlinks=True)
            raise SimulatedKill(self.fired)
        if self.fault == "SIGINT":
            raise KeyboardInterrupt
        code = _ERRNO[self.fault]
        if library is not None:
            raise library_error(library, code)
        raise OSError(code, os.strerror(code), str(path))

    def disk_is_full(self, path: Any) -> bool:
        """Whether ``path`` lies on the disk that an ``ENOSPC`` fault filled."""
        full = self.fired is not None and self.fault == "ENOSPC"
        return full and Path(os.path.abspath(path)).is_relative_to(self.root)

    @contextlib.contextmanager
    def installed(self, monkeypatch: Any) -> Iterator[FileOperations]:
        """Wrap the file functions (through ``monkeypatch``, undone by the test) for the duration of the block."""
        ops = self

        def simple(module: Any, name: str, path_arg: int = 0) -> None:
            real = getattr(module, name)

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if "dir_fd" not in kwargs and len(args) > path_arg:
                    ops._before(name, args[path_arg])
                return real(*args, **kwargs)

            monkeypatch.setattr(module, name, wrapper)

        for name in ("replace", "rename", "mkdir", "unlink", "remove", "rmdir", "chmod"):
            simple(os, name)
        real_rmtree = shutil.rmtree

        def rmtree(path: Any, *args: Any, **kwargs: Any) -> None:
            def delete_one_file() -> None:  # a kill mid-delete leaves the folder half-deleted
                first = next((p for p in sorted(Path(path).rglob("*")) if p.is_file()), None)
                if first is not None:
                    first.unlink()

            ops._before("rmtree", path, delete_one_file if Path(path).is_dir() else None)
            return real_rmtree(path, *args, **kwargs)

        monkeypatch.setattr(shutil, "rmtree", rmtree)
        real_os_open = os.open

        def os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if flags & _WRITE_FLAGS and "dir_fd" not in kwargs:
                ops._before("os.open", path)
            return real_os_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", os_open)
        real_open = builtins.open

        def open_file(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if any(flag in mode for flag in "wax+"):
                ops._before("open", file)
            return real_open(file, mode, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", open_file)
        monkeypatch.setattr(io, "open", open_file)

        def bulk(
            owner: Any, name: str, write: Callable[..., bytes], path_of: Callable[..., Any], library: str
        ) -> None:
            real = getattr(owner, name)

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                path = path_of(*args, **kwargs)

                def half_written() -> None:
                    data = write(*args, **kwargs)
                    with real_open(path, "wb") as f:
                        f.write(data[: len(data) // 2])

                if isinstance(path, (str, os.PathLike)):
                    ops._before(name, path, half_written, library)
                return real(*args, **kwargs)

            monkeypatch.setattr(owner, name, wrapper)

        real_torch_save = torch.save

        def torch_bytes(obj: Any, f: Any, *args: Any, **kwargs: Any) -> bytes:
            buffer = io.BytesIO()
            real_torch_save(obj, buffer)
            return buffer.getvalue()

        bulk(torch, "save", torch_bytes, lambda obj, f, *a, **k: f, "torch")
        real_safetensors_save = safetensors.torch.save

        def safetensors_bytes(tensors: Any, filename: Any, metadata: Any = None) -> bytes:
            return real_safetensors_save(tensors, metadata=metadata)

        for module in (safetensors.torch, transformers.modeling_utils):
            name = "save_file" if module is safetensors.torch else "safe_save_file"
            bulk(module, name, safetensors_bytes, lambda tensors, filename, *a, **k: filename, "safetensors")
        # tokenizer.json: written by the Rust library itself, not through Python's open.
        bulk(
            tokenizers.Tokenizer,
            "save",
            lambda tokenizer, path, pretty=True: tokenizer.to_str(pretty).encode("utf-8"),
            lambda tokenizer, path, *a, **k: path,
            "tokenizers",
        )
        real_statvfs = os.statvfs

        def statvfs(path: Any) -> os.statvfs_result:
            result = real_statvfs(path)
            if not ops.disk_is_full(path):
                return result
            fields = list(result)
            fields[3] = fields[4] = 0  # f_bfree, f_bavail: the disk that the fault filled stays full
            return os.statvfs_result(fields)

        monkeypatch.setattr(os, "statvfs", statvfs)
        yield self
