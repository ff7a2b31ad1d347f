"""Evaluate a sentence encoder on the STS benchmarks from the command line.

Example (the SimCSE setting: STS12-16 "all", STS-B test, SICK-R test, cosine similarity)::

    python -m hf_cse.eval --model_name_or_path out/unsup-simcse-bert --sts_dir SentEval/data/downstream/STS \\
        --output_json out/unsup-simcse-bert/sts.json

MTEB's setting differs only for SICK-R, which MTEB scores on all 9,927 pairs: add ``--sickr_split all``.

``--alignment_uniformity`` adds Wang & Isola's alignment (STS-B pairs with a gold score >= 4) and uniformity (all
distinct STS-B sentences) of the ``--stsb_split`` split (default: test), written under ``"alignment_uniformity"``.

``--truncate_dim 256 128 64`` scores the first ``d`` dimensions of each embedding for every ``d`` (a Matryoshka
model's prefixes; see ``--matryoshka_dims`` of ``run_unsup.py``): the sentences are encoded once, a table is printed
per dimension and one of the averages over dimensions; the first ``d`` gives the top-level results (and the
alignment/uniformity and paper comparison), every ``d`` its summary under ``"truncate_dim"``.

Prints a table (task, split, pairs, ``all`` and ``wmean`` Spearman x 100) and, with ``--output_json``, writes::

    {"sts12": 68.4, ..., "stsb": 76.9, "sickr": 72.3, "avg": 73.1,
     "details": {"sts12": {"all": ..., "wmean": ..., "subsets": {...}, ...}, ..., "settings": {...}}}

``--mteb_tasks TASK ...`` (the ``mteb`` extra: ``pip install "hf_cse[mteb]"``) also runs those MTEB tasks
(``mteb.evaluate``; a task of one's own: an ``AbsTask`` subclass in an ``--import_module`` module) through
:class:`~hf_cse.evaluation.mteb_encoder.MTEBEncoder`, the checkpoint's own pooler and prompt template, for each
``--truncate_dim`` too; the scores (x 100) go under ``"mteb"`` in the JSON and, for a local hf_cse checkpoint, into its
card's model-index beside the STS entries. Given alone, it runs no STS set; add ``--sts_dir`` or ``--tasks`` for both::

    python -m hf_cse.eval --model_name_or_path out/unsup-simcse-bert --mteb_tasks STS22.v2 SciFact

``--compare_to examples/configs/paper/NAME.yaml`` also prints the paper's test scores (the config's ``paper_results``
block) beside the model's, with the differences, and adds them to the JSON under ``"paper_comparison"``; the papers'
setting is SentEval's tokenized copy (``--sts_dir SentEval/data/downstream/STS``), STS-B test and SICK-R test::

    python -m hf_cse.eval --model_name_or_path result/dclr-bert-base --sts_dir SentEval/data/downstream/STS \\
        --compare_to examples/configs/paper/dclr_bert_base.yaml
"""

from __future__ import annotations

import argparse
import importlib
import logging
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import UsageError, echo
from ..evaluation.options import ALIGNMENT_MIN_SCORE
from ..evaluation.sts_data import (
    STS_DOWNLOAD_HINT,
    STS_SPLITS,
    STS_TASKS,
    detect_sts_text,
    load_sts_task,
    normalize_task_name,
)
from ..evaluation.training_record import read_training_record
from ..json_types import json_matches, json_type
from ..number_ranges import WIDTH_LIMIT, NumberFlag, NumberRange
from ..run_files import TRAINING_SUMMARY_FILE
from .cli import (
    ERRORS_HELP,
    EncoderOptions,
    OneLineErrorParser,
    add_encoder_arguments,
    check_directory,
    console_script,
    write_output_json,
)

# The model, the evaluation and the paper configs import torch and transformers (seconds of CPU): imported where
# they run (main: once the arguments are parsed), so that --help does without them (tests/test_help_imports.py).
if TYPE_CHECKING:
    from ..evaluation.sts_evaluator import STSResults
    from ..modeling.encoder import SentenceEncoder

logger = logging.getLogger(__name__)


