"""``benchmarks/quality_study.py``: the sweeps it runs (shipped values first, same run names in both stages), the
choice of each objective's setting on dev only, the comparison with SimCSE, and its BENCHMARKS.md section."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import scipy.stats
from common.study_records import write_records
from conftest import HANG_GUARD_S, wait_until

from hf_cse.objectives.osscse import OssCSELoss
from hf_cse.objectives.simcsepp import SimCSEPPLoss
from hf_cse.objectives.sncse import SNCSELoss
from hf_cse.sweeps.aggregate import STS_TEST_COLUMNS, compare_seed_averages
from hf_cse.sweeps.grid import expand, parse_grid, run_name
from hf_cse.sweeps.runs import Terminated

BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS_DIR))  # the scripts import their helpers as `from _common import ...`
study = importlib.import_module("quality_study")
render = importlib.import_module("render")

SEEDS = (42, 43, 44)
OBJECTIVE_CLASSES = {"osscse": OssCSELoss, "simcsepp": SimCSEPPLoss, "sncse": SNCSELoss}


def test_shipped_values_run_first_then_the_whole_grid(tmp_path: Path) -> None:
    simcse = study.ARMS["simcse"]
    (shipped,) = study.sweep_argvs(simcse, "shipped", SEEDS, tmp_path)
    (grid,) = study.sweep_argvs(simcse, "grid", SEEDS, tmp_path)
    assert shipped[shipped.index("--grid") + 1] == "temperature=0.05"
    assert grid[grid.index("--grid") + 1] == "temperature=0.05,0.1"
    for argv in (shipped, grid):
        assert argv[argv.index("--output_dir") + 1] == str(tmp_path / "simcse")
        assert argv[argv.index("--config") + 1] == "examples/configs/simcse_minilm_wiki1m.yaml"
        assert argv[argv.index("--") + 1 :] == list(study.RUN_FLAGS)
        # The study's data, the configs' download layout aside: the team's wiki1m head and original STS files.
        assert argv[argv.index("--sts_dir") + 1] == study.STS_DIR and study.STS_DIR.endswith("data/sts")
    assert study.RUN_FLAGS[-2:] == ("--train_file", study.TRAIN_FILE)
    assert study.TRAIN_FILE.endswith("data/wiki1m/wiki1m_for_simcse.head11914.txt")
    (combined,) = study.sweep_argvs(study.ARMS["dclr_focal"], "grid", SEEDS, tmp_path)
    assert "--grid" not in combined


def test_a_second_key_is_swept_alone_from_the_shipped_config(tmp_path: Path) -> None:
    focal = study.ARMS["focal_infonce"]
    assert [argv[argv.index("--grid") + 1] for argv in study.sweep_argvs(focal, "shipped", SEEDS, tmp_path)] == [
        "objective_kwargs.hardness=0.3"
    ]
    grids = study.sweep_argvs(focal, "grid", SEEDS, tmp_path)
    assert [argv[argv.index("--grid") + 1] for argv in grids] == [
        "objective_kwargs.hardness=0.3,0.5",
        "temperature=0.1",  # temperature 0.05 with hardness 0.3 is the shipped run above
    ]
    assert {argv[argv.index("--output_dir") + 1] for argv in grids} == {str(tmp_path / "focal_infonce")}
    settings = focal.settings()
    assert [(key, value) for key, value, _ in settings] == [
        ("objective_kwargs.hardness", "0.3"),
        ("objective_kwargs.hardness", "0.5"),
        ("temperature", "0.1"),
    ]
    assert [run_name(point, 42) for *_, point in settings] == [
        "objective_kwargs.hardness=0.3-seed42",
        "objective_kwargs.hardness=0.5-seed42",
        "temperature=0.1-seed42",
    ]


def test_a_failed_sweep_does_not_stop_the_arms_next_key(tmp_path: Path, monkeypatch) -> None:
    import hf_cse.commands.sweep as sweep_command

    swept = []

    def fake_sweep(argv: list[str]) -> None:
        spec = argv[argv.index("--grid") + 1]
        seeds = argv[argv.index("--seeds") + 1 : argv.index("--grid")]
        swept.append((spec, *seeds))
        if spec.startswith("objective_kwargs.hardness=0.3,"):  # the grid stage's first key: some runs failed
            raise sweep_command.SweepRunsFailedError("1 of 2 runs failed")
        name = f"{spec}-seed{seeds[0]}"  # the runs finished: one complete record each
        write_records(tmp_path / "work" / "focal_infonce" / "results",
                      [{**record("0", "unused", 42, dev=80, avg=77), "name": name}])  # fmt: skip

    monkeypatch.setattr(sweep_command, "main", fake_sweep)
    failed = study.run_study([study.ARMS["focal_infonce"]], SEEDS[:2], tmp_path / "work", tmp_path / "kept")
    assert failed == ["focal_infonce"]
    # Stage by stage, and within a stage seed by seed: every arm's seed 42 comes before any arm's seed 43.
    assert swept == [
        ("objective_kwargs.hardness=0.3", "42"),
        ("objective_kwargs.hardness=0.3", "43"),
        ("objective_kwargs.hardness=0.3,0.5", "42"),
        ("temperature=0.1", "42"),
        ("objective_kwargs.hardness=0.3,0.5", "43"),
        ("temperature=0.1", "43"),
    ]
    kept = sorted(path.name for path in (tmp_path / "kept" / "focal_infonce").glob("*.json"))
    assert kept == [f"{name}-seed{seed}.json" for name in ("objective_kwargs.hardness=0.3", "temperature=0.1")
                    for seed in (42, 43)]  # fmt: skip


def test_a_study_cut_short_has_every_arm_at_the_same_seeds(tmp_path: Path, monkeypatch) -> None:
    import hf_cse.commands.sweep as sweep_command

    swept = []

    def fake_sweep(argv: list[str]) -> None:
        swept.append((argv[argv.index("--output_dir") + 1], argv[argv.index("--seeds") + 1]))

    monkeypatch.setattr(sweep_command, "main", fake_sweep)
    arms = [study.ARMS["simcse"], study.ARMS["esimcse"]]
    study.run_study(arms, SEEDS, tmp_path / "work", tmp_path / "kept")
    shipped = [(Path(folder).name, seed) for folder, seed in swept[:6]]
    assert shipped == [(arm, seed) for seed in ("42", "43", "44") for arm in ("simcse", "esimcse")]


@pytest.mark.parametrize(
    ("stop", "message"),
    [
        (  # during the runs: the sweep stopped them and says how far it got
            "sweep",
            "focal_infonce, shipped stage, seed 43: Stopped by SIGTERM with 0 of 1 runs done (sweep.md); the running "
            "ones were stopped. Rerun the same command to resume them.",
        ),
        ("Terminated", "focal_infonce, shipped stage, seed 43: Stopped by SIGTERM. Rerun the same command to resume."),
        (
            "KeyboardInterrupt",
            "focal_infonce, shipped stage, seed 43: Stopped by Ctrl-C. Rerun the same command to resume.",
        ),
    ],
)
def test_a_stop_ends_the_study_with_where_it_was_and_keeps_the_finished_runs(
    tmp_path: Path, monkeypatch, stop: str, message: str
) -> None:
    import hf_cse.commands.sweep as sweep_command

    swept = []

    def fake_sweep(argv: list[str]) -> None:
        seed = argv[argv.index("--seeds") + 1]
        swept.append(seed)
        name = f"objective_kwargs.hardness=0.3-seed{seed}"  # the run finished before the signal
        write_records(tmp_path / "work" / "focal_infonce" / "results",
                      [{**record("0", "unused", 42, dev=80, avg=77), "name": name}])  # fmt: skip
        if seed == "43":
            raise {
                "sweep": sweep_command.SweepStoppedError(
                    "Stopped by SIGTERM with 0 of 1 runs done (sweep.md); the running ones were stopped. Rerun the "
                    "same command to resume them."
                ),
                "Terminated": Terminated(signal.SIGTERM),
                "KeyboardInterrupt": KeyboardInterrupt(),
            }[stop]

    monkeypatch.setattr(sweep_command, "main", fake_sweep)
    with pytest.raises(sweep_command.SweepStoppedError) as stopped:
        study.run_study([study.ARMS["focal_infonce"]], SEEDS, tmp_path / "work", tmp_path / "kept")
    assert str(stopped.value) == message
    assert swept == ["42", "43"]  # nothing after the stop
    kept = sorted(path.name for path in (tmp_path / "kept" / "focal_infonce").glob("*.json"))
    assert kept == [f"objective_kwargs.hardness=0.3-seed{seed}.json" for seed in (42, 43)]


SLEEPING_STUDY = """
import sys, time
from pathlib import Path
sys.path.insert(0, {benchmarks!r})
import hf_cse.commands.sweep as sweep_command
import quality_study

