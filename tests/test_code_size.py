"""``benchmarks/code_size.py``, the count issue 53 sets its size target in: a code line is a non-blank line holding a
token outside comments and docstrings; strings that are code count every line."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

from conftest import HANG_GUARD_S

BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS_DIR))
code_size = importlib.import_module("code_size")

SAMPLE = '''"""Module docstring,
two lines."""

import os  # a comment after code: the line counts

# a comment line


class Point:
    """Class docstring."""

    x: int = 0
    """Attribute docstring."""

    def norm(self) -> str:
        """Function docstring,
        on two lines."""
        message = (
            "a string that is code, "
            "on two lines"
        )
        return message + os.sep
'''
# Code: the import (4), class line (9), the field (12), def (15), `message = (` and its two strings and `)` (18-21),
# return (22).
SAMPLE_CODE_LINES = 9


def test_a_sample_counts_its_code_lines_and_not_its_docstrings_comments_or_blank_lines() -> None:
    assert code_size.code_lines(SAMPLE) == SAMPLE_CODE_LINES


def test_packages_sum_to_the_files_and_the_command_prints_the_total(tmp_path: Path) -> None:
    (tmp_path / "hf_cse" / "training").mkdir(parents=True)
    (tmp_path / "hf_cse" / "training" / "trainer.py").write_text(SAMPLE, encoding="utf-8")
    (tmp_path / "hf_cse" / "errors.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "run_unsup.py").write_text('"""Doc."""\nimport sys\nsys.exit(0)\n', encoding="utf-8")
    per_file = code_size.count_files(tmp_path)
    assert per_file == {"hf_cse/errors.py": 1, "hf_cse/training/trainer.py": SAMPLE_CODE_LINES, "run_unsup.py": 2}
    assert code_size.by_package(per_file) == {
        "hf_cse/training": SAMPLE_CODE_LINES,
        "hf_cse/errors.py": 1,
        "run_unsup.py": 2,
    }

    printed = subprocess.run(
        [sys.executable, str(BENCHMARKS_DIR / "code_size.py"), "--files", "2"],
        capture_output=True,
        text=True,
        check=True,
        timeout=HANG_GUARD_S,
    ).stdout.splitlines()
    total = sum(code_size.count_files().values())
    assert printed[0] == f"total {total}"
    assert sum(int(line.split()[0]) for line in printed[1:-2]) == total  # the package rows, then the 2 largest files
