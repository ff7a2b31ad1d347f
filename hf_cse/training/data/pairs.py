"""Labelled pairs and triplets: which columns hold them, and reading them into the columns a run trains on.

Each row holds an anchor, its positive and optionally hard negatives, in one of two column layouts:

- SimCSE's (``nli_for_simcse.csv``): ``sent0,sent1[,hard_neg]``;
- sentence-transformers': ``anchor,positive[,negative]``, or several negatives ``negative_1 .. negative_k``.

Either is read into the columns a run trains on, :data:`ANCHOR` (``text``, as a one-sentence corpus), :data:`POSITIVE`
and ``negative_1 .. negative_k`` (:func:`negative_column`), from a CSV/TSV/JSON Lines/JSON/Parquet file, a Hub dataset
or a ``datasets.Dataset``. A file of one sentence a row (a ``text`` or ``sentence`` column, a ``.txt`` file) is not
pairs and trains as before (:func:`~hf_cse.training.data.corpus.load_sentences`). A row with an empty or missing cell,
or columns that start one layout without completing it, is a one-line error naming the row or the columns, before the
model loads.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datasets import Dataset, load_dataset

from ...errors import UsageError, echo
from ...sources import check_builtin_corpus_name, is_builtin_corpus
from .corpus import check_corpus_file, csv_table, json_records, load_sentences, text_value
from .pair_columns import ANCHOR, PAIR_LAYOUTS, PairColumns, pair_columns, training_pairs

if TYPE_CHECKING:
    from ...modeling.configuration_cse import PoolingConfig
    from ..training_args import CSETrainingArguments

logger = logging.getLogger(__name__)

PAIR_FILE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json", ".parquet")
"""The file types labelled pairs are read from (``.tsv`` and ``.parquet`` hold pairs only)."""


def checked_pair(location: str, record: Any, pairs: PairColumns, source: str) -> dict[str, str]:
    """``{training column: text}`` of one row (``record``: a mapping by column, at ``location`` of ``source``), every
    cell a non-empty text once stripped (:func:`~hf_cse.training.data.corpus.text_value`), else an error naming the row
    and the column. The in-memory reader checks every row before training; a stream, each row as it is read."""
    row: dict[str, str] = {}
    for column, training_column in pairs.training_columns.items():
        value = record.get(column) if isinstance(record, dict) else None
        text = text_value(value, lambda at=f"{source}: {location}, column {column!r}": at)
        if text is None or not text.strip():
            state = "missing" if text is None else "empty"
            raise UsageError(
                f"{source}: {location}: column {column!r} is {state}; every row of labelled pairs needs its "
                f"anchor, positive{' and hard negatives' if pairs.negatives else ''}."
            )
        row[training_column] = text.strip()
    return row


def _checked_rows(rows: Iterable[tuple[str, Any]], pairs: PairColumns, source: str) -> dict[str, list[str]]:
    """``{training column: texts}`` of ``rows`` (``(location, record)``), each checked by :func:`checked_pair`."""
    table: dict[str, list[str]] = {column: [] for column in pairs.training_columns.values()}
    for location, record in rows:
        for column, text in checked_pair(location, record, pairs, source).items():
            table[column].append(text)
    if not table[ANCHOR]:
        raise UsageError(f"{source} holds labelled pairs' columns but no row.")
    return table


def file_rows(path: Path) -> tuple[list[str], Iterator[tuple[str, Any]]]:
    """The columns of a pairs file and its ``(location, record)`` rows (a record maps columns to cells): a CSV or TSV
    file's rows read lazily, after its header (what a stream reads); a JSON or Parquet file read whole."""
    if path.suffix in (".csv", ".tsv"):
        header, records = csv_table(path, "\t" if path.suffix == ".tsv" else ",")
        if header is None:
            return [], iter(())
        return header, ((f"line {line}", dict(zip(header, row, strict=False))) for line, row in records)
    if path.suffix == ".parquet":
        import pyarrow.parquet  # datasets' own dependency

        table = pyarrow.parquet.read_table(path)
        return table.column_names, ((f"row {i + 1}", row) for i, row in enumerate(table.to_pylist()))
    records = json_records(path)
    columns = list(dict.fromkeys(key for _, record in records if isinstance(record, dict) for key in record))
    return columns, iter(records)


def _pairs_source(
    train_file: str, text_column: str | None, dataset_config_name: str | None
) -> tuple[PairColumns, list[str], Iterator[tuple[str, Any]]] | None:
    """``(pairs, columns, rows)`` of ``train_file`` when it holds labelled pairs, else ``None``: one read serves the
    layout and the rows (a CSV's rows are read lazily, after its header; a JSON file, a Parquet file or a Hub dataset
    is read whole once)."""
    path = Path(train_file)
    check_builtin_corpus_name(train_file)  # a misspelled built-in corpus is no Hub id to look up
    if text_column is not None or is_builtin_corpus(train_file):
        return None
    if path.suffix in PAIR_FILE_SUFFIXES:
        check_corpus_file(path, train_file, read_once=True)
        columns, rows = file_rows(path)
        pairs = pair_columns(columns, str(path))
        if pairs is None and path.suffix in (".tsv", ".parquet"):
            raise UsageError(
                f"train_file {echo(train_file)}: a {path.suffix} file is read as labelled pairs, and its columns "
                f"{echo(columns)} are neither layout: {PAIR_LAYOUTS}."
            )
    elif path.exists() or path.suffix == ".txt":  # one sentence a line, or what load_sentences refuses by name
        return None
    else:
        table = load_dataset(train_file, dataset_config_name, split="train")  # a Hub dataset id; needs the network
        columns, rows = table.column_names, ((f"row {i + 1}", row) for i, row in enumerate(table))
        pairs = pair_columns(columns, train_file)
    return None if pairs is None else (pairs, columns, rows)


