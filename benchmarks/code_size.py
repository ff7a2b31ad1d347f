"""The package's size as issue 53 counts it: code lines of ``hf_cse/**.py`` and ``run_unsup.py``.

A code line is a non-blank line that holds a token outside comments and docstrings (a module's, class's or
function's first string, and a bare string statement such as an attribute docstring). A multi-line string that is
code (an error message, a help text) counts each of its lines. Jinja templates and other data files are not counted.

    python benchmarks/code_size.py            # total, then per package (a top-level module is its own row)
    python benchmarks/code_size.py --files 40 # and the 40 largest files
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SKIPPED_TOKENS = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}


def docstring_lines(tree: ast.Module) -> set[int]:
    """Line numbers of the docstrings in ``tree``: every string that stands alone as a statement."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def code_lines(source: str) -> int:
    """The code lines of one Python source (see the module docstring)."""
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in SKIPPED_TOKENS:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstring_lines(ast.parse(source)))


def count_files(root: Path = REPO_ROOT) -> dict[str, int]:
    """``{path relative to root: code lines}`` of ``hf_cse/**.py`` and ``run_unsup.py``."""
    files = [*sorted((root / "hf_cse").rglob("*.py")), root / "run_unsup.py"]
    return {path.relative_to(root).as_posix(): code_lines(path.read_text(encoding="utf-8")) for path in files}


def by_package(per_file: dict[str, int]) -> Counter[str]:
    """Code lines per ``hf_cse/PACKAGE``; a top-level module (and ``run_unsup.py``) is its own row."""
    packages: Counter[str] = Counter()
    for path, count in per_file.items():
        parts = path.split("/")
        packages["/".join(parts[:2]) if len(parts) > 2 else path] += count
    return packages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=0, help="also list this many of the largest files")
    args = parser.parse_args()
    per_file = count_files()
    print(f"total {sum(per_file.values())}")
    for package, count in by_package(per_file).most_common():
        print(f"{count:6d} {package}")
    for path, count in sorted(per_file.items(), key=lambda item: -item[1])[: args.files]:
        print(f"{count:6d} {path}")


if __name__ == "__main__":
    main()
