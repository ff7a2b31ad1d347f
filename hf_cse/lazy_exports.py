"""Public names of a package imported on first use (PEP 562), so that importing the package costs no torch.

``hf_cse`` and ``hf_cse.evaluation`` each list their public names once, as the ``from .SUBMODULE import NAME as
NAME`` lines of their ``if TYPE_CHECKING:`` block: type checkers and the API docs (griffe) read those as imports, and
at run time :func:`type_checking_exports` reads them from the source into the table that the module ``__getattr__``
and ``__dir__`` of :func:`lazy_attributes` import from.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def type_checking_exports(init_file: str) -> dict[str, str]:
    """``{public name: submodule relative to the package}`` of the relative imports under ``if TYPE_CHECKING:`` in
    a package's ``__init__.py`` (``init_file``: its ``__file__``), in their order."""
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"))
    (block,) = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    return {
        alias.asname or alias.name: statement.module
        for statement in block.body
        if isinstance(statement, ast.ImportFrom) and statement.level == 1 and statement.module
        for alias in statement.names
    }


def lazy_attributes(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` (its ``__name__``), whose ``namespace`` (its
    ``globals()``) gets each name of ``exports`` (``{name: submodule relative to package}``) when first read."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value  # later lookups are plain attribute reads
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
