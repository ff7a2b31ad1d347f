"""``--grid KEY=V1,V2`` values: parsing, the settings they span, and the names of their run folders."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

from ..errors import UsageError

GRID_EXAMPLE = "--grid learning_rate=1e-5,3e-5 --grid objective_kwargs.tau_plus=0.05,0.1"
BASE_SETTING_NAME = "base"
"""The name of the one setting of a sweep without ``--grid``."""
_MAX_NAME_LENGTH = 100
_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]+")
_CLOSERS = {"[": "]", "{": "}", "(": ")"}


@dataclass(frozen=True)
class GridAxis:
    """One ``--grid KEY=V1,V2,...``: a run_unsup flag (or ``config``, or ``FIELD.KEY`` of a JSON flag) and the
    values it takes, as written."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Setting:
    """One point of the grid: ``(key, value as written)`` pairs in the order of the ``--grid`` flags.

    Attributes:
        items: the pairs; empty for the one setting of a sweep without ``--grid``.
        name: the folder-safe name of its runs (``learning_rate=3e-5_pooler=avg``), unique within the sweep.
    """

    items: tuple[tuple[str, str], ...]
    name: str

    def as_dict(self) -> dict[str, str]:
        return dict(self.items)


def split_values(text: str) -> list[str]:
    """``text`` split at the commas that are outside brackets, braces, parentheses and quotes, so a JSON value
    (``{"a": 1, "b": 2}``) stays whole; each part stripped of surrounding spaces."""
    parts, current, closers, quote = [], [], [], None
    for char in text:
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in _CLOSERS:
            closers.append(_CLOSERS[char])
        elif closers and char == closers[-1]:
            closers.pop()
        elif char == "," and not closers:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    parts.append("".join(current).strip())
    return parts


def parse_grid(spec: str) -> GridAxis:
    """Parse one ``--grid`` value, ``KEY=V1,V2,...``.

    Raises:
        UsageError: no ``=``, an empty key or value, or a value given twice.
    """
    key, sep, values_text = spec.partition("=")
    key = key.strip().lstrip("-")
    values = split_values(values_text) if sep else []
    if not sep or not key or not values or any(not value for value in values):
        raise UsageError(
            f"--grid {spec!r}: expected KEY=V1,V2,... with a run_unsup.py flag name as KEY and no empty value, "
            f"e.g. {GRID_EXAMPLE}."
        )
    repeated = sorted({value for value in values if values.count(value) > 1})
    if repeated:
        raise UsageError(f"--grid {spec!r}: the value(s) {', '.join(repeated)} are given twice; list each once.")
    return GridAxis(key, tuple(values))


def check_axes(axes: Sequence[GridAxis]) -> None:
    """Refuse a key swept twice, or both a JSON flag and one of its keys (``objective_kwargs`` and
    ``objective_kwargs.tau_plus``): the runs would not be the settings their names say."""
    keys = [axis.key for axis in axes]
    for index, key in enumerate(keys):
        if key in keys[:index]:
            raise UsageError(f"--grid {key}=... is given twice; give all its values in one --grid {key}=V1,V2,...")
        for other in keys:
            if other.startswith(key + "."):
                raise UsageError(f"--grid {key} and --grid {other} both set {key}; sweep one or the other.")


def expand(axes: Sequence[GridAxis]) -> list[Setting]:
    """Every combination of the axes' values (the first axis varying slowest), each with a unique name."""
    combinations = [
        tuple(zip((axis.key for axis in axes), values, strict=True))
        for values in itertools.product(*(axis.values for axis in axes))
    ]
    names = [_readable_name(items) for items in combinations]
    # A long name is cut, and two values may read the same once unsafe characters are replaced (a/b and a-b):
    # those names get a hash of the exact setting.
    for index, items in enumerate(combinations):
        if len(names[index]) > _MAX_NAME_LENGTH or names.count(names[index]) > 1:
            digest = hashlib.sha1(json.dumps(items).encode("utf-8")).hexdigest()[:8]
            names[index] = f"{names[index][:_MAX_NAME_LENGTH]}-{digest}"
    return [Setting(items, name) for items, name in zip(combinations, names, strict=True)]


def _readable_name(items: Sequence[tuple[str, str]]) -> str:
    return "_".join(f"{key}={_safe(key, value)}" for key, value in items) or BASE_SETTING_NAME


def _safe(key: str, value: str) -> str:
    if key == "config" or "/" in value or "\\" in value:  # a path: its file name without the extension says which
        value = PurePath(value).stem
    return _UNSAFE.sub("-", value).strip("-") or "-"


def run_name(setting: Setting, seed: int) -> str:
    """The name of the run of ``setting`` with ``seed``: its folder, log and result file names."""
    return f"{setting.name}-seed{seed}"
