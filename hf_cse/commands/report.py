"""Markdown report of a training run: STS scores, embedding geometry, the papers' probes, and training curves.

Example::

    python -m hf_cse.report outputs/simcse-minilm-wiki1m --sts_dir ../shared/data/sts \\
        --corpus ../shared/data/wiki1m/wiki1m_for_simcse.head11914.txt

``RUN_DIR`` is an hf_cse output folder: the saved model and the ``trainer_state.json`` that ``Trainer.save_state``
writes (a ``checkpoint-N`` folder has both too). The report, in ``--output_dir`` (default ``RUN_DIR/report``), holds:

* ``report.md`` with
  - the STS table (STS12-16 ``all``, STS-B test, SICK-R, average; Spearman x 100, as ``python -m hf_cse.eval``),
  - alignment and uniformity on STS-B test (Wang & Isola; lower is better for both),
  - OssCSE's Cont./Oppn. surface-structure splits (per dataset and weighted averages, Tables 2, 3 and 6),
  - OssCSE's transformation probe (mean cosine and MER per transformation, paraphrase-over-negation share),
  - DCLR's in-batch negative similarity histogram (``--corpus``);
* the plots, PNG: ``loss.png`` (every ``loss*`` key of the log history), ``stsb_dev.png`` (every
  ``eval_*_spearman`` key), ``geometry.png`` (``eval_alignment``/``eval_uniformity``, when logged),
  ``masked_negative_share.png`` (DCLR runs), ``similarity_histogram.png`` (with ``--corpus``);
* ``report.json`` with every number of the report.

Sections that need data not given are left out with a note saying which flag adds them (``--sts_dir``, ``--corpus``).
``--model_name_or_path`` evaluates another model beside the run's curves (e.g. the starting checkpoint, for a
before/after comparison).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..evaluation import (
    ALIGNMENT_MIN_SCORE,
    DEFAULT_MEDIAN_SCORE_RANGE,
    DEFAULT_PROBE_TSV,
    MER_FUNCTIONS,
    STS_SPLITS,
    STS_TASKS,
    EmbeddingCache,
    ProbeResults,
    ProbeSet,
    SimilarityHistogram,
    STSResults,
    STSSubset,
    SurfaceStructureResults,
    alignment_uniformity,
    evaluate_sts,
    evaluate_surface_structure,
    in_batch_negative_similarities,
    load_probe_tsv,
    load_sts_task,
    load_surface_structure_datasets,
    probe_transformations,
    similarity_histogram,
)
from ..markdown import table
from ..modeling.configuration_cse import POOLERS
from ..modeling.encoder import SentenceEncoder
from ..sources import is_builtin_corpus
from ..training.data import load_sentences
from .cli import ERRORS_HELP, check_batch_size, run_command

logger = logging.getLogger(__name__)

TRAINER_STATE_FILE = "trainer_state.json"
#: Cosine similarity above which DCLR's Figure 1 counts an in-batch negative as "high".
HIGH_SIMILARITY = 0.7
_DEV_KEY = re.compile(r"^eval_\w+_spearman$")
_LINE_STYLES = ("-", "--", ":", "-.")

Series = dict[str, tuple[list[float], list[float]]]


# --------------------------------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------------------------------


def load_trainer_state(run_dir: str | os.PathLike) -> dict[str, Any]:
    """``RUN_DIR/trainer_state.json``, checked to hold a non-empty ``log_history``.

    Raises:
        FileNotFoundError: ``run_dir`` or its ``trainer_state.json`` does not exist (``checkpoint-*`` folders that do
            have one are suggested).
        ValueError: the file is not JSON or its ``log_history`` is empty.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"Run directory {str(run_dir)!r} does not exist or is not a directory.")
    path = run_dir / TRAINER_STATE_FILE
    if not path.is_file():
        checkpoints = sorted(p.parent.name for p in run_dir.glob(f"checkpoint-*/{TRAINER_STATE_FILE}"))
        hint = f" These checkpoints have one: {', '.join(checkpoints)}." if checkpoints else ""
        raise FileNotFoundError(
            f"{str(path)!r} does not exist: {str(run_dir)!r} holds no training logs (Trainer.save_state writes them "
            f"at the end of training; run_unsup.py does).{hint}"
        )
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{str(path)!r} is not valid JSON: {err}.") from None
    if not isinstance(state, dict) or not state.get("log_history"):
        raise ValueError(f"{str(path)!r} has an empty log_history: the run logged nothing to plot.")
    return state


