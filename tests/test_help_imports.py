"""``import hf_cse`` and a command's ``--help`` import no torch, transformers or peft (issue 56): those cost seconds
of CPU to import, and a user reading the help needs none of them. ``hf_cse``'s public names are imported on first
use (PEP 562 ``__getattr__`` in ``hf_cse/__init__.py``); the command parsers import the model code where they run it.

What a process imported is read from its ``sys.modules`` as it exits, not timed.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys

import pytest
from conftest import REPO_ROOT

import hf_cse

HEAVY = {"torch", "transformers", "peft"}
# Printed as the process exits, after a command's --help too (argparse's SystemExit): every module it imported,
# however it was imported (`python -X importtime` misses a module that importlib.import_module imports).
REPORT_MODULES = (
    "import atexit, json, sys; atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))"
)


def modules_imported_by(code: str) -> set[str]:
    """The modules a fresh ``python -c CODE`` has imported when it exits, run from the repository root."""
    done = subprocess.run(
        [sys.executable, "-c", f"{REPORT_MODULES}\n{code}"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stderr.splitlines()[-1]))


def test_import_hf_cse_imports_no_torch() -> None:
    imported = modules_imported_by("import hf_cse\nhf_cse.register_objective")
    assert "hf_cse.registry" in imported  # a public name's module, imported on first use
    assert not HEAVY & imported


def test_download_help_imports_no_torch() -> None:
    # as `python -m hf_cse.download --help` runs it
    imported = modules_imported_by(
        "import runpy\nsys.argv = ['hf_cse.download', '--help']\n"
        "runpy.run_module('hf_cse.download', run_name='__main__')"
    )
    assert "hf_cse.commands.download" in imported and "hf_cse.commands.cli" in imported
    assert not HEAVY & imported


def test_the_probe_sees_torch_where_it_is_imported() -> None:
    """The check above can fail: a module that imports torch is seen doing so."""
    assert "torch" in modules_imported_by("import hf_cse.objectives.base")


def type_checking_imports() -> dict[str, str]:
    """``{name: module}`` of the ``if TYPE_CHECKING:`` imports of ``hf_cse/__init__.py``: what type checkers and the
    API docs (griffe) read as ``hf_cse``'s names."""
    tree = ast.parse((REPO_ROOT / "hf_cse" / "__init__.py").read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {
        alias.asname or alias.name: f"hf_cse.{statement.module}"
        for statement in block.body
        if isinstance(statement, ast.ImportFrom)
        for alias in statement.names
    }


def test_the_lazy_names_are_the_ones_type_checkers_and_the_docs_read() -> None:
    assert type_checking_imports() == {name: f"hf_cse.{module}" for name, module in hf_cse._EXPORTS.items()}
    assert set(hf_cse.__all__) == set(hf_cse._EXPORTS)


@pytest.mark.parametrize("name", sorted(hf_cse._EXPORTS))
def test_each_lazy_name_is_its_module_s_object(name: str) -> None:
    module = importlib.import_module(f"hf_cse.{hf_cse._EXPORTS[name]}")
    assert getattr(hf_cse, name) is getattr(module, name)
    assert name in dir(hf_cse)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'hf_cse' has no attribute 'NoSuchName'"):
        hf_cse.NoSuchName  # noqa: B018
    assert not hasattr(hf_cse, "NoSuchName")
