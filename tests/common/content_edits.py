"""Edits of an input in place that keep its path, its size and its modification time: only its content tells the
edited file from the first, which is what the resume contract must see (issue 55, item 2)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def same_size_edits(path: Path) -> Iterator[bytes]:
    """Other contents for the file at ``path``, of its size, each one byte changed, most harmless first: a weight
    file's last float's lowest mantissa bit (little-endian: the first byte of the last four); a JSON file's first
    indentation space made a tab (the same JSON); then digits, then letters, from the end, each made another (a
    score, a year, a word of the last row before a key or a header)."""
    data = path.read_bytes()
    if path.suffix == ".safetensors":
        yield replaced(data, len(data) - 4, data[-4] ^ 1)
        return
    if path.suffix == ".json" and b"\n " in data:
        yield replaced(data, data.index(b"\n ") + 1, ord("\t"))
    for first, last in ((ord("0"), ord("9")), (ord("a"), ord("z"))):
        for position in range(len(data) - 1, -1, -1):
            if first <= data[position] <= last:
                yield replaced(data, position, data[position] - 1 if data[position] == last else data[position] + 1)


def replaced(data: bytes, position: int, value: int) -> bytes:
    """``data`` with the byte at ``position`` set to ``value``."""
    return data[:position] + bytes([value]) + data[position + 1 :]


def write_in_place(path: Path, content: bytes) -> None:
    """Write ``content`` over the file at ``path`` (the same size), keeping its access and modification times."""
    times = path.stat()
    assert len(content) == times.st_size, "an edit in place keeps the size"
    path.write_bytes(content)
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))


def edit_in_place(path: Path) -> None:
    """The first of :func:`same_size_edits`, written in place (:func:`write_in_place`)."""
    write_in_place(path, next(same_size_edits(path)))
