"""One run of a sweep: train with ``run_unsup.py`` in a subprocess, select the checkpoint on STS-B dev, score it once
on the 7 STS test sets.

Selection is the papers' (SimCSE, DCLR): STS-B dev Spearman every ``eval_steps``, a checkpoint saved at each
evaluation, and the best one reloaded at the end (``load_best_model_at_end``), which ``run_unsup.py`` then saves as
the run's model. The test sets are never looked at during training; they score that saved model, once (a paper
config's run scores it itself at the end, into ``sts_results.json``, which is then read instead of encoding twice).

Resuming: a run whose training finished is only evaluated; one interrupted after a complete checkpoint resumes from
it (``--resume_from_checkpoint true``); any other leftover folder, or one trained with other flags, is started anew.
Every such decision, and every deletion in a run's folder, is taken holding the folder's lock
(:class:`~hf_cse.folder_lock.FolderLock`, which the training run holds while it runs): a run still alive there (the
child of a sweep killed a moment ago) is never deleted nor joined by a second trainer; that run fails, in one line,
and the next invocation retries it.

Secrets (``--hub_token``) are placeholders in every argument list here (:class:`~hf_cse.redaction.
RedactedArguments`): the records, logs and argument files hold ``<HUB_TOKEN>``; only the executed command holds the
value.
"""

from __future__ import annotations

import functools
import logging
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

from ..atomic_files import write_json_atomic
from ..errors import CSEError
from ..folder_lock import FolderLock
from ..links import open_no_follow, remove_tree
from ..redaction import RedactedArguments, command_line, redact_arguments
from ..run_files import LOCK_FILE, STS_RESULTS_FILE, TRAINING_SUMMARY_FILE
from ..training.saving import CHECKPOINT_PATTERN, newest_verified_checkpoint
from ..training.saving.output_dir import incomplete_reason, run_entries
from .aggregate import STS_TEST_COLUMNS, has_test_scores
from .arguments import SELECTION_METRIC, SettingCommand
from .grid import run_name
from .runs import DeviceSlot, read_json, run_child

logger = logging.getLogger(__name__)

DEV_KEY = f"eval_{SELECTION_METRIC}"
NOT_HOW_TRAINED = ("dev_evaluations", "final_dev", "evaluator_results", "citations", "versions")
"""The fields of a run's training record (:class:`~hf_cse.export.model_card.TrainingSummary`) a sweep's record leaves
out: its scores, which the record holds as the sweep measured them, and what the card cites. Every other field, a
later one included, says how the run was trained."""
LOCK_HOLDER = "python -m hf_cse.sweep"


class RunFailedError(CSEError, RuntimeError):
    """A run of the sweep failed (training exited non-zero, or no STS-B dev score was logged); the message says
    where its log is."""


@dataclass(frozen=True)
class SweepRun:
    """One seed of one setting."""

    command: SettingCommand
    seed: int

    @property
    def name(self) -> str:
        return run_name(self.command.setting, self.seed)

    @property
    def arguments(self) -> list[str]:
        """Its ``run_unsup.py`` arguments but the output folder (and the resume flag)."""
        return [*self.command.arguments, "--seed", str(self.seed)]

    @property
    def identity(self) -> dict[str, Any]:
        """What makes two attempts the same run: the arguments (secrets as placeholders: another token is the same
        run) and the config file's content."""
        return {"arguments": self.arguments, "config_sha256": self.command.config_sha256}

    def is_same_run(self, recorded: Any) -> bool:
        """Whether ``recorded`` (an :attr:`identity` or a result, as read back) is this run's: a record an older
        version wrote with a secret in clear is compared with it redacted."""
        if not isinstance(recorded, dict) or not isinstance(recorded.get("arguments"), list):
            return False
        arguments = redact_arguments([str(arg) for arg in recorded["arguments"]])
        return arguments == self.arguments and recorded.get("config_sha256") == self.command.config_sha256


def training_finished(run_dir: Path) -> bool:
    """Whether ``run_unsup.py`` finished in ``run_dir``: its train results and a complete final model are there."""
    return (run_dir / "train_results.json").is_file() and incomplete_reason(run_dir) is None


def read_selection(run_dir: Path) -> dict[str, Any]:
    """The STS-B dev side of a finished run, from its ``trainer_state.json``.

    Returns:
        ``{"stsb_spearman": best dev Spearman x 100, "step": its step, "checkpoint": "checkpoint-N",
        "evaluations": [{"step": ..., "stsb_spearman": ...}, ...], "steps": steps trained}``.

    Raises:
        RunFailedError: no dev score was logged, or none was selected.
    """
    state = read_json(run_dir / "trainer_state.json") or {}
    evaluations = [
        {"step": entry.get("step"), SELECTION_METRIC: entry[DEV_KEY]}
        for entry in state.get("log_history", [])
        if DEV_KEY in entry
    ]
    if not evaluations or state.get("best_metric") is None:
        raise RunFailedError(
            f"{run_dir}: no STS-B dev score was logged, so no checkpoint was selected (trained "
            f"{state.get('global_step')} steps); lower eval_steps."
        )
    checkpoint = state.get("best_model_checkpoint")
    return {
        SELECTION_METRIC: state["best_metric"],
        "step": state.get("best_global_step"),
        "checkpoint": Path(checkpoint).name if checkpoint else None,
        "evaluations": evaluations,
        "steps": state.get("global_step"),
    }


