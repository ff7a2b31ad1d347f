"""``benchmarks/quality_study.py``: the sweeps it runs (shipped values first, same run names in both stages), the
choice of each objective's setting on dev only, the comparison with SimCSE, and its BENCHMARKS.md section."""

from __future__ import annotations

import importlib
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest
import scipy.stats

from hf_cse.objectives.osscse import OssCSELoss
from hf_cse.sweeps.aggregate import STS_TEST_COLUMNS, column_stats, compare_seed_averages
from hf_cse.sweeps.grid import expand, parse_grid, run_name

BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS_DIR))  # the scripts import their helpers as `from _common import ...`
study = importlib.import_module("quality_study")
render = importlib.import_module("render")

SEEDS = (42, 43, 44)
OBJECTIVE_CLASSES = {"osscse": OssCSELoss}


def test_shipped_values_run_first_then_the_whole_grid(tmp_path: Path) -> None:
    simcse = study.ARMS["simcse"]
    shipped = study.sweep_argv(simcse, "shipped", SEEDS, tmp_path)
    grid = study.sweep_argv(simcse, "grid", SEEDS, tmp_path)
    assert shipped[shipped.index("--grid") + 1] == "temperature=0.05"
    assert grid[grid.index("--grid") + 1] == "temperature=0.05,0.1"
    for argv in (shipped, grid):
        assert argv[argv.index("--output_dir") + 1] == str(tmp_path / "simcse")
        assert argv[argv.index("--config") + 1] == "examples/configs/simcse_minilm_wiki1m.yaml"
        assert argv[argv.index("--") + 1 :] == list(study.RUN_FLAGS)
    assert "--grid" not in study.sweep_argv(study.ARMS["dclr_focal"], "grid", SEEDS, tmp_path)


@pytest.mark.parametrize("study_arm", [arm for arm in study.STUDY if arm.key], ids=lambda arm: arm.arm)
def test_the_grid_stage_finds_the_shipped_stage_runs_by_name(study_arm) -> None:
    """The sweep skips a finished run by its name: the first stage's names must be among the second's."""

    def names(stage: str) -> set[str]:
        axis = parse_grid(f"{study_arm.key}={','.join(study_arm.values_in(stage))}")
        return {run_name(setting, seed) for setting in expand([axis]) for seed in SEEDS}

    assert len(names("shipped")) == len(SEEDS)
    assert names("shipped") < names("grid")


def test_every_study_config_exists_and_ships_the_first_value() -> None:
    import yaml

    root = BENCHMARKS_DIR.parent
    for study_arm in study.STUDY:
        config = yaml.safe_load((root / study_arm.config).read_text())
        if not study_arm.key:
            continue
        head, _, key = study_arm.key.partition(".")
        if head == "objective_kwargs":
            shipped = json.loads(config.get("objective_kwargs", "{}")).get(key)
        elif head == "auxiliary_losses":  # not in the config: the objective's default term settings
            assert "auxiliary_losses" not in config
            term, _, field = key.partition(".")
            shipped = OBJECTIVE_CLASSES[config["objective"]].default_auxiliary_losses[term][field]
        else:
            shipped = config[study_arm.key]
        assert float(shipped) == float(study_arm.values[0]), study_arm.arm


def run(value: str, key: str, seed: int, dev: float, avg: float, status: str = "done") -> dict[str, Any]:
    test = {column: avg + i * 0.1 for i, column in enumerate(STS_TEST_COLUMNS[:-1])}
    test["avg"] = avg
    return {
        "name": f"{key}={value}-seed{seed}",
        "setting": {key: value},
        "seed": seed,
        "status": status,
        "dev": {"stsb_spearman": dev, "step": 50, "checkpoint": "checkpoint-50"},
        "test": test,
    }


