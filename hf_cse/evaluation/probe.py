"""OssCSE's transformation probe (Shi et al., 2023, Sections 3.1-3.2): how a model scores rewrites of a sentence.

Each row of a probe file holds a sentence and some of six transformations of it:

=============  ==============================================================  ==========================
column         transformation                                                   OssCSE setting
=============  ==============================================================  ==========================
paraphrase     same meaning, different wording (high MER)                       Oppn.
negation       contradicted by a small edit, e.g. inserting "not" (low MER)     Oppn.
insertion      a few words inserted, meaning kept                               Cont.
deletion       one word deleted, meaning kept                                   Cont.
substitution   a few words replaced by synonyms, meaning kept                   Cont.
random         another, unrelated sentence                                      Cont.
=============  ==============================================================  ==========================

A model free of the surface-structure bias scores a paraphrase above the negation of the same sentence; the paper
finds that unsupervised SimCSE does the opposite. :func:`probe_transformations` reports, per transformation, the mean
cosine similarity to the sentence and the mean MER, and the share of rows where ``sim(paraphrase) > sim(negation)``.

The probe file is UTF-8, TAB-separated, with a header row naming its columns: ``sentence`` and any of the six
transformation names, in any order. An empty cell means "no such transformation for this row". A 30-row probe written
for this package (not the paper's sentences) ships as :data:`DEFAULT_PROBE_TSV`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..text import match_error_rate
from ..text.checks import check_text
from .options import DEFAULT_PROBE_TSV
from .sts_evaluator import EncodeFn, encode_unique, pair_similarities

#: Transformation columns a probe file may have, in the paper's order.
TRANSFORMATIONS: tuple[str, ...] = ("paraphrase", "negation", "insertion", "deletion", "substitution", "random")

SENTENCE_COLUMN = "sentence"


@dataclass
class ProbeSet:
    """Sentences and their transformations, as read by :func:`load_probe_tsv`.

    Attributes:
        sentences: the original sentences, ``[num_rows]``.
        transformations: ``{name: [transformed sentence or None]}``, each list ``[num_rows]``, in file column order.
    """

    sentences: list[str]
    transformations: dict[str, list[str | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, column in self.transformations.items():
            if name not in TRANSFORMATIONS:
                raise ValueError(
                    f"Unknown transformation {name!r}. Valid transformations: {', '.join(TRANSFORMATIONS)}."
                )
            if len(column) != len(self.sentences):
                raise ValueError(
                    f"Transformation {name!r} has {len(column)} rows, but there are {len(self.sentences)} sentences."
                )

    def __len__(self) -> int:
        return len(self.sentences)


def load_probe_tsv(path: str | os.PathLike = DEFAULT_PROBE_TSV) -> ProbeSet:
    """Read a probe file (format in the module docstring).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: no ``sentence`` column, an unknown or repeated column, no transformation column, a row with the
            wrong number of fields, an empty sentence, or no row at all. The message names the file and line.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Probe file {str(path)!r} does not exist.")
    # utf-8-sig: spreadsheet programs often save a byte-order mark, which would otherwise glue onto the first name.
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    if not lines:
        raise ValueError(f"Probe file {str(path)!r} is empty; expected a header row: sentence<TAB>paraphrase<TAB>...")
    header = [name.strip() for name in lines[0].split("\t")]
    valid = f"{SENTENCE_COLUMN} and any of {', '.join(TRANSFORMATIONS)}"
    if SENTENCE_COLUMN not in header:
        raise ValueError(
            f"Probe file {str(path)!r} has no {SENTENCE_COLUMN!r} column; its header is {header}. "
            f"Valid columns: {valid}."
        )
    unknown = [name for name in header if name != SENTENCE_COLUMN and name not in TRANSFORMATIONS]
    if unknown:
        raise ValueError(f"Probe file {str(path)!r} has unknown columns {unknown}. Valid columns: {valid}.")
    if len(set(header)) != len(header):
        raise ValueError(f"Probe file {str(path)!r} repeats a column in its header {header}.")
    if len(header) == 1:
        raise ValueError(f"Probe file {str(path)!r} has no transformation column. Valid columns: {valid}.")

    rows: list[list[str]] = []
    for lineno, line in enumerate(lines[1:], start=2):
        line = check_text(line, lambda lineno=lineno: f"Probe file {str(path)!r}, line {lineno}")
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split("\t")]
        if len(cells) != len(header):
            raise ValueError(
                f"Probe file {str(path)!r} line {lineno}: {len(cells)} TAB-separated fields, the header has "
                f"{len(header)}."
            )
        if not cells[header.index(SENTENCE_COLUMN)]:
            raise ValueError(f"Probe file {str(path)!r} line {lineno}: the sentence is empty.")
        rows.append(cells)
    if not rows:
        raise ValueError(f"Probe file {str(path)!r} has a header but no rows.")
    columns = {name: [row[i] for row in rows] for i, name in enumerate(header)}
    sentences = columns.pop(SENTENCE_COLUMN)
    return ProbeSet(sentences, {name: [cell or None for cell in column] for name, column in columns.items()})


