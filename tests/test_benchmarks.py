"""The benchmark scripts' own logic, fast and without real models.

- ``benchmarks/quality.py``: the resume logic with a fake runner (finished runs skipped, failed runs retried, atomic
  writes, protocol mismatches refused before any work), the summary maths (mean and sample std) on fake JSONs, and
  the evaluation path on the tiny random BERT and a synthetic STS folder;
- ``benchmarks/eval_speed.py``: sentence counts, the tokenizer call counter, the plain loop against
  ``SentenceEncoder``, and one end-to-end run on the tiny model;
- ``benchmarks/render.py``: ``BENCHMARKS.md`` from fake JSONs (every section, numbers from the files, "Not run yet"
  with the command for a missing file);
- ``benchmarks/negation_sample.py``: verdict counts, stale rows, and the shipped hand-checked sample still matching
  the negator.
"""

from __future__ import annotations

import argparse
import base64
import copy
import csv
import hashlib
import importlib
import importlib.metadata
import json
import logging
import math
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
import scipy.stats
import torch
from conftest import HANG_GUARD_S, SENTENCES, hold_lock, write_senteval_dir

from hf_cse.errors import OutputDirLockedError

BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS_DIR))  # the scripts import their helpers as `from _common import ...`
common = importlib.import_module("_common")
quality = importlib.import_module("quality")
render = importlib.import_module("render")
negation_sample = importlib.import_module("negation_sample")
loss_ops = importlib.import_module("loss_ops")

TASKS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")


def fake_scores(base: float) -> dict[str, float]:
    scores = {task: base + i for i, task in enumerate(TASKS)}
    scores["avg"] = sum(scores.values()) / len(TASKS)
    return scores


class FakeRunner:
    """Records the runs asked for; ``fail`` names runs that raise instead of returning scores."""

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.calls: list[str] = []
        self.fail = fail

    def __call__(self, spec: Any) -> dict[str, Any]:
        self.calls.append(spec.name)
        if spec.name in self.fail:
            raise RuntimeError(f"training {spec.name} crashed")
        return {"scores": fake_scores(60.0 + (spec.seed or 0) - 42), "train_s": 1.0}


# ---------------------------------------------------------------------------------------------------------------------
# quality.py: planning and resuming


def test_plan_runs_puts_start_first_then_seed_major() -> None:
    specs = quality.plan_runs(["simcse", "start", "dcl"], [42, 43], steps=150)
    assert [s.name for s in specs] == ["start", "simcse-seed42", "dcl-seed42", "simcse-seed43", "dcl-seed43"]
    assert specs[0].protocol_steps == 0 and specs[1].protocol_steps == 150


def test_finished_runs_are_skipped_on_rerun(tmp_path: Path) -> None:
    specs = quality.plan_runs(["start", "simcse", "dcl"], [42, 43], steps=2)
    runner = FakeRunner()
    status = quality.run_all(specs, tmp_path, runner)
    assert set(status.values()) == {"done"} and len(runner.calls) == 5
    record = json.loads((tmp_path / "simcse-seed43.json").read_text())
    assert record["arm"] == "simcse" and record["seed"] == 43 and record["steps"] == 2
    assert record["scores"]["sts12"] == 61.0 and "finished_at" in record
    assert json.loads((tmp_path / "start.json").read_text())["steps"] == 0

    again = FakeRunner()
    status = quality.run_all(specs, tmp_path, again)
    assert again.calls == [] and set(status.values()) == {"skipped"}

    # A new seed only runs what is missing.
    more = FakeRunner()
    quality.run_all(quality.plan_runs(["start", "simcse", "dcl"], [42, 43, 44], steps=2), tmp_path, more)
    assert more.calls == ["simcse-seed44", "dcl-seed44"]


def test_failed_run_writes_nothing_and_is_retried(tmp_path: Path) -> None:
    specs = quality.plan_runs(["simcse", "dcl"], [42], steps=2)
    status = quality.run_all(specs, tmp_path, FakeRunner(fail=("simcse-seed42",)))
    assert status == {"simcse-seed42": "failed", "dcl-seed42": "done"}
    assert not (tmp_path / "simcse-seed42.json").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["dcl-seed42.json"]  # no temporary file left either

    retry = FakeRunner()
    assert quality.run_all(specs, tmp_path, retry)["simcse-seed42"] == "done"
    assert retry.calls == ["simcse-seed42"]


def test_crash_while_writing_leaves_no_finished_looking_file(tmp_path: Path) -> None:
    spec = quality.RunSpec("simcse", 42, 2)
    # A record that cannot be serialized fails before anything is written.
    status = quality.run_all([spec], tmp_path, lambda s: {"scores": fake_scores(60.0), "bad": object()})
    assert status == {"simcse-seed42": "failed"} and list(tmp_path.iterdir()) == []
    # So does a record without every task's score.
    status = quality.run_all([spec], tmp_path, lambda s: {"scores": {"sts12": 1.0, "avg": 1.0}})
    assert status == {"simcse-seed42": "failed"} and list(tmp_path.iterdir()) == []

    def interrupted(spec: Any) -> dict[str, Any]:
        raise KeyboardInterrupt  # Ctrl-C or SIGTERM mid-run: the benchmark stops, with no result for this run

    with pytest.raises(KeyboardInterrupt):
        quality.run_all([spec], tmp_path, interrupted)
    assert list(tmp_path.iterdir()) == []