def sleeping_sweep(argv):  # a sweep that trains "forever", once it says it started
    Path({started!r}).touch()
    time.sleep(600)

sweep_command.main = sleeping_sweep
quality_study.console_main()
"""


def test_sigterm_ends_the_study_in_one_line(tmp_path: Path) -> None:
    """``kill PID`` of the study process: one line that says where it stopped and that rerunning resumes, exit 1."""
    started = tmp_path / "started"
    code = SLEEPING_STUDY.format(benchmarks=str(BENCHMARKS_DIR), started=str(started))
    argv = ["--work_dir", str(tmp_path / "work"), "--records_dir", str(tmp_path / "kept"), "--arms", "simcse"]
    process = subprocess.Popen(
        [sys.executable, "-c", code, *argv, "--seeds", "42"],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: started.exists() or process.poll() is not None, "the study to start its sweep")
        if not started.exists():
            process.kill()
            raise AssertionError(f"the sweep never started; the study said: {process.communicate()[1][-3000:]}")
        process.send_signal(signal.SIGTERM)
        err = process.communicate(timeout=HANG_GUARD_S)[1]
    finally:
        process.kill()
    assert process.returncode == 1, err[-3000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "python benchmarks/quality_study.py: error: simcse, shipped stage, seed 42: Stopped by SIGTERM. Rerun the "
        "same command to resume."
    )
    (invocation,) = json.loads((tmp_path / "kept" / "invocations.json").read_text())
    assert "stopped_at" in invocation and "finished_at" not in invocation


@pytest.mark.parametrize("study_arm", [arm for arm in study.STUDY if arm.axes], ids=lambda arm: arm.arm)
def test_the_grid_stage_finds_the_shipped_stage_runs_by_name(study_arm) -> None:
    """The sweep skips a finished run by its name: the first stage's names must be among the second's."""

    def names(stage: str) -> set[str]:
        return {run_name(setting, seed) for spec in study_arm.grids(stage) for setting in expand([parse_grid(spec)])
                for seed in SEEDS}  # fmt: skip

    assert len(names("shipped")) == len(SEEDS)
    assert names("shipped") < names("grid")
    assert {run_name(point, seed) for *_, point in study_arm.settings() for seed in SEEDS} == names("grid")


def test_every_study_config_exists_and_ships_the_first_value_of_every_key() -> None:
    import yaml

    root = BENCHMARKS_DIR.parent
    for study_arm in study.STUDY:
        config = yaml.safe_load((root / study_arm.config).read_text())
        for swept_key, values in study_arm.axes:
            head, _, key = swept_key.partition(".")
            if head == "objective_kwargs":
                shipped = json.loads(config.get("objective_kwargs", "{}")).get(key)
            elif head == "auxiliary_losses":  # not in the config: the objective's default term settings
                assert "auxiliary_losses" not in config
                term, _, field = key.partition(".")
                shipped = OBJECTIVE_CLASSES[config["objective"]].default_auxiliary_losses[term][field]
            else:
                shipped = config[swept_key]
            assert shipped is not None and float(shipped) == float(values[0]), (study_arm.arm, swept_key)


def record(value: str, key: str, seed: int, dev: float, avg: float) -> dict[str, Any]:
    """A finished run's record as the sweep writes it to ``results/NAME.json`` (the fields the study reads)."""
    test = {column: avg + i * 0.1 for i, column in enumerate(STS_TEST_COLUMNS[:-1])}
    test["avg"] = avg
    return {
        "name": f"{key}={value}-seed{seed}",
        "setting": {key: float(value)},
        "seed": seed,
        "run_dir": f"runs/{key}={value}-seed{seed}",
        "log": f"logs/{key}={value}-seed{seed}.log",
        "dev": {"stsb_spearman": dev, "step": 50, "checkpoint": "checkpoint-50"},
        "test": test,
    }


