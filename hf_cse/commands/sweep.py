"""Train every setting of a grid with several seeds, select each run's checkpoint on STS-B dev, score it once on the
STS test sets, and report the mean and spread over seeds.

Example (4 settings x 3 seeds = 12 runs of run_unsup.py)::

    python -m hf_cse.sweep --config examples/configs/dcl_minilm_wiki1m.yaml --seeds 42 43 44 \\
        --grid temperature=0.1,0.2 --grid objective_kwargs.tau_plus=0.01,0.05 \\
        --sts_dir SentEval/data/downstream/STS --output_dir sweeps/dcl -- --max_steps 500 --eval_steps 125

``--grid KEY=V1,V2,...`` (repeatable) sweeps a ``run_unsup.py`` flag (its name without dashes; the values are parsed
as that flag's), ``config`` (one YAML per value), or one key of a JSON flag (``objective_kwargs.KEY``,
``auxiliary_losses.TERM.KEY``, ...: the value is JSON, merged into the flag's mapping). Commas inside brackets,
braces or quotes do not split values. The flags after ``--`` go to every run.

Selection, as in the papers: STS-B dev Spearman every ``eval_steps`` (the runs' own setting, else 125), a checkpoint
at each evaluation, the best one reloaded at the end; then STS12-16 ("all"), STS-B test and SICK-R test score that
model once. The sweep sets the flags this takes (``--eval_strategy``, ``--save_steps``, ``--load_best_model_at_end``,
...), and ``--save_total_limit 1`` unless given (while training, the Trainer keeps the best checkpoint and the
latest, to resume from).

Output, in ``--output_dir``::

    runs/NAME/           each run's folder (NAME: the setting's values and the seed); the selected model at its root
    logs/NAME.log        each run's training output
    results/NAME.json    each finished run: dev selection, test scores, arguments, how it trained (``trained_with``:
                         its card's record); written atomically
    sweep.json           {"runs": [{name, setting, seed, status, run_dir, log, dev, test}, ...],
                          "settings": [{name, setting, runs, seeds, dev: {mean, std}, test: {TASK: {mean, std}}}]}
    sweep.md             one row per setting: mean ± std over seeds of STS-B dev and each test task

Rerunning the same command resumes: finished runs are skipped (never re-run or overwritten), an interrupted one
resumes from its latest complete checkpoint, a failed one is retried. Runs go one after another, or one per device
at a time when several CUDA devices are visible (each pinned with ``CUDA_VISIBLE_DEVICES``); ``--runs_per_device N``
runs N at once on each device (or N sharing the CPU cores). A failed run is reported and the sweep goes on; the
command then exits with 1.

The runs die with the sweep. Ctrl-C, SIGTERM or a closed terminal (SIGHUP) stops them with SIGTERM: the sweep waits
for each to save a checkpoint and exit, however long that takes (a second Ctrl-C or SIGTERM kills them at once; each
then resumes from its last complete checkpoint), and ends in one line naming the signals (exit 1). Ctrl-Z stops the
runs with the sweep, and fg or bg continues them. On Linux the runs are outside the terminal's process group, so a
terminal's Ctrl-C and Ctrl-Z reach them only this way (elsewhere they reach them too, and Ctrl-C stops them at once,
without a checkpoint), and a sweep killed outright has the kernel stop them. A run folder is emptied or resumed only
under its lock, so a run still alive there is never deleted nor joined by a second trainer.

A secret among the flags after ``--`` (``--hub_token``) reaches the runs, and nothing else: every argument list the
sweep writes (``sweep.json``, ``sweep.md``, ``results/``, ``runs/NAME.arguments.json``, the logs) shows
``<HUB_TOKEN>`` instead, and a token changed between invocations does not make a finished run another one.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..atomic_files import write_json_atomic, write_text_atomic
from ..errors import CSEError, UsageError
from ..folder_lock import FolderLock
from ..number_ranges import PROCESS_LIMIT, SEED, SENTENCES, NumberFlag, NumberRange
from ..redaction import RedactedArguments, command_line, secret_flag
from ..sweeps.grid import GridAxis, check_axes, expand, parse_grid
from ..sweeps.runs import (
    FAILED,
    DeviceSlot,
    Outcome,
    device_slots,
    install_signal_handlers,
    read_json,
    run_child,
    run_pending,
    stop_cause,
)
from .cli import ERRORS_HELP, OneLineErrorParser, console_script

# run_unsup.py's arguments, the runs' scoring and the summary's statistics import transformers, torch and scipy
# (seconds of CPU): imported where they run, so that --help does without them (tests/test_help_imports.py).
if TYPE_CHECKING:
    from ..sweeps.selection import Launcher, SweepRun

logger = logging.getLogger(__name__)

PROG = "python -m hf_cse.sweep"
DEFAULT_SCRIPT = Path(__file__).resolve().parents[2] / "run_unsup.py"


class SweepRunsFailedError(CSEError, RuntimeError):
    """Some runs of the sweep failed; the others finished and are in ``sweep.json``."""


class SweepStoppedError(CSEError, RuntimeError):
    """Ctrl-C, SIGTERM or SIGHUP stopped the sweep and its running runs; rerunning the command resumes it."""


def build_parser() -> OneLineErrorParser:
    """The argument parser of ``python -m hf_cse.sweep`` (the flags before ``--``)."""
    parser = OneLineErrorParser(
        prog=PROG,
        usage=f"{PROG} --seeds SEED [SEED ...] [--grid KEY=V1,V2 ...] [--config FILE] --output_dir DIR "
        "[options] [-- RUN_UNSUP_FLAGS ...]",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=ERRORS_HELP,
    )
    parser.add_argument(
        "--seeds", nargs="*", type=NumberFlag(SEED), default=None, metavar="SEED", help="Seeds, one run each."
    )
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="A run_unsup.py flag (or config, or FLAG.KEY of a JSON flag) and its values; repeat for more axes.",
    )
    parser.add_argument("--config", default=None, help="run_unsup.py --config file of every run.")
    parser.add_argument("--output_dir", required=True, help="The sweep's folder (created; rerun to resume).")
    parser.add_argument(
        "--sts_dir",
        default=None,
        help="SentEval-layout STS folder: STS-B dev selects, the test sets score (default: the config's sts_dir).",
    )
    parser.add_argument(
        "--eval_batch_size", type=NumberFlag(SENTENCES), default=128, help="Test evaluation batch size (default: 128)."
    )
    parser.add_argument(
        "--keep_checkpoints",
        action="store_true",
        help="Keep each run's checkpoint-N folders after scoring (default: delete them; the selected model stays).",
    )
    parser.add_argument(
        "--runs_per_device",
        type=NumberFlag(NumberRange(low=1, high=PROCESS_LIMIT, integer=True)),
        default=1,
        metavar="N",
        help="Runs at once on each CUDA device (default: 1): a small model's run uses a fraction of a large GPU. "
        "Without CUDA, N runs share the CPU cores.",
    )
    parser.add_argument(
        "--run_unsup", default=str(DEFAULT_SCRIPT), help="The run_unsup.py to run (default: the repository's)."
    )
    return parser


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The sweep's own arguments and the ``run_unsup.py`` flags after the first ``--``."""
    argv = list(argv)
    index = argv.index("--") if "--" in argv else len(argv)
    return argv[:index], argv[index + 1 :]


