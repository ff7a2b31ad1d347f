"""Markdown report of a training run: STS scores, embedding geometry, the papers' probes, and training curves.

Example::

    python -m hf_cse.report outputs/simcse-minilm-wiki1m --sts_dir SentEval/data/downstream/STS \\
        --corpus data/wiki1m_for_simcse.txt

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

The report is published whole: a crash, Ctrl-C or full disk leaves the previous one (or none), never a truncated
plot, and a full disk or an I/O error is one line (exit status 1).

Sections that need data not given are left out with a note saying which flag adds them (``--sts_dir``, ``--corpus``).
``--model_name_or_path`` evaluates another model beside the run's curves (e.g. the starting checkpoint, for a
before/after comparison).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..atomic_files import recover_staged_publishes, staged_publish, write_json_atomic, write_text_atomic
from ..evaluation.options import DEFAULT_MEDIAN_SCORE_RANGE, DEFAULT_PROBE_TSV, MER_FUNCTIONS
from ..evaluation.sts_data import STS_DOWNLOAD_HINT, STS_SPLITS, STS_TASKS, load_sts_task
from ..folder_lock import FolderLock
from ..markdown import table
from ..number_ranges import SEED, SENTENCE_LIMIT, SENTENCES, NumberFlag, NumberRange
from .cli import (
    ERRORS_HELP,
    EncoderOptions,
    OneLineErrorParser,
    add_encoder_arguments,
    check_directory,
    console_script,
    embedding_settings,
)
from .report_sections import (
    HIGH_SIMILARITY,
    geometry_section,
    load_trainer_state,
    negatives_section,
    plot_histogram,
    plotting_classes,
    probe_section,
    sts_section,
    surface_section,
    training_section,
)

# The analyses, the model and the corpus readers import torch and transformers (seconds of CPU): imported where they
# run, so that --help does without them (tests/test_help_imports.py).
if TYPE_CHECKING:
    from ..evaluation.analysis import EmbeddingCache
    from ..evaluation.probe import ProbeSet
    from ..evaluation.sts_data import STSSubset
    from ..modeling.encoder import SentenceEncoder

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportOptions:
    """What :func:`generate_report` evaluates and how; the defaults are the command line's.

    Attributes:
        model_name_or_path: model to evaluate instead of the run's own (local folder, Hub id or ``pip:PACKAGE``),
            e.g. the starting checkpoint for a before/after comparison; None: the run's.
        encoder: pooler, truncation length, batch size and device of the encoding.
        sts_dir: SentEval-layout STS folder; None leaves out the STS, alignment/uniformity and Cont./Oppn. sections.
        probe_tsv: transformation probe file (default: the one shipped with hf_cse).
        corpus: sentences for the in-batch negative histogram (``.txt``, ``.csv``/``.json``/``.jsonl`` or
            ``gensim:lee``); None leaves the histogram out.
        sickr_split: SICK-R split of the STS table (default ``"test"``).
        negatives_batch_size: ``B`` of the in-batch histogram; None: the run's ``train_batch_size``, else 64.
        num_negative_batches: random batches drawn for the histogram (default 8).
        median_score_range: ``(low, high)``, the datasets kept by the Cont./Oppn. analysis (default ``(2.0, 3.5)``;
            ``(2.0, 3.2)`` selects the paper's Table 2).
        mer: MER of the Cont./Oppn. analysis, ``"normalized"`` (default) or ``"plain"`` (the paper's, on tokenized
            text).
        seed: seed of the histogram's batches (default 0).

    Raises:
        ValueError: ``sickr_split`` is not a SICK-R split.
    """

    model_name_or_path: str | None = None
    encoder: EncoderOptions = EncoderOptions()
    sts_dir: str | os.PathLike | None = None
    probe_tsv: str | os.PathLike = DEFAULT_PROBE_TSV
    corpus: str | None = None
    sickr_split: str = "test"
    negatives_batch_size: int | None = None
    num_negative_batches: int = 8
    median_score_range: tuple[float, float] = DEFAULT_MEDIAN_SCORE_RANGE
    mer: str = "normalized"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.sickr_split not in STS_SPLITS["sickr"]:
            raise ValueError(
                f"Unknown sickr_split {self.sickr_split!r}. Valid splits: {', '.join(STS_SPLITS['sickr'])}."
            )


# --------------------------------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class _Inputs:
    """Everything read before the model is loaded, so that bad input fails in seconds."""

    state: dict[str, Any]
    model: str
    sts_subsets: list[STSSubset] | None
    probe: ProbeSet
    corpus: list[str] | None


def _read_inputs(run_dir: Path, options: ReportOptions) -> _Inputs:
    """Read the run's logs and every input file of ``options``, and find the model to evaluate.

    Raises:
        FileNotFoundError: a file is missing; ``run_dir`` holds no model and ``options`` names none.
        ValueError: a file is malformed.
    """
    from ..evaluation.probe import load_probe_tsv
    from ..evaluation.surface_structure import load_surface_structure_datasets
    from ..sources import check_not_adapter_only, is_builtin_corpus
    from ..training.data.corpus import load_sentences

    model_name_or_path = options.model_name_or_path
    if model_name_or_path is None:
        check_not_adapter_only(run_dir)  # before the logs, which a LoRA run's adapter/ lacks too
    state = load_trainer_state(run_dir)
    if model_name_or_path is None:
        if not (run_dir / "config.json").is_file():
            raise FileNotFoundError(
                f"{str(run_dir / 'config.json')!r} does not exist: {str(run_dir)!r} holds no saved model. Pass "
                "--model_name_or_path, or a checkpoint-N folder as RUN_DIR."
            )
        model_name_or_path = str(run_dir)
    sts_subsets = None
    if options.sts_dir is not None:
        # Every STS file the report reads (evaluate_sts re-reads its tasks, which takes well under a second).
        sts_subsets = load_surface_structure_datasets(options.sts_dir)
        load_sts_task("sickr", options.sts_dir, options.sickr_split)
    probe = load_probe_tsv(options.probe_tsv)
    sentences = None
    corpus = options.corpus
    if corpus is not None:
        if not is_builtin_corpus(corpus) and not Path(corpus).is_file():
            raise FileNotFoundError(
                f"Corpus {corpus!r} does not exist. Valid: a .txt file (one sentence a line), a .csv/.json/.jsonl "
                "file with a text column, or gensim:lee."
            )
        sentences = load_sentences(corpus)["text"]
    return _Inputs(state, model_name_or_path, sts_subsets, probe, sentences)


# --------------------------------------------------------------------------------------------------------------------
# The report, section by section
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class _Report:
    """``report.json``'s contents and ``report.md``'s lines, as the steps of :func:`generate_report` add them."""

    data: dict[str, Any]
    lines: list[str]

    def add(self, lines: Sequence[str], **data: Any) -> None:
        """Append a section's ``lines`` (and the blank line that ends it) and its ``data`` for ``report.json``."""
        self.lines += [*lines, ""]
        self.data.update(data)


def _start_report(
    run_dir: Path, output_dir: Path, model_name_or_path: str, encoder: SentenceEncoder, options: ReportOptions
) -> _Report:
    """The title and the settings table, which ``report.json`` holds as ``"settings"``."""
    settings = {
        "run_dir": str(run_dir),
        **embedding_settings(model_name_or_path, encoder),
        "sts_dir": None if options.sts_dir is None else str(options.sts_dir),
        "probe_tsv": str(options.probe_tsv),
        "corpus": options.corpus,
        "output_dir": str(output_dir),
    }
    report = _Report({}, [f"# hf_cse report: {run_dir.resolve().name}", ""])
    report.add(
        [table(("setting", "value"), [(key, f"`{value}`") for key, value in settings.items()])], settings=settings
    )
    return report


def _add_sts_sections(
    report: _Report, encode: EmbeddingCache, subsets: list[STSSubset] | None, options: ReportOptions
) -> None:
    """The STS table, alignment/uniformity on STS-B test and the Cont./Oppn. splits, or a note without ``sts_dir``."""
    from ..evaluation.analysis import alignment_uniformity
    from ..evaluation.sts_evaluator import evaluate_sts
    from ..evaluation.surface_structure import evaluate_surface_structure

    if subsets is None:
        report.add(["*STS, alignment/uniformity and Cont./Oppn. sections: pass --sts_dir to add them.*"])
        return
    sts = evaluate_sts(encode, STS_TASKS, options.sts_dir, sickr_split=options.sickr_split)
    report.add(sts_section(sts), sts=sts.summary())
    stsb_test = [s for s in subsets if s.task == "stsb" and s.name == "test"]
    geometry = alignment_uniformity(encode, stsb_test)
    report.add(geometry_section(geometry, stsb_test), alignment_uniformity=geometry)
    surface = evaluate_surface_structure(
        encode, subsets, median_score_range=options.median_score_range, mer=options.mer
    )
    report.add(surface_section(surface), surface_structure=surface.to_dict())


def _add_negatives_section(
    report: _Report, encoder: SentenceEncoder, inputs: _Inputs, options: ReportOptions, output_dir: Path
) -> None:
    """DCLR's in-batch negative similarity histogram (table and ``similarity_histogram.png``), or a note without
    a corpus."""
    from ..evaluation.analysis import in_batch_negative_similarities, similarity_histogram

    if inputs.corpus is None:
        report.add(["*In-batch negative similarities: pass --corpus to add them.*"])
        return
    size = options.negatives_batch_size or int(inputs.state.get("train_batch_size") or 64)
    # Not the report's EmbeddingCache: corpus sentences would only bloat it.
    encode = options.encoder.encode_function(encoder)
    similarities = in_batch_negative_similarities(
        encode, inputs.corpus, size, options.num_negative_batches, options.seed
    )
    histogram = similarity_histogram(similarities)
    num_batches = len(similarities)
    high_share = float((similarities > HIGH_SIMILARITY).mean())
    png = "similarity_histogram.png"
    title = f"In-batch negative similarities (B = {size}, {num_batches} batches)"
    plot_histogram(output_dir / png, histogram, title)
    report.data["plots"][png] = title
    negatives = {
        **histogram.to_dict(),
        "batch_size": size,
        "num_batches": num_batches,
        f"share_above_{HIGH_SIMILARITY}": high_share,
    }
    report.add(negatives_section(histogram, high_share, options.corpus, size, num_batches, png), negatives=negatives)


def _write_report(report: _Report, output_dir: Path) -> dict[str, Any]:
    """Write ``report.md`` and ``report.json``; returns the latter's contents, every NaN (an undefined correlation)
    replaced by ``None``: strict JSON has no NaN (:func:`~hf_cse.export.model_card.summary.jsonable`)."""
    from ..export.model_card.summary import jsonable

    data = jsonable(report.data)
    write_text_atomic(output_dir / "report.md", "\n".join(report.lines).rstrip() + "\n")
    write_json_atomic(output_dir / "report.json", data)  # NaN-free already
    return data


def generate_report(
    run_dir: str | os.PathLike, output_dir: str | os.PathLike | None = None, options: ReportOptions = ReportOptions()
) -> dict[str, Any]:
    """Write ``report.md``, ``report.json`` and the PNG plots of a run into ``output_dir``.

    Every input is read before the model is loaded, so that a missing or malformed file fails in seconds. The report
    is published whole (:func:`~hf_cse.atomic_files.staged_publish`, under ``output_dir``'s lock): written into a
    staging folder, then moved into ``output_dir``, so that a crash, Ctrl-C or full disk leaves the previous report
    (or none), never a truncated plot; a full disk or an I/O error is one line
    (:class:`~hf_cse.errors.DiskFullError`, :class:`~hf_cse.errors.SaveFailedError`).

    Args:
        run_dir: hf_cse output folder (saved model + ``trainer_state.json``).
        output_dir: where to write; default ``run_dir/report``.
        options: the model, its encoding, the optional inputs and the analyses' settings.

    Returns:
        The contents of ``report.json`` (undefined values, such as the Spearman of a split with fewer than 2 pairs,
        are ``None``).
    """
    from ..evaluation.analysis import EmbeddingCache
    from ..evaluation.probe import probe_transformations

    plotting_classes()  # without matplotlib: one line before anything is read or loaded
    run_dir = Path(run_dir)
    output_dir = Path(output_dir) if output_dir is not None else run_dir / "report"
    inputs = _read_inputs(run_dir, options)
    with FolderLock(output_dir, "python -m hf_cse.report"):  # creates it: an unwritable folder fails before the model
        for action in recover_staged_publishes(output_dir):
            logger.warning("%s: an interrupted report was put right: %s.", output_dir, action)
        encoder = options.encoder.load(inputs.model)
        with staged_publish(output_dir, "the report") as staging:
            report = _start_report(run_dir, output_dir, inputs.model, encoder, options)
            training_lines, plots = training_section(inputs.state, staging)
            report.add(training_lines, plots=plots)
            # One cache for the STS sections and the probe: the STS table, alignment/uniformity and the Cont./Oppn.
            # splits share sentences.
            encode = EmbeddingCache(options.encoder.encode_function(encoder))
            _add_sts_sections(report, encode, inputs.sts_subsets, options)
            probe = probe_transformations(encode, inputs.probe)
            report.add(probe_section(probe, options.probe_tsv), probe=probe.to_dict())
            _add_negatives_section(report, encoder, inputs, options, staging)
            data = _write_report(report, staging)
    logger.info("Wrote %s", output_dir / "report.md")
    return data


# --------------------------------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------------------------------


def build_parser() -> OneLineErrorParser:
    """The argument parser of ``python -m hf_cse.report``."""
    parser = OneLineErrorParser(
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
        "--corpus",
        default=None,
        help="Corpus for the in-batch negative histogram: .txt (one sentence a line), .csv/.json/.jsonl with a text "
        "column, or gensim:lee.",
    )
    parser.add_argument("--output_dir", default=None, help="Output folder (default: RUN_DIR/report).")
    add_encoder_arguments(parser, model_default="the model saved in RUN_DIR (pass e.g. the base model to compare)")
    parser.add_argument(
        "--sickr_split", default="test", choices=STS_SPLITS["sickr"], help="SICK-R split (default: test)."
    )
    parser.add_argument(
        "--negatives_batch_size",
        type=NumberFlag(NumberRange(low=2, high=SENTENCE_LIMIT, integer=True)),  # a pair at least
        default=None,
        help="Batch size B of the in-batch negative histogram (default: the run's train_batch_size, else 64).",
    )
    parser.add_argument(
        "--num_negative_batches", type=NumberFlag(SENTENCES), default=8, help="Batches for the histogram (default: 8)."
    )
    parser.add_argument(
        "--median_score_range",
        type=NumberFlag(NumberRange(low=0, high=5, note="STS gold scores are 0 to 5")),
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
    parser.add_argument(
        "--seed", type=NumberFlag(SEED), default=0, help="Seed of the histogram's random batches (default: 0)."
    )
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the report; returns the contents of ``report.json``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # Check the cheap things before generate_report reads the inputs and loads the model (the numbers were checked as
    # the flags were parsed).
    check_directory(parser, "--sts_dir", args.sts_dir, hint=STS_DOWNLOAD_HINT)
    args.median_score_range = tuple(args.median_score_range)
    options = ReportOptions(  # every field but the encoder's options is the flag of the same name
        **{field.name: getattr(args, field.name) for field in fields(ReportOptions) if field.name != "encoder"},
        encoder=EncoderOptions.from_args(args),
    )
    report = generate_report(args.run_dir, args.output_dir, options)
    print(f"Wrote {Path(report['settings']['output_dir']) / 'report.md'}")
    return report


def console_main() -> None:
    """The command-line entry point: ``python -m hf_cse.report`` and the ``hf-cse-report`` console script."""
    console_script(main, build_parser().prog)