@pytest.fixture
def records_dir(tmp_path: Path) -> Path:
    """SimCSE: 0.05 has the better dev and the worse test, 0.1 the reverse. Focal: 0.5 has the best dev but only
    two seeds, so 0.3 is chosen. DCL: no complete setting yet. A stray file of another seed is ignored."""
    records = tmp_path / "records"
    write_records(
        records / "simcse",
        [record("0.05", "temperature", s, dev=80 + i, avg=76 + 0.1 * i) for i, s in enumerate(SEEDS)]
        + [record("0.1", "temperature", s, dev=70 + i, avg=79 + i) for i, s in enumerate(SEEDS)]
        + [record("0.1", "temperature", 7, dev=99, avg=99)],
    )
    key = "objective_kwargs.hardness"
    write_records(
        records / "focal_infonce",
        [record("0.3", key, s, dev=81, avg=77 + 0.2 * i) for i, s in enumerate(SEEDS)]
        + [record("0.5", key, s, dev=90, avg=70) for s in SEEDS[:2]]
        + [record("0.1", "temperature", s, dev=80, avg=76) for s in SEEDS],
    )
    write_records(records / "dcl", [record("0.2", "temperature", 42, dev=85, avg=90)])
    return records


def test_each_objective_is_chosen_on_dev_among_complete_settings(records_dir: Path) -> None:
    summary = study.summarize(records_dir)
    chosen = {arm["arm"]: arm["chosen"] for arm in summary["arms"]}
    assert chosen == {"simcse": "temperature=0.05", "focal_infonce": "objective_kwargs.hardness=0.3", "dcl": None}
    simcse = summary["arms"][0]
    assert [setting["value"] for setting in simcse["settings"]] == ["0.05", "0.1"]
    assert [r["seed"] for r in simcse["settings"][0]["runs"]] == list(SEEDS)
    assert simcse["settings"][0]["dev"]["mean"] == pytest.approx(81.0)
    assert simcse["settings"][1]["n"] == 3 and simcse["settings"][1]["seeds"] == list(SEEDS)  # seed 7: not asked
    focal = summary["arms"][1]
    assert [setting["n"] for setting in focal["settings"]] == [3, 2, 3]
    assert [(setting["key"], setting["value"]) for setting in focal["settings"]] == [
        ("objective_kwargs.hardness", "0.3"),
        ("objective_kwargs.hardness", "0.5"),
        ("temperature", "0.1"),
    ]