def test_write_json_atomic_keeps_the_old_file_when_interrupted(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "result.json"
    common.write_json_atomic(path, {"version": 1})

    def crash(*args: object) -> None:
        raise KeyboardInterrupt  # e.g. Ctrl-C or a kill between the write and the rename

    monkeypatch.setattr(common.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        common.write_json_atomic(path, {"version": 2})
    assert json.loads(path.read_text()) == {"version": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_incomplete_or_corrupt_result_is_run_again(tmp_path: Path) -> None:
    (tmp_path / "simcse-seed42.json").write_text('{"arm": "simcse", "scores": {"sts12": 1.0}}')
    (tmp_path / "dcl-seed42.json").write_text('{"arm": "dcl", "sco')
    runner = FakeRunner()
    quality.run_all(quality.plan_runs(["simcse", "dcl"], [42], steps=2), tmp_path, runner)
    assert runner.calls == ["simcse-seed42", "dcl-seed42"]
    assert quality.load_results(tmp_path)[0]["scores"]["sickr"] == 66.0


def test_protocol_mismatch_stops_before_any_run(tmp_path: Path) -> None:
    quality.run_all(quality.plan_runs(["dcl"], [42], steps=2), tmp_path, FakeRunner())
    runner = FakeRunner()
    with pytest.raises(quality.ProtocolMismatchError, match="2-step result"):
        quality.run_all(quality.plan_runs(["simcse", "dcl"], [42], steps=150), tmp_path, runner)
    assert runner.calls == []  # simcse comes first in the plan but did not start


def test_result_of_another_config_version_stops_before_any_run(tmp_path: Path) -> None:
    record = {"arm": "dcl", "seed": 42, "steps": 2, "scores": fake_scores(60.0)}
    path = tmp_path / "dcl-seed42.json"
    path.write_text(json.dumps({**record, "config_sha256": quality.config_sha256("dcl")}))
    runner = FakeRunner()
    quality.run_all(quality.plan_runs(["dcl"], [42, 43], steps=2), tmp_path, runner)
    assert runner.calls == ["dcl-seed43"]  # the same config: reused
    path.write_text(json.dumps({**record, "config_sha256": "0" * 64}))
    with pytest.raises(quality.ProtocolMismatchError, match="another version of examples/configs/dcl_minilm"):
        quality.run_all(quality.plan_runs(["dcl"], [42, 44], steps=2), tmp_path, FakeRunner())


def test_output_dir_lock_refuses_a_second_process_and_outlives_no_killed_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("fcntl")
    holder = hold_lock(tmp_path, "quality.py")
    try:
        with pytest.raises(OutputDirLockedError, match=f"in use by another quality.py \\(pid {holder.pid} on "):
            with quality.output_dir_lock(tmp_path):
                pass
    finally:
        holder.kill()  # SIGKILL: its lock file stays, its lock does not
        holder.wait()
    with caplog.at_level(logging.WARNING, logger="hf_cse.folder_lock"), quality.output_dir_lock(tmp_path):
        pass
    assert f"quality.py that is no longer running (pid {holder.pid} on " in caplog.text


def test_main_runs_resumes_and_summarizes_with_a_fake_runner(tmp_path: Path, capsys) -> None:
    argv = ["--arms", "start", "simcse", "--seeds", "42", "43", "--steps", "2", "--output_dir", str(tmp_path)]
    runner = FakeRunner()
    assert quality.main(argv, runner=runner) == {"start": "done", "simcse-seed42": "done", "simcse-seed43": "done"}
    assert set(quality.main(argv, runner=runner).values()) == {"skipped"}
    assert len(runner.calls) == 3

    summary = quality.main(["--summarize", "--steps", "2", "--output_dir", str(tmp_path)])
    written = json.loads((tmp_path / quality.SUMMARY_NAME).read_text())
    assert written["arms"] == summary["arms"]
    assert [arm["arm"] for arm in written["arms"]] == ["start", "simcse"]
    assert "60.50 ± 0.71" in capsys.readouterr().out  # sts12 of seeds 42, 43: 60 and 61

    with pytest.raises(SystemExit, match="Failed runs"):
        quality.main(["--arms", "dcl", "--seeds", "42", "--steps", "2", "--output_dir", str(tmp_path)],
                     runner=FakeRunner(fail=("dcl-seed42",)))  # fmt: skip
    with pytest.raises(SystemExit, match="2-step result"):
        quality.main(["--arms", "simcse", "--seeds", "42", "--output_dir", str(tmp_path)], runner=FakeRunner())


def test_training_command_overrides_the_config() -> None:
    runner = quality.TrainAndEvaluate(Path("/w"), Path("/l"), Path("/s"), Path("/t"), train_file="corpus.txt")
    command = runner.training_command(quality.RunSpec("dclr_focal", 43, 150), Path("/w/dclr_focal-seed43"))
    assert command[2:4] == ["--config", str(quality.CONFIG_DIR / "dclr_focal_minilm_wiki1m.yaml")]
    flags = dict(zip(command[4::2], command[5::2], strict=True))
    assert flags["--seed"] == "43" and flags["--max_steps"] == "150"
    assert flags["--output_dir"] == "/w/dclr_focal-seed43"
    assert flags["--eval_strategy"] == "no" and flags["--save_strategy"] == "no"
    assert flags["--load_best_model_at_end"] == "false" and flags["--train_file"] == "corpus.txt"
    for config in quality.ARM_CONFIGS.values():
        assert (quality.CONFIG_DIR / config).is_file()


# ---------------------------------------------------------------------------------------------------------------------
# quality.py: summary maths


def write_record(directory: Path, arm: str, seed: int | None, steps: int, scores: dict[str, float]) -> None:
    name = "start" if arm == "start" else f"{arm}-seed{seed}"
    record = {
        "arm": arm,
        "seed": seed,
        "steps": steps,
        "scores": scores,
        "finished_at": f"2025-01-0{1 + (seed or 0) % 3}",
    }
    record["environment"] = {"cpu": "Fake CPU", "cpu_cores": 2, "torch_threads": 2, "gpu": None, "torch": "2.x"}
    (directory / f"{name}.json").write_text(json.dumps(record))


def test_mean_std_is_the_sample_standard_deviation() -> None:
    assert quality.mean_std([70.0, 72.0, 74.0]) == (72.0, 2.0)
    assert quality.mean_std([71.5]) == (71.5, None)
    with pytest.raises(ValueError):
        quality.mean_std([])


def welch_p_by_hand(a: list[float], b: list[float]) -> float:
    """Two-sided Welch t-test: t over the unpooled standard error, Welch-Satterthwaite degrees of freedom."""
    va, vb = (statistics.variance(x) / len(x) for x in (a, b))
    t = (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return 2 * scipy.stats.t.sf(abs(t), dof)


def test_comparison_with_simcse_flags_only_non_overlapping_seed_ranges() -> None:
    def arm(name: str, averages: list[float]) -> dict[str, Any]:
        return {"arm": name, "per_seed": {str(42 + i): {"avg": value} for i, value in enumerate(averages)}}

    simcse, better, overlapping = [76.0, 76.5, 77.0], [77.2, 77.4, 78.0], [75.5, 76.2, 77.1]
    arms = [arm("start", [70.0]), arm("simcse", simcse), arm("focal_infonce", better), arm("dcl", overlapping)]
    comparison = quality.compare_with_reference(arms)
    assert comparison["reference"] == "simcse" and comparison["reference_range"] == [76.0, 77.0]
    assert list(comparison["arms"]) == ["focal_infonce", "dcl"]  # neither start nor the reference itself
    focal, dcl = comparison["arms"]["focal_infonce"], comparison["arms"]["dcl"]
    assert focal["beyond_spread"] and not dcl["beyond_spread"]
    assert focal["delta_avg"] == pytest.approx(77.533333 - 76.5) and focal["range"] == [77.2, 78.0]
    assert focal["welch_p"] == pytest.approx(welch_p_by_hand(better, simcse))
    assert dcl["welch_p"] == pytest.approx(welch_p_by_hand(overlapping, simcse))
    assert quality.compare_with_reference([arm("dcl", overlapping)]) == {}  # no SimCSE result yet


def test_summary_on_fake_results(tmp_path: Path) -> None:
    write_record(tmp_path, "start", None, 0, fake_scores(50.0))
    for seed, base in ((42, 70.0), (43, 72.0), (44, 74.0)):
        write_record(tmp_path, "simcse", seed, 150, fake_scores(base))
    dcl = fake_scores(60.0)
    dcl["avg"] = 99.0  # the avg column is averaged as stored, per seed
    write_record(tmp_path, "dcl", 42, 150, dcl)
    write_record(tmp_path, "dcl", 43, 2, fake_scores(0.0))  # a smoke-test result: another protocol, left out
    (tmp_path / "notes.json").write_text("[1, 2]")  # not a result: ignored

    summary = quality.summarize(quality.load_results(tmp_path), steps=150)
    arms = {arm["arm"]: arm for arm in summary["arms"]}
    assert list(arms) == ["start", "simcse", "dcl"]  # the order of quality.ARMS
    simcse = arms["simcse"]
    assert simcse["n"] == 3 and simcse["seeds"] == [42, 43, 44]
    assert simcse["mean"]["sts12"] == 72.0 and simcse["std"]["sts12"] == 2.0
    assert simcse["mean"]["sickr"] == 78.0
    assert math.isclose(simcse["mean"]["avg"], 75.0) and math.isclose(simcse["std"]["avg"], 2.0)
    assert simcse["per_seed"]["43"]["sts13"] == 73.0
    assert arms["dcl"]["n"] == 1 and arms["dcl"]["std"]["avg"] is None and arms["dcl"]["mean"]["avg"] == 99.0
    assert arms["start"]["seeds"] == [None] and arms["start"]["mean"]["sts12"] == 50.0
    assert summary["environments"] == [
        {"cpu": "Fake CPU", "cpu_cores": 2, "torch_threads": 2, "gpu": None, "torch": "2.x"}
    ]

    # simcse averages 73, 75, 77 (fake_scores), dcl's single seed 99: above every simcse seed, no t-test on one seed.
    assert summary["comparison"] == {
        "reference": "simcse",
        "reference_range": [73.0, 77.0],
        "arms": {"dcl": {"delta_avg": 24.0, "range": [99.0, 99.0], "beyond_spread": True, "welch_p": None}},
    }

    table = quality.format_summary(summary)
    lines = table.splitlines()
    assert lines[0].split() == ["arm", *TASKS, "avg", "n"]
    simcse_line = next(line for line in lines if line.startswith("simcse"))
    assert "72.00 ± 2.00" in simcse_line and simcse_line.endswith("3")
    dcl_line = next(line for line in lines if line.startswith("dcl"))
    assert "99.00" in dcl_line and "±" not in dcl_line


# ---------------------------------------------------------------------------------------------------------------------
# quality.py and eval_speed.py on the tiny random BERT


def test_evaluate_checkpoint_reads_tokenized_and_raw_folders(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    sts_dir = write_senteval_dir(tmp_path / "sts")
    result = quality.evaluate_checkpoint(
        tiny_encoder_dir, pooler="cls", sts_dir=sts_dir, sts_tok_dir=sts_dir, batch_size=8, device="cpu"
    )
    assert list(result["scores"]) == [*TASKS, "avg"]
    assert math.isclose(result["scores"]["avg"], sum(result["scores"][t] for t in TASKS) / 7)
    settings = result["details"]["settings"]
    assert settings["stsb_split"] == "test" and settings["sickr_split"] == "test" and settings["pooler"] == "cls"
    assert result["details"]["stsb"]["split"] == "test" and result["details"]["sickr"]["split"] == "test"


def test_eval_speed_counts_and_plain_loop(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoModel, AutoTokenizer

    from hf_cse.modeling.encoder import SentenceEncoder

    eval_speed = importlib.import_module("eval_speed")
    sts_dir = write_senteval_dir(tmp_path / "sts")
    distinct, counts = eval_speed.sts_sentences(sts_dir)
    assert counts["distinct"] == len(distinct) == len(set(distinct)) < counts["slots"]
    assert counts["slots"] == 2 * sum(task["pairs"] for task in counts["per_task"].values())

    encoder = SentenceEncoder.from_pretrained(tiny_encoder_dir, pooler="cls", device="cpu")
    with eval_speed.TokenizerCallCounter() as counter:
        expected = encoder.encode(distinct, batch_size=8)
    assert counter.calls == 1 and counter.sentences_tokenized == len(distinct)
    assert counter.pad_calls == -(-len(distinct) // 8) and counter.rows_padded == len(distinct)
    with eval_speed.TokenizerCallCounter() as counter:
        pass
    assert counter.calls == 0  # the originals are back

    model = AutoModel.from_pretrained(tiny_encoder_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    max_length = encoder.sentence_tokenizer.max_seq_length
    for encode in (eval_speed.encode_plain_sorted, eval_speed.encode_plain_unsorted):
        embeddings = encode(model, tokenizer, distinct, 8, max_length)
        assert embeddings.shape == expected.shape
        assert (embeddings - expected).abs().max() < 1e-4


def test_eval_speed_end_to_end_on_the_tiny_model(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    eval_speed = importlib.import_module("eval_speed")
    sts_dir = write_senteval_dir(tmp_path / "sts")
    output = tmp_path / "results" / "eval_speed.json"
    argv = ["--model_name_or_path", str(tiny_encoder_dir), "--sts_dir", str(sts_dir), "--repeats", "1"]
    result = eval_speed.main([*argv, "--batch_size", "8", "--device", "cpu", "--output_json", str(output)])
    assert json.loads(output.read_text()) == json.loads(json.dumps(result))
    assert set(result["arms"]) == {"eval_command", "plain_sorted", "load_model"}
    assert result["tokenization"]["tokenized_once_per_call"] is True
    assert result["ratios"]["eval_command_vs_plain_sorted"] > 0 and isinstance(result["meets_target"], bool)
    assert result["ratios"]["cpu_eval_command_vs_plain_sorted"] > 0
    assert result["arms"]["plain_sorted"]["median_cpu_s"] > 0
    assert result["environment"]["cpu_cores"] >= 1 and list(result["scores"]) == [*TASKS, "avg"]

    markdown = render.render(output.parent)
    assert "## Evaluation speed" in markdown and f"{result['sentences']['distinct']:,} distinct" in markdown


# ---------------------------------------------------------------------------------------------------------------------
# render.py


def write_fake_results(results_dir: Path) -> None:
    (results_dir / "quality").mkdir(parents=True)
    for seed, base in ((42, 70.0), (43, 72.0)):
        write_record(results_dir / "quality", "simcse", seed, 150, fake_scores(base))
        write_record(results_dir / "quality", "dcl", seed, 150, fake_scores(base + 10.0))
    write_record(results_dir / "quality", "start", None, 0, fake_scores(50.0))
    summary = quality.summarize(quality.load_results(results_dir / "quality"))
    summary["command"] = "python benchmarks/quality.py --summarize"
    (results_dir / "quality" / quality.SUMMARY_NAME).write_text(json.dumps(summary))
    eval_speed = {
        "command": "python benchmarks/eval_speed.py --output_json benchmarks/results/eval_speed.json",
        "environment": {"cpu": "Fake EPYC", "cpu_cores": 2, "torch_threads": 2, "torch": "9.9", "date": "2025-02-03"},
        "settings": {"model_name_or_path": "pip:m", "pooler": "cls", "batch_size": 128, "repeats": 3, "device": "cpu"},
        "sentences": {"slots": 37700, "distinct": 26139,
                      "per_task": {"sts12": {"pairs": 1, "slots": 2, "distinct": 2}}},
        "arms": {"eval_command": {"median_s": 101.5, "times_s": [101.5, 102.0, 100.0]},
                 "plain_sorted": {"median_s": 99.0, "times_s": [99.0, 98.0, 99.5]}},
        "ratios": {"eval_command_vs_plain_sorted": 1.0253},
        "target_ratio": 1.1,
        "tokenization": {"sentence_tokenizer_calls": 1, "sentences_tokenized": 26139, "pad_calls": 205,
                         "batches": 205},
        "overhead": {"tokenize_once_s": 1.234},
        "plain_sorted_vs_encoder_max_abs_diff": 2e-6,
    }  # fmt: skip
    (results_dir / "eval_speed.json").write_text(json.dumps(eval_speed))
    throughput = {
        "command": "python benchmarks/throughput.py --arms bare simcse st_mnrl --batch_size 64 --steps 10",
        "environment": {"cpu": "Fake EPYC", "cpu_cores": 2, "torch_threads": 2, "torch": "9.9", "date": "2025-02-05"},
        "settings": {"model_name_or_path": "pip:m", "arms": ["bare", "simcse", "st_mnrl"], "batch_size": 64,
                     "max_seq_length": 32, "steps": 10, "warmup": 2, "bf16": False,
                     "memory": "peak RSS of a one-arm process"},
        "arms": [{"arm": "bare", "median_step_s": 0.5, "sentences_per_s": 128.0, "time_vs_bare": 1.0,
                  "time_vs_st_mnrl": 0.8, "peak_memory_gib": 1.5},
                 {"arm": "simcse", "median_step_s": 0.55, "sentences_per_s": 116.4, "time_vs_bare": 1.1,
                  "time_vs_st_mnrl": 0.88, "peak_memory_gib": 1.52, "tokens_per_s": None, "mfu": None,
                  "mfu_note": "no GPU: MFU is defined against a GPU's bf16 tensor-core peak",
                  "minutes_per_1m_sentences": 143.2},
                 {"arm": "st_mnrl", "median_step_s": 0.625, "sentences_per_s": 102.4, "time_vs_bare": 1.25,
                  "time_vs_st_mnrl": 1.0, "peak_memory_gib": 1.7}],
        "end_to_end": {"hf_cse_simcse": {"steps": 30, "train_runtime_s": 15.0, "steps_per_s": 2.0,
                                         "sentences_per_s": 128.0, "minutes_per_1m_sentences": 130.2,
                                         "warmup_steps": 15, "warmup_s": 9.0, "steady_steps_per_s": 2.5,
                                         "projected_minutes_per_1m_sentences": 104.2},
                       "st_mnrl": {"skipped": "not installed"}},
    }  # fmt: skip
    (results_dir / "throughput.json").write_text(json.dumps(throughput))


def test_render_builds_every_section_from_the_json_files(tmp_path: Path) -> None:
    write_fake_results(tmp_path)
    markdown = render.render(tmp_path, generated_at="2025-03-04T00:00:00+00:00")
    assert markdown.startswith("# Benchmarks\n") and "2025-03-04T00:00:00+00:00" in markdown
    for heading in ("## STS quality", "## Evaluation speed", "## Training throughput", "## DCLR: complementary"):
        assert heading in markdown

    quality_section = markdown.split("## STS quality")[1].split("\n## ")[0]
    assert "| SimCSE | 71.00 ± 1.41 |" in quality_section  # sts12 of 70 and 72
    assert "| all-MiniLM-L6-v2, untrained (cls) | 50.00 | 51.00 |" in quality_section
    assert "| 2 | 42, 43 |" in quality_section
    assert "Against SimCSE (7-task average; its seeds range 73.00 to 75.00)." in quality_section
    assert "| DCL | +10.00 | 83.00 to 85.00 | **yes** | 0.019 |" in quality_section
    assert "python benchmarks/quality.py --summarize" in quality_section
    assert "Machine: Fake CPU, 2 cores; torch 2.x; 2 torch threads. Date: 2025-01-01 to 2025-01-02." in quality_section

    speed = markdown.split("## Evaluation speed")[1].split("\n## ")[0]
    assert "| `eval_command` | 101.50 | 101.5, 102.0, 100.0 |" in speed
    assert "| evaluation / plain sorted loop | 1.025 |" in speed and "**met** (1.025×)" in speed
    assert "37,700 sentence slots" in speed and "26,139 distinct" in speed and "205 pad calls" in speed
    assert "python benchmarks/eval_speed.py --output_json benchmarks/results/eval_speed.json" in speed
    assert "Machine: Fake EPYC, 2 cores; torch 9.9; 2 torch threads. Date: 2025-02-03." in speed

    throughput = markdown.split("## Training throughput")[1].split("\n## ")[0]
    assert "| `simcse` | 0.550 | 116.4 | - | n/a | 143.2 | 1.100 | 0.880 | 1.52 |" in throughput
    assert "MFU n/a: no GPU: MFU is defined against a GPU's bf16 tensor-core peak." in throughput
    assert "`pip:m`, batch 64" in throughput
    assert "| `run_unsup.py`, SimCSE | 30 | 2.00 | 128.0 | 130.2 | 2.50 | 104.2 | - |  |" in throughput
    assert "| sentence-transformers trainer, MNRL | - | - | - | - | - | - | - | skipped: not installed |" in throughput
    assert "memory: peak RSS of a one-arm process" in throughput
    assert "- `simcse` / `bare` ≤ 1.05×: **NOT met** (1.100×)" in throughput
    assert "- `simcse` / `st_mnrl` ≤ 1.00×: **met** (0.880×)" in throughput
    assert "dclr_cached" not in throughput  # no verdict for an arm that was not measured
    assert "python benchmarks/throughput.py --arms bare simcse st_mnrl --batch_size 64 --steps 10" in throughput
    assert "Machine: Fake EPYC, 2 cores; torch 9.9; 2 torch threads. Date: 2025-02-05." in throughput

    complementary = markdown.split("## DCLR: complementary")[1]
    assert "**Not run yet**" in complementary
    assert "python benchmarks/complementary_cache.py --steps 10 --output_json" in complementary


def test_render_without_results_says_not_run_yet_everywhere(tmp_path: Path) -> None:
    """Run as the README says, ``python benchmarks/render.py``: the script, not only its main(), writes the page."""
    output = tmp_path / "BENCHMARKS.md"
    script = Path(render.__file__)
    argv = [sys.executable, str(script), "--results_dir", str(tmp_path / "none"), "--output", str(output)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0 and f"Wrote {output}" in done.stdout, done.stderr[-2000:]
    markdown = output.read_text()
    assert markdown.count("**Not run yet**") == 15
    assert "python benchmarks/throughput.py --random_config bert-base --bf16 --batch_size 64" in markdown
    assert "python benchmarks/profile_step.py --random_config bert-base --bf16" in markdown
    assert "python benchmarks/quality.py --summarize" in markdown and "benchmarks/eval_speed.py" in markdown


def test_render_gpu_throughput_gets_its_own_section(tmp_path: Path) -> None:
    write_fake_results(tmp_path)
    gpu = json.loads((tmp_path / "throughput.json").read_text())
    gpu["command"] = "python benchmarks/throughput.py --bf16 --steps 30"
    gpu["environment"] |= {"gpu": "Fake H100", "date": "2025-02-06"}
    gpu["settings"] |= {"bf16": True, "memory": "peak CUDA allocated"}
    gpu["arms"][1]["median_step_s"] = 0.51
    gpu["arms"][1] |= {"mfu": 0.0512, "mfu_note": None, "tokens_per_s": 41000.0}
    gpu["settings"]["model_config"] = {
        "name": "random bert-base", "weights": "random (seed 0)", "model_type": "bert", "hidden_size": 768,
        "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522,
    }  # fmt: skip
    (tmp_path / "throughput_gpu_bf16.json").write_text(json.dumps(gpu))
    markdown = render.render(tmp_path)
    cpu_section = markdown.split("## Training throughput\n")[1].split("\n## ")[0]
    gpu_section = markdown.split("## Training throughput on a GPU (bf16)\n")[1].split("\n## ")[0]
    assert "- `simcse` / `bare` ≤ 1.05×: **NOT met** (1.100×)" in cpu_section and "on a shared CPU" in cpu_section
    assert "- `simcse` / `bare` ≤ 1.05×: **met** (1.020×)" in gpu_section
    assert "| 41,000 | 5.1% |" in gpu_section
    assert "`random bert-base` (random (seed 0) weights; bert, hidden 768, 12 layers, 12 heads" in gpu_section
    assert "bf16 autocast; memory: peak CUDA allocated" in gpu_section and "CUDA synchronize" in gpu_section
    # A run from before the optimizer was recorded stepped torch.optim.AdamW's default, and says so.
    assert "optimizer: torch.optim.AdamW's default (foreach on CUDA), not a Trainer run's fused." in gpu_section
    assert "Machine: Fake EPYC, 2 cores; GPU Fake H100; torch 9.9; 2 torch threads. Date: 2025-02-06." in gpu_section


def test_render_step_floor_and_the_gpu_variants_beside_their_floors(tmp_path: Path) -> None:
    flops.main(["--output_json", str(tmp_path / "step_floor.json")])
    gpu = json.loads(json.dumps({"command": "python benchmarks/throughput.py --bf16", "settings": {"batch_size": 64},
                                 "environment": {"gpu": "Fake H100", "date": "2025-02-07"}}))  # fmt: skip
    gpu["arms"] = [{"arm": "bare", "median_step_s": 0.02, "time_vs_bare": 1.0, "h100_floor_s": 0.0025},
                   {"arm": "simcse", "median_step_s": 0.021, "time_vs_bare": 1.05, "h100_floor_s": 0.0026,
                    "mfu": 0.125}]  # fmt: skip
    compiled = json.loads(json.dumps(gpu))
    compiled["settings"] |= {"torch_compile": True, "torch_compile_backend": "inductor",
                             "torch_compile_mode": "reduce-overhead", "pad_to_max_seq_length": True}  # fmt: skip
    compiled["end_to_end"] = {"hf_cse_simcse": {"steps_per_s": 45.0, "steady_steps_per_s": 61.0}}
    (tmp_path / "throughput_gpu_bf16.json").write_text(json.dumps(gpu))
    (tmp_path / "throughput_gpu_bf16_static_cudagraphs.json").write_text(json.dumps(compiled))
    markdown = render.render(tmp_path)
    floor = markdown.split("## Floor of a BERT-base SimCSE step on an H100\n")[1].split("\n## ")[0]
    assert "| floor (ms, compute-bound) | 2.66 |" in floor and "| most steps/s | 376 |" in floor
    assert "| target 52 steps/s (a 1M-sentence epoch in 5 min): step budget (ms) | 19.2 = 7.2 × the floor |" in floor
    variants = markdown.split("## Training throughput on a GPU: eager, compiled, CUDA graphs (bf16)\n")[1]
    variants = variants.split("\n## ")[0]
    assert "| eager | `bare` | 20.00 | 1.000 | n/a | 2.50 | 8.0 | - | - | eager |" in variants
    assert "| torch.compile | - | - | - | - | - | - | - | - | not run (no `" in variants
    assert (
        "| CUDA graphs, padded to max_seq_length | `bare` | 20.00 | 1.000 | n/a | 2.50 | 8.0 | 45.0 | 61.0 | "
        "torch.compile" in (variants)
    )
    assert "| | `simcse` | 21.00 | 1.050 | 12.5% | 2.60 | 8.1 |" in variants.replace("|  |", "| |")
    gpu_section = markdown.split("## Training throughput on a GPU (bf16)\n")[1].split("\n## ")[0]
    assert "| H100 floor ms | × floor |" in gpu_section and "| 2.60 | 8.1 |" in gpu_section


def test_render_eval_speed_reports_a_missed_target(tmp_path: Path) -> None:
    data = {"ratios": {"eval_command_vs_plain_sorted": 1.31}, "target_ratio": 1.1, "arms": {}}
    (tmp_path / "eval_speed.json").write_text(json.dumps(data))
    assert "**NOT met** (1.310×)" in render.render(tmp_path)


def tiny_throughput_argv(tiny_encoder_dir: Path, tmp_path: Path) -> list[str]:
    """``throughput.py`` flags for one warm-up and one timed step of batch 4 on a 16-sentence corpus."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the man number {i} is not playing a guitar today .\n" for i in range(16)))
    return ["--model_name_or_path", str(tiny_encoder_dir), "--train_file", str(corpus), "--batch_size", "4",
            "--steps", "1", "--warmup", "1", "--no_memory"]  # fmt: skip


def test_throughput_runs_every_arm_interleaved_on_the_tiny_model(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    throughput = importlib.import_module("throughput")
    output = tmp_path / "throughput.json"
    result = throughput.main([*tiny_throughput_argv(tiny_encoder_dir, tmp_path), "--output_json", str(output)])
    assert json.loads(output.read_text()) == json.loads(json.dumps(result))
    rows = {row["arm"]: row for row in result["arms"]}
    assert list(rows) == list(throughput.ARMS)
    # --no_memory skips only the CPU probes (one subprocess per arm); the CUDA peak is read in-process for free.
    memory_reported = torch.cuda.is_available()
    for name, row in rows.items():
        assert row["median_step_s"] > 0 and (row["peak_memory_gib"] is not None) == memory_reported, name
        assert row["time_vs_bare"] == pytest.approx(row["median_step_s"] / rows["bare"]["median_step_s"])
        assert row["time_vs_st_mnrl"] == pytest.approx(row["median_step_s"] / rows["st_mnrl"]["median_step_s"])
        assert row["model_flops_per_step"] > 0 and row["bytes_per_step"] > 0 and row["h100_floor_s"] > 0, name
    assert rows["st_mnrl"]["encoder_forwards_per_step"] == 2  # anchors and positives, through its Transformer module
    assert rows["st_mnrl"]["model_flops_per_step"] == pytest.approx(rows["simcse"]["model_flops_per_step"], rel=0.2)
    assert result["command"].startswith("python benchmarks/throughput.py --model_name_or_path")
    assert result["settings"]["optimizer"] == throughput.OPTIMIZER


def test_throughput_bf16_autocast_runs_the_trainer_and_reference_arms(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """The GPU run of the issue is bf16; CPU autocast takes the same code path, so it is checked here too. Every
    trained encoder forward of every arm runs under autocast: hf_cse's arms through ``accelerator.prepare_model``, as
    ``Trainer.train`` runs them (a bare ``compute_loss`` call would run in float32 beside a bf16 ``bare`` arm)."""
    throughput = importlib.import_module("throughput")
    arms = ["bare", "simcse", "st_mnrl", "dclr_cached", "osscse_paraphrases"]
    autocast: list[bool] = []

    def record(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        if flops._is_base_model(module) and torch.is_grad_enabled() and module.training:
            autocast.append(torch.is_autocast_enabled(module.device.type))  # on a GPU machine the arms run on CUDA

    handle = torch.nn.modules.module.register_module_forward_pre_hook(record)
    try:
        result = throughput.main([*tiny_throughput_argv(tiny_encoder_dir, tmp_path), "--bf16", "--arms", *arms])
    finally:
        handle.remove()
    assert result["settings"]["bf16"] is True
    assert [row["arm"] for row in result["arms"]] == arms and all(row["median_step_s"] > 0 for row in result["arms"])
    # Two steps of each arm but st_mnrl, whose Transformer module calls its model's forward directly (no hook).
    assert len(autocast) >= 2 * (len(arms) - 1) and all(autocast)


def test_throughput_compiles_and_pads_every_batch_to_max_seq_length(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """``--torch_compile_backend eager`` (dynamo without code generation: the CPU stand-in for inductor) with
    ``--pad_to_max_seq_length``: the bare arm and hf_cse's arms see one shape, every row ``max_seq_length`` tokens, and
    the end-to-end run gets the same flags."""
    throughput = importlib.import_module("throughput")
    short = tmp_path / "short.txt"  # rows shorter than max_seq_length, so that padding shows
    short.write_text("".join(f"a man {i} .\n" for i in range(16)))
    compiled = ["--torch_compile_backend", "eager", "--torch_compile_mode", "reduce-overhead"]
    argv = [*tiny_throughput_argv(tiny_encoder_dir, tmp_path), "--train_file", str(short), "--arms", "bare", "simcse",
            "--max_seq_length", "24", *compiled, "--pad_to_max_seq_length"]  # fmt: skip
    result = throughput.main(argv)
    settings = result["settings"]
    assert settings["torch_compile"] is True and settings["torch_compile_backend"] == "eager"
    for row in result["arms"]:
        assert row["padded_tokens_per_step"] == 2 * 4 * 24, row["arm"]  # two views of 4 rows, 24 tokens each
        assert row["real_tokens_per_step"] == 2 * 4 * 6  # [CLS] a man i . [SEP]: CSEModel's [B, 1, 1, L] mask too
    args = argparse.Namespace(**settings)
    assert throughput.compile_flags(args) == {
        "torch_compile": True,
        "torch_compile_backend": "eager",
        "torch_compile_mode": "reduce-overhead",
        "pad_to_max_seq_length": True,
    }
    assert throughput.bare_padding(args) == {"padding": "max_length"}
    assert throughput.compile_flags(argparse.Namespace(batch_size=4)) == {}  # profile_step.py's settings


def test_throughput_arms_step_the_fused_adamw_of_a_trainer_run(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    """A Trainer run's default ``optim`` is fused AdamW (one kernel per parameter group on a GPU, against a loop of
    kernels per tensor): every arm steps that, the limit and sentence-transformers' arm as hf_cse's."""
    from hf_cse import CSETrainingArguments

    assert CSETrainingArguments(output_dir=str(tmp_path), use_cpu=True).optim == "adamw_torch_fused"
    throughput = importlib.import_module("throughput")
    fused: list[bool] = []
    step = torch.optim.AdamW.step

    def recording(self: torch.optim.AdamW, *args: Any, **kwargs: Any) -> Any:
        fused.append(bool(self.defaults["fused"]))
        return step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", recording)
    throughput.main([*tiny_throughput_argv(tiny_encoder_dir, tmp_path), "--arms", "bare", "simcse", "st_mnrl"])
    assert len(fused) >= 3 * 2 and all(fused)  # each arm's warm-up and timed steps


def test_end_to_end_rates_time_the_steady_steps_after_the_warm_up() -> None:
    """A compiled run's first steps compile and record CUDA graphs: the steady rate is timed from the end of the
    warm-up steps to the last step, and a 1M-sentence epoch is projected as the warm-up once plus the rest at that
    rate. Clock readings in whole seconds keep the arithmetic exact."""
    throughput = importlib.import_module("throughput")
    clock = throughput.StepClock()
    clock.begin = 100.0
    warmup = throughput.END_TO_END_WARMUP
    # The warm-up's steps end 60 s after training began (compilation); each later step takes 0.5 s.
    clock.step_ends = [100.0 + 60.0 * (i + 1) / warmup for i in range(warmup)]
    clock.step_ends += [160.0 + 0.5 * (i + 1) for i in range(80)]
    entry = throughput.rate_entry(warmup + 80, 64, runtime_s=100.0, clock=clock)
    assert entry["steps_per_s"] == (warmup + 80) / 100.0 and entry["warmup_steps"] == warmup
    assert entry["steady_steps_per_s"] == 2.0 and entry["warmup_s"] == 60.0
    epoch_steps = 15625  # 1M sentences at batch 64
    assert entry["projected_minutes_per_1m_sentences"] == (60.0 + (epoch_steps - warmup) / 2.0) / 60
    short = throughput.StepClock()
    short.begin, short.step_ends = 0.0, [4.0, 5.0]  # two steps: the first is the warm-up
    assert throughput.rate_entry(2, 64, 5.0, short)["steady_steps_per_s"] == 1.0
    single = throughput.StepClock()
    single.begin, single.step_ends = 0.0, [4.0]
    assert "steady_steps_per_s" not in throughput.rate_entry(1, 64, 4.0, single)


def test_throughput_memory_probe_reports_the_peak_rss_of_a_one_arm_process(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    throughput = importlib.import_module("throughput")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"sentence number {i} .\n" for i in range(8)))
    args = argparse.Namespace(model_name_or_path=str(tiny_encoder_dir), train_file=str(corpus), batch_size=4,
                              max_seq_length=16)  # fmt: skip
    # 2 GiB of written (resident) pages here: the child's peak is its own, not this forked process's high-water mark.
    # One probe checks both (each child spends ~10 s importing hf_cse).
    ballast = b"\x01" * 2 * 2**30
    try:
        peak = throughput.peak_rss_gib("bare", args)
        assert 0.05 < peak < 8  # at least the interpreter with torch loaded; far below the machine's memory
        assert peak < throughput.own_peak_rss_gib() - 1.0
    finally:
        del ballast


def test_negation_sample_counts_verdicts_and_sets_aside_stale_rows(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("My sister likes long walks.\n\nBill Poynton\nHe was a teacher.\n", encoding="utf-8")
    sample = tmp_path / "sample.tsv"
    negation_sample.main(["draw", "--corpus", str(corpus), "--size", "3", "--seed", "0", "--output", str(sample)])
    header, *rows = sample.read_text(encoding="utf-8").splitlines()
    assert [row.split("\t")[2] for row in rows] == [
        "My sister does not like long walks.",
        "None",
        "He was not a teacher.",
    ]
    verdicts = ["correct", "declined_ok", "wrong"]
    reviewed = [header, *(row + verdict for row, verdict in zip(rows, verdicts, strict=True))]
    reviewed[3] = reviewed[3].replace("He was not a teacher.", "He was a teacher, not.")  # reviewed an older output
    sample.write_text("\n".join(reviewed) + "\n", encoding="utf-8")
    counts = negation_sample.main(["summarize", str(sample)])
    assert (counts["correct"], counts["declined_ok"], counts["wrong"], counts["stale"]) == (1, 1, 0, 1)
    sample.write_text("\n".join([header, rows[0] + "fine"]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="verdict 'fine'; valid verdicts are: correct, wrong"):
        negation_sample.main(["summarize", str(sample)])


def test_the_shipped_hand_checked_negation_sample_matches_the_negator() -> None:
    counts = negation_sample.summarize(BENCHMARKS_DIR / "results" / "negation_sample.tsv")
    assert counts["stale"] == 0, "the negator changed: redraw and review benchmarks/results/negation_sample.tsv"
    assert sum(counts.values()) == 80


# --- benchmarks/flops.py: the FLOP count and MFU ------------------------------------------------------------------

flops = importlib.import_module("flops")


def test_forward_flops_match_a_hand_count_of_a_tiny_config() -> None:
    config = argparse.Namespace(hidden_size=4, num_hidden_layers=2, intermediate_size=8)
    # Per token and layer: Q, K, V, O 4 x (2 x 4 x 4) = 128, feed-forward 2 x (2 x 4 x 8) = 128; attention per row
    # of n tokens: QK^T 2 n n 4 + AV 2 n n 4 = 16 n^2.
    real, padded = flops.forward_flops(config, lengths=[3, 1], padded_length=3)
    assert real == 2 * ((256 * 3 + 16 * 9) + (256 * 1 + 16 * 1))
    assert padded == 2 * 2 * (256 * 3 + 16 * 9)
    # The 6N rule: trained, the layers' matmuls are 6 x weights x tokens (biases aside), attention 12 L d per token.
    weights = 2 * (4 * 4 * 4 + 2 * 4 * 8)
    step = flops.StepFlops()
    step.add(config, [3, 3], 3, trained=True)
    assert step.flops == 6 * weights * 6 + 12 * 2 * 3 * 4 * 6
    step.add(config, [3, 3], 3, trained=False)  # a frozen model's forward counts once
    assert step.flops == 6 * weights * 6 + 12 * 2 * 3 * 4 * 6 + 2 * weights * 6 + 4 * 2 * 3 * 4 * 6
    assert (step.real_tokens, step.padded_tokens) == (12, 12)


def test_counting_records_the_forwards_that_ran(tiny_encoder_dir: Path) -> None:
    from transformers import AutoModel

    model = AutoModel.from_pretrained(tiny_encoder_dir)
    batch = {"input_ids": torch.ones(3, 5, dtype=torch.long),
             "attention_mask": torch.tensor([[1] * 5, [1] * 2 + [0] * 3, [1] * 4 + [0]])}  # fmt: skip
    assert flops.find_base_models(lambda: model(**batch)) == [model]
    with flops.counting([model]) as step:
        model(**batch)  # trained: x3
        with torch.no_grad():
            model(**batch)  # x1
    step.resolve()
    real, padded = flops.forward_flops(model.config, [5, 2, 4], 5)
    assert (step.real_tokens, step.padded_tokens) == (22, 30)
    assert step.flops == 4 * padded and step.real_flops == 4 * real
    assert [f["trained"] for f in step.forwards] == [True, False]


def test_bytes_of_a_step_and_its_floor_on_the_h100() -> None:
    """The byte floor: weights read by each forward (twice with a backward), layer outputs written and read (and
    their gradients), the optimizer's 8 element sizes per trainable weight once per model per step."""
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 4))
    model[0].weight.requires_grad_(False)
    params = flops.ParamBytes.of(model)
    assert params == flops.ParamBytes(non_embedding=4 * (16 + 4), trainable=4 * (16 + 4))  # the embedding neither
    config = argparse.Namespace(hidden_size=4, num_hidden_layers=2, intermediate_size=8)
    step = flops.StepFlops()
    step.add(config, [3, 3], 3, trained=True, params=params)
    step.add(config, [3, 3], 3, trained=True, params=params)  # the same model again: no second optimizer step
    step.add(config, [3, 3], 3, trained=False, params=params)  # frozen: one read, outputs written and read once
    layer_outputs = 2 * 2 * 4 * 2 * 6  # (write + read) x bf16 x d x layers x 6 tokens
    assert step.bytes == 2 * (2 * 80 + 2 * layer_outputs) + 8 * 80 + (80 + layer_outputs)
    floor = flops.floor_seconds(flops.H100_BF16_FLOPS, 2 * flops.H100_BYTES_PER_S)
    assert floor == {"floor_s": 2.0, "compute_floor_s": 1.0, "memory_floor_s": 2.0, "bound": "memory"}


def test_simcse_step_floor_of_bert_base_at_batch_64_by_32() -> None:
    floor = flops.simcse_step_floor(64, 32)
    # BERT-base (109,482,240 weights) and SimCSE's MLP head (768 x 768 + 768); the encoder's own pooler is frozen.
    assert floor["model"]["parameters"] == 109_482_240 + 590_592
    assert floor["model"]["trainable_parameters"] == floor["model"]["parameters"] - 590_592
    layers = 12 * (8 * 768 * 768 + 4 * 768 * 3072)  # 2N per token, the layers' matrices
    assert floor["tokens_per_step"] == 4096
    assert floor["model_flops_per_step"] == 3 * 128 * 12 * (32 * (8 * 768**2 + 4 * 768 * 3072) + 4 * 32**2 * 768)
    assert floor["model_flops_per_step"] > 3 * layers * 4096  # plus attention
    assert floor["bound"] == "compute" and floor["floor_s"] == pytest.approx(floor["model_flops_per_step"] / 790e12)
    assert 2.5e-3 < floor["floor_s"] < 2.8e-3 and 1.4e-3 < floor["memory_floor_s"] < 1.6e-3
    assert floor["minutes_per_1m_sentences"] == pytest.approx(1e6 / 64 * floor["floor_s"] / 60)


def test_mfu_is_flops_per_second_over_the_bf16_peak() -> None:
    value, reason = flops.mfu(989.4e12 * 0.5, 1.0, "NVIDIA H100 80GB HBM3")
    assert reason is None and value == pytest.approx(0.5)
    assert flops.mfu(312e12, 2.0, "NVIDIA A100-SXM4-80GB")[0] == pytest.approx(0.5)
    assert flops.bf16_peak_flops("NVIDIA H100 PCIe")[0] == 756e12
    assert flops.bf16_peak_flops("NVIDIA H200")[0] == 989.4e12
    value, reason = flops.mfu(1e12, 1.0, None)
    assert value is None and "no GPU" in reason
    value, reason = flops.mfu(1e12, 1.0, "Some Future GPU")
    assert value is None and "unknown device" in reason


def test_render_profile_sections(tmp_path: Path) -> None:
    """CPU: host time per region, no device columns; GPU: device time per region, GPU busy time and idle share,
    kernels and syncs per step, the synchronizing lines and the top kernels."""
    host = {"data": 0.01, "forward+loss": 0.5, "backward": 0.9, "optimizer": 0.05}
    regions = {region: {"host_s": host_s, "device_s": None} for region, host_s in host.items()}
    arm = {"arm": "simcse", "median_step_s": 1.5, "regions": regions, "gpu_busy_s": None, "gpu_idle_share": None,
           "kernels_per_step": None, "top_kernels": None, "syncs_per_step": None, "sync_sites": None,
           "top_ops": [{"op": "aten::addmm", "host_s": 0.3, "calls": 24.0}]}  # fmt: skip
    bare = {**arm, "arm": "bare", "regions": {"step": {"host_s": 1.2, "device_s": None}}}
    cpu = {"command": "python benchmarks/profile_step.py --steps 3", "environment": {"cpu": "Fake", "date": "d"},
           "settings": {"device": "cpu", "batch_size": 64, "max_seq_length": 32, "steps": 3, "warmup": 1,
                        "profiled_steps": 2, "model_name_or_path": "pip:m"}, "arms": [bare, arm]}  # fmt: skip
    gpu = json.loads(json.dumps(cpu))
    gpu["settings"] |= {"device": "cuda", "bf16": True}
    for region, device_s in zip(regions, (0.0, 0.02, 0.03, 0.004), strict=True):
        gpu["arms"][1]["regions"][region]["device_s"] = device_s
    gpu["arms"][1] |= {"gpu_busy_s": 0.045, "gpu_idle_share": 0.97, "kernels_per_step": 812.0, "syncs_per_step": 3,
                       "sync_sites": {"modeling_bert.py:123": 2, "base.py:9": 1},
                       "top_kernels": [{"kernel": "ampere_bf16_gemm", "device_s": 0.0123, "calls": 96.0}]}  # fmt: skip
    (tmp_path / "profile_step_cpu.json").write_text(json.dumps(cpu))
    (tmp_path / "profile_step_gpu_bf16.json").write_text(json.dumps(gpu))
    markdown = render.render(tmp_path)
    cpu_section = markdown.split("## Where a training step's time goes (CPU)\n")[1].split("\n## ")[0]
    gpu_section = markdown.split("## Where a training step's time goes (GPU, bf16)\n")[1].split("\n## ")[0]
    assert "| `simcse` | 1.500 | 0.010 | 0.500 | 0.900 | 0.050 | - |" in cpu_section
    assert "| `bare` | 1.500 | - | - | - | - | 1.200 |" in cpu_section
    assert "syncs / step" not in cpu_section and "| `simcse` | `aten::addmm` | 0.300 | 24 |" in cpu_section
    assert "| 0.000 | 0.020 | 0.030 | 0.004 | - | 0.045 | 97% | 812 | 3 |" in gpu_section
    assert "| `simcse` | `modeling_bert.py:123` | 2 |" in gpu_section
    assert "| `simcse` | `ampere_bf16_gemm` | 0.0123 | 96 |" in gpu_section


def test_profile_step_runs_on_a_random_config_and_records_it(tmp_path: Path, monkeypatch) -> None:
    """``--random_config`` (shared by throughput.py and profile_step.py): a random model of the named size is built,
    profiled and named in the JSON. A tiny size stands in for bert-base, over the real bert-base-uncased vocabulary."""
    throughput = importlib.import_module("throughput")
    profile_step = importlib.import_module("profile_step")
    if not throughput.RANDOM_CONFIG_TOKENIZER.is_dir() or not common.WIKI1M_HEAD.is_file():
        pytest.skip(f"needs {throughput.RANDOM_CONFIG_TOKENIZER} and {common.WIKI1M_HEAD} (../shared/data)")
    tiny = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 37}
    monkeypatch.setitem(throughput.RANDOM_CONFIGS, "tiny", tiny)
    output = tmp_path / "profile.json"
    profile_step.main(
        ["--random_config", "tiny", "--arms", "simcse", "--steps", "1", "--warmup", "1", "--batch_size", "4",
         "--max_seq_length", "16", "--output_json", str(output)]
    )  # fmt: skip
    saved = json.loads(output.read_text())
    config = saved["settings"]["model_config"]
    assert config["name"] == "random tiny" and config["weights"] == "random (seed 0)"
    assert {key: config[key] for key in tiny} == tiny and config["vocab_size"] == 30522
    (arm,) = saved["arms"]
    assert arm["median_step_s"] > 0 and set(arm["regions"]) == {"data", "forward+loss", "backward", "optimizer"}
    # On CPU: host times only, no device columns; the top operators with their calls per step.
    assert all(region["host_s"] > 0 and region["device_s"] is None for region in arm["regions"].values())
    assert arm["gpu_busy_s"] is arm["syncs_per_step"] is arm["top_kernels"] is None
    assert arm["top_ops"] and all(op["calls"] > 0 for op in arm["top_ops"])
    # Stopped in its second arm (the first GPU session's profile stage, at its time cap), it keeps the first.
    profiled = profile_step.profile_arm

    def stopped_at_dclr(name: str, *args: Any) -> dict[str, Any]:
        if name == "dclr_cached":
            raise TimeoutError("the stage's cap")
        return profiled(name, *args)

    monkeypatch.setattr(profile_step, "profile_arm", stopped_at_dclr)
    output.unlink()
    with pytest.raises(TimeoutError):
        profile_step.main(
            ["--random_config", "tiny", "--arms", "simcse", "dclr_cached", "--steps", "1", "--warmup", "1",
             "--batch_size", "4", "--max_seq_length", "16", "--output_json", str(output)]
        )  # fmt: skip
    assert [arm["arm"] for arm in json.loads(output.read_text())["arms"]] == ["simcse"]


def test_profile_step_counts_device_time_once_without_the_regions_annotations() -> None:
    """The profiler keeps a region twice: as a host range and as a user annotation on the GPU timeline, whose span
    covers the region's kernels. GPU busy time sums the kernels' own time only; the host table leaves the regions
    out (their self time is the gaps between operators)."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    profile_step = importlib.import_module("profile_step")

    def row(key: str, device: Any, self_cpu: float = 0.0, self_device: float = 0.0, annotation: bool = False) -> Any:
        return SimpleNamespace(key=key, device_type=device, self_cpu_time_total=self_cpu, count=2,
                               self_device_time_total=self_device, is_user_annotation=annotation)  # fmt: skip

    rows = [
        row("backward", DeviceType.CPU, self_cpu=900.0),
        row("backward", DeviceType.CUDA, self_device=5000.0, annotation=True),  # the region's span: not a kernel
        row("aten::mm", DeviceType.CPU, self_cpu=300.0),
        row("gemm_kernel", DeviceType.CUDA, self_device=3000.0),
        row("Memcpy HtoD", DeviceType.CUDA, self_device=1000.0),
    ]
    tables = profile_step.profiler_tables(SimpleNamespace(key_averages=lambda: rows), steps=2, cuda=True)
    assert tables["gpu_busy_s"] == pytest.approx((3000.0 + 1000.0) / 1e6 / 2)  # microseconds over 2 steps
    assert tables["kernels_per_step"] == 2  # each row's count (2) over 2 steps, two kernel rows
    assert [k["kernel"] for k in tables["top_kernels"]] == ["gemm_kernel", "Memcpy HtoD"]
    assert [op["op"] for op in tables["top_ops"]] == ["aten::mm"] and tables["top_ops"][0]["calls"] == 1
    on_cpu = profile_step.profiler_tables(SimpleNamespace(key_averages=lambda: rows[::2]), steps=2, cuda=False)
    assert on_cpu["gpu_busy_s"] is on_cpu["kernels_per_step"] is on_cpu["top_kernels"] is None


def test_profile_step_profiles_the_bare_encoder_as_one_region(tmp_path: Path) -> None:
    """``bare`` (the limit every ratio divides by) is not a trainer step: it is timed whole, as region ``step``."""
    throughput = importlib.import_module("throughput")
    profile_step = importlib.import_module("profile_step")
    if not throughput.RANDOM_CONFIG_TOKENIZER.is_dir() or not common.WIKI1M_HEAD.is_file():
        pytest.skip(f"needs {throughput.RANDOM_CONFIG_TOKENIZER} and {common.WIKI1M_HEAD} (../shared/data)")
    result = profile_step.main(
        ["--random_config", "tiny", "--arms", "bare", "--steps", "2", "--warmup", "1", "--profiled_steps", "1",
         "--batch_size", "4", "--max_seq_length", "16"]
    )  # fmt: skip
    (arm,) = result["arms"]
    assert arm["arm"] == "bare" and list(arm["regions"]) == ["step"] and arm["median_step_s"] > 0
    # Each step's region lies inside its wall time, so the medians keep the order.
    assert 0 < arm["regions"]["step"]["host_s"] <= arm["median_step_s"] and arm["top_ops"]


def test_loss_ops_counts_kernels_and_views_apart() -> None:
    x = torch.randn(4, 3, requires_grad=True)
    with loss_ops.OperatorCounter() as counter:
        x.t().detach()
    assert (sum(counter.compute.values()), sum(counter.views.values())) == (0, 2)
    with loss_ops.OperatorCounter() as counter:
        x.exp().sum().backward()  # forward exp, sum; backward: expand (a view), mul by exp(x)
    assert counter.compute["aten.exp"] == 1 and counter.compute["aten.sum"] == 1 and counter.compute["aten.mul"] == 1


def test_loss_ops_counts_every_objective_beside_mnrl(tiny_encoder_dir: Path, tmp_path: Path, capsys) -> None:
    from hf_cse.objectives import OBJECTIVES

    output = tmp_path / "loss_ops.json"
    result = loss_ops.main(["--model_name_or_path", str(tiny_encoder_dir), "--batch_size", "8", "--output_json",
                            str(output)])  # fmt: skip
    assert json.loads(output.read_text())["arms"] == result["arms"]
    assert set(result["arms"]) | set(result["not_counted"]) == {"st_mnrl", *OBJECTIVES}
    mnrl = result["arms"]["st_mnrl"]["compute_ops"]
    assert result["arms"]["simcse"]["compute_ops"] <= 1.25 * mnrl  # the same InfoNCE, a few masking ops more
    # OssCSE's recall term over every weight: a handful of multi-tensor operators; a loop costs ~7 per weight, ~290
    # over the tiny BERT's 41 weights (the margin term adds ~60 either way).
    assert result["arms"]["osscse"]["compute_ops"] < result["arms"]["simcse"]["compute_ops"] + 100
    assert "| `simcse` |" in render.render(tmp_path) and "st_mnrl" in capsys.readouterr().out


# --- benchmarks/decoder_step.py: a decoder backbone, full fine-tuning against LoRA -----------------------------------


def test_decoder_step_times_full_and_lora_with_and_without_checkpointing(tmp_path: Path) -> None:
    """The tiny Qwen3 with its in-process WordLevel tokenizer: every arm trains (each trainable tensor gets a
    gradient at the first step, checked by the script), LoRA trains fewer weights and counts fewer FLOPs, and the
    ratios are to full fine-tuning."""
    decoder_step = importlib.import_module("decoder_step")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"a man number {i} plays the guitar .\n" for i in range(16)))
    output = tmp_path / "decoder_step_cpu.json"
    argv = ["--size", "tiny", "--train_file", str(corpus), "--batch_size", "4", "--steps", "1", "--warmup", "1",
            "--lora_r", "4", "--no_memory", "--output_json", str(output)]  # fmt: skip
    result = decoder_step.main(argv)
    assert json.loads(output.read_text()) == json.loads(json.dumps(result))
    rows = {row["arm"]: row for row in result["arms"]}
    assert list(rows) == list(decoder_step.DEFAULT_ARMS) and result["settings"]["reference_arm"] == "full"
    assert rows["full"]["time_vs_reference"] == 1.0
    assert (
        rows["lora_gc"]["lora"]
        and rows["lora_gc"]["gradient_checkpointing"]
        and not rows["lora"]["gradient_checkpointing"]
    )
    assert rows["lora"]["trainable_parameters"] < rows["full"]["trainable_parameters"] == rows["full"]["parameters"]
    assert rows["lora"]["model_flops_per_step"] < rows["full"]["model_flops_per_step"]
    assert rows["full_gc"]["model_flops_per_step"] == rows["full"]["model_flops_per_step"]  # model FLOPs: no recompute
    assert all(row["median_step_s"] > 0 and row["mfu"] is None for row in rows.values())  # MFU: GPUs only
    assert len(result["environment"]["load_average_1min"]) == 2  # what the times shared the CPU with
    settings = result["settings"]
    assert settings["model_config"]["model_type"] == "qwen3" and settings["model_config"]["attention_dropout"] == 0.1
    assert settings["tokens_per_step"] == 2 * 4 * 32 and settings["lora"]["target_modules"][-1] == "down_proj"

    tokenizer = decoder_step.build_tokenizer(["The man plays .", "a man"], vocab_words=3)
    assert tokenizer.pad_token == tokenizer.eos_token == decoder_step.EOS_TOKEN
    section = render.render(tmp_path).split("## Decoder backbone: full fine-tuning against LoRA (CPU)\n")[1]
    assert "A random qwen3 (random (seed 0) weights; hidden 32, 2 layers, 2 heads (1 key-value)" in section
    assert "| `full` | no | no |" in section and "| `lora_gc` | yes | yes |" in section
    assert "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj" in section

    # The 3 most frequent words, lower-cased (ties in order of appearance): man, the, plays.
    assert tokenizer.convert_ids_to_tokens(tokenizer("The man sings")["input_ids"]) == ["the", "man", "<unk>"]


def test_decoder_step_times_eager_attention_and_the_4bit_arm(tmp_path: Path) -> None:
    """``lora_eager`` runs transformers' eager attention (its softmax, no SDPA operator) where ``lora`` runs SDPA
    (the backend torch picked, from the profiled warm-up step), at the same model FLOPs; the ``qlora`` arm loads the
    same weights in 4 bits on the CPU (bitsandbytes' CPU backend) and trains the same adapters at the same model
    FLOPs (a 4-bit layer counts as the matrix it stands for), with half the stored parameters' count (two 4-bit
    weights a byte)."""
    decoder_step = importlib.import_module("decoder_step")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"a man number {i} plays the guitar .\n" for i in range(8)))
    argv = ["--size", "tiny", "--train_file", str(corpus), "--batch_size", "4", "--steps", "1", "--warmup", "1",
            "--lora_r", "4", "--no_memory", "--arms", "lora", "lora_eager", "qlora"]  # fmt: skip
    rows = {row["arm"]: row for row in decoder_step.main(argv)["arms"]}
    sdpa, eager, quantized = rows["lora"], rows["lora_eager"], rows["qlora"]
    assert (sdpa["attn_implementation"], eager["attn_implementation"]) == ("sdpa", "eager")
    assert "aten::scaled_dot_product_attention" in sdpa["attention_ops"]
    assert sdpa["attention_backend"] in {op.removeprefix(decoder_step.SDPA_OP_PREFIX) for op in sdpa["attention_ops"]}
    assert eager["attention_backend"] == "eager"
    assert not any("scaled_dot_product" in op for op in eager["attention_ops"])
    assert eager["model_flops_per_step"] == sdpa["model_flops_per_step"] and eager["median_step_s"] > 0
    assert "error" not in quantized and quantized["load_in_4bit"] and quantized["median_step_s"] > 0
    assert quantized["model_flops_per_step"] == sdpa["model_flops_per_step"]
    assert quantized["trainable_parameters"] == sdpa["trainable_parameters"]
    size = decoder_step.SIZES["tiny"]
    hidden, head = size["hidden_size"], size["head_dim"]
    heads, kv_heads = size["num_attention_heads"], size["num_key_value_heads"]
    # Each layer's q and o, k and v, and gate, up and down projections: in 4 bits, half their count is stored.
    per_layer = 2 * hidden * heads * head + 2 * hidden * kv_heads * head + 3 * hidden * size["intermediate_size"]
    assert sdpa["parameters"] - quantized["parameters"] == size["num_hidden_layers"] * per_layer // 2


def test_decoder_step_counts_a_4bit_layer_as_the_matrix_it_stands_for() -> None:
    """bitsandbytes packs two 4-bit weights per byte of an ``nn.Linear``'s weight: the FLOPs are ``in x out``'s."""
    decoder_step = importlib.import_module("decoder_step")
    layer = torch.nn.Linear(8, 4, bias=False)
    layer.weight = torch.nn.Parameter(torch.zeros(16, 1, dtype=torch.uint8), requires_grad=False)
    assert decoder_step.linear_flops_per_token(layer) == 4 * 8 * 4  # frozen: forward and the input's gradient


def test_decoder_step_qlora_run_trains_saves_and_reloads_bf16_lora_and_qlora(tmp_path: Path) -> None:
    """The QLoRA check's ``run_unsup.py`` runs on CPU, with and without ``--load_in_4bit``: both train (finite losses,
    every LoRA B matrix off zero) and save a plain float32 root (bf16 LoRA: merged in float32, as rounding back to
    bf16 would erase a short run's update; QLoRA: merged into the dequantized weights) that embeds closer to the
    adapter over the base than training moved the adapter from the base; no problem is reported, and a root saved
    4-bit or left at the base would be one."""
    decoder_step = importlib.import_module("decoder_step")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"a man number {i} plays the guitar .\n" for i in range(16)))
    args = argparse.Namespace(qlora_run_size="tiny", qlora_run_steps=2, qlora_run_learning_rate=1e-3, device="cpu",
                              train_file=str(corpus), pooler="avg", lora_r=4, batch_size=4, max_seq_length=16,
                              dtype="bfloat16", bf16=True, attn_implementation="sdpa",
                              attention_dropout=0.1)  # fmt: skip
    tokenizer = decoder_step.build_tokenizer(corpus.read_text().splitlines(), 100)
    result = decoder_step.qlora_run(args, tokenizer, tmp_path)
    runs = result["runs"]
    for name in ("lora", "qlora"):
        run = runs[name]
        assert run["returncode"] == 0 and run["losses_finite"] and len(run["losses"]) == 2, name
        assert run["lora_B_moved"] == run["lora_B_matrices"] == 2 * 7, name  # 2 layers x 7 projections
        assert run["root_quantization_config"] is None and run["root_weight_dtypes"] == {"F32": 24}, name
        assert 0 <= run["embeddings"]["root_vs_adapter"] < run["embeddings"]["adapter_vs_base"], name
    assert "--load_in_4bit true" in runs["qlora"]["command"] and "--load_in_4bit" not in runs["lora"]["command"]
    assert decoder_step.qlora_problems([], result) == []
    lost = copy.deepcopy(result)
    lost["runs"]["qlora"] |= {"root_quantization_config": {"load_in_4bit": True}}
    lost["runs"]["qlora"]["embeddings"] |= {"root_vs_base": 0.0}
    quantized_root = "run qlora: the saved root is quantized: {'load_in_4bit': True}"
    assert decoder_step.qlora_problems([], lost) == [
        quantized_root,
        f"run qlora: the saved root embeds closer to the base (0) than to the adapter "
        f"({runs['qlora']['embeddings']['root_vs_adapter']:.3g})",
    ]


def test_decoder_step_memory_probe_reads_the_arms_peak_rss(tmp_path: Path) -> None:
    decoder_step = importlib.import_module("decoder_step")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"a man number {i} plays the guitar .\n" for i in range(8)))
    args = argparse.Namespace(size="tiny", device="cpu", batch_size=4, max_seq_length=16, steps=1, warmup=1,
                              dtype="float32", bf16=False, lora_r=4, pooler="avg", memory_probe="lora",
                              attn_implementation="sdpa")  # fmt: skip
    sentences = corpus.read_text().splitlines()
    tokenizer = decoder_step.build_tokenizer(sentences, 100)
    probe = decoder_step.memory_probe(args, decoder_step.decoder_config("tiny", tokenizer, 0.1), tokenizer, sentences)
    assert probe["hwm_reset"] is Path("/proc/self/clear_refs").exists()
    assert 0 <= probe["arm_peak_gib"] < probe["peak_rss_gib"] < 16


# --- benchmarks/gpu_session.py: every GPU measurement in one device call, rehearsed here ----------------------------

gpu_session = importlib.import_module("gpu_session")


@pytest.mark.slow
def test_gpu_session_rehearses_every_stage_on_cpu(
    tiny_tokenizer_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--budget tiny``: the GPU session's stages, through the same scripts and flags but tiny models and 2 steps,
    against a team data folder made here (the test vocabulary standing in for bert-base-uncased's). Every stage
    passes and the output folder holds exactly what one device call brings back (at most 8 files).

    Slow (about 2 minutes of CPU: 8 processes, each importing torch, transformers and hf_cse, and dynamo tracing the
    compile stages), so it runs in CI's slow pass; the default suite checks the stages' GPU commands
    (:func:`test_gpu_session_stages_and_install_on_the_gpu`) and each script's flags on the tiny model."""
    data = tmp_path / "data"
    shutil.copytree(tiny_tokenizer_dir, data / "models" / "bert-base-uncased-tokenizer")
    (data / "wiki1m").mkdir()
    lines = [f"{sentence} {i % 7} ." for i in range(8) for sentence in SENTENCES]
    (data / "wiki1m" / "wiki1m_for_simcse.head11914.txt").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("HF_CSE_DATA_DIR", str(data))
    out = tmp_path / "out"
    record = gpu_session.main(["--budget", "tiny", "--out", str(out)])
    stages = {stage["name"]: stage for stage in record["stages"]}
    assert list(stages) == [stage.name for stage in gpu_session.build_stages("gpu", out)]
    assert {name: stage["status"] for name, stage in stages.items()} == dict.fromkeys(stages, "ok"), record
    written = sorted(path.name for path in out.iterdir())
    expected = [stage["output"] for stage in record["stages"] if stage["output"]]
    assert written == sorted([*expected, gpu_session.SESSION_JSON, gpu_session.LOGS]) and len(written) <= 8
    assert json.loads((out / gpu_session.SESSION_JSON).read_text()) == json.loads(json.dumps(record))
    with tarfile.open(out / gpu_session.LOGS) as archive:
        assert {f"logs/{name}.log" for name in stages} <= set(archive.getnames())
    assert stages["tests"]["summary"]["result"].startswith("1 passed")
    assert stages["env"]["summary"]["bitsandbytes"] == importlib.metadata.version("bitsandbytes")
    # The decoder stage's QLoRA arm and run train here too, on the CPU: every arm is timed, both runs save a plain
    # root that embeds as their adapter does.
    decoder = stages["decoder_1b"]["summary"]
    assert decoder["lora_eager"]["attention"] == "eager"
    assert decoder["lora"]["step_ms"] > 0 and decoder["qlora"]["step_ms"] > 0
    for run in (decoder["run_lora"], decoder["run_qlora"]):
        assert run["losses_finite"] and run["lora_B_moved"] == "14/14" and not run["root_4bit"]
        assert run["root_vs_adapter"] < run["adapter_vs_base"]
    assert stages["throughput_static_cudagraphs"]["summary"]["simcse/bare"] > 0
    # Both trainers' end-to-end runs are clocked step by step (2 steps here: the second is the steady part).
    for name in ("hf_cse_simcse", "st_mnrl"):
        assert stages["throughput_eager"]["summary"][f"end_to_end_{name}_steady_steps_per_s"] > 0, name
    compiled = json.loads((out / "throughput_gpu_bf16_static_cudagraphs.json").read_text())["settings"]
    assert compiled["torch_compile_mode"] == "reduce-overhead" and compiled["pad_to_max_seq_length"]
    markdown = render.render(out)
    assert "| CUDA graphs, padded to max_seq_length | `bare` |" in markdown
    assert "## Decoder backbone: a ~1B Qwen3 with LoRA on a GPU (bf16)\n\nA random qwen3" in markdown


def test_gpu_session_stages_and_install_on_the_gpu() -> None:
    """The GPU settings of each stage (what the rehearsal cannot run) and the device README's wheel install."""
    stages = {stage.name: stage for stage in gpu_session.build_stages("gpu", Path("/out"))}
    eager = " ".join(stages["throughput_eager"].argv)
    assert "--random_config bert-base --bf16 --batch_size 64 --max_seq_length 32" in eager
    assert "--end_to_end_steps 300" in eager and "--end_to_end_runs" not in eager
    assert "--torch_compile" in stages["throughput_compile"].argv
    assert "--torch_compile_mode reduce-overhead --end_to_end_runs hf_cse_simcse" in " ".join(
        stages["throughput_cudagraphs"].argv
    )
    assert "--pad_to_max_seq_length" in stages["throughput_static_cudagraphs"].argv
    decoder = " ".join(stages["decoder_1b"].argv)
    assert "--device cuda --size 1b --batch_size 64" in decoder and "--qlora_run_steps 20" in decoder
    assert "--dtype bfloat16 --bf16 --arms lora lora_gc lora_eager qlora" in decoder
    assert stages["tests"].argv[:7] == ["-m", "pytest", "-m", "not slow", "-n", "8", "-v"]
    assert "--need_cuda" in stages["env"].argv
    command = gpu_session.install_command([Path("w/a.whl")], Path("/tmp/site"))
    assert command[3:] == ["install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir", "--upgrade",
                           "--target", "/tmp/site", "w/a.whl"]  # fmt: skip
    env = gpu_session.stage_environment(Path("/tmp/site"))
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == ["/tmp/site", str(gpu_session.REPO_ROOT)]
    assert env["HF_HUB_OFFLINE"] == "1"


def test_the_device_gets_every_package_the_stages_need(monkeypatch: pytest.MonkeyPatch) -> None:
    """hf_cse's requirements and the tests stage's, followed through the carried wheels' own requirements, are all
    in the device image or carried; without lemminflect in :data:`WHEELS` (the first GPU session's four lost stages)
    the check names it and ``--fetch`` stops before downloading anything."""
    assert gpu_session.packages_the_device_lacks() == []
    monkeypatch.setattr(gpu_session, "WHEELS", tuple(name for name in gpu_session.WHEELS if name != "lemminflect"))
    assert gpu_session.packages_the_device_lacks() == ["lemminflect (needed by hf_cse)"]
    # A carried package's own requirements are followed: datasets and multiprocess need dill, which the image lacks.
    monkeypatch.setattr(gpu_session, "WHEELS", tuple(name for name in gpu_session.WHEELS if name != "dill"))
    dill, lemminflect = gpu_session.packages_the_device_lacks()
    assert dill in ("dill (needed by datasets)", "dill (needed by multiprocess)")

    def no_download(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"downloaded: {args}")

    monkeypatch.setattr(gpu_session.subprocess, "run", no_download)
    with pytest.raises(
        SystemExit,
        match=r"The device image lacks dill \(needed by \w+\), lemminflect \(needed by hf_cse\): add it to WHEELS",
    ):
        gpu_session.fetch()


XDIST_VERBOSE_LOG = """bringing up nodes...
[gw1] [ 25%] SKIPPED tests/test_x.py::test_s
[gw1] [ 50%] ERROR tests/test_x.py::test_e
[gw0] [ 75%] FAILED tests/test_x.py::test_p[a b]
[gw0] [100%] PASSED tests/test_x.py::test_p[c]
=================================== FAILURES ===================================
[gw0] linux -- Python 3.12.3 /usr/bin/python3
E   AssertionError: assert 'a b' == 'c'
=========================== short test summary info ============================
FAILED tests/test_x.py::test_p[a b] - AssertionError: assert 'a b' == 'c'
ERROR tests/test_x.py::test_e - RuntimeError
=============== 1 failed, 1 passed, 1 skipped, 1 error in 8.34s ================
"""


def test_tests_stage_names_its_failures_also_when_stopped_at_its_cap() -> None:
    """The tests stage's headline from pytest-xdist's ``-v`` output (copied from a real run): the summary line and
    each failure once; stopped before the summary (the first GPU session's tests stage: 119 F's, no names), the
    failures and outcomes printed so far, which the table line shows."""
    whole = gpu_session.tests_headline(XDIST_VERBOSE_LOG)
    assert whole["result"] == "1 failed, 1 passed, 1 skipped, 1 error in 8.34s"
    assert whole["failed"] == ["tests/test_x.py::test_e", "tests/test_x.py::test_p[a b]"]
    stopped = gpu_session.tests_headline(XDIST_VERBOSE_LOG.split("=====")[0])
    assert stopped == {"result": None, "failed": ["tests/test_x.py::test_e", "tests/test_x.py::test_p[a b]"],
                       "counted": {"skipped": 1, "error": 1, "failed": 1, "passed": 1}}  # fmt: skip
    stage = gpu_session.Stage("tests", [], 1, status="timeout", seconds=600.0, summary=stopped)
    assert gpu_session.table_line(stage).endswith(
        "stopped after skipped 1, error 1, failed 1, passed 1; "
        "failed: tests/test_x.py::test_e tests/test_x.py::test_p[a b]"
    )


@pytest.mark.parametrize(
    ("heading", "output"),
    [
        ("Training throughput on a GPU (bf16)", "throughput_gpu_bf16.json"),
        ("Where a training step's time goes (GPU, bf16)", "profile_step_gpu_bf16.json"),
        ("Decoder backbone: a ~1B Qwen3 with LoRA on a GPU (bf16)", "decoder_step_gpu_1b.json"),
    ],
)
def test_render_not_run_yet_shows_the_gpu_session_stages_command(tmp_path: Path, heading: str, output: str) -> None:
    """A GPU section not run yet shows, first, the command of the ``gpu_session.py`` stage that writes its JSON,
    built from the stage's definition (a copy in ``render.py`` had fallen behind the decoder stage's arms)."""
    (stage,) = [stage for stage in gpu_session.build_stages("gpu", tmp_path) if stage.output == output]
    section = render.render(tmp_path).split(f"## {heading}\n")[1].split("\n## ")[0]
    shown = section.split("```bash\n")[1].splitlines()[0]
    assert shown == f"{gpu_session.command_text(stage)}   # on a GPU (gpu_session.py's {stage.name} stage)"


def fake_wheel(folder: Path, files: dict[str, bytes]) -> Path:
    """A wheel of package ``pkg`` 1.0 holding ``files`` (paths under ``pkg/``), with its METADATA, WHEEL and a
    RECORD of every file's sha256 and size, as setuptools writes them."""
    dist_info = "pkg-1.0.dist-info"
    contents = {f"pkg/{name}": data for name, data in files.items()}
    contents[f"{dist_info}/METADATA"] = b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n"
    contents[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-any\n"
    record = [f"{path},sha256={wheel_hash(data)},{len(data)}" for path, data in contents.items()]
    contents[f"{dist_info}/RECORD"] = "\n".join([*record, f"{dist_info}/RECORD,,"]).encode() + b"\n"
    wheel = folder / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in contents.items():
            archive.writestr(path, data)
    return wheel


def wheel_hash(data: bytes) -> str:
    """A RECORD hash: urlsafe base64 of the sha256, without padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def test_trim_wheel_keeps_the_named_libraries_with_a_consistent_record_and_pip_installs_it(tmp_path: Path) -> None:
    """The trimmed wheel holds every file but the dropped libraries, its RECORD lists exactly its files with their
    true hashes and sizes, its name carries the build tag, and pip installs it without an index; a library to keep
    that the wheel lacks stops the fetch, naming it."""
    files = {"__init__.py": b"VERSION = 1\n", "libpkg_cpu.so": b"cpu" * 100, "libpkg_cuda130.so": b"13" * 200,
             "libpkg_cuda118.so": b"11" * 900, "sub/librocm.so": b"rocm" * 50}  # fmt: skip
    wheel = fake_wheel(tmp_path, files)
    out = tmp_path / "out"
    out.mkdir()
    trimmed = gpu_session.trim_wheel(wheel, out, {"libpkg_cpu.so", "libpkg_cuda130.so"}, "0cuda13")
    assert trimmed.name == "pkg-1.0-0cuda13-py3-none-any.whl" and [p.name for p in out.iterdir()] == [trimmed.name]
    with zipfile.ZipFile(trimmed) as archive:
        names = set(archive.namelist())
        record = list(csv.reader(archive.read("pkg-1.0.dist-info/RECORD").decode().splitlines()))
        contents = {name: archive.read(name) for name in names}
    assert {"pkg/libpkg_cuda118.so", "pkg/sub/librocm.so"}.isdisjoint(names)
    assert {"pkg/__init__.py", "pkg/libpkg_cpu.so", "pkg/libpkg_cuda130.so"} <= names
    assert {row[0] for row in record} == names
    for path, digest, size in record:
        if path.endswith("RECORD"):
            assert digest == size == ""
        else:
            assert (digest, int(size)) == (f"sha256={wheel_hash(contents[path])}", len(contents[path]))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(site),
                    str(trimmed)], check=True)  # fmt: skip
    assert sorted(path.name for path in (site / "pkg").rglob("*.so")) == ["libpkg_cpu.so", "libpkg_cuda130.so"]
    with pytest.raises(SystemExit, match="has no libpkg_cuda132.so; its libraries: "):
        gpu_session.trim_wheel(wheel, out, {"libpkg_cpu.so", "libpkg_cuda132.so"}, "0cuda13")


def test_fetch_bitsandbytes_keeps_the_pinned_wheel_and_removes_other_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trimmed wheel of the pinned version already there is kept without a download; another version of it is
    removed (two versions of one package would stop the device's install)."""
    version = gpu_session.BITSANDBYTES_VERSION
    pinned = tmp_path / f"bitsandbytes-{version}-0cuda13-py3-none-manylinux_2_24_x86_64.whl"
    stale = tmp_path / "bitsandbytes-0.1.0-0cuda13-py3-none-manylinux_2_24_x86_64.whl"
    other = tmp_path / "datasets-5.2.0-py3-none-any.whl"
    for path in (pinned, stale, other):
        path.write_bytes(b"wheel")

    def no_download(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"downloaded: {args}")

    monkeypatch.setattr(gpu_session.subprocess, "run", no_download)
    assert gpu_session.fetch_bitsandbytes(tmp_path) == pinned
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([pinned.name, other.name])
    download = gpu_session.download_command([f"bitsandbytes=={version}"], tmp_path)
    assert download[3:5] == ["download", "--no-deps"] and "--platform=manylinux_2_24_x86_64" in download
    # The GPU measures the bitsandbytes the CPU tests run: constraints.txt's pin.
    pins = (gpu_session.REPO_ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    assert f"bitsandbytes=={version}" in pins


def test_gpu_session_table_shows_the_decoder_arms_errors_and_runs() -> None:
    """The decoder stage's headline and table line from a JSON with a failed arm and a refused run: an error in
    place of an arm's figures, strings and booleans printed as they are."""
    arms = {
        "lora": {"arm": "lora", "median_step_s": 0.05, "mfu": 0.31, "peak_memory_gib": 9.5,
                 "attention_backend": "efficient_attention"},
        "qlora": {"arm": "qlora", "error": "RuntimeError: no kernel image"},
    }  # fmt: skip
    runs = {
        "lora": {"returncode": 0, "losses_finite": True, "lora_B_moved": 28, "lora_B_matrices": 28,
                 "steps_per_s": 9.0, "root_quantization_config": None,
                 "embeddings": {"root_vs_adapter": 0.01, "adapter_vs_base": 0.4, "root_vs_base": 0.4}},
        "qlora": {"returncode": 1, "error": "run_unsup.py: error: boom"},
    }  # fmt: skip
    summary = gpu_session.decoder_headline(arms, runs)
    assert summary["lora"] == {"step_ms": 50.0, "mfu": 0.31, "memory_gib": 9.5, "attention": "efficient_attention"}
    assert summary["qlora"] == {"error": "RuntimeError: no kernel image"}
    assert summary["run_lora"] == {"losses_finite": True, "lora_B_moved": "28/28", "steps_per_s": 9.0,
                                   "root_4bit": False, "root_vs_adapter": 0.01, "adapter_vs_base": 0.4}  # fmt: skip
    assert summary["run_qlora"] == {"exit": 1, "error": "run_unsup.py: error: boom"}
    stage = gpu_session.Stage("decoder_1b", [], 1.0, status="ok", seconds=90.0, summary=summary)
    line = gpu_session.table_line(stage)
    assert line.startswith("decoder_1b")
    assert "lora: step_ms 50, mfu 0.31, memory_gib 9.5, attention efficient_attention" in line
    assert "qlora: error RuntimeError: no kernel image" in line


def test_render_shows_a_gpu_results_command_writing_where_the_file_is_committed() -> None:
    """A GPU stage writes under the device call's ``$OUT``, recorded relative to the repository as
    ``../../root/out/...``; the rendered command names the committed file. A command that wrote inside the repository
    is shown as recorded."""
    recorded = {
        "command": "python benchmarks/throughput.py --bf16 --output_json ../../root/out/throughput_gpu_bf16.json"
    }
    shown = render.as_committed(
        recorded, gpu_session.REPO_ROOT / "benchmarks" / "results" / "throughput_gpu_bf16.json"
    )
    assert shown["command"] == (
        "python benchmarks/throughput.py --bf16 --output_json benchmarks/results/throughput_gpu_bf16.json"
    )
    inside = {"command": "python benchmarks/flops.py --output_json benchmarks/results/step_floor.json"}
    assert render.as_committed(dict(inside), Path("/elsewhere/step_floor.json")) == inside


def test_finding_the_base_models_compiles_nothing() -> None:
    """The first step of a throughput arm finds its base models through a global forward hook; run compiled, dynamo
    guarded on that hook and compiled every graph twice (again at the next step, without it), which on a GPU spent a
    compile stage's time cap. That step now runs eagerly: the compiled steps after it compile once."""
    from torch._dynamo.utils import counters
    from transformers import BertConfig, BertModel

    torch._dynamo.reset()
    counters.clear()
    model = BertModel(BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=16, max_position_embeddings=16))  # fmt: skip
    compiled = torch.compile(model, backend="eager")
    ids = torch.randint(0, 50, (2, 5))
    assert flops.find_base_models(lambda: compiled(input_ids=ids)) == [model]
    assert counters["frames"]["total"] == 0
    for _ in range(2):
        with flops.counting([model]):
            compiled(input_ids=ids)
    assert counters["stats"]["unique_graphs"] == 1


def test_a_stopped_stage_says_so_and_its_last_line_that_is_no_progress_bar() -> None:
    """The first GPU session's stopped stages recorded a progress bar as their error ("Tokenizing: 100%|...")."""
    tail = "Loading weights: 100%|##| 199/199 [00:00<00:00, 5139.67it/s]\nsimcse: 0.113 s/step\n" + (
        "Tokenizing:  39%|#  | 1000/2560 [00:00<00:00, 2188.25 examples/s]\rTokenizing: 100%|##| 2560/2560 "
        "[00:01<00:00, 1776.11 examples/s]\n"
    )
    assert gpu_session.error_line(tail, None, 75) == "stopped at its cap of 75 s; last output: simcse: 0.113 s/step"
    assert gpu_session.error_line("Traceback ...\nModuleNotFoundError: No module named 'x'\n", 1, 75) == (
        "ModuleNotFoundError: No module named 'x'"
    )
