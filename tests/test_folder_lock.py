"""The output folder's lock (:mod:`hf_cse.folder_lock`): it ends with the process that took it even when that process
forked children that outlive it; a run that fails before its first save leaves no folder; and a lock file that is a
symbolic link, a folder or a FIFO is refused in one line, never written through. The module docstring says why hf_cse
keeps its own lock rather than the ``filelock`` library's. The lock's other behaviour (refusal naming the holder,
take-over of a dead holder's lock, re-entrancy, a full disk at the lock) is tested in tests/test_reliability.py and
tests/test_durability.py.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG_GUARD_S, REPO_ROOT

from hf_cse.errors import OutputDirLockedError, UsageError
from hf_cse.folder_lock import LOCK_FILE, FolderLock

HOLDER_THAT_FORKS = f"""
import os, sys, time
from hf_cse.folder_lock import FolderLock

with FolderLock(sys.argv[1], "training run"):
    child = os.fork()  # as a DataLoader worker is forked
    if child == 0:
        # The child says it is here only once fork() has returned in it, so after its at-fork hook closed its copy
        # of the lock's descriptor: the test waits on that line, never on the scheduler. It then leaves the block
        # too: the lock is its parent's, it must not release or remove it.
        print(os.getpid(), flush=True)
    else:
        time.sleep({HANG_GUARD_S})
if child == 0:
    time.sleep({HANG_GUARD_S})  # outlives its parent
    os._exit(0)
"""


def test_a_lock_ends_with_its_holder_though_a_forked_child_lives_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER_THAT_FORKS, str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT
    )
    child = int(holder.stdout.readline())
    try:
        # The child left the block: the folder is still its parent's, record and all.
        with pytest.raises(OutputDirLockedError, match=f"in use by another training run \\(pid {holder.pid} on "):
            with FolderLock(tmp_path):
                pass
        holder.kill()  # SIGKILL: the child, still running, holds a copy of every descriptor it did not close
        holder.wait()
        os.kill(child, 0)  # still alive
        with caplog.at_level(logging.WARNING, logger="hf_cse.folder_lock"), FolderLock(tmp_path):
            assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
        assert f"training run that is no longer running (pid {holder.pid} on " in caplog.text
    finally:
        holder.kill()
        holder.wait()
        os.kill(child, signal.SIGKILL)


def test_a_run_that_failed_before_its_first_save_leaves_no_folder(tmp_path: Path) -> None:
    ours = tmp_path / "run"
    with FolderLock(ours):
        assert (ours / LOCK_FILE).is_file()
    assert not ours.exists()


@pytest.mark.parametrize("kind", ["link", "link_to_nothing", "folder", "fifo"])
def test_a_lock_file_that_is_no_plain_file_is_refused_in_one_line_and_left_as_it_is(kind: str, tmp_path: Path) -> None:
    # Issue 55 item 1: a link planted at the lock file had the file it points to truncated and overwritten with the
    # lock's record, and removed on exit. Opened with O_NOFOLLOW, never written through; a folder or FIFO there is
    # no lock file either (a FIFO's open would block).
    folder, outside = tmp_path / "run", tmp_path / "outside.txt"
    folder.mkdir()
    outside.write_text("outside the run\n", encoding="utf-8")
    lock = folder / LOCK_FILE
    if kind == "link":
        lock.symlink_to(outside)
    elif kind == "link_to_nothing":
        lock.symlink_to(tmp_path / "nowhere")
    elif kind == "folder":
        lock.mkdir()
    else:
        os.mkfifo(lock)
    with pytest.raises(UsageError) as refused, FolderLock(folder, "training run"):
        pass
    message = str(refused.value)
    expected = "is a symbolic link" if kind.startswith("link") else "is not a regular file"
    assert "\n" not in message and LOCK_FILE in message and expected in message, message
    assert outside.read_text(encoding="utf-8") == "outside the run\n" and os.path.lexists(lock)
    assert not (tmp_path / "nowhere").exists()