def write_sweep(path: Path, key: str, runs: list[dict[str, Any]]) -> None:
    """A ``sweep.json`` as ``python -m hf_cse.sweep`` writes it: runs, and per setting the statistics of its runs."""
    settings = []
    for value in dict.fromkeys(r["setting"][key] for r in runs):
        done = [r for r in runs if r["setting"][key] == value and r["status"] == "done"]
        dev_mean, dev_std = column_stats((r["dev"] for r in done), ["stsb_spearman"])
        test_mean, test_std = column_stats((r["test"] for r in done), STS_TEST_COLUMNS)
        settings.append(
            {
                "name": f"{key}={value}",
                "setting": {key: value},
                "runs": len(done),
                "seeds": [r["seed"] for r in done],
                "dev": {"mean": dev_mean.get("stsb_spearman"), "std": dev_std.get("stsb_spearman")},
                "test": {c: {"mean": test_mean.get(c), "std": test_std.get(c)} for c in STS_TEST_COLUMNS},
            }
        )
    path.mkdir(parents=True)
    (path / "sweep.json").write_text(json.dumps({"runs": runs, "settings": settings}))


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    """SimCSE: 0.05 has the better dev and the worse test, 0.1 the reverse. Focal: 0.5 has the best dev but only
    two seeds, so 0.3 is chosen. DCL: no complete setting yet."""
    write_sweep(
        tmp_path / "simcse",
        "temperature",
        [run("0.05", "temperature", s, dev=80 + i, avg=76 + 0.1 * i) for i, s in enumerate(SEEDS)]
        + [run("0.1", "temperature", s, dev=70 + i, avg=79 + i) for i, s in enumerate(SEEDS)],
    )
    key = "objective_kwargs.hardness"
    write_sweep(
        tmp_path / "focal_infonce",
        key,
        [run("0.3", key, s, dev=81, avg=77 + 0.2 * i) for i, s in enumerate(SEEDS)]
        + [run("0.5", key, s, dev=90, avg=70) for s in SEEDS[:2]]
        + [run("0.5", key, 44, dev=0, avg=0, status="failed")],
    )
    write_sweep(tmp_path / "dcl", "temperature", [run("0.2", "temperature", 42, dev=85, avg=90)])
    return tmp_path


def test_each_objective_is_chosen_on_dev_among_complete_settings(work_dir: Path) -> None:
    summary = study.summarize(work_dir)
    chosen = {arm["arm"]: arm["chosen"] for arm in summary["arms"]}
    assert chosen == {"simcse": "temperature=0.05", "focal_infonce": "objective_kwargs.hardness=0.3", "dcl": None}
    simcse = summary["arms"][0]
    assert [setting["value"] for setting in simcse["settings"]] == ["0.05", "0.1"]
    assert [r["seed"] for r in simcse["settings"][0]["runs"]] == list(SEEDS)
    assert simcse["settings"][0]["dev"]["mean"] == pytest.approx(81.0)


def test_chosen_settings_are_compared_with_simcse_seed_by_seed(work_dir: Path) -> None:
    comparison = study.summarize(work_dir)["comparison"]
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
    write_sweep(tmp_path / "focal_infonce", key, [run("0.3", key, s, dev=81, avg=77) for s in SEEDS])
    assert study.summarize(tmp_path)["comparison"] == {}


def test_compare_seed_averages_overlap_and_degenerate_cases() -> None:
    overlapping = compare_seed_averages([1.0, 3.0], [2.0, 4.0])
    assert overlapping["beyond_spread"] is False and overlapping["delta_avg"] == pytest.approx(-1.0)
    assert compare_seed_averages([5.0], [1.0, 2.0])["welch_p"] is None  # one seed: no test
    assert compare_seed_averages([5.0], [1.0, 2.0])["beyond_spread"] is True
    with pytest.raises(ValueError, match="at least one value"):
        compare_seed_averages([], [1.0])


def test_main_summarizes_and_render_shows_the_study(work_dir: Path, tmp_path: Path, capsys) -> None:
    results = tmp_path / "results"
    study.main(["--work_dir", str(work_dir), "--summarize", "--summary_json", str(results / "quality_study.json")])
    assert "Wrote" in capsys.readouterr().out
    markdown = render.render(results)
    section = markdown.split("## Does any objective beat SimCSE?")[1].split("\n## ")[0]
    assert "| SimCSE | **temperature = 0.05** | 81.00 ± 1.00 |" in section
    assert "| SimCSE | temperature = 0.1 | 71.00 ± 1.00 |" in section
    assert "| Focal-InfoNCE | objective_kwargs.hardness=0.3 | +1.10 | 77.00 to 77.40 | **yes** |" in section
    assert "quality_study.py --work_dir" in section


def test_render_says_not_run_yet_without_the_study(tmp_path: Path) -> None:
    section = render.render(tmp_path).split("## Does any objective beat SimCSE?")[1].split("\n## ")[0]
    assert "**Not run yet**" in section and "benchmarks/quality_study.py" in section


def test_unknown_arm_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="unknown nope; valid arms are: simcse"):
        study.main(["--work_dir", str(tmp_path), "--arms", "nope", "--summarize"])