def test_a_second_keys_setting_is_chosen_when_its_dev_is_best(tmp_path: Path) -> None:
    key = "objective_kwargs.hardness"
    write_records(
        tmp_path / "focal_infonce",
        [record("0.3", key, s, dev=81, avg=77) for s in SEEDS]
        + [record("0.5", key, s, dev=82, avg=78) for s in SEEDS]
        + [record("0.1", "temperature", s, dev=83, avg=70) for s in SEEDS],  # the best dev, the worst test
    )
    (focal,) = study.summarize(tmp_path)["arms"]
    assert focal["chosen"] == "temperature=0.1"
    assert focal["axes"] == {key: ["0.3", "0.5"], "temperature": ["0.05", "0.1"]}


def test_chosen_settings_are_compared_with_simcse_seed_by_seed(records_dir: Path) -> None:
    comparison = study.summarize(records_dir)["comparison"]
    simcse = [76.0, 76.1, 76.2]
    focal = [77.0, 77.2, 77.4]
    assert comparison["reference_setting"] == "temperature=0.05"
    assert comparison["reference_range"] == pytest.approx([76.0, 76.2])
    assert list(comparison["arms"]) == ["focal_infonce"]  # DCL has no chosen setting yet
    row = comparison["arms"]["focal_infonce"]
    assert row["setting"] == "objective_kwargs.hardness=0.3"
    assert row["delta_avg"] == pytest.approx(statistics.fmean(focal) - statistics.fmean(simcse))
    assert row["beyond_spread"] is True
    assert row["welch_p"] == pytest.approx(scipy.stats.ttest_ind(focal, simcse, equal_var=False).pvalue)


