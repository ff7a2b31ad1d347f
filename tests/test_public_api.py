"""``hf_cse.__all__`` holds every name the documentation tells a user to take from ``hf_cse`` (issue 28, item 5), and
every ``hf_cse.<module>`` path it names imports. Read from the docs pages (``docs/**/*.md``) and the example files
they include (``examples/python/*.py``), so a new example is checked as it is written:

- the examples and any other ```python block: ``from hf_cse import X``, ``import hf_cse`` then ``hf_cse.X``,
  ``from hf_cse.<module> import X``;
- the pages' inline code: calls of a bare name that hf_cse defines (``MatryoshkaObjective(build_objective("dclr"),
  ...)``; not ``SentenceTransformer(...)`` nor a method such as ``save_model()``), and dotted paths
  ``hf_cse.<module>[.<name>]``.
"""

from __future__ import annotations

import ast
import importlib
import re

import pytest
from conftest import REPO_ROOT

import hf_cse

DOCS = "\n".join(page.read_text(encoding="utf-8") for page in sorted((REPO_ROOT / "docs").rglob("*.md")))
EXAMPLES = [path.read_text(encoding="utf-8") for path in sorted((REPO_ROOT / "examples" / "python").glob("*.py"))]
# The pages' ```python blocks include the example files (--8<--), read above; a block written out is read too.
PYTHON_BLOCKS = EXAMPLES + [
    block
    for block in re.findall(r"^\s*```python\n(.*?)^\s*```", DOCS, flags=re.S | re.M)
    if not block.lstrip().startswith("--8<--")
]
PROSE = re.sub(r"^\s*```.*?^\s*```", "", DOCS, flags=re.S | re.M)
# A span opens and closes with the same run of backticks (``x`` holds no `), as Markdown reads it; it may wrap a line.
INLINE_CODE = sorted(
    {" ".join(span.split()) for _, span in re.findall(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", PROSE, flags=re.S)}
)


def _public_definitions() -> set[str]:
    """The public classes and functions defined at the top level of any hf_cse module (read, not imported)."""
    names = set()
    for path in (REPO_ROOT / "hf_cse").rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef) and not node.name.startswith("_"):
                names.add(node.name)
    return names


HF_CSE_DEFINITIONS = _public_definitions()


def _dedent(block: str) -> str:
    """A block indented under a list item, as Markdown allows."""
    lines = block.splitlines()
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return "\n".join(line[indent:] for line in lines)


def names_imported_from_hf_cse(source: str) -> tuple[set[str], set[str]]:
    """``(names taken from hf_cse itself, "module:name" imports from its submodules)`` of one Python source."""
    top, submodules, aliases = set(), set(), set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "hf_cse":
            top.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hf_cse."):
            submodules.update(f"{node.module}:{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            aliases.update(alias.asname or alias.name for alias in node.names if alias.name == "hf_cse")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            top.add(node.attr)
    return top, submodules


def called_bare_names(span: str) -> set[str]:
    """The bare names an inline code span calls (``F(...)``, ``G(F(...))``), when it is a Python expression."""
    try:
        tree = ast.parse(span, mode="eval")
    except SyntaxError:
        return set()
    return {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}


def resolve(path: str) -> object:
    """``hf_cse.a.b.c``: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(path)


def readme_names() -> tuple[set[str], set[str], set[str]]:
    """``(names from hf_cse, "module:name" submodule imports, hf_cse.* paths)`` the docs and examples use."""
    top, submodules = set(), set()
    for block in PYTHON_BLOCKS:
        block_top, block_submodules = names_imported_from_hf_cse(_dedent(block))
        top |= block_top
        submodules |= block_submodules
    for span in INLINE_CODE:
        top |= called_bare_names(span) & HF_CSE_DEFINITIONS
    paths = {match.group(0) for span in INLINE_CODE if (match := re.match(r"hf_cse(\.[A-Za-z_]\w*)+", span))}
    return top, submodules, paths


TOP, SUBMODULE_IMPORTS, PATHS = readme_names()


def test_the_readme_is_read() -> None:
    """What the checks below see: the docs' own examples (so that docs rewritten in another shape fail here rather
    than letting them check nothing)."""
    assert len(PYTHON_BLOCKS) >= 3
    assert {"CSETrainer", "CSEModel", "SentenceEncoder", "MatryoshkaObjective", "stream_sentences"} <= TOP
    assert "hf_cse.evaluation.evaluate_transfer" in PATHS


@pytest.mark.parametrize("name", sorted(TOP))
def test_every_name_the_readme_takes_from_hf_cse_is_exported(name: str) -> None:
    assert name in hf_cse.__all__, f"the docs use {name}; add it to hf_cse.__all__"
    assert getattr(hf_cse, name) is not None


def test_all_holds_only_importable_names_once() -> None:
    assert len(hf_cse.__all__) == len(set(hf_cse.__all__))
    namespace: dict[str, object] = {}
    exec("from hf_cse import *", namespace)
    assert set(hf_cse.__all__) <= set(namespace)


@pytest.mark.parametrize("item", sorted(SUBMODULE_IMPORTS))
def test_every_submodule_import_in_the_readme_imports(item: str) -> None:
    module, name = item.split(":")
    assert hasattr(importlib.import_module(module), name), f"from {module} import {name}"


@pytest.mark.parametrize("path", sorted(PATHS))
def test_every_hf_cse_path_in_the_readme_resolves(path: str) -> None:
    resolve(path)


def test_the_checks_catch_a_missing_name() -> None:
    """The extraction on examples of each shape, one name of them not exported."""
    top, submodules = names_imported_from_hf_cse(
        "import hf_cse as h\nfrom hf_cse import CSEModel\nfrom hf_cse.inputs.base import pad_and_concatenate\n"
        "h.NotExported(1)\n"
    )
    assert top == {"CSEModel", "NotExported"} and submodules == {"hf_cse.inputs.base:pad_and_concatenate"}
    assert called_bare_names('MatryoshkaObjective(build_objective("dclr"), dims=[64])') == {
        "MatryoshkaObjective",
        "build_objective",
    }
    assert called_bare_names("python -m hf_cse.eval --tasks stsb") == set()
    assert "MatryoshkaObjective" in HF_CSE_DEFINITIONS and "stream_sentences" in HF_CSE_DEFINITIONS
    assert not {"SentenceTransformer", "save_model", "len"} & HF_CSE_DEFINITIONS
    assert "NotExported" not in hf_cse.__all__
