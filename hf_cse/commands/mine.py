"""Mine hard negatives for a file of labelled pairs, into a file that trains as triplets.

Example (one hard negative a pair, SimCSE's ``sent0,sent1,hard_neg`` header)::

    python -m hf_cse.mine --model_name_or_path out/unsup-simcse-bert --train_file pairs.csv --output triplets.csv

With ``--num_negatives k`` (k > 1) the header is sentence-transformers' ``anchor,positive,negative_1..negative_k``.
For each anchor, the negatives are the corpus positives most similar to it under the model, skipping its known
positives, itself, and those scored above ``--margin`` (default 0.95) times its positive's score: positive-aware
mining, NV-Retriever's TopK-PercPos (:mod:`hf_cse.mining` has the rule and the reference). Exact (every anchor against
every positive, chunked matrix products on ``--device``), deterministic (ties broken by corpus order). The file's
own hard negatives, if any, are replaced by the mined ones. The output is written whole or not at all, and an
existing one is replaced only with ``--overwrite``. Prints one line: the rows written and the candidates the margin
skipped.
"""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..atomic_files import write_text_atomic
from ..errors import UsageError, echo
from ..mining_margin import DEFAULT_MARGIN
from ..number_ranges import SENTENCE_LIMIT, SENTENCES, NumberFlag, NumberRange
from .cli import ERRORS_HELP, EncoderOptions, OneLineErrorParser, add_encoder_arguments, console_script

# The mining, the pairs' reader and their column names import torch (seconds of CPU): imported where they run, so
# that --help does without them (tests/test_help_imports.py).

logger = logging.getLogger(__name__)

SIMCSE_HEADER = ("sent0", "sent1", "hard_neg")
"""The header of an output with one hard negative a row: SimCSE's ``nli_for_simcse.csv``."""


def output_header(num_negatives: int) -> list[str]:
    """The columns of the output: SimCSE's ``sent0,sent1,hard_neg`` for one negative, else sentence-transformers'
    ``anchor,positive,negative_1..negative_k``; both read back by :func:`~hf_cse.training.data.pairs.read_pairs`."""
    from ..inputs.labelled_pairs import negative_column

    if num_negatives == 1:
        return list(SIMCSE_HEADER)
    return ["anchor", "positive", *(negative_column(k) for k in range(1, num_negatives + 1))]