def test_no_comparison_before_simcse_has_a_chosen_setting(tmp_path: Path) -> None:
    key = "objective_kwargs.hardness"
    write_records(tmp_path / "focal_infonce", [record("0.3", key, s, dev=81, avg=77) for s in SEEDS])
    assert study.summarize(tmp_path)["comparison"] == {}


def test_compare_seed_averages_overlap_and_degenerate_cases() -> None:
    overlapping = compare_seed_averages([1.0, 3.0], [2.0, 4.0])
    assert overlapping["beyond_spread"] is False and overlapping["delta_avg"] == pytest.approx(-1.0)
    assert compare_seed_averages([5.0], [1.0, 2.0])["welch_p"] is None  # one seed: no test
    assert compare_seed_averages([5.0], [1.0, 2.0])["beyond_spread"] is True
    with pytest.raises(ValueError, match="at least one value"):
        compare_seed_averages([], [1.0])


def test_main_summarizes_and_render_shows_the_study(records_dir: Path, tmp_path: Path, capsys) -> None:
    results = tmp_path / "results"
    (records_dir / "invocations.json").write_text(
        json.dumps([{"command": "python benchmarks/quality_study.py --work_dir ../q", "started_at": "T0",
                     "stopped_at": "T1", "environment": {"cpu": "CPU X", "cpu_cores": 2}}])
    )  # fmt: skip
    combined = [
        {**record("0", "unused", s, dev=80, avg=78 + 0.1 * i), "name": f"base-seed{s}", "setting": {}}
        for i, s in enumerate(SEEDS)
    ]
    write_records(records_dir / "dclr_focal", combined)  # an arm that sweeps nothing: its config as shipped
    argv = ["--summarize", "--records_dir", str(records_dir), "--summary_json", str(results / "quality_study.json")]
    study.main(argv)
    assert "Wrote" in capsys.readouterr().out
    markdown = render.render(results)
    section = markdown.split("## Does any objective beat SimCSE?")[1].split("\n## ")[0]
    assert "| SimCSE | **temperature = 0.05** | 81.00 ± 1.00 |" in section
    assert "| SimCSE | temperature = 0.1 | 71.00 ± 1.00 |" in section
    assert "| Focal-InfoNCE | temperature = 0.1 | 80.00 ± 0.00 |" in section  # the second key's setting
    assert "| 50, 50, 50 | 3 |" in section  # the step dev selected, per seed
    assert "| Focal-InfoNCE | objective_kwargs.hardness=0.3 | +1.10 | 77.00 to 77.40 | **yes** |" in section
    assert "| DCLR + Focal-InfoNCE | **shipped config** | 80.00 ± 0.00 |" in section
    assert "| DCLR + Focal-InfoNCE | shipped config | +2.00 |" in section  # the sweep's name "base" is not shown
    assert "quality_study.py --work_dir ../q" in section
    assert "T0 to stopped at T1" in section
    # What rerunning the study trains: DCL has one run of its 9, Focal-InfoNCE 8 of 9, OssCSE none.
    assert "Still to run (" in section and "`dcl`: `temperature=0.1-seed42`, " in section
    assert "`focal_infonce`: `objective_kwargs.hardness=0.5-seed44`;" in section and "`osscse`: " in section


