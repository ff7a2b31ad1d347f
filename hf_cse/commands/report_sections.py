"""The sections of ``python -m hf_cse.report``: each turns results into Markdown lines, and the training curves and
the similarity histogram into PNG plots; :func:`load_trainer_state` reads the run's logs that the training section
shows. :mod:`hf_cse.commands.report` reads the other inputs, computes the results and puts the report together.

Each section function returns its lines without the blank line that ends a section, which the report adds.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..atomic_files import open_atomic
from ..errors import UsageError
from ..evaluation.options import ALIGNMENT_MIN_SCORE
from ..markdown import table

# The analyses and the checkpoints' reader import torch (seconds of CPU): imported where they run, so that the
# report's --help does without them (tests/test_help_imports.py).
if TYPE_CHECKING:
    from ..evaluation.analysis import SimilarityHistogram
    from ..evaluation.probe import ProbeResults
    from ..evaluation.sts_data import STSSubset
    from ..evaluation.sts_evaluator import STSResults
    from ..evaluation.surface_structure import SurfaceStructureResults

TRAINER_STATE_FILE = "trainer_state.json"
#: Cosine similarity above which DCLR's Figure 1 counts an in-batch negative as "high".
HIGH_SIMILARITY = 0.7
_DEV_KEY = re.compile(r"^eval_\w+_spearman$")
_LINE_STYLES = ("-", "--", ":", "-.")
_GEOMETRY = ("alignment", "uniformity")

Series = dict[str, tuple[list[float], list[float]]]
"""``{log key: (steps, values)}``, the curves of one plot panel."""


# --------------------------------------------------------------------------------------------------------------------
# The log history
# --------------------------------------------------------------------------------------------------------------------


def load_trainer_state(run_dir: str | os.PathLike) -> dict[str, Any]:
    """``RUN_DIR/trainer_state.json``, checked to hold a non-empty ``log_history``.

    Raises:
        FileNotFoundError: ``run_dir`` or its ``trainer_state.json`` does not exist (``checkpoint-*`` folders that do
            have one are suggested).
        ValueError: the file is not JSON or its ``log_history`` is empty.
    """
    from ..training.saving import checkpoints_newest_first

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"Run directory {str(run_dir)!r} does not exist or is not a directory.")
    path = run_dir / TRAINER_STATE_FILE
    if not path.is_file():
        logged = [path for path in checkpoints_newest_first(run_dir) if (path / TRAINER_STATE_FILE).is_file()]
        hint = (  # the newest by step, not all of them: a run may save dozens
            f" Its {len(logged)} checkpoint folder(s) have them; the newest: {str(logged[0])!r}." if logged else ""
        )
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


def plotting_classes() -> tuple[type, type]:
    """matplotlib's ``Figure`` and ``FigureCanvasAgg``, imported here because only the plots need them (matplotlib is
    an optional dependency, the ``analysis`` extra); the report calls this first, so that without matplotlib it
    stops before reading any input or loading the model.

    Raises:
        UsageError: matplotlib does not import; the message says how to install it.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise UsageError(
            f"the report draws its plots with matplotlib, which does not import ({err}): pip install "
            '"hf_cse[analysis]" (in a clone of hf_cse: pip install -e ".[analysis]").'
        ) from None
    return Figure, FigureCanvasAgg


def _new_figure(num_panels: int = 1) -> tuple[Any, list[Any]]:
    """A figure of ``num_panels`` stacked axes, 7 x 3.2 inches each."""
    figure_class, canvas_class = plotting_classes()
    figure = figure_class(figsize=(7.0, 3.2 * num_panels), layout="constrained")
    canvas_class(figure)
    axes = figure.subplots(num_panels, 1, squeeze=False)[:, 0]
    return figure, list(axes)


def _save_png(figure: Any, path: Path) -> None:
    """``figure`` as a PNG at ``path``, whole or not at all (:func:`~hf_cse.atomic_files.open_atomic`: a full disk
    never leaves a truncated image, and is one line)."""
    with open_atomic(path) as f:
        figure.savefig(f, format="png", dpi=120)


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
    _save_png(figure, path)
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
    _save_png(figure, path)
    return path


# --------------------------------------------------------------------------------------------------------------------
# Markdown sections
# --------------------------------------------------------------------------------------------------------------------


