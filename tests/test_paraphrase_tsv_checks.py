"""OssCSE's paraphrase TSV (``negations_and_paraphrases``' ``paraphrase_source``) is checked row by row before
anything loads, not only when it is read after the model: a bad row is one line naming the setting, the file, the
line and the form of a row, exit 2. A run parses the file once all the same: the check's table goes to the provider
through the settings the check returns, and nothing else holds it. A run whose objective does not build the provider
never opens the file: the setting is refused, in one line naming the provider and those the run builds.
"""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path

import pytest
from common.commands import run_unsup_before_any_load
from conftest import SENTENCES, run_unsup, write_config, write_train_file

from hf_cse import CSETrainer, CSETrainingArguments
from hf_cse.augment.paraphrase import TSVParaphrases, tsv
from hf_cse.errors import UsageError
from hf_cse.training.arguments.checks import check_input_paths

ROW_FORM = "sentence<TAB>paraphrase, both non-empty"


@pytest.mark.parametrize(
    ("content", "line", "problem"),
    [
        (b"sentence\tparaphrase\na man plays\tsomeone plays\njust one field\n", 3, "expected 2 tab-separated fields"),
        (b"a man plays\tsomeone plays\tand a third\n", 1, "expected 2 tab-separated fields"),
        (b"a man plays\tsomeone plays\n\n \tno sentence\n", 3, "the sentence field is empty"),
        (b"a man plays\tsomeone plays\nca\xe7a\tcasa\n", 2, "not valid UTF-8"),
    ],
)
def test_a_bad_row_is_one_line_and_exit_2_before_anything_loads(
    content: bytes,
    line: int,
    problem: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    tiny_encoder_dir: Path,
    tmp_path: Path,
) -> None:
    path = tmp_path / "paraphrases.tsv"
    path.write_bytes(content)
    train_file = write_train_file(tmp_path, SENTENCES)
    config = write_config(tmp_path, tiny_encoder_dir, train_file, objective="osscse", pooler="mask")
    input_kwargs = {"negations_and_paraphrases": {"paraphrase_source": f"tsv:{path}", "negation_backend": "rules"}}
    argv = ["--config", str(config), "--input_kwargs", json.dumps(input_kwargs)]
    code, message = run_unsup_before_any_load(monkeypatch, capsys, argv)
    assert code == 2
    assert message.startswith(
        f"run_unsup.py: error: input_kwargs negations_and_paraphrases.paraphrase_source 'tsv:{path}': {path}, line "
        f"{line}: {problem}"
    ), message
    assert ROW_FORM in message, message
    assert not (tmp_path / "out").exists()


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths :func:`~hf_cse.augment.paraphrase.tsv.read_paraphrase_table` parses from now on, in order."""
    reads: list[Path] = []
    read = tsv.read_paraphrase_table

    def counted(path: str | Path) -> dict[str, list[str]]:
        reads.append(Path(path))
        return read(path)

    monkeypatch.setattr(tsv, "read_paraphrase_table", counted)
    return reads


def write_tsv(tmp_path: Path, content: str = "a man is playing a guitar\ta man is playing the guitar\n") -> Path:
    path = tmp_path / "paraphrases.tsv"
    path.write_text(content, encoding="utf-8")
    return path


class Prepared(Exception):
    """Raised by ``CSETrainer.train``: the trainer was built, its providers' columns prepared."""


def test_a_run_parses_its_tsv_once(monkeypatch: pytest.MonkeyPatch, tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """Checked before the model loads and read by the provider after: one parse, whose paraphrase the corpus got."""
    reads = count_reads(monkeypatch)
    path = write_tsv(tmp_path)
    has_pair: list[bool] = []

    def stop(trainer: CSETrainer, **kwargs: object) -> None:
        has_pair.extend(trainer.train_dataset["has_pair"])
        raise Prepared

    monkeypatch.setattr(CSETrainer, "train", stop)
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), objective="osscse")
    input_kwargs = {"negations_and_paraphrases": {"paraphrase_source": f"tsv:{path}", "negation_backend": "rules"}}
    with pytest.raises(Prepared):
        run_unsup.main(["--config", str(config), "--pooler", "mask", "--input_kwargs", json.dumps(input_kwargs)])
    assert reads == [path]
    # The provider prepared the corpus from the checked table: the sentence it paraphrases has its pair.
    assert has_pair[SENTENCES.index("a man is playing a guitar")]


def test_the_checked_table_is_held_by_the_returned_settings_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No module keeps the table: once the settings the check returned (or the source their provider took) are
    dropped, it is freed; and a source built apart from the check parses the file itself."""

    class Table(dict):  # a dict that a weak reference can follow
        pass

    tables: list[weakref.ref] = []
    read = tsv.read_paraphrase_table

    def traced(path: str | Path) -> dict[str, list[str]]:
        table = Table(read(path))
        tables.append(weakref.ref(table))
        return table

    monkeypatch.setattr(tsv, "read_paraphrase_table", traced)
    path = write_tsv(tmp_path)
    given = {"negations_and_paraphrases": {"paraphrase_source": f"tsv:{path}"}}
    args = CSETrainingArguments(str(tmp_path / "out"), objective="osscse", input_kwargs=given, use_cpu=True)

    settings = check_input_paths(args)["negations_and_paraphrases"]
    assert len(tables) == 1 and tables[0]() is not None
    del settings
    gc.collect()
    assert tables[0]() is None

    settings = check_input_paths(args)["negations_and_paraphrases"]
    source = settings.take_paraphrase_source()
    assert isinstance(source, TSVParaphrases) and source.table is tables[1]()
    assert settings.take_paraphrase_source() == f"tsv:{path}"  # handed over once: the settings hold it no more
    assert source.paraphrases(["a man is playing a guitar"]) == ["a man is playing the guitar"]
    del source
    gc.collect()
    assert tables[1]() is None

    TSVParaphrases(path)  # built apart from any check: it reads the file
    assert len(tables) == 3


def test_a_tsv_for_a_provider_the_run_does_not_build_is_refused_unread(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    tiny_encoder_dir: Path,
    tmp_path: Path,
) -> None:
    """SimCSE builds no negations_and_paraphrases: its paraphrase_source, a malformed file here, is one line naming
    the provider and those the run builds, before anything loads, and the file is never parsed."""
    reads = count_reads(monkeypatch)
    path = write_tsv(tmp_path, "only one field\n")
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), objective="simcse")
    input_kwargs = {"negations_and_paraphrases": {"paraphrase_source": f"tsv:{path}"}}
    argv = ["--config", str(config), "--input_kwargs", json.dumps(input_kwargs)]
    code, message = run_unsup_before_any_load(monkeypatch, capsys, argv)
    assert code == 2
    assert message.startswith("run_unsup.py: error: input_kwargs sets 'negations_and_paraphrases', which this run "), (
        message
    )
    assert message.endswith(
        "which this run does not use: its input providers (of its objective, auxiliary terms, views and "
        "mask_duplicates) are 'augmented_views'; drop the setting or change the objective."
    ), message
    assert reads == []
    assert not (tmp_path / "out").exists()


def test_check_inputs_names_the_setting_as_given(tmp_path: Path) -> None:
    path = write_tsv(tmp_path, "sentence\tparaphrase\n")
    given = {"negations_and_paraphrases": {"paraphrase_source": str(path)}}
    with pytest.raises(UsageError, match=r"^input_kwargs negations_and_paraphrases\.paraphrase_source '.*': Paraphr"):
        check_input_paths(
            CSETrainingArguments(str(tmp_path / "out"), objective="osscse", input_kwargs=given, use_cpu=True)
        )
