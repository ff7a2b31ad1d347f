"""Rows of a user's local evaluation file (TSV, CSV or JSONL), each with where it came from, so that a bad value is
one line naming the file, the line and the column.

A TSV or CSV file starts with a header naming its columns; a JSONL file holds one JSON object per line. Extra
columns or keys are ignored; a missing one, an empty value or a value that is not a number where one belongs is a
:class:`~hf_cse.errors.UsageError` such as ``pairs.tsv, line 7, column 3 (score): 'n/a' is not a number.``
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import UsageError, echo

#: File suffixes :func:`read_rows` reads, and their format.
ROW_FORMATS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl"}


@dataclass(frozen=True)
class Row:
    """One record of a file: its values by column name and where it is (for error messages).

    Attributes:
        path: the file.
        line: 1-based line number (a CSV record spanning lines: where it starts).
        values: ``{column: value}``; strings from TSV/CSV, JSON values from JSONL.
        columns: 1-based column number of each column in a TSV/CSV header; ``{}`` for JSONL (keys have no position).
    """

    path: Path
    line: int
    values: dict[str, Any]
    columns: dict[str, int]

    def where(self, column: str) -> str:
        """``"pairs.tsv, line 7, column 3 (score)"``, or for JSONL ``"pairs.jsonl, line 7, key 'score'"``."""
        if column in self.columns:
            return f"{self.path}, line {self.line}, column {self.columns[column]} ({column})"
        return f"{self.path}, line {self.line}, key {column!r}"

    def text(self, column: str) -> str:
        """The non-empty string in ``column``; a number in JSONL is refused (an id or a sentence is text)."""
        value = self.values.get(column)
        if not isinstance(value, str) or not value.strip():
            got = "nothing" if value is None or value == "" else echo(value)
            raise UsageError(f"{self.where(column)}: expected non-empty text, got {got}.")
        return value

    def number(self, column: str) -> float:
        """The finite number in ``column`` (a number, or a string that parses as one)."""
        value = self.values.get(column)
        try:
            number = float(value) if not isinstance(value, bool) else math.nan
        except (TypeError, ValueError):
            number = math.nan
        if not math.isfinite(number):
            raise UsageError(f"{self.where(column)}: {echo(value)} is not a number.")
        return number


def read_rows(path: str | os.PathLike, required: Sequence[str]) -> Iterator[Row]:
    """The records of ``path``, after checking that its header (TSV/CSV) holds the ``required`` columns.

    Args:
        path: a ``.tsv``, ``.csv`` or ``.jsonl`` file (the suffix picks the format).
        required: columns every record needs; in JSONL each line is checked, in TSV/CSV the header once.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        UsageError: an unknown suffix, a header without a required column, a line that is not a JSON object, or a
            record with fewer fields than the header (each naming the file and line).
    """
    path = Path(path)
    kind = ROW_FORMATS.get(path.suffix.lower())
    if kind is None:
        raise UsageError(
            f"{echo(str(path))}: unknown file type {path.suffix!r}; valid types are: {', '.join(ROW_FORMATS)}."
        )
    if not path.is_file():
        raise FileNotFoundError(f"Evaluation file {echo(str(path))} does not exist.")
    if kind == "jsonl":
        yield from _jsonl_rows(path, required)
    else:
        yield from _delimited_rows(path, required, "\t" if kind == "tsv" else ",")


def _jsonl_rows(path: Path, required: Sequence[str]) -> Iterator[Row]:
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                values = json.loads(line)
            except json.JSONDecodeError as err:
                raise UsageError(f"{path}, line {number}, column {err.colno}: not valid JSON ({err.msg}).") from None
            if not isinstance(values, dict):
                raise UsageError(f"{path}, line {number}: expected a JSON object, got {echo(values)}.")
            row = Row(path, number, values, {})
            for column in required:
                if column not in values:
                    raise UsageError(f"{row.where(column)}: missing (the line has {echo(sorted(values))}).")
            yield row


def _delimited_rows(path: Path, required: Sequence[str], delimiter: str) -> Iterator[Row]:
    with open(path, encoding="utf-8", newline="") as handle:
        # TSV without quoting: a sentence may hold a quote character, which csv would take for a quoted field.
        quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
        reader = csv.reader(handle, delimiter=delimiter, quoting=quoting)
        header = next(reader, None)
        if header is None:
            raise UsageError(f"{path} is empty: expected a header line naming the columns {', '.join(required)}.")
        header = [name.strip() for name in header]
        missing = [column for column in required if column not in header]
        if missing:
            raise UsageError(
                f"{path}, line 1: the header has no column {', '.join(missing)} (it has {echo(header)}; a header "
                f"naming {', '.join(required)} is required)."
            )
        columns = {name: index + 1 for index, name in enumerate(header)}
        start = reader.line_num + 1
        for fields in reader:
            line, start = start, reader.line_num + 1
            if not fields or fields == [""]:
                continue
            if len(fields) < len(header):
                absent = header[len(fields)]
                raise UsageError(
                    f"{path}, line {line}, column {len(fields) + 1} ({absent}): missing ({len(fields)} fields, the "
                    f"header has {len(header)})."
                )
            yield Row(path, line, dict(zip(header, fields, strict=False)), columns)
