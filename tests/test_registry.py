"""The registries: names are checked, citations live on the parts, and a user's objective defined outside the package
trains by name through ``run_unsup.py --import_module``. That every registered part keeps the contract the trainer
relies on is checked part by part in tests/every_part/test_contracts.py."""

from __future__ import annotations

import json
import math
import re
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import SENTENCES, run_unsup, write_config, write_train_file

from hf_cse import ContrastiveObjective, CSETrainingArguments, register_objective
from hf_cse.commands.cli import import_user_module
from hf_cse.errors import UsageError
from hf_cse.registry import (
    LOSS_FORMS,
    OBJECTIVES,
    VIEW_AUGMENTATIONS,
    Registry,
)


def test_citations_live_on_the_parts() -> None:
    dclr_focal = OBJECTIVES.build("dclr", loss_form="focal")
    assert dclr_focal.citations == (OBJECTIVES["dclr"].citation, LOSS_FORMS["focal"].citation)
    assert OBJECTIVES.build("focal_infonce").citations == (LOSS_FORMS["focal"].citation,)  # borrowed once
    assert VIEW_AUGMENTATIONS["dropout"].citations == () and len(VIEW_AUGMENTATIONS["span_cutoff"].citations) == 2


def test_unknown_names_and_taken_names_are_one_line_errors() -> None:
    registry: Registry = Registry("widget", "widgets")

    @registry.register("round")
    class Round:
        def __init__(self, size: int = 1) -> None:
            self.size = size

    with pytest.raises(UsageError, match=re.escape("Unknown widget 'square'; valid widgets are: round.")):
        registry.build("square")
    with pytest.raises(UsageError, match=re.escape("Widget 'round' got unknown hyper-parameters ['colour']")):
        registry.build("round", colour="red")
    with pytest.raises(UsageError, match="name must be a Python identifier, got 'two words'"):
        registry.register("two words")
    with pytest.raises(UsageError, match="The widget name 'round' is taken by .*Round; register yours"):

        @registry.register("round")
        class Other:
            pass

    assert registry.build("round", size=3).size == 3 and list(registry) == ["round"]
    with pytest.raises(UsageError, match=re.escape("Expected a registered widget's name, got a Round object; valid")):
        registry.check(Round())  # a part's repr may run over many lines: its type is named instead


def test_an_objective_object_in_the_arguments_is_sent_to_the_trainer_in_one_line(tmp_path: Path) -> None:
    from hf_cse import CSETrainingArguments
    from hf_cse.objectives.matryoshka import MatryoshkaObjective

    for objective in (OBJECTIVES.build("dcl"), MatryoshkaObjective(OBJECTIVES.build("simcse"), dims=[4])):
        with pytest.raises(UsageError) as error:
            CSETrainingArguments(output_dir=str(tmp_path), use_cpu=True, objective=objective)
        assert str(error.value) == (
            f"objective takes a registered objective's name, got a {type(objective).__name__} object: pass the "
            "object as CSETrainer(objective=...), which uses it instead of the arguments' objective."
        )


USER_MODULE = '''
"""A loss-form objective of a user's own, outside hf_cse: one file."""

import torch

from hf_cse import ContrastiveObjective, FormOutput, LossForm, register_loss_form, register_objective


@register_loss_form("{name}_hinge")
class HingeForm(LossForm):
    """Mean hinge over kept negatives: relu(s_n - s_p + margin) / t."""

    citation = "@misc{{user2026hinge, title = {{A hinge of our own}}}}"

    def forward(self, positive, negative, keep):
        hinge = torch.relu(negative - positive[:, :1] + 0.2) / self.temperature
        return FormOutput((hinge * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1))


@register_objective("{name}")
class HingeObjective(ContrastiveObjective):
    def __init__(self, temperature: float = 0.05) -> None:
        super().__init__(HingeForm(temperature))
'''


def test_a_users_objective_trains_by_name_from_run_unsup(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"user_hinge_{tmp_path.name.replace('-', '_')}"  # a fresh name: registrations last for the process
    (tmp_path / f"{name}_module.py").write_text(textwrap.dedent(USER_MODULE.format(name=name)), encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # --import_module finds modules in the working directory, like python -m
    monkeypatch.setattr(sys, "path", list(sys.path))  # undo the working directory it adds
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), objective=name)
    with pytest.raises(UsageError, match=f"Unknown objective '{name}'"):
        run_unsup.main(["--config", str(config)])
    metrics = run_unsup.main(["--config", str(config), "--import_module", f"{name}_module"])
    assert math.isfinite(metrics["train_loss"])
    state = json.loads((tmp_path / "out" / "trainer_state.json").read_text())
    logged = [entry[f"loss_{name}"] for entry in state["log_history"] if f"loss_{name}" in entry]
    assert len(logged) == 2 and all(math.isfinite(value) for value in logged)
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert f"`{name}`" in card and "user2026hinge" in card  # the objective and its loss form's paper


def test_a_missing_user_module_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(
        UsageError, match="--import_module 'no_such_module_here': No module named 'no_such_module_here'"
    ):
        run_unsup.main(["--import_module", "no_such_module_here"])


def test_a_user_file_imports_by_its_path_and_a_bad_one_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--import_module`` takes the path of a ``.py`` file too (the docs' examples are files of examples/python/,
    and their commands run from the repository root), imported under its own name, as ``PYTHONPATH=FOLDER`` would."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "path_imported_part.py").write_text("LOADED = True\n", encoding="utf-8")
    (folder / "json.py").write_text("", encoding="utf-8")
    (folder / "notes.txt").write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "path_imported_part", raising=False)
    import_user_module("parts/path_imported_part.py")
    assert sys.modules.pop("path_imported_part").LOADED is True
    for path, said in [
        ("parts/missing.py", "no such file; give a module name importable from the working directory"),
        ("parts/notes.txt", "a file to import is a .py file whose name is a Python identifier"),
        ("parts/json.py", "the module name 'json' is already taken by "),
    ]:
        with pytest.raises(UsageError, match=f"^--import_module '{path}': {said}"):
            import_user_module(path)


def test_registering_a_builtin_name_again_is_refused() -> None:
    with pytest.raises(
        UsageError, match="The objective name 'simcse' is taken by hf_cse.objectives.simcse.SimCSELoss"
    ):

        @register_objective("simcse")
        class MySimCSE(ContrastiveObjective):
            pass


def test_a_users_objective_without_a_temperature_builds_from_run_arguments(tmp_path: Path) -> None:
    """Every run has a temperature (default 0.05); an objective whose constructor takes none gets none, where it used
    to fail with "got unknown hyper-parameters ['temperature']", a setting the user never gave. A temperature set
    for it is one line saying it has none."""
    from hf_cse.objectives import build_objective
    from hf_cse.objectives.simcse import InfoNCEForm

    name = f"fixed_temperature_{tmp_path.name.replace('-', '_')}"

    @register_objective(name)
    class FixedTemperature(ContrastiveObjective):
        def __init__(self, margin: float = 0.0) -> None:
            super().__init__(InfoNCEForm(0.1))
            self.margin = margin

    arguments = CSETrainingArguments(str(tmp_path), objective=name, objective_kwargs={"margin": 0.5})
    assert arguments.objective_hparams() == {"margin": 0.5}
    assert build_objective(name, **arguments.objective_hparams()).margin == 0.5
    with pytest.raises(UsageError, match=f"^Objective '{name}' has no temperature; got temperature 0.2: leave"):
        CSETrainingArguments(str(tmp_path), objective=name, temperature=0.2).objective_hparams()