def trained_with(run_dir: Path) -> dict[str, Any]:
    """How a finished run was trained, as its card says: the settings of its ``hf_cse_training.json`` (every part's
    own record: base model, data, objective, auxiliary terms, views, pooling, training arguments and each input
    provider's settings, LoRA, encoder), so that a setting a part adds reaches the sweep's records unlisted here.

    Raises:
        RunFailedError: the run left no readable record.
    """
    from ..export.model_card import TrainingSummary

    path = run_dir / TRAINING_SUMMARY_FILE
    try:
        summary = TrainingSummary.from_json_file(path).to_dict()
    except (OSError, ValueError) as err:
        raise RunFailedError(
            f"{run_dir}: its training record {TRAINING_SUMMARY_FILE} cannot be read ({err})."
        ) from err
    return {key: value for key, value in summary.items() if key not in NOT_HOW_TRAINED}


def evaluate_test(
    model_dir: Path, sts_dir: str, *, batch_size: int = 128, device: str | None = None
) -> tuple[dict[str, float], dict[str, Any]]:
    """The 7 STS test sets as SimCSE scores them (STS12-16 "all", STS-B test, SICK-R test; Spearman x 100 of
    cosine), with the pooler the run saved.

    Returns:
        ``({task: score, ..., "avg": mean}, details)``, ``details`` as in ``python -m hf_cse.eval``'s JSON.
    """
    import torch

    from ..evaluation import STS_TASKS, evaluate_sts
    from ..modeling.encoder import SentenceEncoder

    encoder = SentenceEncoder.from_pretrained(model_dir, device=device)
    encode = functools.partial(encoder.encode, batch_size=batch_size)
    try:
        results = evaluate_sts(encode, STS_TASKS, sts_dir, sickr_split="test", stsb_split="test")
    finally:
        del encoder, encode  # the next run's model needs the memory (of this device, when runs share one)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    output = results.to_dict()
    return {column: output[column] for column in STS_TEST_COLUMNS}, output["details"]


def scores_saved_by_the_run(run_dir: Path, sts_dir: str) -> tuple[dict[str, float], dict[str, Any]] | None:
    """The test scores ``run_unsup.py`` saved for the final model, when they are those :func:`evaluate_test` would
    compute: a paper config scores the 7 STS test sets at the end of training into ``sts_results.json`` (the
    ``hf_cse.eval`` JSON). Used only with every task, STS-B and SICK-R test splits, the same STS folder, and written
    after the final weights; else ``None`` (and the sweep scores the model itself)."""
    path = run_dir / STS_RESULTS_FILE
    weights = run_dir / "model.safetensors"
    saved = read_json(path)
    if not isinstance(saved, dict) or not weights.is_file():
        return None
    details = saved.get("details") if isinstance(saved.get("details"), dict) else {}
    settings = details.get("settings") if isinstance(details.get("settings"), dict) else {}
    usable = (
        has_test_scores(saved)
        and all((details.get(task) or {}).get("split") == "test" for task in ("stsb", "sickr"))
        and settings.get("sts_dir") == Path(sts_dir).name
        and path.stat().st_mtime_ns >= weights.stat().st_mtime_ns
    )
    return ({column: saved[column] for column in STS_TEST_COLUMNS}, details) if usable else None


Launcher = Callable[..., int]
"""``launch(command, log, *, env, cwd) -> exit status``: :func:`~hf_cse.sweeps.runs.run_child`, or a stand-in."""


