"""``python -m hf_cse.report`` end to end on a tiny run folder, and its errors on bad input.

The run folder is the tiny random BERT of ``conftest.py`` plus a hand-written ``trainer_state.json``; the STS folder is
the synthetic SentEval-layout one of ``test_sts_evaluation.py``. Numbers of a random model mean nothing: the tests
check that every section and plot is there and that the plots are real images.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import SENTENCES, write_senteval_dir
from matplotlib.figure import Figure
from PIL import Image

from hf_cse.commands import report as report_cli
from hf_cse.commands import report_sections
from hf_cse.evaluation.analysis import SimilarityHistogram

LOG_HISTORY = [
    {"step": 0, "epoch": 0.0, "eval_stsb_spearman": 60.0, "eval_alignment": 0.30, "eval_uniformity": -1.5},
    {"step": 10, "epoch": 0.5, "loss": 1.2, "loss_dclr": 1.2, "masked_negative_share": 0.05, "learning_rate": 1e-5},
    {"step": 20, "epoch": 1.0, "loss": 0.9, "loss_dclr": 0.9, "masked_negative_share": 0.04, "learning_rate": 5e-6},
    {"step": 20, "epoch": 1.0, "eval_stsb_spearman": 70.0, "eval_alignment": 0.25, "eval_uniformity": -2.0},
    {"step": 20, "epoch": 1.0, "train_loss": 1.05, "train_runtime": 3.0},
]


def write_trainer_state(run_dir: Path, log_history: list[dict], best_global_step: int | None = 20) -> None:
    state = {"global_step": 20, "best_metric": 70.0, "best_global_step": best_global_step, "train_batch_size": 4}
    (run_dir / "trainer_state.json").write_text(json.dumps({**state, "log_history": log_history}), encoding="utf-8")


@pytest.fixture
def run_dir(tiny_encoder_dir: Path, tmp_path: Path) -> Path:
    directory = tmp_path / "run"
    shutil.copytree(tiny_encoder_dir, directory)
    write_trainer_state(directory, LOG_HISTORY)
    return directory


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return path


def assert_png(path: Path) -> None:
    assert path.is_file(), f"missing plot {path.name}"
    with Image.open(path) as image:
        image.verify()
        assert image.format == "PNG" and image.size[0] >= 300 and image.size[1] >= 200


def test_report_end_to_end(run_dir: Path, corpus: Path, tmp_path: Path) -> None:
    sts_dir = write_senteval_dir(tmp_path / "sts")
    output_dir = tmp_path / "report"
    argv = [str(run_dir), "--sts_dir", str(sts_dir), "--corpus", str(corpus), "--output_dir", str(output_dir)]
    result = report_cli.main([*argv, "--pooler", "avg", "--device", "cpu", "--num_negative_batches", "2"])

    markdown = (output_dir / "report.md").read_text(encoding="utf-8")
    for heading in (
        "# hf_cse report: run",
        "## Training",
        "## STS (Spearman x 100)",
        "## Alignment and uniformity (STS-B test)",
        "## Surface structure: Cont./Oppn. splits (OssCSE)",
        "## Transformation probe (OssCSE)",
        "## In-batch negative similarities (DCLR, Figure 1)",
    ):
        assert heading in markdown, heading
    assert "| **avg** |" in markdown and "| **weighted average** |" in markdown
    assert "sim(paraphrase) > sim(negation)" in markdown
    for png in ("loss.png", "stsb_dev.png", "geometry.png", "masked_negative_share.png", "similarity_histogram.png"):
        assert f"]({png})" in markdown
        assert_png(output_dir / png)

    assert json.loads((output_dir / "report.json").read_text()) == result
    assert set(result["sts"]) == {"sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "avg"}
    assert set(result["alignment_uniformity"]) == {"alignment", "uniformity"}
    assert len(result["surface_structure"]["datasets"]) == 26  # 24 STS12-16 subsets, STS-B train and test
    assert result["negatives"]["batch_size"] == 4  # the run's train_batch_size
    assert result["negatives"]["num_batches"] == 2 and result["negatives"]["total"] == 2 * 6
    assert result["settings"]["pooler"] == "avg"


def test_report_without_optional_inputs_says_what_to_add(run_dir: Path) -> None:
    write_trainer_state(run_dir, LOG_HISTORY[1:3])  # losses only: no eval, no geometry
    result = report_cli.main([str(run_dir), "--device", "cpu"])
    markdown = (run_dir / "report" / "report.md").read_text(encoding="utf-8")
    assert "pass --sts_dir to add them" in markdown and "pass --corpus to add them" in markdown
    assert "*STS dev Spearman: not in the log history.*" in markdown
    assert "## Transformation probe (OssCSE)" in markdown  # the shipped probe file is the default
    assert set(result["plots"]) == {"loss.png", "masked_negative_share.png"}
    assert_png(run_dir / "report" / "loss.png")


def test_best_step_is_found_in_the_logs_when_no_checkpoint_was_saved(run_dir: Path) -> None:
    write_trainer_state(run_dir, LOG_HISTORY, best_global_step=None)  # what save_strategy "no" leaves
    report_cli.main([str(run_dir), "--device", "cpu"])
    assert "best dev metric 70.00 at step 20." in (run_dir / "report" / "report.md").read_text(encoding="utf-8")


def test_run_dir_without_logs_is_an_error_naming_the_file(run_dir: Path) -> None:
    (run_dir / "trainer_state.json").unlink()
    for step in (20, 100):  # the newest by step, which is not the last by name
        (run_dir / f"checkpoint-{step}").mkdir()
        write_trainer_state(run_dir / f"checkpoint-{step}", LOG_HISTORY)
    with pytest.raises(FileNotFoundError) as error:
        report_cli.main([str(run_dir)])
    assert "trainer_state.json' does not exist" in str(error.value)
    assert str(error.value).endswith(
        f" Its 2 checkpoint folder(s) have them; the newest: {str(run_dir / 'checkpoint-100')!r}."
    )
    write_trainer_state(run_dir, [])
    with pytest.raises(ValueError, match="empty log_history"):
        report_cli.main([str(run_dir)])
    with pytest.raises(FileNotFoundError, match="does not exist or is not a directory"):
        report_cli.main([str(run_dir / "missing")])


def test_run_dir_without_model_is_an_error(tmp_path: Path) -> None:
    write_trainer_state(tmp_path, LOG_HISTORY)
    with pytest.raises(FileNotFoundError, match="config.json' does not exist.*--model_name_or_path"):
        report_cli.main([str(tmp_path)])


def test_probe_without_sentence_column_is_an_error(run_dir: Path, tmp_path: Path) -> None:
    probe = tmp_path / "probe.tsv"
    probe.write_text("text\tnegation\na\tb\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no 'sentence' column"):
        report_cli.main([str(run_dir), "--probe_tsv", str(probe)])


def test_sts_dir_missing_a_subset_is_an_error_naming_the_file(run_dir: Path, tmp_path: Path) -> None:
    sts_dir = write_senteval_dir(tmp_path / "sts")
    (sts_dir / "STS14-en-test" / "STS.gs.images.txt").unlink()
    with pytest.raises(FileNotFoundError, match="STS14-en-test/STS.gs.images.txt"):
        report_cli.main([str(run_dir), "--sts_dir", str(sts_dir)])


def test_missing_corpus_is_an_error(run_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="Corpus .*nope.txt' does not exist"):
        report_cli.main([str(run_dir), "--corpus", str(tmp_path / "nope.txt")])


def test_plots_label_their_axes_and_series(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    saved: list[Figure] = []
    monkeypatch.setattr(Figure, "savefig", lambda figure, path, **kwargs: saved.append(figure))
    panels = [("loss", {"loss": ([1, 2], [0.9, 0.5]), "loss_dclr": ([1, 2], [0.8, 0.4])}),
              ("Spearman x 100", {"eval_stsb_spearman": ([2], [71.0])})]  # fmt: skip
    assert report_sections.plot_curves(tmp_path / "curves.png", "Training loss", panels) == tmp_path / "curves.png"
    histogram = SimilarityHistogram(edges=np.linspace(-1, 1, 5), counts=np.array([0, 1, 2, 1]), mean=0.1)
    report_sections.plot_histogram(tmp_path / "histogram.png", histogram, "In-batch negatives")

    curves, bars = saved
    assert [ax.get_ylabel() for ax in curves.axes] == ["loss", "Spearman x 100"]
    assert {ax.get_xlabel() for ax in curves.axes} == {"training step"}
    assert curves.axes[0].get_title() == "Training loss"
    assert [text.get_text() for text in curves.axes[0].get_legend().get_texts()] == ["loss", "loss_dclr"]
    (ax,) = bars.axes
    assert ax.get_xlabel() == "cosine similarity to the anchor sentence" and ax.get_title() == "In-batch negatives"
    assert ax.get_ylabel() == "share of in-batch negatives (%)"
    assert [patch.get_height() for patch in ax.patches] == pytest.approx([0.0, 25.0, 50.0, 25.0])


def test_report_json_writes_undefined_values_as_null(tmp_path: Path) -> None:
    # A split with fewer than 2 pairs has a NaN Spearman: strict JSON has no NaN, so report.json holds null instead.
    data = {"sts": {"sts12": float("nan"), "stsb": 80.5}, "edges": (0.0, float("nan"))}
    written = report_cli._write_report(report_cli._Report(data, ["# hf_cse report: run"]), tmp_path)
    assert written == {"sts": {"sts12": None, "stsb": 80.5}, "edges": [0.0, None]}
    assert json.loads((tmp_path / "report.json").read_text(encoding="utf-8")) == written
    assert (tmp_path / "report.md").read_text(encoding="utf-8") == "# hf_cse report: run\n"
