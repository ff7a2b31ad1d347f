"""One check of training text (issue 55, item 3): every reader of text that trains a model refuses a control character
in one line naming where, through :func:`hf_cse.text.checks.check_text`; the walk is over the readers' own suffix
lists, so a new file type is checked without being named here. Evaluation data are read as they are (the papers' STS
test sets hold control characters)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow
import pyarrow.parquet
import pytest

from hf_cse.augment.paraphrase.tsv import read_paraphrase_table
from hf_cse.errors import UsageError
from hf_cse.evaluation.probe import load_probe_tsv
from hf_cse.evaluation.sts_data import load_sts_task
from hf_cse.training.data.corpus import CORPUS_FILE_READERS, load_sentences
from hf_cse.training.data.pairs import PAIR_FILE_SUFFIXES, read_pairs
from hf_cse.training.data.streaming import STREAMABLE_SUFFIXES, stream_sentences

BAD = "a sentence with a \x00 in it"
REFUSED = r"holds the control character U\+0000 \(character \d+ of its text\)"


def write_table(path: Path, rows: list[dict[str, str]]) -> Path:
    """``rows`` in the file type of ``path``'s suffix."""
    columns = list(rows[0])
    if path.suffix == ".txt":
        path.write_text("".join(row[columns[0]] + "\n" for row in rows), encoding="utf-8")
    elif path.suffix in (".csv", ".tsv"):
        separator = "," if path.suffix == ".csv" else "\t"
        lines = [separator.join(columns), *(separator.join(row[c] for c in columns) for row in rows)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    elif path.suffix == ".json":
        path.write_text(json.dumps(rows), encoding="utf-8")
    elif path.suffix == ".parquet":
        pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows), path)
    else:
        raise AssertionError(f"no writer for {path.suffix}: add one, so the new file type is checked")
    return path


@pytest.mark.parametrize("suffix", sorted(CORPUS_FILE_READERS))
def test_every_in_memory_corpus_reader_refuses_a_control_character(tmp_path: Path, suffix: str) -> None:
    path = write_table(tmp_path / f"corpus{suffix}", [{"text": "fine"}, {"text": BAD}])
    with pytest.raises(UsageError, match=REFUSED):
        load_sentences(str(path))


# A .tsv file streams labelled pairs only: the pairs test below streams it.
@pytest.mark.parametrize("suffix", sorted(set(STREAMABLE_SUFFIXES) & set(CORPUS_FILE_READERS)))
def test_every_streamed_corpus_reader_refuses_a_control_character(tmp_path: Path, suffix: str) -> None:
    path = write_table(tmp_path / f"corpus{suffix}", [{"text": "fine"}, {"text": BAD}])
    with pytest.raises(UsageError, match=REFUSED):
        list(stream_sentences(str(path)))


@pytest.mark.parametrize("suffix", sorted(PAIR_FILE_SUFFIXES))
@pytest.mark.parametrize("column", ["sent0", "sent1", "hard_neg"])
def test_every_pairs_reader_refuses_a_control_character_in_any_column(
    tmp_path: Path, suffix: str, column: str
) -> None:
    row = {"sent0": "an anchor", "sent1": "its positive", "hard_neg": "a hard negative"}
    path = write_table(tmp_path / f"pairs{suffix}", [row, {**row, column: BAD}])
    with pytest.raises(UsageError, match=REFUSED):
        read_pairs(str(path))
    if suffix in STREAMABLE_SUFFIXES:
        with pytest.raises(UsageError, match=REFUSED):
            list(stream_sentences(str(path)))


def test_every_streamable_file_type_is_walked_above() -> None:
    assert set(STREAMABLE_SUFFIXES) <= set(CORPUS_FILE_READERS) | set(PAIR_FILE_SUFFIXES)


def test_the_paraphrase_tsv_and_the_probe_file_refuse_a_control_character(tmp_path: Path) -> None:
    """A NUL in a paraphrase TSV trained (OssCSE's paraphrases feed the model); a probe file's sentences are encoded
    by it as well."""
    tsv = tmp_path / "paraphrases.tsv"
    tsv.write_text(f"sentence\tparaphrase\nfine\talso fine\n{BAD}\tits paraphrase\n", encoding="utf-8")
    with pytest.raises(UsageError, match=rf"^{tsv}, line 3 {REFUSED}"):
        read_paraphrase_table(tsv)
    probe = tmp_path / "probe.tsv"
    probe.write_text(f"sentence\tparaphrase\nfine\talso fine\n{BAD}\tparaphrased\n", encoding="utf-8")
    with pytest.raises(UsageError, match=rf"^Probe file '{probe}', line 3 {REFUSED}"):
        load_probe_tsv(probe)


def test_evaluation_data_keep_their_control_characters(tmp_path: Path) -> None:
    """STS12's MSRpar holds a U+0012, as SentEval ships it: the published scores were computed on that text."""
    folder = tmp_path / "STS12-en-test"
    folder.mkdir()
    for subset in ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"):
        (folder / f"STS.input.{subset}.txt").write_text("a \x12 b\tc d\n", encoding="utf-8")
        (folder / f"STS.gs.{subset}.txt").write_text("3.0\n", encoding="utf-8")
    subsets = load_sts_task("sts12", tmp_path)
    assert subsets[0].sentences1 == ["a \x12 b"]
