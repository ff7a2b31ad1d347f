"""Does any objective beat SimCSE once each is tuned and selected as the papers do? (issue #18, part 4)

The quality benchmark (``benchmarks/quality.py``) scores every objective's FINAL model with its shipped settings.
The papers instead pick the checkpoint with the best STS-B dev score and tune key hyper-parameters. This study
does the same on the CPU proxy: for each objective, sweeps (``python -m hf_cse.sweep``) over its one or two key
hyper-parameters (the second changed alone from the shipped config), 3 seeds per value, STS-B dev every 25 steps with
the best checkpoint kept, and the selected model scored once on the 7 STS test sets. Per objective, the setting with
the best mean dev score is chosen (never on test), and its test average is compared with SimCSE's chosen one, seed
by seed.

The proxy: ``examples/configs/<arm>_minilm_wiki1m.yaml`` (all-MiniLM-L6-v2 from PyPI, cls pooling, 150 steps of
batch 64 on the wiki1m head; mask pooling and length 48 for OssCSE), unchanged but for the swept value, the seed and
``--eval_steps 25``, and the data: the configs name the layout ``python -m hf_cse.download`` writes (the first
11,914 sentences of ``wiki1m_for_simcse.txt``, SentEval's tokenized STS), the study gives the team's copies
(:data:`TRAIN_FILE`, the same 11,914 sentences, and :data:`STS_DIR`). Test sets: STS12-16 ("all"), STS-B test and
SICK-R test from :data:`STS_DIR` (the original files; the quality benchmark uses SentEval's tokenized copy, so the
two tables differ slightly).

Runs go in two stages so that a partial study is still a fair one: first every objective's shipped config (3 seeds
each), then the other values; within a stage, seed by seed over every objective (seed 42 of each, then 43, ...).
Each objective is one sweep folder under ``--work_dir`` (trained models, logs, the sweep's ``sweep.json``, which
lists the latest sweep's runs); rerunning the same command resumes every sweep.

The study outlives its work folder: each finished run's record (the sweep's ``results/NAME.json``: dev selection,
test scores, arguments; not the model) is kept in ``benchmarks/results/quality_study/ARM/``, committed with the
code. A later session on a fresh machine restores those records into its ``--work_dir``, where the sweeps count
them as done, and trains only the runs still missing. A record is reused only for the same run_unsup.py arguments
and the same config file; after changing either, delete the arm's records. ``--summarize`` reads the records alone
(it first keeps those of ``--work_dir``, when given), chooses, compares, and writes
``benchmarks/results/quality_study.json``, which ``benchmarks/render.py`` puts in BENCHMARKS.md.

    # everything: 72 runs, 5-8 minutes each on 2 CPU cores, seconds on a GPU; rerun (anywhere) to resume
    nohup python benchmarks/quality_study.py --work_dir ../quality_study > quality_study.log 2>&1 &
    python benchmarks/quality_study.py --work_dir ../quality_study --summarize
    python benchmarks/render.py
"""

from __future__ import annotations

import argparse
import functools
import itertools
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    REPO_ROOT,
    RESULTS_DIR,
    SHARED_DATA,
    WIKI1M_HEAD,
    command_line,
    environment,
    portable_path,
    utc_now,
    write_json_atomic,
)
from _study_records import keep_records, read_record, restore_records, sweep_arm

from hf_cse.commands.cli import TRACEBACK_HELP, console_script
from hf_cse.sweeps.aggregate import compare_seed_averages
from hf_cse.sweeps.grid import Setting, expand, parse_grid, run_name
from hf_cse.sweeps.report import run_entry, setting_summary
from hf_cse.sweeps.runs import install_signal_handlers, read_json

logger = logging.getLogger("quality_study")

PROG = "python benchmarks/quality_study.py"

SEEDS: tuple[int, ...] = (42, 43, 44)
TRAIN_FILE = portable_path(str(WIKI1M_HEAD))
STS_DIR = portable_path(str(SHARED_DATA / "sts"))
"""The study's data, the team's copies (``../shared/data``, or ``HF_CSE_DATA_DIR``), named relative to the repository
root as the records name them: the wiki1m head (the first 11,914 sentences, as the configs' ``max_train_samples`` cut
``python -m hf_cse.download``'s full file) and the original STS files."""
RUN_FLAGS: tuple[str, ...] = ("--eval_steps", "25", "--disable_tqdm", "true", "--train_file", TRAIN_FILE)
"""Every run's extra ``run_unsup.py`` flags: the same selection interval for every objective (the configs say 25
or 50), no progress bars in the logs, and the study's corpus."""
STAGES: tuple[str, ...] = ("shipped", "grid")
SUMMARY_JSON = RESULTS_DIR / "quality_study.json"
RECORDS_DIR = RESULTS_DIR / "quality_study"
"""The finished runs' records, one folder per arm, and ``invocations.json``: what carries the study across
machines."""
REFERENCE = "simcse"