def triplets_csv(anchors: Sequence[str], positives: Sequence[str], negatives: Sequence[Sequence[str]]) -> str:
    """The CSV text of the rows ``(anchor, positive, *negatives)`` under :func:`output_header`: ``\\n`` line ends,
    a field quoted only when it holds a comma, a quote or a line break (as the trainer's reader expects)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(output_header(len(negatives[0]) if negatives else 1))
    writer.writerows(
        [anchor, positive, *row] for anchor, positive, row in zip(anchors, positives, negatives, strict=True)
    )
    return buffer.getvalue()


def build_parser() -> OneLineErrorParser:
    """The argument parser of ``python -m hf_cse.mine``."""
    parser = OneLineErrorParser(
        prog="python -m hf_cse.mine",
        epilog=ERRORS_HELP,
        description="Mine hard negatives for labelled pairs: for each anchor, the corpus positives most similar to it "
        "under the model, skipping its own positives, itself and those scored above --margin x its positive's score "
        "(positive-aware mining, NV-Retriever's TopK-PercPos). Writes a CSV that trains as triplets.",
    )
    add_encoder_arguments(parser)
    parser.add_argument(
        "--train_file",
        required=True,
        help="Labelled pairs (CSV/TSV/JSON Lines/JSON/Parquet) in SimCSE's or sentence-transformers' layout, as "
        "run_unsup.py's --train_file reads them (a file in neither is refused naming their columns). Their positives "
        "are the corpus the negatives are mined from; hard negatives already there are replaced.",
    )
    parser.add_argument(
        "--output",
        required=True,
        help="The .csv file to write: sent0,sent1,hard_neg for one negative, anchor,positive,negative_1..negative_k "
        "for more. Not replaced unless --overwrite.",
    )
    parser.add_argument(
        "--num_negatives",
        type=NumberFlag(NumberRange(low=1, high=SENTENCE_LIMIT, integer=True, note="hard negatives per anchor")),
        default=1,
        metavar="K",
        help="Hard negatives per anchor, >= 1 (default: 1).",
    )
    skipped = "a candidate is skipped when scored above MARGIN x its positive's score"
    parser.add_argument(
        "--margin",
        type=NumberFlag(NumberRange(low=0, low_open=True, high=1, note=skipped)),
        default=DEFAULT_MARGIN,
        help="Skip a candidate scored above MARGIN x the anchor's score with its positive, the likeliest false "
        f"negatives; in (0, 1] (default: {DEFAULT_MARGIN}, NV-Retriever-v1's; 1 skips only those above the positive).",
    )
    parser.add_argument(
        "--chunk_size",
        type=NumberFlag(SENTENCES),
        default=None,
        help="Anchors scored against the whole corpus per matrix product (default: as many as keep 64M scores, at "
        "most 1024); lower it if the device runs out of memory.",
    )
    parser.add_argument("--overwrite", action="store_true", help="Replace --output if it exists.")
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Mine and write ``--output``; returns the summary (``rows``, ``num_negatives``, ``skipped_by_margin``,
    ``anchors_with_skips``, ``corpus_size``, ``output``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from ..mining import TooFewCandidatesError, candidate_corpus, check_corpus_size, mine_pairs
    from ..training.data.pair_columns import ANCHOR, PAIR_LAYOUTS, POSITIVE, num_hard_negatives
    from ..training.data.pairs import read_pairs

    # The cheap checks first, so that a typo fails in a second rather than after the model loads (the numbers were
    # checked as the flags were parsed).
    output = Path(args.output)
    if output.suffix != ".csv":
        parser.error(
            f"--output {echo(args.output)}: write a .csv file (the trainer reads labelled pairs from its header; "
            "another suffix reads as something else)."
        )
    if output.is_dir():
        parser.error(f"--output {echo(args.output)} is a directory; name the .csv file to write.")
    if output.exists() and not args.overwrite:
        parser.error(f"--output {echo(args.output)} exists; pass --overwrite to replace it.")

    pairs = read_pairs(args.train_file)
    given = num_hard_negatives(pairs)
    if given is None:
        raise UsageError(
            f"--train_file {echo(args.train_file)} holds one sentence a row (a {ANCHOR!r} column): mining needs "
            f"labelled pairs, {PAIR_LAYOUTS}."
        )
    if given:
        logger.warning("%s: its %d hard negative(s) a row are replaced by the mined ones.", args.train_file, given)
    anchors, positives = pairs[ANCHOR], pairs[POSITIVE]

    options = EncoderOptions.from_args(args)
    try:  # every anchor's candidates are counted before the model loads
        check_corpus_size(candidate_corpus(anchors, positives), args.num_negatives)
        mined = mine_pairs(
            options.load(args.model_name_or_path),
            anchors,
            positives,
            num_negatives=args.num_negatives,
            margin=args.margin,
            batch_size=options.batch_size,
            chunk_size=args.chunk_size,
            show_progress_bar=options.show_progress_bar,
        )
    except TooFewCandidatesError as err:
        margin = f", {err.skipped_by_margin} scored above --margin {args.margin:g} x its positive's score"
        raise UsageError(
            f"{args.train_file}: pair {err.row + 1} (anchor {echo(anchors[err.row])}) has {err.eligible} candidate(s) "
            f"left of the file's {len(set(positives))} distinct positives (less its own positives and itself"
            f"{margin if err.skipped_by_margin else ''}), fewer than --num_negatives {args.num_negatives}: lower "
            "--num_negatives, raise --margin, or add pairs."
        ) from None

    if output.exists() and not args.overwrite:  # checked first; a file may have appeared while the model ran
        raise UsageError(f"--output {echo(args.output)} appeared while mining; it is left as it is, nothing written.")
    write_text_atomic(output, triplets_csv(mined.anchors, mined.positives, mined.negatives))
    summary = {
        "rows": len(mined.anchors),
        "num_negatives": args.num_negatives,
        "skipped_by_margin": mined.skipped_by_margin,
        "anchors_with_skips": mined.anchors_with_skips,
        "corpus_size": mined.corpus_size,
        "output": str(output),
    }
    print(
        f"Wrote {summary['rows']} rows ({args.num_negatives} hard negative{'s' if args.num_negatives > 1 else ''} "
        f"each, mined from {mined.corpus_size} distinct positives) to {output}; the margin ({args.margin:g} x the "
        f"positive's score) skipped {mined.skipped_by_margin} candidate(s) of {mined.anchors_with_skips} anchor(s)."
    )
    return summary


def console_main() -> None:
    """The command-line entry point: ``python -m hf_cse.mine`` and the ``hf-cse-mine`` console script."""
    console_script(main, build_parser().prog)
