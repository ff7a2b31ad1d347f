"""Public names of a package imported on first use (PEP 562), so that importing the package costs no torch.

``hf_cse`` and ``hf_cse.evaluation`` each keep a table ``{public name: submodule}`` and take their module
``__getattr__`` and ``__dir__`` from :func:`lazy_attributes`; their ``if TYPE_CHECKING:`` imports say the same to type
checkers and the API docs (``tests/test_help_imports.py`` holds the two to each other).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


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