@dataclass(frozen=True)
class StudyArm:
    """One objective of the study: its proxy config and the hyper-parameters swept, each as ``(key, values)`` with
    ``key`` as ``--grid`` takes it and the shipped value first.

    The first key is swept over all its values; each further key alone from the shipped config (one key changed at a
    time, not the full grid), so its shipped value is the first key's shipped run and only its other values run."""

    arm: str
    label: str
    axes: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def config(self) -> str:
        """The config path as the sweeps record it: relative to the repository root, where the study runs."""
        return f"examples/configs/{self.arm}_minilm_wiki1m.yaml"

    def grids(self, stage: str) -> list[str]:
        """The ``--grid`` specs of a stage, one sweep each: the shipped stage runs the first key's shipped value (no
        spec without a key: the config as shipped); the grid stage every key's values it sweeps."""
        if not self.axes:
            return [""]
        (key, values), *further = self.axes
        if stage == "shipped":
            return [f"{key}={values[0]}"]
        return [f"{key}={','.join(values)}", *(f"{key}={','.join(values[1:])}" for key, values in further)]

    def settings(self) -> list[tuple[str | None, str | None, Setting]]:
        """``(key, value, grid point)`` of each setting (one ``(None, None, point)`` without a key), shipped first,
        named as the sweep names them: the sweep's run of a setting and seed is ``run_name(point, seed)``."""
        if not self.axes:
            return [(None, None, setting) for setting in expand([])]
        settings = []
        for spec in self.grids("grid"):
            axis = parse_grid(spec)
            settings += [(axis.key, value, point) for value, point in zip(axis.values, expand([axis]), strict=True)]
        return settings


STUDY: tuple[StudyArm, ...] = (
    StudyArm("simcse", "SimCSE", (("temperature", ("0.05", "0.1")),)),
    StudyArm(
        "focal_infonce",
        "Focal-InfoNCE",
        (("objective_kwargs.hardness", ("0.3", "0.5")), ("temperature", ("0.05", "0.1"))),
    ),
    StudyArm("dcl", "DCL", (("temperature", ("0.2", "0.1")), ("objective_kwargs.tau_plus", ("0.01", "0.1")))),
    StudyArm("dclr", "DCLR", (("objective_kwargs.phi", ("0.99", "0.95")), ("objective_kwargs.k", ("1.0", "3.0")))),
    # Offline there are no paraphrases, so OssCSE's margin term (lambda) is skipped for every sentence and sweeping
    # it would change nothing; the recall term's weight is swept instead (0 drops it: does it help?).
    StudyArm("osscse", "OssCSE (no paraphrases)", (("auxiliary_losses.recall.weight", ("1.0", "0")),)),
    StudyArm("dclr_focal", "DCLR + Focal-InfoNCE"),
    StudyArm("promptbert", "PromptBERT", (("temperature", ("0.05", "0.1")),)),
    # The dimension-wise term's weight: 0 leaves off-dropout negatives alone (does DCL help on the proxy?).
    StudyArm("simcsepp", "SimCSE++", (("auxiliary_losses.dimension_contrast.weight", ("0.1", "0")),)),
    # The bidirectional margin loss's weight: 0 leaves prompt-based SimCSE without soft negatives (does BML help?).
    StudyArm("sncse", "SNCSE", (("auxiliary_losses.bml.weight", ("0.001", "0.01", "0")),)),
    # The queue's length in sentences (2.5 and 5 batches of 64); 0 drops the momentum encoder, ESimCSE's
    # "w/o momentum contrast" ablation (does the queue help?).
    StudyArm("esimcse", "ESimCSE", (("objective_kwargs.momentum_queue_size", ("160", "320", "0")),)),
)
ARMS = {study_arm.arm: study_arm for study_arm in STUDY}


def sweep_argvs(study_arm: StudyArm, stage: str, seeds: Sequence[int], work_dir: Path) -> list[list[str]]:
    """The ``python -m hf_cse.sweep`` arguments of one arm in one stage, one sweep per key. Every sweep of an arm
    writes the same folder and a setting's runs have the same names in both stages, so the grid stage skips the runs
    the first one finished."""
    head = ["--config", study_arm.config, "--seeds", *map(str, seeds)]
    tail = ["--sts_dir", STS_DIR, "--output_dir", str(work_dir / study_arm.arm), "--", *RUN_FLAGS]
    return [[*head, *(["--grid", spec] if spec else []), *tail] for spec in study_arm.grids(stage)]


