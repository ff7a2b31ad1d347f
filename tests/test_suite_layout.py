"""The test suite's own layout: test files share helpers through ``tests/conftest.py`` (fixtures) and
``tests/common/`` (plain helpers), never by importing one another; and the folders under ``tests/`` stay importable
the way pytest imports them (``rootdir``-relative, no ``__init__.py``: each test module is imported by its bare file
name, and every module that writes ``from conftest import ...`` must get the one ``tests/conftest.py``)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from conftest import REPO_ROOT

TESTS = REPO_ROOT / "tests"


def imported_modules(path: Path) -> set[str]:
    """The top-level names of every module ``path`` imports, at module level or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def python_files() -> list[Path]:
    return sorted(TESTS.rglob("*.py"))


def test_no_file_under_tests_imports_a_test_module() -> None:
    test_modules = {path.stem for path in python_files() if path.name.startswith("test_")}
    importers = {
        str(path.relative_to(TESTS)): sorted(imported_modules(path) & test_modules) for path in python_files()
    }
    assert {path: names for path, names in importers.items() if names} == {}


def test_test_module_names_are_unique_and_there_is_one_conftest() -> None:
    names = Counter(path.name for path in python_files() if path.name.startswith("test_"))
    assert [name for name, count in names.items() if count > 1] == []
    assert [str(path.relative_to(TESTS)) for path in TESTS.rglob("conftest.py")] == ["conftest.py"]


def test_the_check_sees_an_import_of_a_test_module(tmp_path: Path) -> None:
    """``imported_modules`` finds the imports the check above forbids, at module level and inside a function."""
    source = tmp_path / "example.py"
    source.write_text(
        "import os.path\nfrom test_a import x\n\n\ndef f():\n    import test_b.c\n    from . import d\n",
        encoding="utf-8",
    )
    assert imported_modules(source) == {"os", "test_a", "test_b"}
