"""OssCSE's paraphrase TSV (``negations_and_paraphrases``' ``paraphrase_source``) is checked row by row before
anything loads, not only when it is read after the model: a bad row is one line naming the setting, the file, the
line and the form of a row, exit 2. A run parses the file once all the same: the reader takes the table the check
kept, unless the file changed in between.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common.commands import run_unsup_before_any_load
from conftest import SENTENCES, write_config, write_train_file

from hf_cse import CSETrainingArguments
from hf_cse.augment.paraphrase import build_paraphrase_source, tsv
from hf_cse.errors import UsageError
from hf_cse.training.argument_checks import check_input_paths

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


def test_the_checked_table_is_taken_by_the_reader_so_a_run_parses_the_file_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    reads = count_reads(monkeypatch)
    path = tmp_path / "paraphrases.tsv"
    path.write_text("a man plays a guitar\tsomeone plays the guitar\n", encoding="utf-8")
    given = {"negations_and_paraphrases": {"paraphrase_source": f"tsv:{path}"}}
    check_input_paths(CSETrainingArguments(str(tmp_path / "out"), input_kwargs=given, use_cpu=True))
    source = build_paraphrase_source(f"tsv:{path}", mer_filter=None)  # as the provider's prepare() does
    assert source.paraphrases(["a man plays a guitar"]) == ["someone plays the guitar"]
    assert reads == [path]
    # Taken, not shared: a second reader parses the file itself.
    assert build_paraphrase_source(f"tsv:{path}", mer_filter=None).table == source.table
    assert reads == [path, path]


def test_a_file_changed_after_its_check_is_read_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    reads = count_reads(monkeypatch)
    path = tmp_path / "paraphrases.tsv"
    path.write_text("a man plays a guitar\tsomeone plays the guitar\n", encoding="utf-8")
    tsv.check_paraphrase_tsv(path)
    path.write_text("a man plays a guitar\ta person plays a guitar\nbad row\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"paraphrases\.tsv, line 2: expected 2 tab-separated fields"):
        build_paraphrase_source(f"tsv:{path}", mer_filter=None)
    assert reads == [path, path]


def test_check_inputs_names_the_setting_as_given(tmp_path: Path) -> None:
    path = tmp_path / "paraphrases.tsv"
    path.write_text("sentence\tparaphrase\n", encoding="utf-8")
    given = {"negations_and_paraphrases": {"paraphrase_source": str(path)}}
    with pytest.raises(UsageError, match=r"^input_kwargs negations_and_paraphrases\.paraphrase_source '.*': Paraphr"):
        check_input_paths(CSETrainingArguments(str(tmp_path / "out"), input_kwargs=given, use_cpu=True))