def run_study(arms: Sequence[StudyArm], seeds: Sequence[int], work_dir: Path, records_dir: Path) -> list[str]:
    """Run (or resume) every arm's sweeps, stage by stage and within a stage seed by seed over every arm (a study cut
    short has every arm at the same seeds), each arm's kept records restored first and its finished runs kept after
    each sweep (also when interrupted); returns the arms with a sweep that had failed runs.

    Raises:
        SweepStoppedError: SIGTERM or Ctrl-C stopped the study (the running runs too); the message starts with the
            arm, stage and seed it was at and says that rerunning resumes it.
    """
    failed = []
    for stage, seed, study_arm in itertools.product(STAGES, seeds, arms):
        logger.info("Stage %s, seed %d: %s.", stage, seed, study_arm.arm)
        where = f"{study_arm.arm}, {stage} stage, seed {seed}"
        argvs = sweep_argvs(study_arm, stage, [seed], work_dir)
        restore = functools.partial(restore_records, study_arm.arm, work_dir, records_dir)
        if sweep_arm(study_arm.arm, argvs, where, work_dir, records_dir, restore):
            failed.append(study_arm.arm)
    return sorted(set(failed))


def setting_entry(
    key: str | None, value: str | None, summary: dict[str, Any], runs: list[dict[str, Any]]
) -> dict[str, Any]:
    """A setting's :func:`~hf_cse.sweeps.report.setting_summary` with the key and value it changes and its finished
    runs' seed, selected step, dev and test scores."""
    return {
        "key": key,
        "value": value,
        "name": summary["name"],
        "n": summary["runs"],
        "seeds": summary["seeds"],
        "dev": summary["dev"],
        "test": summary["test"],
        "runs": [
            {"seed": run["seed"], "dev": run["dev"]["stsb_spearman"], "step": run["dev"]["step"], "test": run["test"]}
            for run in sorted(runs, key=lambda run: run["seed"])
        ],
    }


def choose_setting(settings: Sequence[dict[str, Any]], seeds: Sequence[int]) -> dict[str, Any] | None:
    """The setting with the best mean STS-B dev score among those with every seed done (ties: the earlier one, the
    shipped value first); ``None`` while none is complete. Test scores play no part."""
    complete = [setting for setting in settings if sorted(setting["seeds"]) == sorted(seeds)]
    return max(complete, key=lambda setting: setting["dev"]["mean"], default=None)


def summarize(records_dir: Path, arms: Sequence[StudyArm] = STUDY, seeds: Sequence[int] = SEEDS) -> dict[str, Any]:
    """From the kept records: each arm's settings (mean ± std over seeds of dev and test), its dev-chosen setting,
    and the chosen setting's 7-task test average against SimCSE's chosen one
    (:func:`~hf_cse.sweeps.aggregate.compare_seed_averages`). Arms without a record are left out of ``arms``;
    ``pending`` names every arm's runs without a record (what rerunning the study trains)."""
    entries = []
    pending = {}
    for study_arm in arms:
        folder = records_dir / study_arm.arm
        names = [run_name(setting, seed) for seed in seeds for *_, setting in study_arm.settings()]
        pending[study_arm.arm] = [name for name in names if not (folder / f"{name}.json").is_file()]
        settings = []
        for key, value, setting in study_arm.settings():
            runs = []
            for seed in seeds:
                name = run_name(setting, seed)
                path = folder / f"{name}.json"
                if path.is_file():
                    record = read_record(path)
                    runs.append(run_entry(name, record["setting"], seed, "done", record))
            summary = setting_summary(setting, setting.as_dict(), seeds, runs)
            settings.append(setting_entry(key, value, summary, runs))
        if not any(setting["n"] for setting in settings):
            continue
        chosen = choose_setting(settings, seeds)
        entries.append(
            {
                "arm": study_arm.arm,
                "label": study_arm.label,
                "axes": {key: list(values) for key, values in study_arm.axes},
                "config": study_arm.config,
                "settings": settings,
                "chosen": chosen["name"] if chosen else None,
            }
        )
    return {
        "protocol": {
            "configs": "examples/configs/<arm>_minilm_wiki1m.yaml",
            "seeds": list(seeds),
            "run_flags": list(RUN_FLAGS),
            "selection": "STS-B dev Spearman every 25 steps, best checkpoint kept; per arm, the setting with the best "
            "mean dev score over the seeds",
            "test": "Spearman x 100 of cosine similarity: STS12-16 'all', STS-B test, SICK-R test (original files)",
        },
        "arms": entries,
        "comparison": compare_chosen(entries),
        "pending": {arm: names for arm, names in pending.items() if names},
    }


