"""``python -m hf_cse.transfer``: SentEval transfer tasks for a checkpoint (see :mod:`hf_cse.evaluation.transfer`).

    python -m hf_cse.transfer --model_name_or_path out/unsup-simcse-bert \\
        --data_dir SentEval/data/downstream --tasks mr cr sst2 --output_json out/unsup-simcse-bert/transfer.json
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..evaluation.options import TRANSFER_TASKS
from ..number_ranges import SEED, SENTENCE_LIMIT, NumberFlag, NumberRange
from .cli import (
    ERRORS_HELP,
    EncoderOptions,
    OneLineErrorParser,
    add_encoder_arguments,
    console_script,
    write_output_json,
)

# The evaluation code (hf_cse.evaluation.transfer and the STS evaluator's plain_table) imports torch: imported
# where it runs, so that --help does without it (tests/test_help_imports.py).


def _format_table(results: dict[str, dict[str, float]]) -> str:
    """Plain-text table: task, examples, acc, dev_acc (SST-2) and f1 (MRPC), x 100; the average last."""
    from ..evaluation.sts_evaluator import plain_table

    def cell(result: dict[str, float], key: str) -> str:
        return "" if key not in result else str(result[key]) if key == "num_examples" else f"{result[key]:.2f}"

    columns = ("num_examples", "acc", "dev_acc", "f1")
    rows = [(task, *(cell(result, key) for key in columns)) for task, result in results.items()]
    return plain_table([("task", "examples", "acc", "dev_acc", "f1"), *rows])


TRANSFER_DATA_HINT = (
    "SentEval's data/downstream/get_transfer_data.bash (https://github.com/facebookresearch/SentEval) downloads the "
    "transfer tasks' data beside itself; python -m hf_cse.download fetches the STS data only."
)
"""What a message about missing transfer-task data adds: where the data comes from."""


def build_parser() -> OneLineErrorParser:
    """The argument parser of ``python -m hf_cse.transfer``."""
    parser = OneLineErrorParser(
        prog="python -m hf_cse.transfer",
        epilog=ERRORS_HELP,
        description="SentEval transfer tasks: accuracy (x 100) of logistic regression on frozen sentence embeddings.",
    )
    add_encoder_arguments(parser, output_json=True)
    parser.add_argument(
        "--data_dir", required=True, help="SentEval's data/downstream folder (MR/, CR/, SUBJ/, MPQA/, SST/, ...)."
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=list(TRANSFER_TASKS),
        metavar="TASK",
        help=f"Tasks to evaluate (default: all). Valid: {' '.join(TRANSFER_TASKS)}.",
    )
    # and at most the examples of a task, checked as it is scored
    folds = NumberFlag(NumberRange(low=2, high=SENTENCE_LIMIT, integer=True))
    parser.add_argument("--kfold", type=folds, default=10, help="CV folds for MR, CR, SUBJ, MPQA (default: 10).")
    parser.add_argument(
        "--seed", type=NumberFlag(SEED), default=0, help="Seed of the folds and the penalty hold-out (default: 0)."
    )
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the evaluation; returns the dict written to ``--output_json``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from ..evaluation.transfer import TRANSFER_L2_GRID, load_transfer_tasks, score_transfer  # after a --help

    # Check the arguments and read the data before loading the model, so a typo or a missing file fails in seconds.
    try:
        loaded = load_transfer_tasks(args.tasks, args.data_dir)
    except FileNotFoundError as err:
        parser.error(f"{err} {TRANSFER_DATA_HINT}")
    except ValueError as err:
        parser.error(str(err))

    options = EncoderOptions.from_args(args)
    encoder = options.load(args.model_name_or_path)
    results = score_transfer(options.encode_function(encoder), loaded, kfold=args.kfold, seed=args.seed)
    settings = {
        **options.settings(args.model_name_or_path, encoder),
        "data_dir": str(args.data_dir),
        "tasks": list(loaded),
        "kfold": args.kfold,
        "seed": args.seed,
        "l2_grid": list(TRANSFER_L2_GRID),
    }
    output: dict[str, Any] = {**results, "settings": settings}
    print(_format_table(results))
    write_output_json(args.output_json, output)
    return output


def console_main() -> None:
    """The command-line entry point: ``python -m hf_cse.transfer`` and the ``hf-cse-transfer`` console script."""
    console_script(main, build_parser().prog)