def test_the_summary_names_every_run_still_to_do(records_dir: Path) -> None:
    pending = study.summarize(records_dir)["pending"]
    assert "simcse" not in pending  # its 6 runs are done (the stray seed 7 is not asked for)
    assert pending["focal_infonce"] == ["objective_kwargs.hardness=0.5-seed44"]
    assert pending["dcl"][0] == "temperature=0.1-seed42" and len(pending["dcl"]) == 3 * 3 - 1
    assert pending["dclr_focal"] == [f"base-seed{seed}" for seed in SEEDS]  # no record: every run, by its name


def test_render_says_not_run_yet_without_the_study(tmp_path: Path) -> None:
    section = render.render(tmp_path).split("## Does any objective beat SimCSE?")[1].split("\n## ")[0]
    assert "**Not run yet**" in section and "benchmarks/quality_study.py" in section


def test_unknown_arm_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="unknown nope; valid arms are: simcse"):
        study.main(["--work_dir", str(tmp_path), "--arms", "nope", "--summarize"])


def test_work_dir_is_required_to_run(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="--work_dir is required to run the study"):
        study.main(["--records_dir", str(tmp_path)])


def test_records_carry_finished_runs_to_a_fresh_work_dir(tmp_path: Path) -> None:
    """Kept after a sweep, restored into a new machine's work folder (never over a record there), summarized alone."""
    simcse = study.ARMS["simcse"]
    first, records = tmp_path / "first", tmp_path / "records"
    write_records(first / "simcse" / "results", [record("0.05", "temperature", s, dev=80, avg=76) for s in SEEDS])
    assert study.keep_records(simcse.arm, first, records) == 3
    assert study.keep_records(simcse.arm, first, records) == 0  # unchanged: nothing rewritten
    (first / "simcse" / "results" / "temperature=0.1-seed42.json").write_text("{")  # a broken one: not kept
    assert study.keep_records(simcse.arm, first, records) == 0 and len(list((records / "simcse").iterdir())) == 3

    fresh = tmp_path / "fresh"
    own = record("0.05", "temperature", 42, dev=1, avg=1)
    write_records(fresh / "simcse" / "results", [own])
    assert study.restore_records(simcse.arm, fresh, records) == 2
    assert json.loads((fresh / "simcse" / "results" / f"{own['name']}.json").read_text()) == own
    restored = fresh / "simcse" / "results" / "temperature=0.05-seed43.json"
    assert json.loads(restored.read_text()) == record("0.05", "temperature", 43, dev=80, avg=76)

    summary = study.summarize(records, [simcse])
    assert summary["arms"][0]["settings"][0]["n"] == 3
    assert summary["arms"][0]["chosen"] == "temperature=0.05"


def test_summarize_keeps_the_work_dirs_records_first(records_dir: Path, tmp_path: Path) -> None:
    work_dir = tmp_path / "work"
    kept_elsewhere = [record("0.2", "temperature", s, dev=85, avg=90 + i) for i, s in enumerate(SEEDS[1:], 1)]
    write_records(work_dir / "dcl" / "results", kept_elsewhere)
    argv = ["--work_dir", str(work_dir), "--summarize", "--records_dir", str(records_dir)]
    summary = study.main([*argv, "--summary_json", str(tmp_path / "summary.json")])
    dcl = next(arm for arm in summary["arms"] if arm["arm"] == "dcl")
    assert dcl["settings"][0]["n"] == 3 and dcl["chosen"] == "temperature=0.2"


def test_an_incomplete_record_is_one_line(tmp_path: Path) -> None:
    broken = record("0.05", "temperature", 42, dev=80, avg=76)
    del broken["test"]["sickr"]
    write_records(tmp_path / "simcse", [broken])
    with pytest.raises(SystemExit, match="not a finished run's record .*; delete it"):
        study.summarize(tmp_path)