def compare_chosen(entries: Sequence[dict[str, Any]], reference: str = REFERENCE) -> dict[str, Any]:
    """Each arm's chosen setting against the reference arm's, on the per-seed 7-task test averages; empty until the
    reference has a chosen setting."""
    averages = {}
    for entry in entries:
        chosen = next((s for s in entry["settings"] if s["name"] == entry["chosen"]), None)
        if chosen is not None:
            averages[entry["arm"]] = (chosen["name"], [run["test"]["avg"] for run in chosen["runs"]])
    if reference not in averages:
        return {}
    reference_setting, base = averages.pop(reference)
    return {
        "reference": reference,
        "reference_setting": reference_setting,
        "reference_range": [min(base), max(base)],
        "arms": {
            arm: {"setting": setting, **compare_seed_averages(values, base)}
            for arm, (setting, values) in averages.items()
        },
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=TRACEBACK_HELP
    )
    parser.add_argument(
        "--work_dir",
        help="The sweeps' folder: trained models, logs, sweep.json (rerun to resume). Required but with --summarize.",
    )
    parser.add_argument(
        "--arms", nargs="+", default=list(ARMS), metavar="ARM", help=f"Arms (default: all): {', '.join(ARMS)}."
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), help="Seeds (default: 42 43 44).")
    parser.add_argument(
        "--summarize",
        action="store_true",
        help="Only summarize the kept records (after keeping --work_dir's finished runs, when given).",
    )
    parser.add_argument("--summary_json", default=str(SUMMARY_JSON), help="Where the summary goes.")
    parser.add_argument(
        "--records_dir",
        default=str(RECORDS_DIR),
        help=f"Where finished runs' records are kept (default: {RECORDS_DIR}).",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = build_parser().parse_args(argv)
    unknown = [arm for arm in args.arms if arm not in ARMS]
    if unknown:
        raise SystemExit(f"--arms: unknown {', '.join(unknown)}; valid arms are: {', '.join(ARMS)}.")
    arms = [ARMS[arm] for arm in args.arms]
    if args.work_dir is None and not args.summarize:
        raise SystemExit("--work_dir is required to run the study (the trained models go there); only --summarize "
                         "reads the kept records alone.")  # fmt: skip
    records_dir = Path(args.records_dir).absolute()
    invocations_path = records_dir / "invocations.json"
    invocations = read_json(invocations_path) or []
    if args.work_dir is not None:
        work_dir = Path(args.work_dir).absolute()
        if args.summarize:
            for study_arm in arms:
                keep_records(study_arm.arm, work_dir, records_dir)
        else:
            # The study's data paths and the sweeps' recorded config paths are relative to the repository root.
            os.chdir(REPO_ROOT)
            invocations.append({"command": command_line(), "environment": environment(), "started_at": utc_now()})
            write_json_atomic(invocations_path, invocations)
            try:
                failed = run_study(arms, args.seeds, work_dir, records_dir)
            except BaseException:  # Ctrl-C, kill, a crash: the invocation says when it stopped
                invocations[-1]["stopped_at"] = utc_now()
                raise
            else:
                invocations[-1]["finished_at"] = utc_now()
            finally:
                write_json_atomic(invocations_path, invocations)
            if failed:
                raise SystemExit(f"Runs failed in: {', '.join(failed)}; rerun the same command to retry them.")
    summary = summarize(records_dir, arms, args.seeds)
    summary["invocations"] = invocations
    summary["command"] = command_line([__file__, *(sys.argv[1:] if argv is None else argv)])
    summary["generated_at"] = utc_now()
    path = write_json_atomic(args.summary_json, summary)
    print(f"Wrote {path}")
    return summary


def console_main() -> None:
    """The command line: SIGTERM or SIGHUP stops the study as Ctrl-C does (the running runs too; Ctrl-Z pauses them
    with it), and a stop ends in one line (:class:`~hf_cse.commands.sweep.SweepStoppedError`, exit 1), as
    hf_cse's own commands' errors do."""
    install_signal_handlers()  # `kill PID` or a closed terminal stops the training runs too; Ctrl-Z pauses them
    console_script(main, PROG)


if __name__ == "__main__":
    console_main()