def build_parser() -> OneLineErrorParser:
    """The argument parser of ``python -m hf_cse.eval``."""
    parser = OneLineErrorParser(
        prog="python -m hf_cse.eval",
        epilog=ERRORS_HELP,
        description="Spearman correlation (x 100) of cosine similarities with gold scores on STS12-16, STS-B, SICK-R.",
    )
    add_encoder_arguments(parser, output_json=True)
    parser.add_argument(
        "--sts_dir",
        default=None,
        help="SentEval-layout STS folder (STS1x-en-test/, STSBenchmark/, and SICK/ inside it or beside it, as in "
        "SentEval's data/downstream/). Omit to load MTEB's Hub copies (needs network; use --sickr_split all).",
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        metavar="TASK",
        help=f"STS tasks to evaluate (default: all, or none with --mteb_tasks and no --sts_dir). Valid: "
        f"{' '.join(STS_TASKS)}.",
    )
    parser.add_argument(
        "--mteb_tasks",
        nargs="+",
        default=None,
        metavar="TASK",
        help="MTEB tasks to run too (mteb.evaluate, the mteb extra: pip install 'hf_cse[mteb]'), by name: mteb's "
        "(e.g. STS22.v2 SciFact) or an AbsTask subclass's of an --import_module module. Scores x 100, for each "
        "--truncate_dim; added to the card's model-index of a local hf_cse checkpoint.",
    )
    parser.add_argument(
        "--sickr_split",
        default=None,
        choices=STS_SPLITS["sickr"],
        help="SICK-R split: test (4,927 pairs; SentEval/SimCSE; the default with --sts_dir) or all (9,927 pairs; "
        "MTEB; the default and only choice without --sts_dir).",
    )
    parser.add_argument(
        "--stsb_split", default="test", choices=STS_SPLITS["stsb"], help="STS-B split (default: test)."
    )
    parser.add_argument(
        "--alignment_uniformity",
        action="store_true",
        help=f"Also report alignment (STS-B pairs with gold >= {ALIGNMENT_MIN_SCORE:g}) and uniformity (all distinct "
        "STS-B sentences) on normalized embeddings, for the --stsb_split split.",
    )
    parser.add_argument(
        "--truncate_dim",
        type=NumberFlag(NumberRange(low=1, high=WIDTH_LIMIT, integer=True, note="at most the embedding size")),
        nargs="+",
        default=None,
        metavar="D",
        help="Score the first D dimensions of each embedding (Matryoshka models); several values score each, the "
        "first giving the top-level results. Default: the full embedding.",
    )
    parser.add_argument(
        "--compare_to",
        default=None,
        metavar="CONFIG",
        help="A paper config (examples/configs/paper/*.yaml): print the paper's test scores (its paper_results "
        "block) beside the model's, with the differences, and add them to --output_json.",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the evaluation; returns the dict written to ``--output_json``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from ..evaluation.analysis import EmbeddingCache, alignment_uniformity
    from ..evaluation.matryoshka import truncated
    from ..evaluation.paper_comparison import check_paper_setting, compare_with_paper
    from ..evaluation.sts_evaluator import evaluate_sts
    from ..objectives.matryoshka import check_matryoshka_dims
    from ..training.arguments.config_file import read_paper_results

    # Check the cheap things before loading the model, so a typo fails in a second (the numbers were, as parsed).
    if args.tasks is None:  # --mteb_tasks alone scores no STS set: without --sts_dir they would come from the Hub
        args.tasks = [] if args.mteb_tasks is not None and args.sts_dir is None else list(STS_TASKS)
    try:
        args.tasks = [normalize_task_name(task) for task in args.tasks]
    except ValueError as err:
        parser.error(str(err))
    check_directory(parser, "--sts_dir", args.sts_dir, hint=STS_DOWNLOAD_HINT)
    if args.truncate_dim is not None:
        check_matryoshka_dims(args.truncate_dim, name="--truncate_dim")  # the embedding size once the model is loaded
    if args.sickr_split is None:
        args.sickr_split = "test" if args.sts_dir is not None else "all"
    if args.sts_dir is None and args.tasks:
        if args.sickr_split != "all" and "sickr" in args.tasks:
            parser.error(f"--sickr_split {args.sickr_split} needs --sts_dir: MTEB's Hub copy of SICK-R is 'all'.")
        # Read before anything is logged and before the model loads: an unreachable Hub is then one line, in
        # seconds. evaluate_sts reads them again, from datasets' cache.
        for task in args.tasks:
            load_sts_task(task, None, {"stsb": args.stsb_split, "sickr": args.sickr_split}.get(task))
        logger.warning("No --sts_dir given: scoring MTEB's STS datasets from the Hugging Face Hub.")
    # Read before the model is loaded, so that a missing file fails fast.
    stsb_subsets = load_sts_task("stsb", args.sts_dir, args.stsb_split) if args.alignment_uniformity else None
    paper = None
    if args.compare_to is not None:
        if not args.tasks:
            parser.error("--compare_to compares STS scores: give --sts_dir (or --tasks) beside --mteb_tasks.")
        paper = read_paper_results(args.compare_to)
        check_paper_setting(args.tasks, args.stsb_split, args.sickr_split)

    options = EncoderOptions.from_args(args)
    # After --import_module (a custom task's module), before the model loads: an unknown task fails in seconds.
    mteb_tasks = None if args.mteb_tasks is None else mteb_encoder().resolve_mteb_tasks(args.mteb_tasks)
    encoder = options.load(args.model_name_or_path)

    # The cache lets alignment/uniformity and every truncation reuse the embeddings of the first evaluation.
    full = EmbeddingCache(options.encode_function(encoder))
    dims: list[int | None] = [None] if args.truncate_dim is None else list(args.truncate_dim)
    if args.truncate_dim is not None:
        check_matryoshka_dims(
            args.truncate_dim, embedding_size=encoder.model.config.hidden_size, name="--truncate_dim"
        )
    output: dict[str, Any] = {}
    per_dim: dict[int | None, STSResults] = {}
    encode_by_dim = {dim: full if dim is None else truncated(full, dim) for dim in dims}
    for dim in dims if args.tasks else ():
        results = evaluate_sts(
            encode_by_dim[dim], args.tasks, args.sts_dir, sickr_split=args.sickr_split, stsb_split=args.stsb_split
        )
        results.settings.update(options.settings(args.model_name_or_path, encoder), tasks=list(results.tasks))
        if dim is not None:
            results.settings["truncate_dim"] = dim
            print(f"First {dim} dimensions:")
        print(results.format_table())
        per_dim[dim] = results
    # The first dimension listed gives the top-level results, alignment/uniformity and the paper comparison.
    encode, results = encode_by_dim[dims[0]], per_dim.get(dims[0])
    if results is not None:
        output.update(results.to_dict())
    if args.truncate_dim is not None and results is not None:
        output["truncate_dim"] = {str(dim): per_dim[dim].summary() for dim in args.truncate_dim}
        if len(args.truncate_dim) > 1:
            print(format_dimension_table(per_dim))
    if stsb_subsets is not None:
        geometry = alignment_uniformity(encode, stsb_subsets)
        output["alignment_uniformity"] = {**geometry, "stsb_split": args.stsb_split, "min_score": ALIGNMENT_MIN_SCORE}
        print(
            f"STS-B {args.stsb_split}: alignment {geometry['alignment']:.4f}, uniformity {geometry['uniformity']:.4f}"
        )
    if mteb_tasks is not None:
        output["mteb"] = run_mteb(args, options, encoder, mteb_tasks, dims)
    if paper is not None:
        # MTEB's Hub copies are raw text; a folder is raw or SentEval's tokenized copy, judged by letter case.
        text = "raw" if args.sts_dir is None else detect_sts_text(args.sts_dir)
        comparison = compare_with_paper(results, paper, text, trained_from(args.model_name_or_path))
        print(comparison.format_table())
        output["paper_comparison"] = comparison.to_dict()
    write_output_json(args.output_json, output)
    return output


def mteb_encoder() -> ModuleType:
    """:mod:`hf_cse.evaluation.mteb_encoder`, imported when ``--mteb_tasks`` is given (``mteb`` takes seconds to
    import, and is an optional dependency: without it, the import is one line saying how to install it)."""
    return importlib.import_module("hf_cse.evaluation.mteb_encoder")


def run_mteb(
    args: argparse.Namespace,
    options: EncoderOptions,
    encoder: SentenceEncoder,
    tasks: Sequence[Any],
    dims: Sequence[int | None],
) -> list[dict[str, Any]]:
    """Run the ``--mteb_tasks`` for each dimension of ``dims`` (``None``: the whole embedding), print their table,
    add them to the card of a local hf_cse checkpoint, and return the records of
    :func:`~hf_cse.evaluation.mteb_encoder.evaluate_mteb`."""
    module = mteb_encoder()
    trained_dims = module.trained_matryoshka_dims(args.model_name_or_path)
    encoders = {dim: module.MTEBEncoder(encoder, args.model_name_or_path, dim, trained_dims) for dim in dims}
    records = module.evaluate_mteb(encoders, tasks, options.batch_size, options.show_progress_bar)
    print(module.format_mteb_table(records))
    card = module.add_to_card(args.model_name_or_path, module.model_index_entries(records))
    if card is not None:
        print(f"Added {len(records)} MTEB result{'' if len(records) == 1 else 's'} to the model-index of {card}")
    return records


def trained_from(model_name_or_path: str) -> str | None:
    """The model a checkpoint that hf_cse trained started from, read from its card record
    (``hf_cse_training.json``); ``None`` for any other model, whose base model is unknown.

    Raises:
        UsageError: the record is not JSON, not an object, or its ``base_model`` is neither a string nor null.
    """
    record = read_training_record(model_name_or_path)
    if record is None:
        return None
    path = Path(model_name_or_path) / TRAINING_SUMMARY_FILE
    base_model = record.get("base_model") if isinstance(record, dict) else record
    if not isinstance(record, dict) or not json_matches(base_model, str | None):
        shown = f"its base_model is {echo(base_model)}" if isinstance(record, dict) else f"it holds {echo(record)}"
        raise UsageError(f"{path}: {shown} (a JSON {json_type(base_model)}); base_model must be a string or null.")
    return base_model


def format_dimension_table(per_dim: dict[int | None, STSResults]) -> str:
    """One row per dimension: each task's ``all`` Spearman x 100 and the average."""
    from ..evaluation.sts_evaluator import plain_table

    rows = [(str(dim), *(f"{score:.2f}" for score in results.summary().values())) for dim, results in per_dim.items()]
    return plain_table([("dim", *next(iter(per_dim.values())).tasks, "avg"), *rows])


def console_main() -> None:
    """The command-line entry point: ``python -m hf_cse.eval`` and the ``hf-cse-eval`` console script."""
    console_script(main, build_parser().prog)