RESPELLED_AFTER_THE_STUDY = {
    # config -> SHA-256
    "examples/configs/dclr_minilm_wiki1m.yaml": "170f55b1030cb1edf688c5b975c8b8f12e54919e149271b6c8a452f04472fd93",
    "examples/configs/dclr_focal_minilm_wiki1m.yaml": (
        "b11e60515841954783d057feca593a018674f3a59570d96ec58f8118657e9f72"
    ),
    "examples/configs/osscse_minilm_wiki1m.yaml": "1b7733132a171e2f3e6bfc27d4f8a584e780b4a407ecd2f832ec713f77d97a33",
    "examples/configs/sncse_minilm_wiki1m.yaml": "2d01f35be6f3268acfe9147202d9dcfd05c9990377775adffc38732de4ea9128",
}
"""The SHA-256 each of these configs had when the (finished) quality study trained its records: commit 2bbd864 spelled
their flat provider flags (``complementary_model_name_or_path``, ``negation_backend``, ...), removed with it, as the
same settings under ``input_kwargs``. A resume of those arms would train them again (another config file)."""


def test_every_kept_record_was_trained_with_its_arms_config_as_it_is_now() -> None:
    """A sweep counts a kept record as the same run only if its config file's SHA-256 matches (``config_sha256``), so
    an edit to an arm's config, even one that keeps its meaning (a deprecated flag spelled anew), makes the study's
    next resume refuse every record of that arm. Such an edit waits until the study is finished, or moves the arm's
    records aside; this test says so before the study does. The one exception, :data:`RESPELLED_AFTER_THE_STUDY`:
    the unsupervised study was finished when its four configs were respelled."""
    repo_root = BENCHMARKS_DIR.parent
    records = sorted(study.RECORDS_DIR.glob("*/*.json"))
    assert records, f"no kept records under {study.RECORDS_DIR}"
    for path in records:
        record = json.loads(path.read_text(encoding="utf-8"))
        config = record["arguments"][record["arguments"].index("--config") + 1]
        digest = hashlib.sha256((repo_root / config).read_bytes()).hexdigest()
        trained_with = RESPELLED_AFTER_THE_STUDY.get(config, digest)
        assert record["config_sha256"] == trained_with, f"{config} changed since {path.name} was trained with it"


STUDY_RUNS = [(arm.arm, point) for arm in study.STUDY for _, _, point in arm.settings()]


@pytest.mark.parametrize(("arm", "point"), STUDY_RUNS, ids=[f"{arm}-{point.name}" for arm, point in STUDY_RUNS])
def test_every_study_run_passes_run_unsups_checks(arm: str, point: Any, tmp_path: Path, monkeypatch) -> None:
    """Every setting of every arm, with the arguments the sweep gives its run, passes what run_unsup.py checks before
    anything loads (the arguments, the providers' settings): a sweep value cannot fail at its run's start, as SNCSE's
    BML weight 0 did when its term's provider settings were refused (the config names them; the term is off)."""
    from hf_cse.sweeps.arguments import RunUnsupArguments
    from hf_cse.training.arguments.checks import check_input_paths

    monkeypatch.chdir(BENCHMARKS_DIR.parent)  # the configs' and the study's paths are relative to the repository
    script = RunUnsupArguments(BENCHMARKS_DIR.parent / "run_unsup.py")
    command = script.setting_command(
        point, config=study.ARMS[arm].config, passthrough=list(study.RUN_FLAGS), sts_dir=study.STS_DIR,
        placeholder_dir=tmp_path,
    )  # fmt: skip
    argv = [*command.arguments, "--seed", "42", "--output_dir", str(tmp_path / "run")]
    _, _, training_args = script.parse(argv, point.name)  # run_unsup.parse_args, as the sweep checks a run
    check_input_paths(training_args)
