"""The command-line reference (docs/reference/, docs/api/trainer.md's field table) is what the parsers give:
every flag of every command has its row, and a page the parsers no longer give fails ``--check``."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest
import transformers
from common.commands import run_script
from conftest import REPO_ROOT, run_unsup
from transformers import TrainingArguments

GENERATOR = REPO_ROOT / "docs" / "reference_generator.py"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference_generator", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pages_are_what_the_parsers_give() -> None:
    # A fresh process: help texts list the registered parts, which a test of this process may have added to.
    result = run_script([str(GENERATOR), "--check"])
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]


def parsers(generator: ModuleType) -> dict[str, tuple[argparse.ArgumentParser, list[Path]]]:
    """Each command's parser and the pages its flags are on."""
    reference = generator.REFERENCE_DIR
    commands = {
        name: (importlib.import_module(f"hf_cse.commands.{name}").build_parser(), [reference / f"{name}.md"])
        for name in generator.COMMANDS
    }
    run_pages = [reference / "run_unsup.md", reference / "trainer-flags.md"]
    return {"run_unsup": (run_unsup.build_parser(), run_pages), **commands}


def test_every_flag_of_every_parser_has_its_row(generator: ModuleType) -> None:
    trainer_flags = {field.name for field in dataclasses.fields(TrainingArguments)}
    seen = 0
    for name, (parser, pages) in parsers(generator).items():
        texts = [page.read_text(encoding="utf-8") for page in pages]
        # Under another transformers than the pages were generated with (.ci/newest_versions.sh), its flags differ.
        check_trainer_flags = all(generator.generated_with_installed_transformers(text) for text in texts)
        text = "".join(texts)
        for action in generator.documented_actions(parser):
            if action.dest in trainer_flags and not check_trainer_flags:
                continue
            flag = generator.canonical_option(action)
            assert f"| `{flag}` |" in text, f"{name}: {flag} has no row in {', '.join(p.name for p in pages)}"
            seen += 1
    # The flags issue 56 found on no page, among them.
    run_text = (generator.REFERENCE_DIR / "run_unsup.md").read_text(encoding="utf-8")
    for flag in ("--normalize_embeddings", "--inference_max_seq_length", "--max_train_samples"):
        assert f"| `{flag}` |" in run_text
    assert seen > 200  # run_unsup.py's Trainer flags alone are over a hundred


def test_check_names_a_page_that_lost_a_row(
    generator: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    transformers_version = transformers.__version__
    reference = shutil.copytree(generator.REFERENCE_DIR, tmp_path / "reference")
    api_page = shutil.copy(generator.TRAINER_API_PAGE, tmp_path / "trainer.md")
    monkeypatch.setattr(generator, "REFERENCE_DIR", reference)
    monkeypatch.setattr(generator, "TRAINER_API_PAGE", Path(api_page))
    page = reference / "transfer.md"
    lines = page.read_text(encoding="utf-8").splitlines(keepends=True)
    page.write_text("".join(line for line in lines if "| `--kfold` |" not in line), encoding="utf-8")
    assert generator.main(["--check"]) == 1
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Not what the parsers give")]
    assert str(page) in line and "trainer-flags.md" not in line
    # Under another transformers, its pages are not compared (their flags are that release's), the others are.
    monkeypatch.setattr(transformers, "__version__", "0.0.0.other")
    assert generator.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert f"{reference / 'trainer-flags.md'}: generated for transformers {transformers_version}" in out
    assert "transformers 0.0.0.other is installed: not compared." in out


@dataclasses.dataclass
class _Base:
    inherited: int = 0


@dataclasses.dataclass
class _Arguments(_Base):
    """Arguments of a test.

    First group:
        alpha: the first; it goes on
            on a second line.
        beta, gamma,
        delta: three names, one text.

    Second group (with a colon: inside):
        epsilon: the last.

    A closing paragraph.
    """

    alpha: int = 1
    beta: str | None = None
    gamma: str | None = None
    delta: bool = False
    epsilon: list[int] = dataclasses.field(default_factory=lambda: [4])


def test_the_field_table_follows_the_docstring_groups_and_refuses_an_undescribed_field(generator: ModuleType) -> None:
    groups, closing = generator.docstring_groups(_Arguments)
    assert groups == [
        (
            "First group",
            [
                (["alpha"], "the first; it goes on on a second line."),
                (["beta", "gamma", "delta"], "three names, one text."),
            ],
        ),
        ("Second group (with a colon: inside)", [(["epsilon"], "the last.")]),
    ]
    assert closing == "A closing paragraph."
    table = generator.fields_table(_Arguments, _Base)
    assert "| `alpha` | `int` | `1` | the first; it goes on on a second line. |" in table
    assert "| `beta`, `gamma`, `delta` | `str | None` / `bool` | `None` / `False` | three names, one text. |" in table
    assert "| `epsilon` | `list[int]` | `[4]` | the last. |" in table and "inherited" not in table

    @dataclasses.dataclass
    class Undescribed(_Arguments):
        zeta: int = 0

    Undescribed.__doc__ = _Arguments.__doc__
    with pytest.raises(ValueError, match=r"fields not described \['zeta'\], names that are no field \[\]"):
        generator.fields_table(Undescribed, _Base)
