"""``benchmarks/supervised_quality.py``: SICK's rows as pairs, triplets and a corpus (the same bytes every time), the
records it keeps and refuses, the summary (SICK-R left out, each arm against unsupervised SimCSE seed by seed), its
BENCHMARKS.md section, and a rehearsal of every arm end to end on the tiny model (2 steps, 1 seed)."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import statistics
import sys
from pathlib import Path
from typing import IO, Any

import pytest
import scipy.stats
import torch
from common.study_records import write_records
from conftest import run_unsup, write_senteval_dir, write_stsb_dev

from hf_cse.commands.cli import run_command
from hf_cse.sweeps.aggregate import STS_TEST_COLUMNS
from hf_cse.sweeps.runs import DeviceSlot

BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS_DIR))  # the scripts import their helpers as `from _common import ...`
study = importlib.import_module("supervised_quality")
render = importlib.import_module("render")
SCRATCH_DIR = importlib.import_module("_common").SCRATCH_DIR

HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"
# SICK-like rows: positives that share most words with their anchors (so that the random model's mined candidates are
# not all above the margin), a repeated pair, an anchor with two positives, contradictions with the anchor on either
# side, and one that would be the anchor's own positive.
SICK_ROWS = [
    ("a man is playing a guitar", "a man plays a guitar", "ENTAILMENT"),
    ("a man is playing a guitar", "a man is not playing a guitar", "CONTRADICTION"),
    ("a woman plays the piano", "the woman is playing a piano", "ENTAILMENT"),
    ("nobody plays the piano", "a woman plays the piano", "CONTRADICTION"),  # the anchor as sentence_B
    ("the dog runs in the park", "a dog is running in a park", "ENTAILMENT"),
    ("the dog runs in the park", "the dog is playing in the park", "ENTAILMENT"),
    ("the dog runs in the park", "the cat is in the house", "NEUTRAL"),
    ("the dog runs in the park", "no dog runs in the park", "CONTRADICTION"),
    ("the dog runs in the park", "the dog is not in the park", "CONTRADICTION"),  # the second: not used
    ("a cat is in the house", "the cat is inside the house", "ENTAILMENT"),
    ("a man plays a guitar", "a man is playing a guitar", "ENTAILMENT"),
    ("a man is playing a guitar", "a man plays a guitar", "ENTAILMENT"),  # a repeated pair: kept once
    ("children eat food on the street", "kids eat food on the street", "ENTAILMENT"),
    ("the red car is big", "the big red car", "ENTAILMENT"),
    ("the red car is big", "the big red car", "CONTRADICTION"),  # its own positive: never its hard negative
    ("the red car is big", "the red car is small", "CONTRADICTION"),
    ("a small blue car", "a small blue car is here", "ENTAILMENT"),
    ("the child likes the dog", "the kid likes a dog", "ENTAILMENT"),
    ("the child likes the dog", "the child does not like the dog", "CONTRADICTION"),
    ("the woman is running", "the woman is running fast", "ENTAILMENT"),
]


def write_sick(path: Path, rows: list[tuple[str, str, str]] = SICK_ROWS) -> Path:
    lines = [HEADER, *(f"{i + 1}\t{a}\t{b}\t{1 + i % 4}.0\t{label}" for i, (a, b, label) in enumerate(rows))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_sick_rows_become_pairs_triplets_and_a_corpus(tmp_path: Path) -> None:
    files, counts = study.derive_data(study.read_sick(write_sick(tmp_path / "SICK_train.txt")))
    pairs = files[study.PAIRS_FILE]
    assert len(pairs) == 11 and pairs[0] == ("a man is playing a guitar", "a man plays a guitar")
    assert files[study.TRIPLETS_FILE] == [
        ("a man is playing a guitar", "a man plays a guitar", "a man is not playing a guitar"),
        ("a woman plays the piano", "the woman is playing a piano", "nobody plays the piano"),  # read both ways
        ("the dog runs in the park", "a dog is running in a park", "no dog runs in the park"),  # the first one
        ("the dog runs in the park", "the dog is playing in the park", "no dog runs in the park"),
        ("the red car is big", "the big red car", "the red car is small"),  # not its own positive
        ("the child likes the dog", "the kid likes a dog", "the child does not like the dog"),
    ]
    assert files[study.TRIPLET_PAIRS_FILE] == [row[:2] for row in files[study.TRIPLETS_FILE]]
    corpus = [sentence for (sentence,) in files[study.SENTENCES_FILE]]
    assert corpus[:3] == ["a man is playing a guitar", "a man plays a guitar", "a woman plays the piano"]
    assert len(corpus) == len(set(corpus)) == len({s for pair in pairs for s in pair})
    assert counts == {
        "sick_rows": 20,
        "entailment_rows": 12,
        "contradiction_rows": 7,
        "pairs": 11,
        "repeated_pairs_dropped": 1,
        "anchors": 10,
        "pairs_with_contradiction_as_sentence_a": 5,
        "anchors_with_contradiction_as_sentence_a": 4,
        "triplets": 6,
        "triplet_anchors": 5,
        "sentences": 19,
    }


def test_the_derived_files_are_the_same_bytes_every_time(tmp_path: Path) -> None:
    sick = write_sick(tmp_path / "SICK_train.txt", [*SICK_ROWS, ("a man, a guitar", 'a "man" plays', "ENTAILMENT")])
    sts_dir = write_senteval_dir(tmp_path / "sts")
    first = study.prepare_data(sick, str(sts_dir), tmp_path / "first")
    again = study.prepare_data(sick, str(sts_dir), tmp_path / "again")
    assert first == again and first["counts"]["pairs"] == 12
    assert first["sick_test"] == {
        "test_pairs": 4, "test_sentences": 8, "trained_on": 0, "pairs_with_a_trained_sentence": 0
    }  # fmt: skip
    assert study.file_entries(tmp_path / "first" / "data") == study.file_entries(tmp_path / "again" / "data")
    pairs = (tmp_path / "first" / "data" / study.PAIRS_FILE).read_text(encoding="utf-8")
    assert pairs.startswith("sent0,sent1\n") and pairs.endswith('"a man, a guitar","a ""man"" plays"\n')
    assert study.read_rows(tmp_path / "first" / "data" / study.PAIRS_FILE)[-1] == ("a man, a guitar", 'a "man" plays')
    sentences = (tmp_path / "first" / "data" / study.SENTENCES_FILE).read_text(encoding="utf-8").splitlines()
    assert sentences[-2:] == ["a man, a guitar", 'a "man" plays']  # one sentence a line, as it is
    assert study.file_entries(tmp_path / "first" / "data")[study.TRIPLETS_FILE]["rows"] == 6


def test_every_arm_trains_the_shipped_config_on_its_own_file(tmp_path: Path) -> None:
    work_dir = Path(study.REPO_ROOT).parent / "supervised_quality"
    argvs = {arm.arm: study.sweep_argv(arm, 42, work_dir, study.STS_DIR, []) for arm in study.STUDY}
    for arm, argv in argvs.items():
        assert argv[:4] == ["--config", "examples/configs/simcse_minilm_wiki1m.yaml", "--seeds", "42"]
        assert argv[argv.index("--output_dir") + 1] == str(work_dir / arm)
        assert argv[argv.index("--") + 1 :][:4] == ["--eval_steps", "25", "--disable_tqdm", "true"]
    files = {arm: argv[argv.index("--train_file") + 1] for arm, argv in argvs.items()}
    # Relative to the repository root, the same on every machine; a checkout under the scratch folder (a CI clone in
    # /tmp) keeps a scratch path as it is (benchmarks/_common.portable_path).
    in_scratch = str(study.REPO_ROOT).startswith(f"{SCRATCH_DIR}/")
    mined = str(work_dir / "data" / "sick_mined.csv") if in_scratch else "../supervised_quality/data/sick_mined.csv"
    assert files["mined"] == mined
    assert len(set(files.values())) == len(study.STUDY)
    assert [arm.arm for arm in study.STUDY if arm.stage == "main"] == ["unsup", "triplets", "pairs", "mined"]
    assert {arm.arm for arm in study.STUDY if arm.mined} == {"mined", "triplets_mined"}


def record(seed: int, avg: float, sickr: float = 99.0, dev: float = 80.0, step: int = 50) -> dict[str, Any]:
    """A finished run's record as the sweep writes it (the fields the study reads): STS12-16 and STS-B average to
    ``avg``; SICK-R far from it, which no reported number may show."""
    offsets = (-2.5, -1.5, -0.5, 0.5, 1.5, 2.5)
    test = {column: avg + offset for column, offset in zip(study.TEST_TASKS, offsets, strict=True)}
    test |= {"sickr": sickr, "avg": statistics.fmean([*test.values(), sickr])}
    assert set(test) == set(STS_TEST_COLUMNS)
    arguments = ["--config", study.CONFIG, "--train_file", "x", "--seed", str(seed)]
    dev_entry = {"stsb_spearman": dev, "step": step, "checkpoint": f"checkpoint-{step}"}
    return {"name": f"base-seed{seed}", "setting": {}, "seed": seed, "run_dir": f"runs/base-seed{seed}",
            "log": f"logs/base-seed{seed}.log", "arguments": arguments, "dev": dev_entry, "test": test}  # fmt: skip


@pytest.fixture
def records_dir(tmp_path: Path) -> Path:
    """unsup at 70, 71, 72; triplets at 73, 72.5, 74 (every seed above); pairs at 71, 70 (two seeds); mined none."""
    records = tmp_path / "records"
    write_records(records / "unsup", [record(s, 70 + i) for i, s in enumerate(study.SEEDS)])
    triplets = zip(study.SEEDS, (73, 72.5, 74), strict=True)
    write_records(records / "triplets", [record(s, a, dev=81 + i) for i, (s, a) in enumerate(triplets)])
    write_records(records / "pairs", [record(42, 71), record(43, 70)])
    settings = {"max_steps": 150, "per_device_train_batch_size": 64, "model_name_or_path": "pip:m"}
    files = {study.TRIPLETS_FILE: 251, study.PAIRS_FILE: 1284, study.SENTENCES_FILE: 2106}
    counts = {"entailment_rows": 1299, "pairs": 1284, "triplets": 251, "triplet_anchors": 200, "sentences": 2106}
    sick = {"test_pairs": 4927, "test_sentences": 5007, "trained_on": 1761, "pairs_with_a_trained_sentence": 3015}
    manifest = {"files": {name: {"rows": rows} for name, rows in files.items()}, "settings": settings}
    manifest |= {"counts": counts, "sick_test": sick, "sick_train": "../shared/data/sts/SICK/SICK_train.txt"}
    (records / "data.json").write_text(json.dumps(manifest))
    return records


def test_each_arm_against_unsup_seed_by_seed_without_sickr(records_dir: Path) -> None:
    summary = study.summarize(records_dir)
    arms = {arm["arm"]: arm for arm in summary["arms"]}
    assert list(arms) == ["unsup", "triplets", "pairs"]
    unsup = arms["unsup"]
    assert unsup["test"]["avg"]["mean"] == pytest.approx(71.0) and unsup["test"]["avg"]["std"] == pytest.approx(1.0)
    assert unsup["test"]["stsb"]["mean"] == pytest.approx(73.5)
    assert "sickr" not in unsup["test"] and all(run["test"]["avg"] < 80 for run in unsup["runs"])
    assert arms["triplets"]["dev"]["mean"] == pytest.approx(82.0) and arms["triplets"]["rows"] == 251
    assert arms["pairs"]["n"] == 2 and arms["pairs"]["seeds"] == [42, 43]
    comparisons = {(row["arm"], row["reference"]): row for row in summary["comparisons"]}
    assert list(comparisons) == [("triplets", "unsup"), ("pairs", "unsup")]  # the others lack an arm
    triplets = comparisons["triplets", "unsup"]
    assert triplets["differences"] == pytest.approx([3.0, 1.5, 2.0]) and triplets["same_sign"] is True
    assert triplets["mean"] == pytest.approx(13 / 6)
    assert triplets["std"] == pytest.approx(statistics.stdev([3, 1.5, 2]))
    expected = scipy.stats.ttest_rel([73, 72.5, 74], [70, 71, 72]).pvalue
    assert triplets["paired_p"] == pytest.approx(expected)
    pairs = comparisons["pairs", "unsup"]
    assert pairs["seeds"] == [42, 43] and pairs["differences"] == pytest.approx([1.0, -1.0])
    assert pairs["same_sign"] is False
    assert summary["pending"] == {
        "pairs": ["base-seed44"],
        **{arm: [f"base-seed{s}" for s in study.SEEDS] for arm in ("mined", "triplet_pairs", "triplets_mined")},
    }


def test_paired_difference_of_one_seed_has_no_spread_nor_test() -> None:
    one = study.paired_difference({42: 2.0, 43: 5.0}, {42: 1.0})
    assert one == {"seeds": [42], "differences": [1.0], "mean": 1.0, "std": None, "same_sign": None, "paired_p": None}
    constant = study.paired_difference({42: 2.0, 43: 3.0}, {42: 1.0, 43: 2.0})
    assert constant["paired_p"] is None and constant["std"] == 0.0
    assert study.paired_difference({42: 1.0}, {43: 1.0}) is None


def section(markdown: str) -> str:
    return markdown.split("## Labelled pairs and hard negatives")[1].split("\n## ")[0]


def test_render_says_not_run_yet_then_not_measured_yet(tmp_path: Path) -> None:
    absent = section(render.render(tmp_path))
    assert "**Not run yet**" in absent and "python benchmarks/supervised_quality.py --work_dir" in absent
    empty = tmp_path / "empty"
    summary = study.main(["--summarize", "--records_dir", str(empty), "--summary_json", str(tmp_path / "s.json")])
    assert summary["arms"] == [] and summary["comparisons"] == []
    (tmp_path / "results").mkdir()
    (tmp_path / "s.json").rename(tmp_path / "results" / "supervised_quality.json")
    text = section(render.render(tmp_path / "results"))
    assert "**Not measured yet**: no run has finished." in text and "supervised_quality.py --work_dir" in text
    assert "Still to run (18, by arm" in text and "`unsup`: `base-seed42`, `base-seed43`, `base-seed44`" in text
    assert "| (a)" not in text


def test_main_summarizes_and_render_shows_the_arms_and_differences(records_dir: Path, tmp_path: Path) -> None:
    (records_dir / "invocations.json").write_text(
        json.dumps([{"command": "python benchmarks/supervised_quality.py --work_dir ../sq", "started_at": "T0",
                     "finished_at": "T1", "environment": {"cpu": "CPU X", "cpu_cores": 2}}])
    )  # fmt: skip
    results = tmp_path / "results"
    summary_json = results / "supervised_quality.json"
    study.main(["--summarize", "--records_dir", str(records_dir), "--summary_json", str(summary_json)])
    text = section(render.render(results))
    assert "| (a) Unsupervised SimCSE, the pairs' sentences | 2,106 | 4.6 | 80.00 ± 0.00 | 68.50 ± 1.00 |" in text
    assert "| 73.50 ± 1.00 | 71.00 ± 1.00 | 50, 50, 50 | 3 |" in text  # STS-B, the 6-task average, steps, n
    assert "| (b) Supervised, SICK's contradictions as hard negatives | 251 | 38.2 | 82.00 ± 1.00 |" in text
    assert "| (b) Supervised, SICK's contradictions as hard negatives − (a) Unsupervised SimCSE, the pairs' " in text
    assert "| +2.17 ± 0.76 | 42: +3.00, 43: +1.50, 44: +2.00 | **yes** |" in text
    assert "| +0.00 ± 1.41 | 42: +1.00, 43: -1.00 | no | 1.000 |" in text
    assert "SICK-R is left out: 1,761 of the 5,007 distinct sentences" in text and "3,015 of its 4,927 pairs" in text
    assert "99.00" not in text and "SICK-R |" not in text  # no SICK-R score, no SICK-R column
    assert "Still to run (10, by arm" in text
    assert "python benchmarks/supervised_quality.py --work_dir ../sq" in text and "T0 to T1" in text


def test_a_record_of_another_work_dir_is_refused(tmp_path: Path) -> None:
    triplets = study.ARMS["triplets"]
    given = {**record(42, 70), "arguments": ["--train_file", study.train_file_argument(triplets, tmp_path / "a")]}
    write_records(tmp_path / "records" / "triplets", [given])
    assert study.restore_records(triplets, tmp_path / "a", tmp_path / "records") == 1
    assert study.restore_records(triplets, tmp_path / "a", tmp_path / "records") == 0  # there already
    with pytest.raises(SystemExit, match=r"was trained on --train_file .*/a/data/sick_triplets.csv, this study gives"):
        study.restore_records(triplets, tmp_path / "b", tmp_path / "records")


def test_a_changed_data_file_is_refused_only_where_records_were_trained_on_it(tmp_path: Path) -> None:
    records = tmp_path / "records"
    first = {"files": {study.MINED_FILE: {"rows": 3, "sha256": "a"}, study.PAIRS_FILE: {"rows": 3, "sha256": "b"}}}
    study.check_and_keep_manifest(first, records)
    changed = {"files": {study.MINED_FILE: {"rows": 3, "sha256": "c"}, study.PAIRS_FILE: {"rows": 3, "sha256": "b"}}}
    assert study.check_and_keep_manifest(changed, records)["files"][study.MINED_FILE]["sha256"] == "c"  # no record
    write_records(records / "mined", [record(42, 70)])
    with pytest.raises(SystemExit, match=r"sick_mined.csv differs from the one the kept records of mined were .*"
                                         r"another hf_cse.mine, model or device"):  # fmt: skip
        study.check_and_keep_manifest(first, records)


def test_without_the_miner_the_mined_arms_are_skipped_with_the_reason(tmp_path: Path, monkeypatch) -> None:
    import hf_cse.commands.sweep as sweep_command

    swept = []

    def fake_sweep(argv: list[str]) -> None:
        swept.append(Path(argv[argv.index("--output_dir") + 1]).name)

    monkeypatch.setattr(sweep_command, "main", fake_sweep)
    monkeypatch.setattr(study, "MINE_MODULE", "hf_cse.no_such_miner")
    monkeypatch.chdir(study.REPO_ROOT)
    argv = ["--work_dir", str(tmp_path / "work"), "--records_dir", str(tmp_path / "records"), "--seeds", "42", "43"]
    argv += ["--sick_train", str(write_sick(tmp_path / "SICK_train.txt")), "--sts_dir", str(tmp_path / "sts")]
    with pytest.raises(SystemExit) as stopped:
        study.main(argv)
    reason = "`python -m hf_cse.no_such_miner` is not in this hf_cse yet"
    assert str(stopped.value) == f"mined not trained: {reason}; triplets_mined not trained: {reason}."
    # Stage by stage, seed by seed within a stage.
    assert swept == ["unsup", "triplets", "pairs", "unsup", "triplets", "pairs", "triplet_pairs", "triplet_pairs"]
    (invocation,) = json.loads((tmp_path / "records" / "invocations.json").read_text())
    assert "finished_at" in invocation
    manifest = json.loads((tmp_path / "records" / "data.json").read_text())
    assert study.MINED_FILE not in manifest["files"] and manifest["files"][study.TRIPLETS_FILE]["rows"] == 6
    assert manifest["mine_command"].startswith("python -m hf_cse.no_such_miner --model_name_or_path pip:")


# ---------------------------------------------------------------------------------------------------------------------
# The rehearsal: every arm's sweep, the miner and the summary on the tiny model, 2 steps, 1 seed


class InProcess:
    """A sweep launcher that runs ``run_unsup.py``'s ``main`` in this process (a subprocess spends ~10 s importing
    torch and transformers, ten times the tiny run)."""

    def __call__(self, command: list[str], log: IO[str], *, env: dict[str, str], cwd: Any) -> int:
        assert Path(command[1]).name == "run_unsup.py" and command[0] == sys.executable
        try:
            run_command(run_unsup.main, "run_unsup.py", command[2:])
        except SystemExit as exit_info:
            return exit_info.code
        return 0


def rehearse(arms: list[str], tiny_encoder_dir: Path, tmp_path: Path, monkeypatch) -> dict[str, Any]:
    """The study's command for ``arms`` with the tiny model (2 steps of batch 4, STS-B dev every step), each run
    in this process; returns the summary."""
    import hf_cse.commands.sweep as sweep_command

    monkeypatch.setattr(
        sweep_command, "main", functools.partial(sweep_command.main, launch=InProcess(), slots=[DeviceSlot()])
    )
    monkeypatch.chdir(study.REPO_ROOT)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    sts_dir = write_senteval_dir(tmp_path / "sts")
    write_stsb_dev(sts_dir)
    flags = ["--model_name_or_path", str(tiny_encoder_dir), "--per_device_train_batch_size", "4", "--max_steps", "2"]
    flags += ["--eval_steps", "1", "--logging_steps", "1", "--use_cpu", "true", "--report_to", "none"]
    argv = ["--work_dir", str(tmp_path / "work"), "--records_dir", str(tmp_path / "records"), "--seeds", "42"]
    argv += ["--summary_json", str(tmp_path / "results" / "supervised_quality.json"), "--arms", *arms]
    argv += ["--sick_train", str(write_sick(tmp_path / "SICK_train.txt")), "--sts_dir", str(sts_dir)]
    try:
        summary = study.main([*argv, "--mine_flags", "--pooler avg --margin 1", "--", *flags])
    finally:
        torch.set_num_threads(threads)
    for arm in arms:
        kept = json.loads((tmp_path / "records" / arm / "base-seed42.json").read_text())
        train_file = kept["arguments"][kept["arguments"].index("--train_file") + 1]
        assert train_file == str(tmp_path / "work" / "data" / study.ARMS[arm].train_file)
        assert kept["dev"]["step"] in (1, 2) and set(kept["test"]) == set(STS_TEST_COLUMNS)
    assert [arm["arm"] for arm in summary["arms"]] == arms and summary["pending"] == {}
    text = section(render.render(tmp_path / "results"))
    assert "Not measured yet" not in text and all(study.ARMS[arm].label in text for arm in arms)
    return summary


def test_rehearsal_of_every_arm_but_the_mined_ones(tiny_encoder_dir: Path, tmp_path: Path, monkeypatch) -> None:
    arms = ["unsup", "triplets", "pairs", "triplet_pairs"]
    summary = rehearse(arms, tiny_encoder_dir, tmp_path, monkeypatch)
    files = summary["data"]["files"]
    assert {name: entry["rows"] for name, entry in files.items()} == {
        study.SENTENCES_FILE: 19, study.TRIPLETS_FILE: 6, study.PAIRS_FILE: 11, study.TRIPLET_PAIRS_FILE: 6
    }  # fmt: skip
    compared = [(row["arm"], row["reference"]) for row in summary["comparisons"]]
    against_unsup = [("triplets", "unsup"), ("pairs", "unsup"), ("triplet_pairs", "unsup")]
    assert compared == [*against_unsup, ("triplets", "triplet_pairs")]
    assert "mine_command" not in summary["data"]  # no mined arm asked for: nothing mined


@pytest.mark.skipif(importlib.util.find_spec("hf_cse.mine") is None, reason="python -m hf_cse.mine is not there yet")
def test_rehearsal_of_the_mined_arms(tiny_encoder_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """The miner as a subprocess on the pairs, then both mined arms: the triplets' rows take their negatives from the
    pairs' mined file."""
    summary = rehearse(["mined", "triplets_mined"], tiny_encoder_dir, tmp_path, monkeypatch)
    data = tmp_path / "work" / "data"
    mined = study.read_triplets(data / study.MINED_FILE)
    assert [row[:2] for row in mined] == study.read_rows(data / study.PAIRS_FILE)
    assert all(negative not in (anchor, positive) for anchor, positive, negative in mined)
    negatives = {row[:2]: row[2] for row in mined}
    triplets_mined = study.read_rows(data / study.TRIPLETS_MINED_FILE)
    assert triplets_mined == [(*pair, negatives[pair]) for pair in study.read_rows(data / study.TRIPLET_PAIRS_FILE)]
    command = summary["data"]["mine_command"]
    assert command.startswith("python -m hf_cse.mine --model_name_or_path ") and command.endswith(" --margin 1")
    assert summary["data"]["files"][study.MINED_FILE]["rows"] == 11
    assert [(row["arm"], row["reference"]) for row in summary["comparisons"]] == []  # no reference arm asked for
    log = (tmp_path / "work" / "logs" / "mine.log").read_text()
    assert "Wrote 11 rows" in log
