"""Every hf_cse module imports on its own, as the first hf_cse module a process imports.

An import circle that only one order completes passes every other test, which import the modules in an order that
happens to work, and fails the user whose first import is the other end of the circle (``import
hf_cse.export.model_card`` once failed so, through ``hf_cse.evaluation.sts_model_index``). One process imports each
module in turn with every ``hf_cse`` module dropped from ``sys.modules`` before it: third-party libraries stay
imported, so the walk costs seconds, not a fresh interpreter per module.
"""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import HANG_GUARD_S, REPO_ROOT

# Prints {"modules": N, "failures": {module: error}} for the package PACKAGE found on sys.path.
WALK = """
import importlib, json, pkgutil, sys
package = importlib.import_module(PACKAGE)
names = sorted(m.name for m in pkgutil.walk_packages(package.__path__, PACKAGE + "."))
failures = {}
for name in names:
    for loaded in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as error:
        failures[name] = f"{type(error).__name__}: {error}"
print(json.dumps({"modules": len(names), "failures": failures}))
"""


def walk(package: str, path: str = "") -> dict:
    code = (
        f"import sys\nsys.path.insert(0, {path!r})\nPACKAGE = {package!r}\n{WALK}"
        if path
        else f"PACKAGE = {package!r}\n{WALK}"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_every_module_imports_first() -> None:
    result = walk("hf_cse")
    assert result["modules"] > 150  # the walk found the package's modules, not an empty path
    assert result["failures"] == {}


def test_the_walk_sees_a_circle_that_one_order_completes(tmp_path) -> None:
    """The walk can fail: of two modules that import each other's names, ``a`` imports first (its ``VALUE`` is set
    before it imports ``b``) and ``b`` does not (``a`` then asks it for ``helper``, not yet defined)."""
    package = tmp_path / "circle"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("VALUE = 1\nfrom .b import helper\n")
    (package / "b.py").write_text("from .a import VALUE\n\ndef helper():\n    return VALUE\n")
    result = walk("circle", str(tmp_path))
    assert result["modules"] == 2
    assert list(result["failures"]) == ["circle.b"]