def main(
    argv: Sequence[str] | None = None, *, launch: Launcher = run_child, slots: Sequence[DeviceSlot] | None = None
) -> dict[str, Any]:
    """Run (or resume) the sweep; returns what it writes to ``sweep.json``.

    Args:
        argv: the command line without the program name.
        launch: starts a run's training (default: a ``run_unsup.py`` subprocess; tests pass an in-process one).
        slots: where runs go (default: :func:`~hf_cse.sweeps.runs.device_slots`, ``--runs_per_device`` per visible
            CUDA device).

    Raises:
        UsageError: bad arguments, or a finished run in ``--output_dir`` with other arguments.
        SweepRunsFailedError: some runs failed (after all the others were done).
    """
    # From here on every argument list holds placeholders for its secrets; only the runs' launch fills them in.
    arguments = RedactedArguments.of(sys.argv[1:] if argv is None else argv)
    sweep_argv, passthrough = split_argv(arguments.arguments)
    args = build_parser().parse_args(sweep_argv)
    from ..sweeps.arguments import SELECTION_METRIC, RunUnsupArguments, plain_number
    from ..sweeps.report import PENDING, run_entry, sweep_markdown
    from ..sweeps.selection import SweepRun, TrainSelectEvaluate

    if not args.seeds:
        raise UsageError("--seeds: give at least one seed, e.g. --seeds 42 43 44.")
    repeated = sorted({seed for seed in args.seeds if args.seeds.count(seed) > 1})
    if repeated:
        raise UsageError(f"--seeds: {', '.join(map(str, repeated))} given twice; list each seed once.")
    script = RunUnsupArguments(args.run_unsup)
    for spec in args.grid:
        key = spec.partition("=")[0].strip()
        if secret_flag(f"--{key.lstrip('-').partition('.')[0]}") is not None:  # its values would name folders
            raise UsageError(f"--grid {key}: a secret is no setting to sweep; give it once after --.")
    axes = [parse_grid(spec) for spec in args.grid]
    axes = [GridAxis(script.grid_key(axis.key), axis.values) for axis in axes]
    check_axes(axes)
    script.check_passthrough(passthrough, [axis.key for axis in axes])

    output_dir = Path(args.output_dir).absolute()
    commands = [
        script.setting_command(
            setting, config=args.config, passthrough=passthrough, sts_dir=args.sts_dir, placeholder_dir=output_dir
        )
        for setting in expand(axes)
    ]
    # Seed-major: every setting's first seed before any second seed, so a partial sweep covers every setting.
    runs = [SweepRun(command, seed) for seed in args.seeds for command in commands]
    runner = TrainSelectEvaluate(
        Path(args.run_unsup), output_dir, eval_batch_size=args.eval_batch_size, keep_checkpoints=args.keep_checkpoints,
        launch=launch, secrets=arguments,
    )  # fmt: skip
    entries = {run.name: run_entry(run.name, run.command.values, run.seed, PENDING, None) for run in runs}
    sweep = {
        "command": command_line([*PROG.split(), *arguments.arguments]),
        "seeds": list(args.seeds),
        "grid": {axis.key: list(axis.values) for axis in axes},
        "config": args.config,
        "run_unsup_arguments": passthrough,
        "eval_steps": sorted({plain_number(command.eval_steps) for command in commands}),
        "selection": f"best STS-B dev {SELECTION_METRIC} every eval_steps (load_best_model_at_end)",
        "test": "Spearman x 100 of cosine similarity: STS12-16 'all', STS-B test, SICK-R test",
    }

    def record_outcome(outcome: Outcome[SweepRun]) -> None:
        run = outcome.task
        if outcome.status == FAILED:
            entry = run_entry(
                run.name, run.command.values, run.seed, FAILED, None, error=outcome.error,
                run_dir=str(runner.run_dir(run).relative_to(output_dir)),
                log=str(runner.log_path(run).relative_to(output_dir)),
            )  # fmt: skip
        else:  # done now, or by an earlier invocation (skipped): its result file is its record
            record = outcome.record if outcome.record is not None else read_json(result_path(run))
            entry = run_entry(run.name, run.command.values, run.seed, "done", record)
        entries[run.name] = entry
        write_summary(output_dir, sweep, commands, list(entries.values()))

    def result_path(run: SweepRun) -> Path:
        return output_dir / "results" / f"{run.name}.json"

    with FolderLock(output_dir, PROG):  # a second sweep in the same folder: OutputDirLockedError, one line
        try:
            run_pending(
                runs,
                name=lambda run: run.name,
                result_path=result_path,
                is_finished=lambda run, path: is_finished(run, path, output_dir),
                run=runner,
                slots=device_slots(runs_per_device=args.runs_per_device) if slots is None else slots,
                on_outcome=record_outcome,
            )
        except KeyboardInterrupt as err:  # the running runs were stopped (run_child): saved, or killed by a 2nd signal
            summary = write_summary(output_dir, sweep, commands, list(entries.values()))
            done = sum(entry["status"] == "done" for entry in summary["runs"])
            raise SweepStoppedError(
                f"Stopped by {stop_cause(err)} with {done} of {len(runs)} runs done ({output_dir / 'sweep.md'}); the "
                "running ones were stopped. Rerun the same command to resume them."
            ) from None
        summary = write_summary(output_dir, sweep, commands, list(entries.values()))
    print(sweep_markdown(summary))
    failed = summary["failed"]
    if failed:
        raise SweepRunsFailedError(
            f"{len(failed)} of {len(runs)} runs failed ({', '.join(failed)}); their logs are in "
            f"{output_dir / 'logs'}. Rerun the same command to retry them."
        )
    return summary


