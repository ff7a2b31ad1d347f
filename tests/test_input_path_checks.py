"""The inputs a run reads only once its model has loaded, checked before anything loads: DCLR's complementary model
(``--input_kwargs '{"complementary_similarities": {"model_name_or_path": ...}}'``) and OssCSE's paraphrase TSV
(``negations_and_paraphrases``' ``paraphrase_source``). Each bad value is one line naming the setting as given, the
value and what it takes, exit 2, with the corpus, the dev sets and the base model (a valid one) never read.
tests/test_argument_checks.py checks the numbers and the other paths.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from common.commands import run_unsup_before_any_load
from conftest import SENTENCES, run_unsup, write_config, write_train_file

from hf_cse.errors import echo

COMPLEMENTARY = "input_kwargs complementary_similarities.model_name_or_path"
PARAPHRASES = "input_kwargs negations_and_paraphrases.paraphrase_source"
RUNS = {COMPLEMENTARY: {"objective": "dclr"}, PARAPHRASES: {"objective": "osscse", "pooler": "mask"}}
"""Per setting (as its messages name it): the run that reads it."""


def given(setting: str, value: str) -> list[str]:
    """The ``run_unsup.py`` arguments that give ``setting`` (a key of :data:`RUNS`) the ``value``."""
    provider, name = setting.removeprefix("input_kwargs ").split(".")
    return ["--input_kwargs", json.dumps({provider: {name: value}})]


def bad_complementary_model(case: str, tmp_path: Path) -> tuple[str, str]:
    """A complementary ``model_name_or_path`` that names no model, and what the error says of it."""
    if case == "absent_folder":
        return str(tmp_path / "no_such_model"), "does not exist."
    if case == "file":
        (tmp_path / "model.bin").write_bytes(b"weights")
        return str(tmp_path / "model.bin"), "is a file; expected a model folder"
    if case == "hub_id_not_cached":  # offline (conftest): what a typo of a local folder's name looks like too
        return "outputs/no-such-run", "is not in the local cache"
    return "pip:no_such_hf_cse_model_package", "needs the Python package 'no_such_hf_cse_model_package'"


def bad_paraphrase_source(case: str, tmp_path: Path) -> tuple[str, str]:
    """A value of ``paraphrase_source`` that names no TSV file, and what the error says of it."""
    if case == "absent_tsv":
        return f"tsv:{tmp_path / 'missing.tsv'}", "is absent"
    if case == "absent_path":
        return str(tmp_path / "missing.tsv"), "is absent"
    if case == "folder":
        return f"tsv:{tmp_path}", "is a folder"
    if case == "fifo":
        os.mkfifo(tmp_path / "paraphrases.tsv")
        return f"tsv:{tmp_path / 'paraphrases.tsv'}", "is a FIFO"
    return "marian:de", "'marian:de' is absent"  # no form of the flag's


@pytest.mark.parametrize(
    ("flag", "case"),
    [
        *((COMPLEMENTARY, case) for case in ("absent_folder", "file", "hub_id_not_cached", "pip_module_missing")),
        *((PARAPHRASES, case) for case in ("absent_tsv", "absent_path", "folder", "fifo", "unknown_form")),
    ],
)
def test_a_bad_late_input_is_one_line_and_exit_2_before_anything_loads(
    flag: str,
    case: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    tiny_encoder_dir: Path,
    tmp_path: Path,
) -> None:
    value, problem = (bad_complementary_model if flag == COMPLEMENTARY else bad_paraphrase_source)(case, tmp_path)
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), **RUNS[flag])
    code, line = run_unsup_before_any_load(monkeypatch, capsys, ["--config", str(config), *given(flag, value)])
    assert code == 2 and line.startswith(f"run_unsup.py: error: {flag} {echo(value)} is not valid: "), line
    assert problem in line and f"{flag} takes " in line, line
    if flag == PARAPHRASES:
        assert "tsv:PATH (or PATH) of a sentence<TAB>paraphrase file, or back-translation:LANG[,LANG...]" in line
    assert not (tmp_path / "out").exists()


class FirstLoad(Exception):
    """Raised by the first load of a run whose arguments passed every check."""


def first_load(*args: object, **kwargs: object) -> None:
    raise FirstLoad


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        (COMPLEMENTARY, "{model}"),
        (PARAPHRASES, "tsv:{tsv}"),
        (PARAPHRASES, "{tsv}"),
        (PARAPHRASES, "back-translation:de,ru"),  # names models: checked as they load
    ],
)
def test_inputs_that_name_what_they_should_reach_the_first_load(
    flag: str, value: str, monkeypatch: pytest.MonkeyPatch, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    tsv = tmp_path / "paraphrases.tsv"
    tsv.write_text("a man plays a guitar\tsomeone plays the guitar\n", encoding="utf-8")
    monkeypatch.setattr(run_unsup, "load_training_dev_sets", first_load)
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), **RUNS[flag])
    with pytest.raises(FirstLoad):
        run_unsup.main(["--config", str(config), *given(flag, value.format(model=tiny_encoder_dir, tsv=tsv))])
