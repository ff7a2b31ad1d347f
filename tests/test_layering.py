"""The package's layers: what the model, objectives, input providers, text and augmentation code may import at
run time (never the training code, which builds on them)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "hf_cse"


def runtime_imports(path: Path) -> set[str]:
    """The absolute module names ``path`` imports when it runs (``if TYPE_CHECKING:`` blocks left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts[:-1])
    type_checking = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for statement in block.body
        for node in ast.walk(statement)
    }
    names = set()
    for node in ast.walk(tree):
        if id(node) in type_checking:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            names.add(".".join([*base, node.module] if node.module else base))
    return names


@pytest.mark.parametrize("layer", ["objectives", "inputs", "modeling", "text", "augment"])
def test_lower_layers_do_not_import_the_training_code(layer: str) -> None:
    offenders = {
        str(path.relative_to(REPO_ROOT)): sorted(
            name for name in runtime_imports(path) if name.startswith("hf_cse.training")
        )
        for path in sorted((PACKAGE / layer).rglob("*.py"))
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_runtime_imports_resolve_relative_imports_and_skip_type_checking_blocks() -> None:
    """The check above sees what it must: relative imports, one and two levels up; not type-only imports."""
    trainer = runtime_imports(PACKAGE / "training" / "trainer.py")
    assert {"hf_cse.training.data", "hf_cse.distributed", "torch"} <= trainer
    assert "hf_cse.training.training_args" not in runtime_imports(PACKAGE / "inputs" / "base.py")
