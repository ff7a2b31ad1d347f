"""``benchmarks/corpus_memory.py``: the corpus it writes, how runs are merged, one real arm on the tiny model, and
its ``BENCHMARKS.md`` section."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS_DIR))  # the scripts import their helpers as `from _common import ...`
corpus_memory = importlib.import_module("corpus_memory")
render = importlib.import_module("render")


def arm(objective: str, sentences: int, peak: float, seconds: float) -> dict[str, object]:
    return {"objective": objective, "sentences": sentences, "peak_rss_gib": peak, "time_to_first_step_s": seconds}


def test_corpus_repeats_the_source_lines_with_the_copy_number(tmp_path: Path) -> None:
    source = tmp_path / "head.txt"
    source.write_text("first line\n\nsecond line\n", encoding="utf-8")
    corpus = corpus_memory.write_corpus(tmp_path / "corpus.txt", 5, source)
    assert corpus.read_text(encoding="utf-8").splitlines() == [
        "0 first line",
        "0 second line",
        "1 first line",
        "1 second line",
        "2 first line",
    ]


def test_an_arm_replaces_the_same_arm_of_its_run_and_keeps_the_rest() -> None:
    results = {"runs": [{"label": "baseline", "arms": [arm("dclr", 10, 9.0, 70.0)]}]}
    results = corpus_memory.merge_arm(results, "after", {"code_commit": "abc"}, arm("dclr", 10, 1.0, 30.0))
    results = corpus_memory.merge_arm(results, "after", {"code_commit": "def"}, arm("simcse", 10, 0.9, 20.0))
    results = corpus_memory.merge_arm(results, "after", {"code_commit": "def"}, arm("dclr", 10, 1.2, 31.0))
    baseline, after = results["runs"]
    assert baseline == {"label": "baseline", "arms": [arm("dclr", 10, 9.0, 70.0)]}
    assert after == {
        "code_commit": "def",
        "label": "after",
        "arms": [arm("simcse", 10, 0.9, 20.0), arm("dclr", 10, 1.2, 31.0)],
    }


def test_one_arm_runs_in_a_child_process_and_reports_its_peak_and_time(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"sentence number {i}\n" for i in range(40)), encoding="utf-8")
    settings = argparse.Namespace(hf_cse_root=corpus_memory.REPO_ROOT, batch_size=4, max_seq_length=16)
    measured = corpus_memory.measure_arm("dclr", corpus, tiny_encoder_dir, tmp_path, settings)
    assert measured["objective"] == "dclr" and measured["sentences"] == 40
    assert 0.1 < measured["peak_rss_gib"] < 8  # a Python process with torch: hundreds of MB
    assert 0 < measured["time_to_first_step_s"] < measured["wall_s"]


def test_render_puts_each_run_in_its_own_columns(tmp_path: Path) -> None:
    results = {
        "settings": {"model": {"hidden_size": 768, "num_hidden_layers": 0, "vocabulary": "bert"}, "batch_size": 64},
        "runs": [
            {"label": "baseline", "code_commit": "8293f92", "command": "python x --label baseline",
             "arms": [arm("dclr", 100_000, 9.39, 70.0), arm("simcse", 100_000, 1.02, 21.3)]},
            {"label": "after", "code_commit": "74eab5f", "command": "python x",
             "arms": [arm("dclr", 100_000, 1.3, 40.4), arm("dclr", 1_000_000, 3.1, 400.0)]},
        ],
    }  # fmt: skip
    (tmp_path / "corpus_memory.json").write_text(json.dumps(results), encoding="utf-8")
    section = render.render(tmp_path).split("## Memory and start-up time against corpus size")[1]
    assert "| objective | sentences | peak RSS (GiB), baseline | peak RSS (GiB), after |" in section
    assert "| dclr | 100,000 | 9.39 | 1.30 | 70 | 40 |" in section
    assert "| dclr | 1,000,000 | not run | 3.10 | not run | 400 |" in section
    assert "| simcse | 100,000 | 1.02 | not run | 21 | not run |" in section
    assert "- baseline: hf_cse at `8293f92`; `python x --label baseline`." in section
    assert "hidden size 768, 0 transformer layers" in section


@pytest.mark.slow  # a child process importing torch: ~50 s on 2 loaded cores
def test_a_streaming_arm_streams_the_corpus_in_its_child(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"sentence number {i}\n" for i in range(40)), encoding="utf-8")
    settings = argparse.Namespace(hf_cse_root=corpus_memory.REPO_ROOT, batch_size=4, max_seq_length=16, streaming=True)
    measured = corpus_memory.measure_arm("dclr", corpus, tiny_encoder_dir, tmp_path, settings)
    assert measured["sentences"] == 40 and 0 < measured["time_to_first_step_s"] < measured["wall_s"]
    log = (tmp_path / "child.log").read_text(encoding="utf-8")
    assert "Complementary embeddings" not in log and "Tokenizing" not in log  # the in-memory path's progress bars


def test_render_names_the_streamed_runs(tmp_path: Path) -> None:
    results = {
        "settings": {"model": {}},
        "runs": [
            {"label": "in memory", "arms": [arm("dclr", 100_000, 1.6, 47.0)]},
            {"label": "streaming", "streaming": True, "arms": [arm("dclr", 100_000, 0.9, 20.0)]},
        ],
    }
    (tmp_path / "corpus_memory.json").write_text(json.dumps(results), encoding="utf-8")
    section = render.render(tmp_path).split("## Memory and start-up time against corpus size")[1]
    assert "Streamed (`--streaming`, no tokenization or encoding before step 1): streaming." in section
    assert "| dclr | 100,000 | 1.60 | 0.90 | 47 | 20 |" in section
