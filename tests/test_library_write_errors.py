"""What each library that writes a save's files really raises when a write fails with an errno other than a full
disk's, told apart by the one mapping (:func:`hf_cse.write_failures.write_failure_errno`). tests/test_reliability.py
enumerates the errnos (ENOSPC, EDQUOT, EIO, EROFS, EACCES) on exceptions built as each library raises them, and
tests/test_full_filesystem.py has the libraries meet a real full disk (ENOSPC); here the libraries themselves fail a
write, in a process whose file-size limit (``ulimit -f``) their file passes: ``EFBIG``, "File too large", which
freeing space does not fix, so it is a :class:`~hf_cse.errors.SaveFailedError` naming the cause, not a
:class:`~hf_cse.errors.DiskFullError`.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

from conftest import HANG_GUARD_S, REPO_ROOT

FILE_SIZE_LIMIT = 1 << 16
"""Bytes a file may reach in the writing process: below each file written there."""

WRITE_PAST_THE_LIMIT = f"""
import json, os, resource, signal, sys
import safetensors, safetensors.torch, tokenizers, torch
from tokenizers import Tokenizer, models
from hf_cse.write_failures import write_error, write_failure_errno

folder = sys.argv[1]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of the signal killing the process
resource.setrlimit(resource.RLIMIT_FSIZE, ({FILE_SIZE_LIMIT}, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
weights = {{"w": torch.zeros({FILE_SIZE_LIMIT})}}  # 4 bytes a value


def python():
    with open(os.path.join(folder, "results.json"), "w") as f:
        f.write("x" * {FILE_SIZE_LIMIT * 2})


def tokenizer():
    vocabulary = {{f"word{{i}}": i for i in range({FILE_SIZE_LIMIT // 4})}}
    Tokenizer(models.WordLevel(vocabulary, unk_token="word0")).save(os.path.join(folder, "tokenizer.json"))


writes = {{
    "python": python,
    "safetensors": lambda: safetensors.torch.save_file(weights, os.path.join(folder, "model.safetensors")),
    "tokenizers": tokenizer,
    "torch": lambda: torch.save(weights, os.path.join(folder, "optimizer.pt")),
}}
for library, write in writes.items():
    try:
        write()
        raised = None
    except Exception as err:
        one_line = write_error(err, "checkpoint-4", folder)
        raised = [type(err).__name__, str(err), write_failure_errno(err, folder), type(one_line).__name__,
                  str(one_line)]
    print(json.dumps([library, raised]), flush=True)
"""

RAISED_AS = {
    "python": ("OSError", "[Errno 27] File too large"),
    "safetensors": ("SafetensorError", "I/O error: File too large (os error 27)"),
    "tokenizers": ("Exception", "File too large (os error 27)"),
    "torch": ("RuntimeError", ""),  # says no cause ("unexpected pos 576 vs 534"): with free space, an I/O error
}
"""What each library raises, as measured: its exception type and a part of its message."""


def test_each_library_s_own_failed_write_is_one_line_of_the_writer(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WRITE_PAST_THE_LIMIT, str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr
    seen = dict(json.loads(line) for line in done.stdout.splitlines())
    assert set(seen) == set(RAISED_AS)
    for library, (exception_type, message) in RAISED_AS.items():
        assert seen[library] is not None, f"{library} wrote past the file-size limit without an error"
        raised_type, raised_message, code, one_line_type, one_line = seen[library]
        assert raised_type == exception_type and message in raised_message, seen[library]
        assert code == (errno.EIO if library == "torch" else errno.EFBIG), library
        assert one_line_type == "SaveFailedError" and "\n" not in one_line, library
        assert one_line.startswith(f"Saving checkpoint-4 in {tmp_path} failed: "), one_line