def log_series(log_history: Sequence[dict[str, Any]], keys: Sequence[str]) -> Series:
    """``{key: (steps, values)}`` of the log entries holding ``key``, for each key present at least once."""
    series: Series = {}
    for key in keys:
        points = [(entry["step"], entry[key]) for entry in log_history if key in entry and "step" in entry]
        if points:
            series[key] = ([float(step) for step, _ in points], [float(value) for _, value in points])
    return series


def _keys(log_history: Sequence[dict[str, Any]], predicate: Callable[[str], Any]) -> list[str]:
    """Keys of the log history matching ``predicate``, in first-logged order."""
    return [key for key in dict.fromkeys(k for entry in log_history for k in entry) if predicate(key)]


# --------------------------------------------------------------------------------------------------------------------
# Plots (matplotlib's object API with the Agg canvas: no pyplot global state, no display needed)
# --------------------------------------------------------------------------------------------------------------------


def _new_figure(num_panels: int = 1) -> tuple[Any, list[Any]]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError("The report's plots need matplotlib: pip install 'hf_cse[analysis]'.") from err
    figure = Figure(figsize=(7.0, 3.2 * num_panels), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(num_panels, 1, squeeze=False)[:, 0]
    return figure, list(axes)


def plot_curves(path: Path, title: str, panels: Sequence[tuple[str, Series]]) -> Path:
    """Line plot of logged values over training steps, one panel per ``(y label, series)``; returns ``path``."""
    figure, axes = _new_figure(len(panels))
    for ax, (ylabel, series) in zip(axes, panels, strict=True):
        # Cycling line styles keeps curves that coincide visible (the total loss equals a lone objective's part).
        for index, (label, (steps, values)) in enumerate(series.items()):
            style = _LINE_STYLES[index % len(_LINE_STYLES)]
            ax.plot(
                steps, values, linestyle=style, marker="o" if len(steps) <= 30 else None, markersize=3, label=label
            )
        ax.set_xlabel("training step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_title(title)
    figure.savefig(path, dpi=120)
    return path


def plot_histogram(path: Path, histogram: SimilarityHistogram, title: str) -> Path:
    """Bar chart of the share of in-batch negatives per cosine-similarity bin; returns ``path``."""
    figure, (ax,) = _new_figure()
    edges = histogram.edges
    ax.bar(
        edges[:-1], 100 * histogram.shares, width=np.diff(edges), align="edge", edgecolor="black", label="negatives"
    )
    ax.axvline(HIGH_SIMILARITY, color="tab:red", linestyle="--", label=f"cosine = {HIGH_SIMILARITY}")
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel("cosine similarity to the anchor sentence")
    ax.set_ylabel("share of in-batch negatives (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="y")
    ax.legend()
    figure.savefig(path, dpi=120)
    return path


# --------------------------------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class _Inputs:
    """Everything read before the model is loaded, so that bad input fails in seconds."""

    state: dict[str, Any]
    model: str
    sts_subsets: list[STSSubset] | None
    probe: ProbeSet
    corpus: list[str] | None


def _read_inputs(
    run_dir: Path,
    model_name_or_path: str | None,
    sts_dir: str | os.PathLike | None,
    probe_tsv: str | os.PathLike,
    corpus: str | None,
    sickr_split: str,
) -> _Inputs:
    state = load_trainer_state(run_dir)
    if model_name_or_path is None:
        if not (run_dir / "config.json").is_file():
            raise FileNotFoundError(
                f"{str(run_dir / 'config.json')!r} does not exist: {str(run_dir)!r} holds no saved model. Pass "
                "--model_name_or_path, or a checkpoint-N folder as RUN_DIR."
            )
        model_name_or_path = str(run_dir)
    sts_subsets = None
    if sts_dir is not None:
        # Every STS file the report reads (evaluate_sts re-reads its tasks, which takes well under a second).
        sts_subsets = load_surface_structure_datasets(sts_dir)
        load_sts_task("sickr", sts_dir, sickr_split)
    probe = load_probe_tsv(probe_tsv)
    sentences = None
    if corpus is not None:
        if not is_builtin_corpus(corpus) and not Path(corpus).is_file():
            raise FileNotFoundError(
                f"Corpus {corpus!r} does not exist. Valid: a .txt file (one sentence a line), a .csv/.json/.jsonl "
                "file with a text column, or gensim:lee."
            )
        sentences = load_sentences(corpus)["text"]
    return _Inputs(state, model_name_or_path, sts_subsets, probe, sentences)


def _without_nan(value: Any) -> Any:
    """``value`` with every float NaN (an undefined correlation) replaced by ``None``: strict JSON has no NaN."""
    if isinstance(value, dict):
        return {key: _without_nan(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_nan(item) for item in value]
    return None if isinstance(value, float) and math.isnan(value) else value


def _fmt(value: float, digits: int = 2) -> str:
    return "n/a" if math.isnan(value) else f"{value:.{digits}f}"


def _sts_section(results: STSResults) -> list[str]:
    rows = [(r.task, r.split, str(r.num_pairs), _fmt(r.all), _fmt(r.wmean)) for r in results]
    rows.append(("**avg**", "", "", f"**{_fmt(results.avg)}**", ""))
    return [
        "## STS (Spearman x 100)",
        "",
        "Cosine similarity against gold scores. STS12-16: `all` (pairs of all subsets together; `wmean`: subsets "
        "weighted by size), STS-B test, SICK-R as `--sickr_split`.",
        "",
        table(("task", "split", "pairs", "all", "wmean"), rows),
    ]


def _geometry_section(geometry: dict[str, float], num_positive: int, num_sentences: int) -> list[str]:
    return [
        "## Alignment and uniformity (STS-B test)",
        "",
        "On L2-normalized embeddings (Wang & Isola, 2020); lower is better for both.",
        "",
        table(
            ("metric", "value", "over"),
            [
                (
                    "alignment",
                    _fmt(geometry["alignment"], 4),
                    f"pairs with gold >= {ALIGNMENT_MIN_SCORE:g}: {num_positive}",
                ),
                ("uniformity", _fmt(geometry["uniformity"], 4), f"distinct sentences: {num_sentences}"),
            ],
        ),
    ]


def _surface_section(results: SurfaceStructureResults) -> list[str]:
    low, high = results.median_score_range
    rows = [
        (
            score.split.dataset,
            f"{score.split.median_score:g}",
            f"{score.split.median_mer:.3f}",
            str(score.split.num_cont),
            str(score.split.num_oppn),
            _fmt(score.cont_spearman),
            _fmt(score.oppn_spearman),
        )
        for score in results.scores
    ]
    cont, oppn = (sum(getattr(s.split, n) for s in results.scores) for n in ("num_cont", "num_oppn"))
    weighted = (f"**{_fmt(results.cont_weighted)}**", f"**{_fmt(results.oppn_weighted)}**")
    rows.append(("**weighted average**", "", "", str(cont), str(oppn), *weighted))
    excluded = [f"{s.dataset} ({s.median_score:g})" for s in results.splits if not s.kept]
    return [
        "## Surface structure: Cont./Oppn. splits (OssCSE)",
        "",
        "Per dataset, pairs above the median gold score and below the median MER (or below and above) are Cont.; "
        "all others, pairs at a median included, are Oppn. Spearman x 100 within each split; averages weighted by "
        f"split size. Datasets kept: median gold score in [{low:g}, {high:g}].",
        "",
        table(("dataset", "median score", "median MER", "Cont.", "Oppn.", "Spearman Cont.", "Spearman Oppn."), rows),
        "",
        f"Excluded (median gold score): {', '.join(excluded) if excluded else 'none'}.",
    ]


def _probe_section(results: ProbeResults, probe_path: str | os.PathLike) -> list[str]:
    rows = [(name, str(s.num_rows), _fmt(s.mean_cosine, 3), _fmt(s.mean_mer, 3)) for name, s in results.stats.items()]
    if results.num_compared:
        share = (
            f"sim(paraphrase) > sim(negation) in **{results.paraphrase_over_negation:.1%}** of "
            f"{results.num_compared} rows (an unbiased model ranks every paraphrase first)."
        )
    else:
        share = "The probe has no row with both a paraphrase and a negation."
    return [
        "## Transformation probe (OssCSE)",
        "",
        f"Probe file `{probe_path}`. Mean cosine similarity of each sentence to its transformation, and mean MER.",
        "",
        table(("transformation", "rows", "mean cosine", "mean MER"), rows),
        "",
        share,
    ]


def _negatives_section(
    histogram: SimilarityHistogram, high_share: float, corpus: str, batch_size: int, num_batches: int, png: str
) -> list[str]:
    rows = [
        (f"[{lo:.1f}, {hi:.1f})", str(int(count)), f"{100 * share:.2f}")
        for lo, hi, count, share in zip(
            histogram.edges[:-1], histogram.edges[1:], histogram.counts, histogram.shares, strict=True
        )
        if count
    ]
    return [
        "## In-batch negative similarities (DCLR, Figure 1)",
        "",
        f"Cosine similarity between each sentence and its in-batch negatives: {num_batches} random batches of "
        f"{batch_size} sentences of `{corpus}` ({histogram.total} pairs). Mean {histogram.mean:.3f}; "
        f"**{high_share:.2%}** above {HIGH_SIMILARITY} (DCLR reports about half for SimCSE-BERT on Wikipedia).",
        "",
        f"![In-batch negative similarities]({png})",
        "",
        table(("cosine bin", "pairs", "share (%)"), rows),
    ]


def _training_section(state: dict[str, Any], output_dir: Path) -> tuple[list[str], dict[str, str]]:
    history = state["log_history"]
    plots: dict[str, str] = {}
    lines = ["## Training", ""]
    step_info = f"{state.get('global_step', '?')} steps"
    best = state.get("best_metric")
    if best is not None:
        # best_global_step is None when no checkpoint was saved (save_strategy "no"): find the evaluation instead.
        best_step = state.get("best_global_step")
        if best_step is None:
            best_step = next((entry.get("step", "?") for entry in history if best in entry.values()), "?")
        step_info += f"; best dev metric {best:.2f} at step {best_step}"
    lines += [step_info + ".", ""]
    # The total "loss" last, drawn dashed over its parts (loss_simcse, loss_margin, ...).
    loss_keys = sorted(_keys(history, lambda key: key.startswith("loss")), key=lambda key: key == "loss")
    figures = [
        ("loss.png", "Training loss", [("loss", log_series(history, loss_keys))]),
        (
            "stsb_dev.png",
            "STS dev Spearman",
            [("Spearman x 100", log_series(history, _keys(history, _DEV_KEY.match)))],
        ),
        (
            "geometry.png",
            "Alignment and uniformity (STS-B dev)",
            [(name, log_series(history, [f"eval_{name}"])) for name in ("alignment", "uniformity")],
        ),
        (
            "masked_negative_share.png",
            "Share of in-batch negatives masked as false negatives (DCLR)",
            [("share", log_series(history, ["masked_negative_share"]))],
        ),
    ]
    for filename, title, panels in figures:
        panels = [(ylabel, series) for ylabel, series in panels if series]
        if not panels:
            lines += [f"*{title}: not in the log history.*", ""]
            continue
        plot_curves(output_dir / filename, title, panels)
        plots[filename] = title
        lines += [f"![{title}]({filename})", ""]
    return lines, plots


def generate_report(
    run_dir: str | os.PathLike,
    output_dir: str | os.PathLike | None = None,
    *,
    sts_dir: str | os.PathLike | None = None,
    probe_tsv: str | os.PathLike = DEFAULT_PROBE_TSV,
    corpus: str | None = None,
    model_name_or_path: str | None = None,
    pooler: str | None = None,
    max_seq_length: int | None = None,
    batch_size: int = 128,
    device: str | None = None,
    sickr_split: str = "test",
    negatives_batch_size: int | None = None,
    num_negative_batches: int = 8,
    median_score_range: tuple[float, float] = DEFAULT_MEDIAN_SCORE_RANGE,
    mer: str = "normalized",
    seed: int = 0,
) -> dict[str, Any]:
    """Write ``report.md``, ``report.json`` and the PNG plots of a run into ``output_dir``.

    Args:
        run_dir: hf_cse output folder (saved model + ``trainer_state.json``).
        output_dir: where to write; default ``run_dir/report``.
        sts_dir: SentEval-layout STS folder; without it the STS, alignment/uniformity and Cont./Oppn. sections are
            left out.
        probe_tsv: transformation probe file (default: the one shipped with hf_cse).
        corpus: sentences for the in-batch negative histogram (``.txt``, ``.csv``/``.json``/``.jsonl`` or
            ``gensim:lee``); without it the histogram is left out.
        model_name_or_path: model to evaluate instead of ``run_dir``'s (local folder, Hub id or ``pip:PACKAGE``).
        pooler: pooler override (default: the saved one; ``cls`` for a plain checkpoint).
        max_seq_length: truncation length (default: the saved one, else the tokenizer's).
        batch_size: encoding batch size.
        device: e.g. ``"cpu"``, ``"cuda:0"`` (default: cuda if available).
        sickr_split: SICK-R split of the STS table.
        negatives_batch_size: ``B`` of the in-batch histogram; default the run's ``train_batch_size``, else 64.
        num_negative_batches: random batches drawn for the histogram.
        median_score_range: datasets kept by the Cont./Oppn. analysis (``(2.0, 3.2)`` selects the paper's Table 2).
        mer: MER of the Cont./Oppn. analysis, ``"normalized"`` or ``"plain"`` (the paper's, on tokenized text).
        seed: seed of the histogram's batches.

    Returns:
        The contents of ``report.json`` (undefined values, such as the Spearman of a split with fewer than 2 pairs,
        are ``None``).
    """
    run_dir = Path(run_dir)
    output_dir = Path(output_dir) if output_dir is not None else run_dir / "report"
    if sickr_split not in STS_SPLITS["sickr"]:
        raise ValueError(f"Unknown sickr_split {sickr_split!r}. Valid splits: {', '.join(STS_SPLITS['sickr'])}.")
    inputs = _read_inputs(run_dir, model_name_or_path, sts_dir, probe_tsv, corpus, sickr_split)
    output_dir.mkdir(parents=True, exist_ok=True)

    encoder = SentenceEncoder.from_pretrained(
        inputs.model, pooler=pooler, max_seq_length=max_seq_length, device=device
    )
    # One cache for all sections: the STS table, alignment/uniformity and the Cont./Oppn. splits share sentences.
    encode = EmbeddingCache(functools.partial(encoder.encode, batch_size=batch_size))
    settings = {
        "run_dir": str(run_dir),
        "model_name_or_path": inputs.model,
        "pooler": encoder.model.pooling.pooler,
        "max_seq_length": encoder.sentence_tokenizer.max_seq_length,
        "sts_dir": None if sts_dir is None else str(sts_dir),
        "probe_tsv": str(probe_tsv),
        "corpus": corpus,
        "output_dir": str(output_dir),
    }
    report: dict[str, Any] = {"settings": settings}
    lines = [
        f"# hf_cse report: {run_dir.resolve().name}",
        "",
        table(("setting", "value"), [(key, f"`{value}`") for key, value in settings.items()]),
        "",
    ]
    training_lines, report["plots"] = _training_section(inputs.state, output_dir)
    lines += training_lines

    if inputs.sts_subsets is None:
        lines += ["*STS, alignment/uniformity and Cont./Oppn. sections: pass --sts_dir to add them.*", ""]
    else:
        sts = evaluate_sts(encode, STS_TASKS, sts_dir, sickr_split=sickr_split)
        report["sts"] = sts.summary()
        lines += [*_sts_section(sts), ""]

        stsb_test = [s for s in inputs.sts_subsets if s.task == "stsb" and s.name == "test"]
        report["alignment_uniformity"] = alignment_uniformity(encode, stsb_test)
        num_positive = sum(score >= ALIGNMENT_MIN_SCORE for s in stsb_test for score in s.scores)
        num_sentences = len({x for s in stsb_test for x in (*s.sentences1, *s.sentences2)})
        lines += [*_geometry_section(report["alignment_uniformity"], num_positive, num_sentences), ""]

        surface = evaluate_surface_structure(
            encode, inputs.sts_subsets, median_score_range=median_score_range, mer=mer
        )
        report["surface_structure"] = surface.to_dict()
        lines += [*_surface_section(surface), ""]

    probe = probe_transformations(encode, inputs.probe)
    report["probe"] = probe.to_dict()
    lines += [*_probe_section(probe, probe_tsv), ""]

    if inputs.corpus is None:
        lines += ["*In-batch negative similarities: pass --corpus to add them.*", ""]
    else:
        size = negatives_batch_size or int(inputs.state.get("train_batch_size") or 64)
        # A separate encode: corpus sentences would only bloat the STS cache.
        similarities = in_batch_negative_similarities(
            functools.partial(encoder.encode, batch_size=batch_size), inputs.corpus, size, num_negative_batches, seed
        )
        histogram = similarity_histogram(similarities)
        num_batches = len(similarities)
        high_share = float((similarities > HIGH_SIMILARITY).mean())
        report["negatives"] = {
            **histogram.to_dict(),
            "batch_size": size,
            "num_batches": num_batches,
            f"share_above_{HIGH_SIMILARITY}": high_share,
        }
        title = f"In-batch negative similarities (B = {size}, {num_batches} batches)"
        plot_histogram(output_dir / "similarity_histogram.png", histogram, title)
        report["plots"]["similarity_histogram.png"] = title
        lines += [
            *_negatives_section(histogram, high_share, corpus, size, num_batches, "similarity_histogram.png"),
            "",
        ]

    report = _without_nan(report)
    (output_dir / "report.md").write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    (output_dir / "report.json").write_text(json.dumps(report, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    logger.info("Wrote %s", output_dir / "report.md")
    return report


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m hf_cse.report``."""
    parser = argparse.ArgumentParser(
        prog="python -m hf_cse.report",
        epilog=ERRORS_HELP,
        description="Markdown report of an hf_cse run: STS, alignment/uniformity, Cont./Oppn. splits, transformation "
        "probe, in-batch negative similarities, training curves.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="hf_cse output folder (model files + trainer_state.json).")
    parser.add_argument("--sts_dir", default=None, help="SentEval-layout STS folder; omit to skip the STS sections.")
    parser.add_argument(
        "--probe_tsv", default=str(DEFAULT_PROBE_TSV), help="Transformation probe TSV (default: the shipped one)."
    )
    parser.add_argument(
        "--corpus", default=None, help="Corpus for the in-batch negative histogram (.txt, one sentence a line)."
    )
    parser.add_argument("--output_dir", default=None, help="Output folder (default: RUN_DIR/report).")
    parser.add_argument(
        "--model_name_or_path", default=None, help="Evaluate this model instead of RUN_DIR's (e.g. the base model)."
    )
    parser.add_argument("--pooler", default=None, choices=POOLERS, help="Pooler override (default: the saved one).")
    parser.add_argument("--max_seq_length", type=int, default=None, help="Truncation length (default: the saved one).")
    parser.add_argument("--batch_size", type=int, default=128, help="Encoding batch size (default: 128).")
    parser.add_argument("--device", default=None, help="Device, e.g. cpu or cuda:0 (default: cuda if available).")
    parser.add_argument(
        "--sickr_split", default="test", choices=STS_SPLITS["sickr"], help="SICK-R split (default: test)."
    )
    parser.add_argument(
        "--negatives_batch_size",
        type=int,
        default=None,
        help="Batch size B of the in-batch negative histogram (default: the run's train_batch_size, else 64).",
    )
    parser.add_argument("--num_negative_batches", type=int, default=8, help="Batches for the histogram (default: 8).")
    parser.add_argument(
        "--median_score_range",
        type=float,
        nargs=2,
        default=list(DEFAULT_MEDIAN_SCORE_RANGE),
        metavar=("LOW", "HIGH"),
        help="Cont./Oppn.: keep datasets whose median gold score is in [LOW, HIGH] (default: 2 3.5, the paper's text; "
        "2 3.2 selects the paper's Table 2).",
    )
    parser.add_argument(
        "--mer",
        default="normalized",
        choices=list(MER_FUNCTIONS),
        help="Cont./Oppn. MER: normalized (words only, lower-cased; default) or plain (jiwer.mer on the text as is, "
        "the paper's, on SentEval's tokenized copy).",
    )
    parser.add_argument("--seed", type=int, default=0, help="Seed of the histogram's random batches (default: 0).")
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the report; returns the contents of ``report.json``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    check_batch_size(parser, args)
    if args.sts_dir is not None and not Path(args.sts_dir).is_dir():
        parser.error(f"--sts_dir {args.sts_dir!r} does not exist or is not a directory.")
    report = generate_report(
        args.run_dir,
        args.output_dir,
        sts_dir=args.sts_dir,
        probe_tsv=args.probe_tsv,
        corpus=args.corpus,
        model_name_or_path=args.model_name_or_path,
        pooler=args.pooler,
        max_seq_length=args.max_seq_length,
        batch_size=args.batch_size,
        device=args.device,
        sickr_split=args.sickr_split,
        negatives_batch_size=args.negatives_batch_size,
        num_negative_batches=args.num_negative_batches,
        median_score_range=tuple(args.median_score_range),
        mer=args.mer,
        seed=args.seed,
    )
    print(f"Wrote {Path(report['settings']['output_dir']) / 'report.md'}")
    return report


def console_main() -> None:
    """The command-line entry point: ``python -m hf_cse.report`` and the ``hf-cse-report`` console script."""
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    run_command(main, build_parser().prog)


if __name__ == "__main__":
    console_main()
