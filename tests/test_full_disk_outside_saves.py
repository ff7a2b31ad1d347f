"""The two files a command writes outside a run's saves, on a real full filesystem (a tmpfs; skipped, saying so, where
no tmpfs can be mounted): the error file that ``torchrun`` and ``accelerate launch`` read
(``TORCHELASTIC_ERROR_FILE``), written whole or not at all, and the download's ``.part``, written in place because a
rerun resumes from it: a full disk is one line naming the ``.part``, the file's own path never holds a partial file,
and the rerun once the disk has room completes. tests/test_full_filesystem.py does the same for a run's saves and
the report.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from common.small_filesystem import PAGE, small_filesystem
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from hf_cse.commands.cli import run_command
from hf_cse.commands.download import DATA_FILES, fetch
from hf_cse.distributed import ERROR_FILE_VARIABLE
from hf_cse.errors import UsageError

MESSAGE = "run_unsup.py: error: pass --use_cpu true."


def fail_with_a_usage_error(argv: list[str]) -> None:
    raise UsageError("pass --use_cpu true.")


def launcher_summary(error_file: Path) -> str:
    """The failure summary that torch.distributed.elastic's launcher prints for a process that left ``error_file``."""
    failure = ProcessFailure(local_rank=0, pid=1, exitcode=2, error_file=str(error_file))
    return ChildFailedError("run_unsup.py", {0: failure}).format_msg()


def test_the_launcher_reads_the_error_file_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    error_file = tmp_path / "attempt_0" / "0" / "error.json"  # the launcher names a file in folders it made
    error_file.parent.mkdir(parents=True)
    monkeypatch.setenv(ERROR_FILE_VARIABLE, str(error_file))
    with pytest.raises(SystemExit) as exit_info:
        run_command(fail_with_a_usage_error, "run_unsup.py", [])
    assert (exit_info.value.code, capsys.readouterr().err) == (2, MESSAGE + "\n")
    assert MESSAGE in launcher_summary(error_file)
    assert sorted(path.name for path in error_file.parent.iterdir()) == ["error.json"]  # no temporary file left


def test_a_full_disk_at_the_error_file_leaves_no_file_and_the_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with small_filesystem(tmp_path / "mnt") as fs:
        (fs.path / "filler").write_bytes(b"x" * PAGE)
        fs.leave_free(0)  # every page in use: the next byte written finds the disk full
        error_file = fs.path / "error.json"
        monkeypatch.setenv(ERROR_FILE_VARIABLE, str(error_file))
        with pytest.raises(SystemExit) as exit_info:
            run_command(fail_with_a_usage_error, "run_unsup.py", [])
        assert (exit_info.value.code, capsys.readouterr().err) == (2, MESSAGE + "\n")
        assert sorted(path.name for path in fs.path.iterdir()) == ["filler"]  # no partial JSON, no temporary file
        # Without the file the launcher says what it says of any failed process; a partial one made it raise.
        assert "error_file: <N/A>" in launcher_summary(error_file)


CORPUS = os.urandom(3 << 20)  # three of the download's 1 MiB chunks
CORPUS_SHA256 = hashlib.sha256(CORPUS).hexdigest()


def test_a_full_disk_mid_download_is_one_line_keeps_the_part_and_the_rerun_completes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wiki1m = DATA_FILES["wiki1m"]
    served = tmp_path / "mirror"
    served.mkdir()
    (served / wiki1m.filename).write_bytes(CORPUS)
    base_url = served.as_uri()  # urllib reads file:// as it reads http://, without a server

    def download(argv: list[str]) -> None:
        fetch(wiki1m, fs.path, base_url=base_url, sha256=CORPUS_SHA256)

    with small_filesystem(tmp_path / "mnt") as fs:
        target = fs.path / wiki1m.path
        part = target.with_name(target.name + ".part")
        target.parent.mkdir(parents=True)
        fs.leave_free(len(CORPUS) // 2)  # the disk fills in the second chunk
        with pytest.raises(SystemExit) as exit_info:
            run_command(download, "python -m hf_cse.download", [])
        error = capsys.readouterr().err.splitlines()[-1]  # after the progress bar
        assert exit_info.value.code == 1 and error.startswith(
            f"python -m hf_cse.download: error: The disk is full: saving {wiki1m.filename} in {target.parent} failed ("
        )
        assert error.endswith(f"run the command again, which resumes from {part}.")
        assert not target.exists()  # the file's own path: the whole verified file or nothing
        kept = part.read_bytes()
        assert 0 < len(kept) < len(CORPUS) and CORPUS.startswith(kept)  # what fitted, in order, to resume from

        fs.enlarge()
        run_command(download, "python -m hf_cse.download", [])
        assert target.read_bytes() == CORPUS and not part.exists()
