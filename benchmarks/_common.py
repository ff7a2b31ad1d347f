"""Helpers shared by the benchmark scripts: the machine description stored with every result, and atomic writes.

The scripts in ``benchmarks/`` are run as files (``python benchmarks/quality.py``), so Python puts this folder on
``sys.path`` and ``from _common import ...`` works without installing anything.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
# A benchmark measures the checkout it lives in: this one's hf_cse and run_unsup.py come before an hf_cse installed
# from another folder (an editable install of the main worktree imported the wrong code from a second worktree).
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(1, str(REPO_ROOT))
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
# The team data folder beside the repo; HF_CSE_DATA_DIR points elsewhere, as it does for the tests.
SHARED_DATA = Path(os.environ.get("HF_CSE_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))
WIKI1M_HEAD = SHARED_DATA / "wiki1m" / "wiki1m_for_simcse.head11914.txt"  # the training corpus of the proxies


def cpu_model() -> str:
    """The CPU model name from ``/proc/cpuinfo`` (Linux), else ``platform.processor()``, else ``"unknown"``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def git_commit(repo: Path = REPO_ROOT) -> str | None:
    """The ``HEAD`` commit of ``repo`` with a ``-dirty`` suffix for uncommitted changes; ``None`` outside git."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{commit}-dirty" if dirty else commit


def utc_now() -> str:
    """The current time, ISO 8601 in UTC to the second (``2025-01-31T12:00:00+00:00``)."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def environment() -> dict[str, Any]:
    """What a benchmark number depends on: CPU/GPU, core and thread counts, library versions, commit and date."""
    import torch
    import transformers

    cuda = torch.cuda.is_available()
    return {
        "cpu": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "git_commit": git_commit(),
        "date": utc_now(),
    }


SCRATCH_DIR = "/tmp"
"""The one absolute folder a recorded command may name: the same scratch folder on every machine."""

# An absolute path in text: a "/" that starts a token (not inside a URL, a word or a relative path) and at least two
# components, so that a lone "/s" of a unit stays.
ABSOLUTE_PATH = re.compile(r"(?<![\w./:~$-])/[\w.@%+=,-]+(?:/[\w.@%+=,-]*)+")


def portable_path(path: str) -> str:
    """An absolute ``path`` as any checkout can read it: relative to the repository root (``benchmarks/results``,
    ``../quality_study``, ``../shared/data``), or as it is under :data:`SCRATCH_DIR`. A development machine's folders
    (``/work/...``, a home folder) are never recorded or shown."""
    inside_repo = path == str(REPO_ROOT) or path.startswith(f"{REPO_ROOT}/")
    in_scratch = path == SCRATCH_DIR or path.startswith(f"{SCRATCH_DIR}/")
    return path if in_scratch and not inside_repo else os.path.relpath(path, REPO_ROOT)


def portable_paths(text: str) -> str:
    """``text`` with every absolute path in it made :func:`portable_path` (commands, labels, notes)."""
    return ABSOLUTE_PATH.sub(lambda match: portable_path(match.group()), text)


def command_line(argv: list[str] | None = None) -> str:
    """The command that ran this script, as a user would type it from the repository root (``python benchmarks/x.py
    --flag value``), its absolute paths relative to the repository (:func:`portable_paths`)."""
    argv = sys.argv if argv is None else argv
    script = portable_path(str(Path(argv[0]).resolve()))
    return " ".join(["python", script, *(shlex.quote(portable_paths(arg)) for arg in argv[1:])])


def write_json_atomic(path: str | os.PathLike, data: Any) -> Path:
    """Write ``data`` as JSON to ``path`` so that a crash never leaves a partial file there: serialized first, written
    to a temporary file beside it, flushed, and moved into place with ``os.replace``
    (:func:`hf_cse.atomic_files.write_json_atomic`, imported here when called so that scripts which never
    write JSON, like ``render.py``, do not import torch)."""
    from hf_cse.atomic_files import write_json_atomic as write

    return write(path, data)