def train_file_pairs(
    train_file: str, text_column: str | None = None, dataset_config_name: str | None = None
) -> PairColumns | None:
    """Where ``train_file`` holds labelled pairs: a file of :data:`PAIR_FILE_SUFFIXES` (its header or records read,
    not its rows checked) or a Hub dataset whose columns are one of the layouts, with no ``text_column`` named;
    ``None`` for one sentence a row. What ``run_unsup.py`` asks before anything loads, and :func:`read_pairs` reads.

    Raises:
        UsageError: as :func:`~hf_cse.training.data.pair_columns.pair_columns`; a ``.tsv`` or ``.parquet`` file that
            holds no pairs.
    """
    source = _pairs_source(train_file, text_column, dataset_config_name)
    return None if source is None else source[0]


def read_pairs(train_file: str, text_column: str | None = None, dataset_config_name: str | None = None) -> Dataset:
    """The training data of ``train_file``: its labelled pairs in training columns when it holds them
    (:func:`train_file_pairs`), every row checked; else its sentences
    (:func:`~hf_cse.training.data.corpus.load_sentences`: a ``text`` column).

    Raises:
        UsageError: as :func:`train_file_pairs`; a row with an empty or missing cell, naming it.
    """
    source = _pairs_source(train_file, text_column, dataset_config_name)
    if source is None:
        return load_sentences(train_file, text_column, dataset_config_name)
    pairs, columns, rows = source
    others = [column for column in columns if column not in pairs.training_columns]
    if others:
        logger.warning("%s: labelled pairs in %s; not read: columns %s.", train_file, pairs, echo(others))
    table = _checked_rows(rows, pairs, train_file)
    logger.info("%s: %d labelled pairs, %d hard negatives each.", train_file, len(table[ANCHOR]), len(table) - 2)
    return Dataset.from_dict(table)


def pairs_dataset(dataset: Dataset, source: str = "train_dataset") -> Dataset:
    """``dataset`` (a ``datasets.Dataset`` given to the trainer) with its labelled pairs in training columns, checked
    row by row; as it is when it holds no pairs (one sentence a row) or is already tokenized.

    Raises:
        UsageError: as :func:`pair_columns` and :func:`read_pairs`.
    """
    if "input_ids" in dataset.column_names:
        return dataset
    pairs = training_pairs(dataset.column_names) or pair_columns(dataset.column_names, source)
    if pairs is None:
        return dataset
    rows = ((f"row {i + 1}", row) for i, row in enumerate(dataset.select_columns(list(pairs.training_columns))))
    return Dataset.from_dict(_checked_rows(rows, pairs, source))


def check_instruction_has_anchors(pooling: PoolingConfig, args: CSETrainingArguments, data: str) -> None:
    """Refuse an instruction (``pooling.instruction``) on training data of one sentence a row
    (``args.num_hard_negatives`` is ``None``): only labelled pairs have anchors to put it before
    (:mod:`hf_cse.inputs.labelled_pairs`), so it would go unused in training and still be applied at encode time.

    Raises:
        UsageError: one line naming the instruction and ``data`` (e.g. ``"train_file 'wiki.txt'"``).
    """
    if pooling.instruction is not None and args.num_hard_negatives is None:
        raise UsageError(
            f"instruction={pooling.instruction!r} goes before the anchors of labelled pairs; {data} holds one "
            "sentence a row: give a file of pairs or triplets, or no instruction."
        )


def record_num_hard_negatives(args: CSETrainingArguments, found: int | None) -> None:
    """Set ``args.num_hard_negatives`` to the training data's ``found``: ``None`` for one sentence a row, else the hard
    negatives per row of labelled pairs (:func:`~hf_cse.training.data.pair_columns.num_hard_negatives` of a table, or a
    file's :func:`train_file_pairs`), so that the run's providers, its saved arguments, a resume and the card know the
    data were pairs. A value already set must agree (``run_unsup.py`` sets it from the file's columns before anything
    loads, the trainer from its dataset).

    Raises:
        UsageError: ``args.num_hard_negatives`` was set to another value than the data's.
    """
    if args.num_hard_negatives is None and found is not None:
        args.num_hard_negatives = found
    elif args.num_hard_negatives != found:
        data = "one sentence a row" if found is None else f"labelled pairs with {found} hard negatives a row"
        raise UsageError(
            f"num_hard_negatives={args.num_hard_negatives}, but the training data are {data}; leave "
            "num_hard_negatives unset: the trainer reads it from the data."
        )
