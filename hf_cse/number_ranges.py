"""The one range check of hf_cse's numbers: :class:`NumberRange`, what a numeric setting takes, with its words.

Three kinds of setting are checked against it: the fields of the argument dataclasses
(:mod:`hf_cse.training.arguments.checks`, whose one-line error names the flag), the numeric flags of the
``python -m hf_cse.*`` commands (:class:`NumberFlag`, their parsers' ``type``), and the hyperparameters an objective,
loss form or auxiliary loss is built with (:func:`check_setting`, in :mod:`hf_cse.objectives`). It imports nothing of
hf_cse but its errors, so the objectives below the training code and the command parsers (whose ``--help`` imports
no torch) take it alike.

The limits are the upper bounds of those ranges: far above any value a run uses, not tuned limits.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import shorten

SEED_LIMIT = 2**32 - 1
"""numpy's ``random.seed`` (which ``set_seed`` calls) takes seeds in ``[0, 2**32 - 1]``."""
TOKEN_LIMIT = 2**20
"""Tokens in one sentence (``max_seq_length``, ``pad_to_multiple_of``, ``inference_max_seq_length``): 1,048,576,
above the context of every model hf_cse trains (BERT's 512 to Qwen3's 131,072). The check of a padded length against
the model's positions builds a row of that many token ids: 8 MiB at this bound."""
SENTENCE_LIMIT = 2**24
"""Sentences held in memory at once (a device's batch, a gradient-cache chunk, a step's accumulated micro-batches,
the shuffle buffer of a stream): 16,777,216, far above the largest contrastive batches in use (tens of thousands)."""
COUNT_LIMIT = 2**40
"""Steps, epochs, intervals, checkpoints, corpus lines and seconds: about 1.1e12, more than any run counts (a million
steps a day for three thousand years)."""
PROCESS_LIMIT = 1024
"""Processes of one machine (data-loading workers, a launcher's local rank), and batches each worker keeps ready:
more than a machine has cores."""
WIDTH_LIMIT = 2**16
"""A LoRA rank and alpha: 65,536, above any hidden size (a weight update's rank is at most its layer's width)."""


@dataclass(frozen=True)
class NumberRange:
    """The values a numeric setting takes: a finite number (an integer with ``integer``) between ``low`` and
    ``high`` (each bound inclusive unless ``*_open``; ``None``: unbounded), or one of ``special`` (a value outside
    the range with a meaning of its own, e.g. ``{None: "unset"}``, ``{-1: "unset"}``)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    special: Mapping[Any, str] = field(default_factory=dict)
    note: str = ""
    """Said after the range, e.g. what 0 means."""

    def accepts(self, value: Any) -> bool:
        if any(value is key or (value == key and type(value) is type(key)) for key in self.special):
            return True
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def describe(self, number: str = "a finite number") -> str:
        """``an integer >= 1``, ``a finite number in [0, 1)``, ``-1 (unset) or an integer >= 1``, ...; ``number``: the
        words for a value that need not be an integer (:func:`check_setting` says ``a number``)."""
        kind = "an integer" if self.integer else number
        low, high = (None if bound is None else _number(bound) for bound in (self.low, self.high))
        if self.low is not None and self.low == self.high:
            kind, bounds = "", low
        elif low is not None and high is not None:
            bounds = f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        elif low is not None:
            bounds = f"{'>' if self.low_open else '>='} {low}"
        else:
            bounds = "" if high is None else f"{'<' if self.high_open else '<='} {high}"
        text = " ".join(part for part in (kind, bounds) if part)
        specials = [
            ("unset" if key is None else _number(key)) + (f" ({meaning})" if meaning else "")
            for key, meaning in self.special.items()
        ]
        described = " or ".join([*specials, text])
        return f"{described} ({self.note})" if self.note else described


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def check_setting(name: str, value: Any, valid: NumberRange) -> int | float:
    """``value``, once ``valid`` accepts it, as an ``int`` (``valid.integer``) or a ``float``: how an objective, loss
    form or auxiliary loss checks a hyperparameter it is built with (``dclr``'s ``sigma``, ...).

    Raises:
        ValueError: one line naming ``name``, the range and the value: ``sigma must be a number in (0, 100], got
            inf.`` (the words of a Python API's error, where the argument dataclasses say ``sigma inf is not
            valid: ...`` of a flag).
    """
    if not valid.accepts(value):
        raise ValueError(f"{name} must be {valid.describe(number='a number')}, got {value!r}.")
    return int(value) if valid.integer else float(value)


class NumberFlag:
    """The ``type`` of a numeric command-line flag (``parser.add_argument("--kfold", type=NumberFlag(...))``): the
    text read as an ``int`` (``valid.integer``) or a ``float``, then checked against ``valid`` (which must have an
    upper bound, said in the error). Text that is no number is argparse's own ``invalid int value: 'x'``; a number
    out of range, ``argument --kfold: 1 is not valid: it takes an integer in [2, 16777216].``"""

    def __init__(self, valid: NumberRange) -> None:
        if valid.high is None:
            raise ValueError(f"a flag's range has an upper bound; got {valid}.")
        self.valid = valid
        # argparse names the type in "invalid int value"; the reference's type column reads it too
        self.__name__ = "int" if valid.integer else "float"

    def __call__(self, text: str) -> int | float:
        value = int(text) if self.valid.integer else float(text)
        if not self.valid.accepts(value):
            given = shorten(text.strip())
            raise argparse.ArgumentTypeError(f"{given} is not valid: it takes {self.valid.describe()}.")
        return value

    def __repr__(self) -> str:
        return f"NumberFlag({self.valid!r})"


UNSET: dict[Any, str] = {None: ""}
PROBABILITY = NumberRange(low=0, high=1, high_open=True)
SEED = NumberRange(low=0, high=SEED_LIMIT, integer=True)
SENTENCES = NumberRange(low=1, high=SENTENCE_LIMIT, integer=True)
