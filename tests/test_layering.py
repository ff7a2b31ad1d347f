"""The package's layers, read from the source with ``ast``: no import circle anywhere in ``hf_cse``, and what the
lower layers may import: the model, objectives, input providers, text and augmentation code never import the
training code, which builds on them; evaluation, the card and the Hub push never import it either, not even for a
type (the training side builds the card's summary, :mod:`hf_cse.training.record.model_card`, and hands it over), and
evaluation never imports the card; nothing but the commands' own ``python -m`` modules imports the command lines
(:mod:`hf_cse.commands`), which build on everything else; the run folder's file names (:mod:`hf_cse.run_files`) and
the version import nothing. Nor do hf_cse's subpackages import each other in a circle, even through modules that
are not themselves in one: a package is a layer, above or below another.

The import graph has an edge ``a -> b`` for every ``import`` statement of module ``a`` that names module ``b`` (``from
p import x`` names ``p.x`` when that is a module, else ``p``), at module level or inside a function: an import moved
into a function to dodge a circle is still the circle. Left out:

- imports under ``if TYPE_CHECKING:``: they never run, so they order no module's initialization (the layer checks
  count them, since a type is a dependency all the same);
- the package ``__init__`` that Python runs before a submodule: a package re-exporting its submodules would be a
  circle with each of them (grimp and import-linter count the same way).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "hf_cse"


@dataclass(frozen=True)
class ImportStatement:
    """One ``import`` statement of a module.

    Attributes:
        module: the absolute name imported (``import X`` → ``X``) or imported from (``from X import a`` → ``X``).
        names: what ``from X import`` takes (``()`` for ``import X``).
        line: its line in the file.
        in_function: inside a function (run when the function is called, not when the module is imported).
        type_checking: under ``if TYPE_CHECKING:`` (never run).
    """

    module: str
    names: tuple[str, ...]
    line: int
    in_function: bool
    type_checking: bool


def module_name(path: Path, root: Path = REPO_ROOT) -> str:
    """``root/a/b/c.py`` → ``a.b.c``; ``root/a/b/__init__.py`` → ``a.b``."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_statements(path: Path, root: Path = REPO_ROOT) -> list[ImportStatement]:
    """Every ``import`` statement of ``path`` (a module under ``root``), relative imports made absolute."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = module_name(path, root)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]

    def nodes_under(blocks: Iterator[ast.AST]) -> set[int]:
        return {id(node) for block in blocks for node in ast.walk(block)}

    type_checking = nodes_under(
        statement
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for statement in block.body
    )
    in_function = nodes_under(
        node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
    )
    statements = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found = [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            source = ".".join([*base, node.module] if node.module else base)
            found = [(source, tuple(alias.name for alias in node.names))]
        else:
            continue
        flags = {"in_function": id(node) in in_function, "type_checking": id(node) in type_checking}
        statements += [ImportStatement(name, names, node.lineno, **flags) for name, names in found]
    return statements


def all_imports(path: Path) -> set[str]:
    """The absolute module names ``path`` imports, ``if TYPE_CHECKING:`` blocks included."""
    return {statement.module for statement in import_statements(path)}


def runtime_imports(path: Path) -> set[str]:
    """The absolute module names ``path`` imports when it runs (``if TYPE_CHECKING:`` blocks left out)."""
    return {statement.module for statement in import_statements(path) if not statement.type_checking}


def imported_modules(statement: ImportStatement, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``statement`` names: ``from p import x`` names ``p.x`` when that is a module,
    else ``p``; a name that is no module of ``modules`` stands for the closest enclosing one (none: outside)."""

    def enclosing(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    named = [f"{statement.module}.{name}" for name in statement.names] or [statement.module]
    return {found for name in named if (found := enclosing(name)) is not None}


def import_graph(package_dir: Path = PACKAGE, root: Path = REPO_ROOT) -> dict[str, dict[str, ImportStatement]]:
    """The run-time import graph of the package at ``package_dir``: ``{module: {imported module: the first statement
    importing it}}`` over the package's own modules, function-level imports included, ``TYPE_CHECKING`` ones not."""
    paths = {module_name(path, root): path for path in sorted(package_dir.rglob("*.py"))}
    graph: dict[str, dict[str, ImportStatement]] = {module: {} for module in paths}
    for module, path in paths.items():
        for statement in import_statements(path, root):
            if statement.type_checking:
                continue
            for imported in sorted(imported_modules(statement, set(paths)) - {module}):
                graph[module].setdefault(imported, statement)
    return graph


def strongly_connected_components(graph: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """Tarjan's algorithm: the sets of nodes that each reach all the others of their set (a node alone is one)."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = lowlink[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                lowlink[node] = min(lowlink[node], lowlink[target])
            elif target in on_stack:
                lowlink[node] = min(lowlink[node], index[target])
        if lowlink[node] == index[node]:
            component: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def import_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One circle per group of modules that import each other: for each strongly connected component of two or more
    nodes (or a node with an edge to itself), the shortest path from its first node (sorted) back to it, as
    ``[a, b, ..., a]``. Sorted; ``[]`` when the graph has no circle."""
    cycles = []
    for component in strongly_connected_components(graph):
        start = min(component)
        if len(component) == 1 and start not in graph.get(start, ()):
            continue
        came_from: dict[str, str] = {}
        frontier = [start]
        while start not in came_from:  # breadth first within the component: the shortest way back to start
            reached = []
            for node in frontier:
                for target in sorted(graph.get(node, ())):
                    if target in component and target not in came_from:
                        came_from[target] = node
                        reached.append(target)
            frontier = reached
        path = [start]
        while len(path) == 1 or path[-1] != start:
            path.append(came_from[path[-1]])
        cycles.append(path[::-1])
    return sorted(cycles)


def describe_cycle(cycle: list[str], graph: Mapping[str, Mapping[str, ImportStatement]]) -> str:
    """``a (line 12) -> b (line 40, in a function) -> a``: where each module of ``cycle`` imports the next."""
    steps = []
    for importer, imported in zip(cycle, cycle[1:], strict=False):
        statement = graph[importer][imported]
        steps.append(f"{importer} (line {statement.line}{', in a function' if statement.in_function else ''})")
    return " -> ".join([*steps, cycle[-1]])


def package_graph(
    graph: Mapping[str, Mapping[str, ImportStatement]], package: str = "hf_cse"
) -> dict[str, dict[str, tuple[str, str, ImportStatement]]]:
    """``graph`` (:func:`import_graph`) with each module of ``package`` merged into its top part, the subpackage or
    module right under ``package`` (``hf_cse.training.saving.preemption`` → ``hf_cse.training``): ``{part: {imported
    part: (the importing module, the imported module, the statement)}}``, the first such import in sorted order.
    ``package``'s own ``__init__`` is left out, as in :func:`import_graph`: Python runs it before any of its parts."""

    def part(module: str) -> str:
        return ".".join(module.split(".")[: package.count(".") + 2])

    parts: dict[str, dict[str, tuple[str, str, ImportStatement]]] = {}
    for module in sorted(graph):
        if module == package:
            continue
        parts.setdefault(part(module), {})
        for imported, statement in sorted(graph[module].items()):
            if imported != package and part(imported) != part(module):
                parts[part(module)].setdefault(part(imported), (module, imported, statement))
    return parts


def describe_package_cycle(
    cycle: list[str], parts: Mapping[str, Mapping[str, tuple[str, str, ImportStatement]]]
) -> str:
    """``a -> b (a.x line 3 imports b.y) -> a (b.z line 7 imports a.w)``: one import closing each step of ``cycle``."""
    steps = [cycle[0]]
    for importer, imported in zip(cycle, cycle[1:], strict=False):
        module, target, statement = parts[importer][imported]
        steps.append(f"{imported} ({module} line {statement.line} imports {target})")
    return " -> ".join(steps)


def test_no_import_circle_in_the_package() -> None:
    graph = import_graph()
    assert [describe_cycle(cycle, graph) for cycle in import_cycles(graph)] == []


def test_no_import_circle_between_subpackages() -> None:
    """Each subpackage is a layer: e.g. the text metrics know nothing of the model, and the tokenizer that fills in the
    pooler's settings is the model's (:mod:`hf_cse.modeling.tokenization`)."""
    parts = package_graph(import_graph())
    assert [describe_package_cycle(cycle, parts) for cycle in import_cycles(parts)] == []


def test_package_graph_finds_a_circle_that_no_module_circle_makes(tmp_path: Path) -> None:
    """Two subpackages importing each other through different modules: no module is in a circle, the packages are;
    the package's ``__init__`` re-exporting its parts is no circle."""
    for folder in ("pkg", "pkg/low", "pkg/high"):
        (tmp_path / folder).mkdir()
    files = {
        "pkg/__init__.py": "from .high import top\n",
        "pkg/low/__init__.py": "",
        "pkg/low/base.py": "BASE = 1\n",
        "pkg/low/helper.py": "from ..high.top import TOP\n",
        "pkg/high/__init__.py": "from . import top\n",
        "pkg/high/top.py": "from ..low.base import BASE\n\nTOP = BASE\n",
        "pkg/leaf.py": "from . import low\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    graph = import_graph(tmp_path / "pkg", tmp_path)
    assert import_cycles(graph) == []
    parts = package_graph(graph, "pkg")
    assert {part: set(imported) for part, imported in parts.items()} == {
        "pkg.high": {"pkg.low"},
        "pkg.leaf": {"pkg.low"},
        "pkg.low": {"pkg.high"},
    }
    cycles = import_cycles(parts)
    assert cycles == [["pkg.high", "pkg.low", "pkg.high"]]
    assert describe_package_cycle(cycles[0], parts) == (
        "pkg.high -> pkg.low (pkg.high.top line 1 imports pkg.low.base) -> pkg.high (pkg.low.helper line 1 imports "
        "pkg.high.top)"
    )
    # Without the helper's upward import the packages are layered.
    (tmp_path / "pkg/low/helper.py").write_text("from .base import BASE\n", encoding="utf-8")
    assert import_cycles(package_graph(import_graph(tmp_path / "pkg", tmp_path), "pkg")) == []


def test_cycle_finder_on_a_small_graph() -> None:
    """A 3-circle with a way in, a self-import, two separate 2-circles, and a graph without any circle."""
    graph = {"a": {"b"}, "b": {"c", "x"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "p": {"q"}, "q": {"p"}, "x": set()}
    assert import_cycles(graph) == [["a", "b", "c", "a"], ["e", "e"], ["p", "q", "p"]]
    assert import_cycles({"a": {"b", "c"}, "b": {"c"}, "c": set(), "d": {"a"}}) == []
    # Of the two ways around, the shorter one is shown.
    assert import_cycles({"a": {"b", "c"}, "b": {"c"}, "c": {"a"}}) == [["a", "c", "a"]]


def test_import_graph_sees_function_level_imports_and_skips_type_checking(tmp_path: Path) -> None:
    """A circle closed by an import inside a function is found and described; one closed only under
    ``TYPE_CHECKING`` is not a circle."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from .a import A\n", encoding="utf-8")
    (package / "a.py").write_text("from . import b\n\nA = 1\n", encoding="utf-8")
    (package / "b.py").write_text("def f():\n    from .a import A\n\n    return A\n", encoding="utf-8")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\n\nfrom .b import f\n\nif TYPE_CHECKING:\n    from . import c\n"
        "    from .d import D\n",
        encoding="utf-8",
    )
    (package / "d.py").write_text("from .c import f\n\nD = f\n", encoding="utf-8")
    graph = import_graph(package, tmp_path)
    assert {module: set(imported) for module, imported in graph.items()} == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.a"},
        "pkg.c": {"pkg.b"},
        "pkg.d": {"pkg.c"},
    }
    cycles = import_cycles(graph)
    assert cycles == [["pkg.a", "pkg.b", "pkg.a"]]
    assert describe_cycle(cycles[0], graph) == "pkg.a (line 1) -> pkg.b (line 2, in a function) -> pkg.a"


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
    """The check above sees what it must: relative imports, in the package and one and two levels up, and absolute
    ones; not type-only imports."""
    render = runtime_imports(PACKAGE / "export" / "model_card" / "render.py")
    assert {"hf_cse.export.model_card.templating", "hf_cse.export.sentence_transformers_files"} <= render
    assert {"hf_cse.atomic_files", "huggingface_hub"} <= render
    assert "hf_cse.training.trainer" not in runtime_imports(PACKAGE / "training" / "record" / "model_card.py")


@pytest.mark.parametrize(
    ("layer", "above"),
    [("evaluation", ("hf_cse.training", "hf_cse.export")), ("export", ("hf_cse.training",))],
)
def test_evaluation_the_card_and_the_push_never_import_the_layers_above(layer: str, above: tuple[str, ...]) -> None:
    offenders = {
        str(path.relative_to(REPO_ROOT)): sorted(
            name
            for name in all_imports(path)
            if any(name == package or name.startswith(f"{package}.") for package in above)
        )
        for path in sorted((PACKAGE / layer).rglob("*.py"))
    }
    assert {path: names for path, names in offenders.items() if names} == {}


COMMAND_MODULES = ("download", "eval", "mine", "push", "report", "sweep", "transfer")
"""The ``python -m hf_cse.NAME`` modules: each hands over to ``hf_cse.commands.NAME``."""


def test_only_the_commands_import_the_command_lines() -> None:
    """The training code (``run_unsup.py``'s parser, the "To resume" line) and everything below it never import
    :mod:`hf_cse.commands`, not even for a type: what both need (the one-line error parser, the redaction of
    secrets) lives below, in :mod:`hf_cse.errors` and :mod:`hf_cse.redaction`."""
    commands = PACKAGE / "commands"
    entry_points = {PACKAGE / f"{name}.py" for name in COMMAND_MODULES}
    offenders = {
        str(path.relative_to(REPO_ROOT)): sorted(
            name for name in all_imports(path) if name == "hf_cse.commands" or name.startswith("hf_cse.commands.")
        )
        for path in sorted(PACKAGE.rglob("*.py"))
        if commands not in path.parents and path not in entry_points
    }
    assert {path: names for path, names in offenders.items() if names} == {}
    # The entry points are the exception the rule makes, and each still is one.
    assert all(f"hf_cse.commands.{name}" in all_imports(PACKAGE / f"{name}.py") for name in COMMAND_MODULES)


@pytest.mark.parametrize("module", ["run_files", "version"])
def test_bottom_modules_import_nothing(module: str) -> None:
    """Any module may import these: they must not import back."""
    statements = import_statements(PACKAGE / f"{module}.py")
    assert [statement.module for statement in statements if statement.module != "__future__"] == []


def test_the_redaction_imports_only_the_standard_library() -> None:
    """The training code's "To resume" line and the commands redact with it (:mod:`hf_cse.redaction`): it must not
    import back."""
    imported = {statement.module.split(".")[0] for statement in import_statements(PACKAGE / "redaction.py")}
    assert imported - set(sys.stdlib_module_names) == set()


def test_all_imports_include_type_checking_blocks() -> None:
    """The layer check above sees type-only imports: the trainer's card module names the trainer for a type only."""
    card = PACKAGE / "training" / "record" / "model_card.py"
    assert "hf_cse.training.trainer" in all_imports(card) - runtime_imports(card)


def test_only_the_integration_imports_sentence_transformers() -> None:
    """sentence-transformers stays optional: no hf_cse module outside hf_cse.integrations imports it (read from the
    sources, function-level imports included), and none imports hf_cse.integrations."""

    def optional(name: str) -> bool:
        return name.split(".")[0] == "sentence_transformers" or name.startswith("hf_cse.integrations")

    importers = {
        str(path.relative_to(REPO_ROOT)): sorted(filter(optional, runtime_imports(path)))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.parent.name != "integrations"
    }
    assert {path: names for path, names in importers.items() if names} == {}
    assert runtime_imports(PACKAGE / "integrations" / "__init__.py") == {"hf_cse.integrations.sentence_transformers"}
