"""The per-run records a study keeps beside the code (``benchmarks/results/STUDY/ARM/*.json``): a finished run's sweep
record (dev selection, test scores, arguments), so that a study outlives its work folder and a later session on a
fresh machine trains only the runs still missing. Shared by ``quality_study.py`` and ``supervised_quality.py``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from _common import write_json_atomic

from hf_cse.sweeps.report import is_complete_record
from hf_cse.sweeps.runs import read_json, stop_cause

logger = logging.getLogger(__name__)


def read_record(path: Path) -> dict[str, Any]:
    """A finished run's record: its dev selection and every test column.

    Raises:
        SystemExit: unreadable or incomplete (one line naming the file).
    """
    record = read_json(path)
    if not is_complete_record(record):
        raise SystemExit(f"{path} is not a finished run's record (unreadable, or no dev or test scores); delete it.")
    return record


def restore_records(
    arm: str, work_dir: Path, records_dir: Path, check: Callable[[Path, dict[str, Any]], None] | None = None
) -> int:
    """Copy the arm's kept records (``records_dir/ARM/``) into its sweep's ``work_dir/ARM/results/`` where that holds
    none of the same name (a record there is never overwritten); returns how many were copied. ``check(path,
    record)`` may refuse a kept record (``SystemExit``) before anything is copied."""
    target = work_dir / arm / "results"
    kept = sorted((records_dir / arm).glob("*.json"))
    records = {path: read_record(path) for path in kept}
    for path, record in records.items():
        if check is not None:
            check(path, record)
    copied = 0
    for path, record in records.items():
        if not (target / path.name).exists():
            write_json_atomic(target / path.name, record)
            copied += 1
    if copied:
        logger.info("%s: %d finished run(s) restored from %s.", arm, copied, records_dir / arm)
    return copied


def keep_records(arm: str, work_dir: Path, records_dir: Path) -> int:
    """Copy the finished runs' records of the arm's sweep (its ``results/*.json``, written once a run is scored) into
    ``records_dir/ARM/``, those new or changed; returns how many were written. An incomplete one is left out with a
    warning: the sweep runs it again."""
    written = 0
    for path in sorted((work_dir / arm / "results").glob("*.json")):
        record = read_json(path)
        if not is_complete_record(record):
            logger.warning("%s is incomplete: not kept (the sweep runs it again).", path)
            continue
        kept = records_dir / arm / path.name
        if read_json(kept) != record:
            write_json_atomic(kept, record)
            written += 1
    return written


def sweep_arm(
    arm: str,
    argvs: Iterable[list[str]],
    where: str,
    work_dir: Path,
    records_dir: Path,
    restore: Callable[[], int],
) -> bool:
    """One arm's turn in a study: its kept records restored (``restore()``), then each sweep of ``argvs`` run
    (``python -m hf_cse.sweep``), the finished runs kept after each (also when interrupted); returns whether a sweep
    had failed runs (the other arms still run; rerunning the study retries them).

    Raises:
        SweepStoppedError: SIGTERM or Ctrl-C stopped the study (the running runs too); the message starts with
            ``where`` (the arm, stage and seed) and says that rerunning resumes it.
    """
    from hf_cse.commands.sweep import SweepRunsFailedError, SweepStoppedError
    from hf_cse.commands.sweep import main as sweep

    failed = False
    try:
        restore()
        for argv in argvs:
            try:
                sweep(argv)
            except SweepRunsFailedError as err:
                logger.error("%s: %s", arm, err)
                failed = True
            finally:
                keep_records(arm, work_dir, records_dir)
    except SweepStoppedError as err:  # during the runs: the sweep stopped them and says how many were done
        raise SweepStoppedError(f"{where}: {err}") from None
    except KeyboardInterrupt as err:  # outside the runs (restoring or keeping records, a sweep's own set-up)
        raise SweepStoppedError(f"{where}: Stopped by {stop_cause(err)}. Rerun the same command to resume.") from None
    return failed
