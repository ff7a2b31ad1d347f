"""Every cross-reference in hf_cse's docstrings and comments (``:func:`name```, ``:class:``, ``:meth:``, ``:attr:``,
``:data:``, ``:mod:``, ``:exc:``, ``:obj:``) names something that exists, so that a rename cannot leave a docstring
pointing at a function that is gone (``check_pooler_sees_sentence`` outlived its rename to
``attention_is_bidirectional``; ``hf_cse.training.saving.output_dir.write_json_atomic`` its move to ``atomic_files``).

A dotted target that starts with an importable module (``hf_cse.sources.hub_file``, ``transformers.Trainer``) must
resolve attribute by attribute from it, but for an instance attribute as its last part (``RunWriter.unfinished``,
set in ``__init__``); a relative one (``.finite_verbs``) resolves from the module's package. A bare name
(``:attr:`token_head```) resolves in the module, else must be defined somewhere in hf_cse: a module-level name, a
class member or field, or an attribute some method sets on ``self`` (Sphinx would look it up in the class whose
docstring holds it, which this test does not know).
"""

from __future__ import annotations

import importlib
import inspect
import re
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
from conftest import REPO_ROOT

ROLE = re.compile(r":(?:func|class|meth|attr|data|mod|exc|obj):`~?([^`<>]+?)`")
SELF_ASSIGNMENT = re.compile(r"self\.(\w+)\s*(?::[^=\n]+)?=")
PACKAGE = REPO_ROOT / "hf_cse"


def module_names() -> list[str]:
    return [
        ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


@cache
def defined_names() -> frozenset[str]:
    """Every name hf_cse defines: module globals, class members and fields, attributes set on ``self``."""
    names: set[str] = set()
    for name in module_names():
        module = importlib.import_module(name)
        names.update(vars(module))
        names.update(SELF_ASSIGNMENT.findall(Path(module.__file__).read_text(encoding="utf-8")))
        for value in vars(module).values():
            if inspect.isclass(value):
                names.update(dir(value))
                names.update(getattr(value, "__annotations__", {}))
    return frozenset(names)


def resolves(target: str, module: ModuleType) -> bool:
    """Whether the reference ``target`` (written in ``module``) names something that exists."""
    target = re.sub(r"\s+", "", target)  # a reference wrapped over two lines
    if target.startswith("."):
        package = module.__name__ if module.__file__.endswith("__init__.py") else module.__name__.rsplit(".", 1)[0]
        target = package + target
    parts = target.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for depth, part in enumerate(parts[split:], start=split):
            if not hasattr(found, part):
                # Only an instance attribute may be missing from its class: Class.attribute, set on self.
                return depth == len(parts) - 1 and inspect.isclass(found) and part in defined_names()
            found = getattr(found, part)
        return True
    found = module
    for part in parts:
        if not hasattr(found, part):
            return parts[-1] in defined_names() and (len(parts) == 1 or parts[-2] in defined_names())
        found = getattr(found, part)
    return True


@pytest.mark.parametrize("name", module_names())
def test_every_docstring_cross_reference_names_something_that_exists(name: str) -> None:
    module = importlib.import_module(name)
    text = Path(module.__file__).read_text(encoding="utf-8")
    unresolved = [
        f"line {text[: match.start()].count(chr(10)) + 1}: {match.group(0)}"
        for match in ROLE.finditer(text)
        if not resolves(match.group(1), module)
    ]
    assert not unresolved, unresolved


def test_the_check_finds_a_stale_reference() -> None:
    """The test above can fail: a renamed function, a moved module and a misspelled bare name do not resolve."""
    backbone = importlib.import_module("hf_cse.modeling.backbone")
    assert resolves("attention_is_bidirectional", backbone) and resolves("hf_cse.sources.hub_file", backbone)
    assert not resolves("check_pooler_sees_sentence", backbone)
    assert not resolves("hf_cse.training.saving.output_dir.write_json_atomic", backbone)
    assert not resolves("hf_cse.sources.no_such_function", backbone)
    assert resolves("hf_cse.training.saving.writer.RunWriter.unfinished", backbone)  # set in __init__
    assert not resolves("hf_cse.training.saving.writer.RunWriter.no_such_attribute", backbone)
