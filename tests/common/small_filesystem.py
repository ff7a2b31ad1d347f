"""A real small filesystem for the full-disk tests: a tmpfs mounted in the test's folder, whose free space a test
sets (:meth:`SmallFilesystem.leave_free`). Mounting needs root (CAP_SYS_ADMIN): elsewhere :func:`small_filesystem`
skips the test, saying so."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

PAGE = 4096
"""tmpfs allocates whole pages: a budget between two multiples of it changes nothing."""
ROOMY = 64 << 20


class SmallFilesystem:
    """A tmpfs mounted at ``path``, resized (``mount -o remount,size=``) to leave a given number of bytes free."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir()
        self._mount("-t", "tmpfs", "-o", f"size={ROOMY}", "tmpfs")

    def _mount(self, *args: str) -> None:
        subprocess.run(["mount", *args, str(self.path)], check=True, capture_output=True, text=True)

    def used(self) -> int:
        stat = os.statvfs(self.path)
        return (stat.f_blocks - stat.f_bfree) * stat.f_frsize

    def leave_free(self, budget: int) -> None:
        """From now on only ``budget`` more bytes (rounded up to a page) fit."""
        self._mount("-o", f"remount,size={self.used() + budget}")

    def enlarge(self) -> None:
        self._mount("-o", f"remount,size={ROOMY}")

    def unmount(self) -> None:
        # Lazily: a model loaded from it may still map its weights until a garbage collection.
        subprocess.run(["umount", "--lazy", str(self.path)], check=False, capture_output=True)


@contextlib.contextmanager
def small_filesystem(path: Path) -> Iterator[SmallFilesystem]:
    """A :class:`SmallFilesystem` at ``path`` for the block, unmounted after; the test is skipped where no tmpfs can be
    mounted."""
    try:
        fs = SmallFilesystem(path)
    except (OSError, subprocess.CalledProcessError) as err:
        reason = getattr(err, "stderr", None) or err
        pytest.skip(f"cannot mount a tmpfs here ({str(reason).strip()}): the real full-disk tests need root")
    try:
        yield fs
    finally:
        fs.unmount()
