"""Labelled pairs as training data (issue 52): SimCSE's and sentence-transformers' layouts in every file type, a
dataset given to the trainer, one-line errors for a broken row or half a layout, one sentence a row unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow
import pyarrow.parquet
import pytest
from datasets import Dataset

from hf_cse.errors import UsageError
from hf_cse.training.data.corpus import load_sentences
from hf_cse.training.data.pair_columns import PairColumns, num_hard_negatives, pair_columns
from hf_cse.training.data.pairs import pairs_dataset, read_pairs, train_file_pairs
from hf_cse.training.data.streaming import stream_sentences

ROWS = [
    {"sent0": "A man plays a guitar.", "sent1": "Someone plays music.", "hard_neg": "Nobody plays anything."},
    {"sent0": "A dog runs, fast.", "sent1": "An animal is moving.", "hard_neg": "The dog sleeps."},
    {"sent0": 'She said "hi".', "sent1": "She greeted someone.", "hard_neg": "She stayed silent."},
]
TRAINING = {
    "text": [row["sent0"] for row in ROWS],
    "positive": [row["sent1"] for row in ROWS],
    "negative_1": [row["hard_neg"] for row in ROWS],
}


def write(path: Path, rows: list[dict], columns: list[str] | None = None) -> Path:
    """``rows`` in the file type of ``path``'s suffix (CSV quoted as needed, TSV unquoted)."""
    columns = columns or list(rows[0])
    if path.suffix == ".csv":
        import csv

        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(columns)
            writer.writerows([[row[c] for c in columns] for row in rows])
    elif path.suffix == ".tsv":
        lines = ["\t".join(columns), *("\t".join(row[c] for c in columns) for row in rows)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps({c: row[c] for c in columns}) + "\n" for row in rows), encoding="utf-8")
    elif path.suffix == ".json":
        path.write_text(json.dumps([{c: row[c] for c in columns} for row in rows]), encoding="utf-8")
    else:
        pyarrow.parquet.write_table(pyarrow.Table.from_pylist([{c: row[c] for c in columns} for row in rows]), path)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".json", ".parquet"])
def test_simcses_triplets_are_read_into_training_columns_from_every_file_type(tmp_path: Path, suffix: str) -> None:
    path = write(tmp_path / f"nli{suffix}", ROWS)
    assert train_file_pairs(str(path)) == PairColumns("sent0", "sent1", ("hard_neg",))
    assert read_pairs(str(path)).to_dict() == TRAINING


def test_sentence_transformers_layouts_single_and_numbered_negatives(tmp_path: Path) -> None:
    rows = [{"anchor": r["sent0"], "positive": r["sent1"], "negative": r["hard_neg"]} for r in ROWS]
    assert read_pairs(str(write(tmp_path / "one.csv", rows))).to_dict() == TRAINING
    numbered = [{**row, "negative_1": row["negative"], "negative_2": row["anchor"][::-1]} for row in rows]
    columns = ["anchor", "positive", "negative_1", "negative_2"]
    table = read_pairs(str(write(tmp_path / "two.jsonl", numbered, columns)))
    assert table.column_names == ["text", "positive", "negative_1", "negative_2"]
    assert table["negative_2"] == [row["anchor"][::-1] for row in rows] and num_hard_negatives(table) == 2
    pairs_only = read_pairs(str(write(tmp_path / "pairs.csv", rows, ["anchor", "positive"])))
    assert pairs_only.column_names == ["text", "positive"] and num_hard_negatives(pairs_only) == 0


def test_a_dataset_given_to_the_trainer_is_read_the_same_way() -> None:
    assert pairs_dataset(Dataset.from_list(ROWS)).to_dict() == TRAINING
    sentence_transformers_style = [
        {"anchor": r["sent0"], "positive": r["sent1"], "negative": r["hard_neg"]} for r in ROWS
    ]
    assert pairs_dataset(Dataset.from_list(sentence_transformers_style)).to_dict() == TRAINING
    assert pairs_dataset(Dataset.from_dict(TRAINING)).to_dict() == TRAINING  # already in training columns
    text = Dataset.from_dict({"text": ["a", "b"]})
    assert pairs_dataset(text) is text and num_hard_negatives(text) is None


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (["sent0", "hard_neg"], r"columns \['sent0', 'hard_neg'\] have hard_neg without sent1; labelled pairs have "),
        (["anchor", "negative"], r"have negative without positive; labelled pairs have SimCSE's sent0,sent1"),
        (["sent0", "sent1", "negative"], r"mix the two layouts of labelled pairs"),
        (["anchor", "positive", "negative", "negative_1"], r"have both negative and numbered negative_k columns"),
        (["anchor", "positive", "negative_1", "negative_3"], r"number their negatives with a gap"),
    ],
    ids=["hard_neg-without-sent1", "negative-without-positive", "mixed", "both-negatives", "gap"],
)
def test_half_a_layout_is_one_line_naming_the_columns(columns: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message) as error:
        pair_columns(columns, "train.csv")
    assert "\n" not in str(error.value) and str(error.value).startswith("train.csv: columns ")


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_an_empty_or_missing_cell_is_one_line_naming_the_row_and_column(tmp_path: Path, suffix: str) -> None:
    rows = [dict(row) for row in ROWS]
    rows[1]["sent1"] = "   "
    path = write(tmp_path / f"nli{suffix}", rows)
    where = {".csv": "line 3", ".jsonl": "line 2", ".parquet": "row 2"}[suffix]
    with pytest.raises(UsageError, match=rf"^{path}: {where}: column 'sent1' is empty; every row of labelled pairs"):
        read_pairs(str(path))
    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({"sent0": "a", "sent1": "b"}) + "\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r": line 2: column 'hard_neg' is missing; every row of labelled pairs needs"):
        read_pairs(str(missing))


def test_one_sentence_a_row_reads_as_before(tmp_path: Path) -> None:
    """A text column, a lone sent0 column and a .txt file stay corpora of sentences; a named text_column reads one
    column of a pairs file as sentences, as the user asked."""
    texts = tmp_path / "texts.csv"
    texts.write_text("text,label\nfirst,1\nsecond,0\n", encoding="utf-8")
    assert train_file_pairs(str(texts)) is None and read_pairs(str(texts))["text"] == ["first", "second"]
    lone = write(tmp_path / "lone.csv", ROWS, ["sent0"])
    assert read_pairs(str(lone))["text"] == TRAINING["text"]
    nli = write(tmp_path / "nli.csv", ROWS)
    assert read_pairs(str(nli), text_column="sent1").to_dict() == {"text": TRAINING["positive"]}


def test_a_pairs_file_never_trains_as_its_first_column_alone(tmp_path: Path) -> None:
    """Before, SimCSE's NLI file trained as a corpus of its sent0 column without a word; the one-sentence reader
    refuses it in one line, and a stream reads its rows as pairs (tests/test_pairs_streaming.py)."""
    nli = write(tmp_path / "nli.csv", ROWS)
    with pytest.raises(UsageError, match=r"holds labelled pairs \(columns .*\): read them with hf_cse.read_pairs"):
        load_sentences(str(nli))
    assert stream_sentences(str(nli)).column_names == ["text", "positive", "negative_1"]


def test_a_tsv_or_parquet_file_without_pairs_is_refused_naming_the_layouts(tmp_path: Path) -> None:
    path = write(tmp_path / "texts.tsv", [{"text": "a"}, {"text": "b"}])
    with pytest.raises(UsageError, match=r"a \.tsv file is read as labelled pairs, and its columns \['text'\] are"):
        read_pairs(str(path))