@dataclass
class TransformationStats:
    """Mean cosine similarity and MER of one transformation over the rows that have it."""

    num_rows: int
    mean_cosine: float
    mean_mer: float


@dataclass
class ProbeResults:
    """Results of :func:`probe_transformations`.

    Attributes:
        stats: ``{transformation: TransformationStats}`` in the probe's column order (a column whose cells are all
            empty is left out).
        similarities: ``{transformation: cosine similarity per row}``, ``[num_rows]``, ``nan`` where a row lacks it.
        paraphrase_over_negation: share of the rows with both a paraphrase and a negation where the paraphrase is
            more similar to the sentence (1.0 is the unbiased ranking); ``nan`` when no row has both.
        num_compared: number of rows with both.
    """

    stats: dict[str, TransformationStats]
    similarities: dict[str, np.ndarray] = field(repr=False)
    paraphrase_over_negation: float
    num_compared: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: per-transformation statistics and the paraphrase-over-negation share."""
        return {
            "transformations": {
                name: {"num_rows": s.num_rows, "mean_cosine": s.mean_cosine, "mean_mer": s.mean_mer}
                for name, s in self.stats.items()
            },
            "paraphrase_over_negation": self.paraphrase_over_negation,
            "num_compared": self.num_compared,
        }


def probe_transformations(encode: EncodeFn, probe: ProbeSet, *, batch_size: int | None = None) -> ProbeResults:
    """Cosine similarity of each sentence to each of its transformations, summarized per transformation.

    Args:
        encode: ``encode(list_of_N_sentences) -> [N, D]``, as in :func:`~hf_cse.evaluation.evaluate_sts`.
        probe: the probe, e.g. ``load_probe_tsv()``.
        batch_size: sentences per ``encode`` call (``None``: all distinct sentences at once).

    Returns:
        :class:`ProbeResults`. MER is :func:`~hf_cse.text.match_error_rate` with the sentence as the reference.
    """
    present = {name: column for name, column in probe.transformations.items() if any(column)}
    if not present:
        raise ValueError("The probe has no transformed sentence: every transformation cell is empty.")
    texts = [*probe.sentences, *(text for column in present.values() for text in column if text is not None)]
    table = encode_unique(encode, texts, batch_size=batch_size)

    stats, similarities = {}, {}
    for name, column in present.items():
        rows = [i for i, text in enumerate(column) if text is not None]
        per_row = np.full(len(probe), math.nan)
        per_row[rows] = pair_similarities(table, [probe.sentences[i] for i in rows], [column[i] for i in rows])
        mers = [match_error_rate(probe.sentences[i], column[i]) for i in rows]
        similarities[name] = per_row
        stats[name] = TransformationStats(len(rows), float(np.nanmean(per_row)), float(np.mean(mers)))

    absent = np.full(len(probe), math.nan)  # a transformation the probe lacks: no row to compare
    paraphrase, negation = (similarities.get(name, absent) for name in ("paraphrase", "negation"))
    both = ~np.isnan(paraphrase) & ~np.isnan(negation)
    compared = int(both.sum())
    share = float((paraphrase[both] > negation[both]).mean()) if compared else math.nan
    return ProbeResults(stats, similarities, share, compared)
