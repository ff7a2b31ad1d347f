"""How well the rule-based negator (OssCSE's s_n) does on Wikipedia: a random wiki1m-head sample checked by hand.

Draw a sample for review (a TSV with an empty ``verdict`` column to fill in by hand), then summarize the reviewed
file. The summary re-negates every sentence with the current negator first: a row whose output changed since it was
reviewed is reported as stale instead of being counted.

Verdicts: ``correct`` (grammatical, the main clause negated), ``wrong`` (anything else that was negated),
``declined_ok`` (returned ``None`` for a title, name, fragment or already negated sentence), ``declined_missed``
(returned ``None`` for a sentence it should have negated).

    python benchmarks/negation_sample.py draw --size 80 --seed 2026 --output /tmp/negation_sample.tsv
    python benchmarks/negation_sample.py summarize benchmarks/results/negation_sample.tsv
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from _common import WIKI1M_HEAD

from hf_cse.augment.negation import negate

VERDICTS = ("correct", "wrong", "declined_ok", "declined_missed")
COLUMNS = ("line", "sentence", "negation", "verdict")
NO_NEGATION = "None"


def draw(corpus: Path, size: int, seed: int, output: Path) -> None:
    """Write ``size`` random non-blank lines of ``corpus`` with their rules-backend negation, verdicts empty."""
    lines = corpus.read_text(encoding="utf-8").splitlines()
    candidates = [i for i, line in enumerate(lines) if line.strip()]
    rows = ["\t".join(COLUMNS)]
    for index in sorted(random.Random(seed).sample(candidates, size)):
        sentence = " ".join(lines[index].split())  # no tab survives: the file is split on tabs
        rows.append(f"{index + 1}\t{sentence}\t{negate(sentence, backend='rules') or NO_NEGATION}\t")
    output.write_text("\n".join(rows) + "\n", encoding="utf-8")


def summarize(reviewed: Path) -> Counter:
    """Count the verdicts of a reviewed sample, print the shares, and return the counts (``stale`` included)."""
    header, *lines = reviewed.read_text(encoding="utf-8").splitlines()
    if tuple(header.split("\t")) != COLUMNS:
        raise ValueError(f"{reviewed}: header {header!r}; expected the columns {', '.join(COLUMNS)}.")
    rows = [dict(zip(COLUMNS, line.split("\t"), strict=True)) for line in lines]
    counts: Counter = Counter()
    for row in rows:
        if row["verdict"] not in VERDICTS:
            raise ValueError(
                f"Line {row['line']}: verdict {row['verdict']!r}; valid verdicts are: {', '.join(VERDICTS)}."
            )
        if (negate(row["sentence"], backend="rules") or NO_NEGATION) != row["negation"]:
            counts["stale"] += 1
            print(f"stale (the negator's output changed; review again): line {row['line']}")
            continue
        counts[row["verdict"]] += 1
    negated = counts["correct"] + counts["wrong"]
    declined = counts["declined_ok"] + counts["declined_missed"]
    print(f"sentences reviewed: {len(rows) - counts['stale']} (stale: {counts['stale']})")
    correct_share = 100 * counts["correct"] / max(negated, 1)
    declined_share = 100 * declined / max(len(rows), 1)
    print(f"negated: {negated}, of which correct: {counts['correct']} ({correct_share:.1f}%)")
    print(f"declined: {declined} ({declined_share:.1f}%), of which negatable: {counts['declined_missed']}")
    return counts


def main(argv: Sequence[str] | None = None) -> Counter | None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    draw_parser = commands.add_parser("draw", help="Write a sample to review.")
    draw_parser.add_argument("--corpus", type=Path, default=WIKI1M_HEAD)
    draw_parser.add_argument("--size", type=int, default=80)
    draw_parser.add_argument("--seed", type=int, default=2026)
    draw_parser.add_argument("--output", type=Path, required=True)
    summarize_parser = commands.add_parser("summarize", help="Count the verdicts of a reviewed sample.")
    summarize_parser.add_argument("reviewed", type=Path)
    args = parser.parse_args(argv)
    if args.command == "draw":
        draw(args.corpus, args.size, args.seed, args.output)
        return None
    return summarize(args.reviewed)


if __name__ == "__main__":
    main()