def is_finished(run: SweepRun, path: Path, output_dir: Path) -> bool:
    """Whether ``path`` holds a finished result of ``run``.

    Raises:
        UsageError: it is a finished run of other arguments (or of another version of the config file): it is
            neither reused nor overwritten.
    """
    from ..sweeps.report import is_complete_record

    if not path.exists():
        return False
    record = read_json(path)
    if not is_complete_record(record):
        logger.warning("%s is unreadable or incomplete: running %s again.", path, run.name)
        return False
    if not run.is_same_run(record):
        raise UsageError(
            f"{path} is a finished run of other run_unsup.py arguments or another version of the config file than "
            f"this sweep gives {run.name}; use another --output_dir, or delete {path.relative_to(output_dir)} (and "
            f"runs/{run.name}) to run it again."
        )
    return True


def write_summary(
    output_dir: Path, sweep: dict[str, Any], commands: Sequence[Any], runs: list[dict[str, Any]]
) -> dict[str, Any]:
    """Write ``sweep.json`` and ``sweep.md`` (atomically) for the runs as they stand; returns the summary."""
    from ..sweeps.report import setting_summary, sweep_markdown

    summary = {
        **sweep,
        "runs": runs,
        "settings": [setting_summary(command.setting, command.values, sweep["seeds"], runs) for command in commands],
        "failed": [run["name"] for run in runs if run["status"] == FAILED],
        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    write_json_atomic(output_dir / "sweep.json", summary)
    write_text_atomic(output_dir / "sweep.md", sweep_markdown(summary))
    return summary


def console_main() -> None:
    """The command-line entry point: ``python -m hf_cse.sweep`` and the ``hf-cse-sweep`` console script."""
    install_signal_handlers()  # `kill PID` stops the training subprocesses as well, and Ctrl-Z pauses them
    console_script(main, PROG)
