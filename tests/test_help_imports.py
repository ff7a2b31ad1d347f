"""``import hf_cse`` and every command's ``--help`` import no torch, transformers or peft (issue 56): those cost
seconds of CPU to import, and a user reading the help needs none of them. ``hf_cse``'s and ``hf_cse.evaluation``'s
public names are imported on first use (PEP 562 ``__getattr__`` in their ``__init__.py``); the settings the help
shows live in modules without torch (``hf_cse/evaluation/options.py``, ``hf_cse/mining_margin.py``), and the
commands import the model code where they run it. (``run_unsup.py --help`` still imports them: transformers'
``HfArgumentParser`` builds its parser.)

What a process imported is read from its ``sys.modules`` as it exits, not timed.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys

import pytest
from conftest import HANG_GUARD_S, REPO_ROOT

import hf_cse
import hf_cse.evaluation

HEAVY = {"torch", "transformers", "peft"}
# Printed as the process exits, after a command's --help too (argparse's SystemExit): every module it imported,
# however it was imported (`python -X importtime` misses a module that importlib.import_module imports).
REPORT_MODULES = (
    "import atexit, json, sys; atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))"
)


def run_and_list_modules(code: str) -> tuple[set[str], str]:
    """The modules a fresh ``python -c CODE`` has imported when it exits, run from the repository root, and what it
    printed on stdout; it must exit with 0."""
    done = subprocess.run(
        [sys.executable, "-c", f"{REPORT_MODULES}\n{code}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stderr.splitlines()[-1])), done.stdout


def modules_imported_by(code: str) -> set[str]:
    """The modules a fresh ``python -c CODE`` has imported when it exits (:func:`run_and_list_modules`)."""
    return run_and_list_modules(code)[0]


def entry_modules() -> list[str]:
    """``NAME`` of every ``python -m hf_cse.NAME`` command: the modules of ``hf_cse/`` that run as a script."""
    return sorted(
        path.stem
        for path in (REPO_ROOT / "hf_cse").glob("*.py")
        if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")
    )


def test_the_entry_modules_are_the_console_scripts() -> None:
    """The commands below are every command: ``python -m hf_cse.NAME`` for each ``hf-cse-NAME`` console script."""
    console_scripts = re.findall(r"hf_cse\.commands\.(\w+):console_main", (REPO_ROOT / "setup.cfg").read_text())
    assert entry_modules() == sorted(console_scripts) and len(console_scripts) == 7


def test_import_hf_cse_imports_no_torch() -> None:
    imported = modules_imported_by("import hf_cse\nhf_cse.register_objective")
    assert "hf_cse.registry" in imported  # a public name's module, imported on first use
    assert not HEAVY & imported


@pytest.mark.parametrize("command", entry_modules())
def test_a_command_s_help_imports_no_torch(command: str) -> None:
    # as `python -m hf_cse.COMMAND --help` runs it; argparse exits with 0 after printing the help
    imported, printed = run_and_list_modules(
        f"import runpy\nsys.argv = ['hf_cse.{command}', '--help']\n"
        f"runpy.run_module('hf_cse.{command}', run_name='__main__')"
    )
    assert printed.startswith(f"usage: python -m hf_cse.{command} ") and "--traceback" in printed
    assert f"hf_cse.commands.{command}" in imported and "hf_cse.commands.cli" in imported
    assert not HEAVY & imported


def test_the_probe_sees_torch_where_it_is_imported() -> None:
    """The check above can fail: a module that imports torch is seen doing so."""
    assert "torch" in modules_imported_by("import hf_cse.objectives.base")


def test_import_hf_cse_evaluation_imports_no_torch() -> None:
    imported = modules_imported_by("from hf_cse.evaluation import STS_TASKS, TRANSFER_TASKS")
    assert "hf_cse.evaluation.sts_data" in imported and "hf_cse.evaluation.options" in imported
    assert not HEAVY & imported


LAZY_PACKAGES = {"hf_cse": hf_cse, "hf_cse.evaluation": hf_cse.evaluation}
"""The packages whose public names are imported on first use."""


@pytest.mark.parametrize("package", sorted(LAZY_PACKAGES))
def test_the_lazy_names_are_the_type_checking_imports_type_checkers_and_the_docs_read(package: str) -> None:
    """One list: the ``from .SUBMODULE import NAME as NAME`` lines under ``if TYPE_CHECKING:`` are what type
    checkers and griffe read, and what the package imports on first use (read back here independently of it)."""
    init = REPO_ROOT.joinpath(*package.split("."), "__init__.py")
    tree = ast.parse(init.read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    imported = [alias.asname for statement in block.body for alias in statement.names]
    assert all(isinstance(statement, ast.ImportFrom) and statement.level == 1 for statement in block.body)
    assert None not in imported and len(imported) > 10
    assert list(LAZY_PACKAGES[package].__all__) == imported == list(LAZY_PACKAGES[package]._EXPORTS)


LAZY_NAMES = [(package, name) for package in sorted(LAZY_PACKAGES) for name in LAZY_PACKAGES[package]._EXPORTS]


@pytest.mark.parametrize(("package", "name"), LAZY_NAMES)
def test_each_lazy_name_is_its_module_s_object(package: str, name: str) -> None:
    lazy = LAZY_PACKAGES[package]
    module = importlib.import_module(f"{package}.{lazy._EXPORTS[name]}")
    assert getattr(lazy, name) is getattr(module, name)
    assert name in dir(lazy)


@pytest.mark.parametrize("package", sorted(LAZY_PACKAGES))
def test_an_unknown_name_is_an_attribute_error(package: str) -> None:
    lazy = LAZY_PACKAGES[package]
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'NoSuchName'"):
        lazy.NoSuchName  # noqa: B018
    assert not hasattr(lazy, "NoSuchName")