@dataclass(frozen=True)
class TrainSelectEvaluate:
    """Does one :class:`SweepRun` on a device slot and returns its record (see :meth:`__call__`).

    Args:
        script: the ``run_unsup.py`` to run.
        output_dir: the sweep's folder: runs in ``runs/NAME/``, logs in ``logs/NAME.log``.
        eval_batch_size: sentences per forward pass of the test evaluation.
        keep_checkpoints: keep the ``checkpoint-N`` folders once the run is scored (the selected model stays at
            the run folder's root either way).
        launch: runs the training command (default: :func:`~hf_cse.sweeps.runs.run_child`).
        secrets: the sweep's arguments, whose placeholders the runs' arguments hold: :meth:`train` fills them in on
            the command it launches, and only there.
    """

    script: Path
    output_dir: Path
    _: KW_ONLY
    eval_batch_size: int = 128
    keep_checkpoints: bool = False
    launch: Launcher = run_child
    secrets: RedactedArguments = RedactedArguments(())

    def run_dir(self, run: SweepRun) -> Path:
        return self.output_dir / "runs" / run.name

    def log_path(self, run: SweepRun) -> Path:
        return self.output_dir / "logs" / f"{run.name}.log"

    def arguments_path(self, run: SweepRun) -> Path:
        """Where a run's :attr:`SweepRun.identity` is kept, to resume only what the same arguments started:
        beside its folder, so that the folder holds only what run_unsup.py writes."""
        return self.output_dir / "runs" / f"{run.name}.arguments.json"

    def locked(self, run: SweepRun) -> FolderLock:
        """The lock of ``runs/NAME/``, which its training run holds while it runs: held by this process, no
        training is alive there.

        Raises (on entering):
            OutputDirLockedError: a training run still holds it (the child of a killed sweep, stopping).
        """
        return FolderLock(self.run_dir(run), LOCK_HOLDER)

    def prepare(self, run: SweepRun) -> list[str]:
        """Ready ``runs/NAME/`` for training and return the resume flags: resume from its newest verified checkpoint
        when it was interrupted under the same arguments, else start anew in an empty folder. Call it holding
        :meth:`locked`."""
        run_dir, arguments_path = self.run_dir(run), self.arguments_path(run)
        if run_entries(run_dir):  # leftovers of an earlier, interrupted invocation
            if run.is_same_run(read_json(arguments_path)) and newest_verified_checkpoint(run_dir) is not None:
                logger.info("%s: resuming from its latest complete checkpoint.", run.name)
                return ["--resume_from_checkpoint", "true"]
            logger.warning("%s: starting anew (no complete checkpoint of these arguments in %s).", run.name, run_dir)
        _empty_but_the_lock(run_dir)
        write_json_atomic(arguments_path, run.identity)
        return []

    def train(self, run: SweepRun, slot: DeviceSlot, resume: Sequence[str] = ()) -> None:
        """Run ``run_unsup.py`` for ``run`` (``resume``: :meth:`prepare`'s flags), its output appended to
        ``logs/NAME.log``."""
        command = [sys.executable, str(self.script), *run.arguments, "--output_dir", str(self.run_dir(run)), *resume]
        log_path = self.log_path(run)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        where = "" if slot.cuda_visible_devices is None else f"CUDA_VISIBLE_DEVICES={slot.cuda_visible_devices} "
        with open_no_follow(log_path) as log:  # a link planted there is refused, never written through
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')}: {where}{command_line(command)}\n\n")
            returncode = self.launch(self.secrets.reveal(command), log, env=slot.environment(), cwd=None)
        if returncode != 0:
            raise RunFailedError(f"run_unsup.py exited with status {returncode}; see {log_path}.")

    def __call__(self, run: SweepRun, slot: DeviceSlot) -> dict[str, Any]:
        """Train (unless an earlier attempt finished training), read the dev selection, score the test sets.

        Returns:
            The run's record: ``name``, ``setting``, ``seed``, ``run_dir`` and ``log`` (relative to the sweep's
            folder), ``arguments``, ``config_sha256``, ``dev`` (see :func:`read_selection`), ``test`` (task scores
            and ``avg``), ``test_details``, ``trained_with`` (:func:`trained_with`), ``train_s``, ``eval_s`` and
            ``finished_at``.
        """
        run_dir = self.run_dir(run)
        started = time.perf_counter()
        with self.locked(run):  # decided (and the folder emptied) with no training alive in it
            finished = training_finished(run_dir) and run.is_same_run(read_json(self.arguments_path(run)))
            resume = None if finished else self.prepare(run)
        if resume is None:
            logger.info("%s: training finished in an earlier attempt; scoring it.", run.name)
        else:
            self.train(run, slot, resume)  # the training run takes the lock itself
        train_s = time.perf_counter() - started
        dev = read_selection(run_dir)
        started = time.perf_counter()
        saved = scores_saved_by_the_run(run_dir, run.command.sts_dir)
        if saved is not None:  # a paper config's run scored the selected (final) model already: not twice
            logger.info(
                "%s: the test scores run_unsup.py saved for the selected model (%s).", run.name, STS_RESULTS_FILE
            )
            test, details = saved
        else:
            test, details = evaluate_test(
                run_dir, run.command.sts_dir, batch_size=self.eval_batch_size, device=slot.device
            )
        eval_s = time.perf_counter() - started
        if not self.keep_checkpoints:  # the selected model is the run folder's own; checkpoints only served resuming
            with self.locked(run):
                for entry in run_dir.iterdir():
                    if CHECKPOINT_PATTERN.match(entry.name) and entry.is_dir():
                        remove_tree(entry, "a checkpoint of a scored sweep run")  # a link: the link only
        return {
            "name": run.name,
            "setting": run.command.values,
            "seed": run.seed,
            "run_dir": str(run_dir.relative_to(self.output_dir)),
            "log": str(self.log_path(run).relative_to(self.output_dir)),
            "arguments": run.arguments,
            "config_sha256": run.command.config_sha256,
            "dev": dev,
            "test": test,
            "test_details": details,
            "trained_with": trained_with(run_dir),
            "train_s": round(train_s, 1),
            "eval_s": round(eval_s, 1),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }


def _empty_but_the_lock(folder: Path) -> None:
    """Delete everything in ``folder`` (whose lock this process holds) but the lock file: deleting that would let
    another process lock a new file of the same name while this one still holds the old."""
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        if entry.name == LOCK_FILE:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
