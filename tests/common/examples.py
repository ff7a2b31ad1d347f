"""Running the Python examples a user copies (``examples/python/*.py``) from a test, with the Hub model, corpus and
output folder they name swapped for the tiny model's and a scratch folder's."""

from __future__ import annotations

from conftest import REPO_ROOT

EXAMPLES_DIR = REPO_ROOT / "examples" / "python"


def example_source(name: str, swaps: dict[str, str] | None = None) -> str:
    """``examples/python/<name>`` with each ``old`` text replaced by its ``new`` one (each must be there)."""
    source = (EXAMPLES_DIR / name).read_text(encoding="utf-8")
    for old, new in (swaps or {}).items():
        assert old in source, f"{name} no longer holds {old!r}"
        source = source.replace(old, new)
    return source


def run_example(name: str, swaps: dict[str, str] | None = None) -> dict[str, object]:
    """Execute the example as a script (``__name__ == "__main__"``); its globals afterwards."""
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(compile(example_source(name, swaps), str(EXAMPLES_DIR / name), "exec"), namespace)  # noqa: S102
    return namespace