def _fmt(value: float, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals, or ``n/a`` for NaN (an undefined correlation)."""
    return "n/a" if math.isnan(value) else f"{value:.{digits}f}"


def training_section(state: dict[str, Any], output_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The step count, the best dev metric and the curves of ``trainer_state.json``'s ``state``.

    Writes ``loss.png``, ``stsb_dev.png``, ``geometry.png`` and ``masked_negative_share.png`` into ``output_dir``,
    each only when its keys were logged (a note takes the place of a missing one).

    Returns:
        The lines, and ``{PNG file name: title}`` of the plots written.
    """
    history = state["log_history"]
    plots: dict[str, str] = {}
    step_info = f"{state.get('global_step', '?')} steps"
    best = state.get("best_metric")
    if best is not None:
        # best_global_step is None when no checkpoint was saved (save_strategy "no"): find the evaluation instead.
        best_step = state.get("best_global_step")
        if best_step is None:
            best_step = next((entry.get("step", "?") for entry in history if best in entry.values()), "?")
        step_info += f"; best dev metric {best:.2f} at step {best_step}"
    lines = ["## Training", "", step_info + "."]
    # The total "loss" last, drawn dashed over its parts (loss_simcse, loss_margin, ...).
    loss_keys = sorted(_keys(history, lambda key: key.startswith("loss")), key=lambda key: key == "loss")
    figures = [  # (file, title, [(y label, log keys) of each panel])
        ("loss.png", "Training loss", [("loss", loss_keys)]),
        ("stsb_dev.png", "STS dev Spearman", [("Spearman x 100", _keys(history, _DEV_KEY.match))]),
        ("geometry.png", "Alignment and uniformity (STS-B dev)", [(name, [f"eval_{name}"]) for name in _GEOMETRY]),
        (
            "masked_negative_share.png",
            "Share of in-batch negatives masked as false negatives (DCLR)",
            [("share", ["masked_negative_share"])],
        ),
    ]
    for filename, title, panel_keys in figures:
        panels = [(ylabel, series) for ylabel, keys in panel_keys if (series := log_series(history, keys))]
        if not panels:
            lines += ["", f"*{title}: not in the log history.*"]
            continue
        plot_curves(output_dir / filename, title, panels)
        plots[filename] = title
        lines += ["", f"![{title}]({filename})"]
    return lines, plots


def sts_section(results: STSResults) -> list[str]:
    """The STS table: per task its split, pairs, ``all`` and ``wmean`` Spearman x 100; the average last."""
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


def geometry_section(geometry: dict[str, float], subsets: Sequence[STSSubset]) -> list[str]:
    """Alignment and uniformity (``geometry``) with what each is over: the pairs of ``subsets`` with a gold score of
    at least :data:`~hf_cse.evaluation.ALIGNMENT_MIN_SCORE`, and their distinct sentences."""
    from ..evaluation.analysis import positive_pairs

    num_positive = len(positive_pairs(subsets))
    num_sentences = len({x for subset in subsets for x in (*subset.sentences1, *subset.sentences2)})
    rows = [
        ("alignment", _fmt(geometry["alignment"], 4), f"pairs with gold >= {ALIGNMENT_MIN_SCORE:g}: {num_positive}"),
        ("uniformity", _fmt(geometry["uniformity"], 4), f"distinct sentences: {num_sentences}"),
    ]
    return [
        "## Alignment and uniformity (STS-B test)",
        "",
        "On L2-normalized embeddings (Wang & Isola, 2020); lower is better for both.",
        "",
        table(("metric", "value", "over"), rows),
    ]


def surface_section(results: SurfaceStructureResults) -> list[str]:
    """OssCSE's Cont./Oppn. table: per kept dataset the medians, split sizes and Spearman x 100; the weighted
    averages last, then the datasets left out."""
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


def probe_section(results: ProbeResults, probe_path: str | os.PathLike) -> list[str]:
    """OssCSE's transformation probe of the file ``probe_path``: per transformation the rows, mean cosine and mean
    MER, then how often the paraphrase is closer than the negation."""
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


def negatives_section(
    histogram: SimilarityHistogram, high_share: float, corpus: str, batch_size: int, num_batches: int, png: str
) -> list[str]:
    """DCLR's Figure 1: the histogram of ``num_batches`` batches of ``batch_size`` sentences of ``corpus`` (plotted
    in ``png``) and ``high_share``, the share above :data:`HIGH_SIMILARITY`; empty bins are left out of the table."""
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
