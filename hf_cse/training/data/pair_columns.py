"""Which columns of a table hold labelled pairs, and the training columns they are read into.

Two layouts (:data:`PAIR_LAYOUTS`): SimCSE's ``sent0,sent1[,hard_neg]`` and sentence-transformers'
``anchor,positive[,negative | negative_1..negative_k]``, read into :data:`ANCHOR` (``text``), :data:`POSITIVE` and
``negative_1..negative_k`` (:func:`negative_column`). Apart from the readers (:mod:`hf_cse.training.data.pairs`) so
that the one-sentence readers (:mod:`hf_cse.training.data.corpus`, streaming) can refuse a pairs file instead of
training on its first column.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import UsageError, echo
from ...inputs.labelled_pairs import ANCHOR, POSITIVE, hard_negative_columns, negative_column

PAIR_LAYOUTS = (
    "SimCSE's sent0,sent1[,hard_neg] or sentence-transformers' anchor,positive[,negative | negative_1..negative_k]"
)
_NUMBERED_NEGATIVE = re.compile(r"^negative_(\d+)$")


@dataclass(frozen=True)
class PairColumns:
    """Where a table holds its labelled pairs.

    Attributes:
        anchor: the anchor's column (``sent0``, ``anchor``, or ``text`` once read).
        positive: the positive's column.
        negatives: the hard negatives' columns, in order (``()``: pairs alone).
    """

    anchor: str
    positive: str
    negatives: tuple[str, ...] = ()

    @property
    def training_columns(self) -> dict[str, str]:
        """``{column here: training column}``: anchor to ``text``, positive to ``positive``, the ``k``-th negative to
        ``negative_k``."""
        renamed = {self.anchor: ANCHOR, self.positive: POSITIVE}
        renamed.update({column: negative_column(k) for k, column in enumerate(self.negatives, start=1)})
        return renamed


def pair_columns(columns: Sequence[str], source: str) -> PairColumns | None:
    """The labelled pairs among ``columns`` (a table's, named ``source`` in messages); ``None`` for a corpus of one
    sentence a row (no column of either layout but its anchor's: ``sent0`` alone is a text column).

    Raises:
        UsageError: the columns start a layout without completing it (a ``hard_neg`` without ``sent1``, a ``negative``
            without ``positive``), mix the two layouts, or number their negatives with a gap; one line naming the
            columns and the layouts.
    """
    present = set(columns)
    numbered = sorted(
        (int(match.group(1)), column) for column in columns if (match := _NUMBERED_NEGATIVE.match(column))
    )
    simcse = present & {"sent1", "hard_neg"}
    transformers_style = (present & {"positive", "negative"}) | {column for _, column in numbered}
    if not simcse and not transformers_style:
        return None

    def refuse(problem: str) -> UsageError:
        return UsageError(
            f"{source}: columns {echo(list(columns))} {problem}; labelled pairs have {PAIR_LAYOUTS} (a corpus of one "
            "sentence a row has a text or sentence column)."
        )

    if simcse and transformers_style:
        raise refuse("mix the two layouts of labelled pairs")
    style, anchor, positive = (simcse, "sent0", "sent1") if simcse else (transformers_style, "anchor", "positive")
    if missing := sorted({anchor, positive} - present):
        raise refuse(f"have {', '.join(sorted(style))} without {' and '.join(missing)}")
    if simcse:
        return PairColumns(anchor, positive, ("hard_neg",) if "hard_neg" in present else ())
    if "negative" in present and numbered:
        raise refuse("have both negative and numbered negative_k columns")
    if [k for k, _ in numbered] != list(range(1, len(numbered) + 1)):
        raise refuse("number their negatives with a gap (negative_1, negative_2, ... from 1)")
    negatives = ("negative",) if "negative" in present else tuple(column for _, column in numbered)
    return PairColumns(anchor, positive, negatives)


def training_pairs(columns: Sequence[str]) -> PairColumns | None:
    """The labelled pairs of a table already in training columns (``text``, ``positive``, ``negative_k``), as
    :func:`read_pairs` and :func:`pairs_dataset` leave it; ``None`` without a ``text`` and a ``positive`` column."""
    if POSITIVE not in columns or ANCHOR not in columns:  # sentence-transformers' anchor,positive is not read yet
        return None
    return PairColumns(ANCHOR, POSITIVE, tuple(hard_negative_columns(columns)))


def num_hard_negatives(dataset: Any) -> int | None:
    """``None`` for a corpus of one sentence a row, else the hard negatives each row of the labelled pairs in training
    columns holds (0: pairs alone); ``dataset`` is anything with ``column_names``."""
    pairs = training_pairs(list(getattr(dataset, "column_names", None) or []))
    return None if pairs is None else len(pairs.negatives)
