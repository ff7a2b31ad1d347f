"""STS scores of a saved checkpoint folder, for its model card (``python -m hf_cse.push --sts_dir``): the 7 STS
tasks with the folder's own pooler, alignment/uniformity on STS-B test, and a Matryoshka run's per-dimension test
scores saved beside its training's dev scores."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..atomic_files import write_json_atomic
from ..run_files import MATRYOSHKA_RESULTS_FILE
from .analysis import ALIGNMENT_MIN_SCORE, EmbeddingCache
from .analysis import alignment_uniformity as measure_alignment_uniformity
from .matryoshka import evaluate_dimensions
from .sts_data import STS_TASKS, detect_sts_text, load_sts_task
from .sts_evaluator import evaluate_sts

logger = logging.getLogger(__name__)


def evaluate_run(
    run_dir: str | Path,
    sts_dir: str | Path,
    tasks: Sequence[str] | None = None,
    sickr_split: str = "test",
    batch_size: int = 128,
    device: str | None = None,
    alignment_uniformity: bool = True,
    sts_text: str | None = None,
    matryoshka_dims: Sequence[int] | None = None,
    show_progress_bar: bool = True,
) -> dict[str, Any]:
    """STS results of the checkpoint in ``run_dir``, in the ``python -m hf_cse.eval --output_json`` format.

    The checkpoint is encoded with its saved pooler (``hf_cse.SentenceEncoder``), each distinct sentence once.
    Alignment/uniformity (STS-B test) are added under ``"alignment_uniformity"`` when ``hf_cse.evaluation`` provides
    them; ``"text"`` says whether the STS text is raw or tokenized (detected unless ``sts_text`` is given). With
    ``matryoshka_dims``, the same tasks are scored for each prefix size from the same embeddings and saved as the
    test group of ``run_dir``'s ``matryoshka_sts.json`` (:func:`save_test_dimensions`).

    The encoding (minutes on a CPU) shows a progress bar on stderr unless ``show_progress_bar`` is False, as
    ``python -m hf_cse.eval`` does (:meth:`~hf_cse.modeling.encoder.SentenceEncoder.encode`: nested under another
    bar where stderr is no terminal, it is left out; ``HF_HUB_DISABLE_PROGRESS_BARS=1`` hides it).
    """
    from ..modeling.encoder import SentenceEncoder

    tasks = list(tasks or STS_TASKS)
    encoder = SentenceEncoder.from_pretrained(run_dir, device=device)
    # alignment/uniformity reuse the STS-B embeddings
    encode = EmbeddingCache(
        functools.partial(encoder.encode, batch_size=batch_size, show_progress_bar=show_progress_bar)
    )
    results = evaluate_sts(encode, tasks, sts_dir, sickr_split=sickr_split)
    results.settings.update(
        sts_dir=Path(sts_dir).name,  # a local path means nothing on the Hub
        pooler=encoder.model.pooling.pooler,
        max_seq_length=encoder.sentence_tokenizer.max_seq_length,
        tasks=list(results.tasks),
        batch_size=batch_size,
    )
    output = results.to_dict()
    output["text"] = sts_text or detect_sts_text(sts_dir)
    if alignment_uniformity and "stsb" in results.tasks:
        try:
            geometry = measure_alignment_uniformity(encode, load_sts_task("stsb", sts_dir, "test"))
        except ValueError as err:
            logger.warning("Alignment/uniformity skipped: %s", err)
        else:
            output["alignment_uniformity"] = {**geometry, "stsb_split": "test", "min_score": ALIGNMENT_MIN_SCORE}
    if matryoshka_dims:
        scored = evaluate_dimensions(
            encode,
            matryoshka_dims,
            test_sts_dir=sts_dir,
            test_tasks=tasks,
            sickr_split=sickr_split,
            text=output["text"],
        )
        save_test_dimensions(Path(run_dir), scored)
    logger.info("STS results of %s:\n%s", run_dir, results.format_table())
    return output


def save_test_dimensions(run_dir: Path, scored: dict[str, Any]) -> Path:
    """Write ``scored`` (:func:`~hf_cse.evaluation.matryoshka.evaluate_dimensions` of the test sets) into
    ``run_dir``'s ``matryoshka_sts.json``, atomically: its test group replaces the file's, and the file's other groups
    (training's dev scores) stay when they are of the same dimensions (else they describe another run and go)."""
    path = run_dir / MATRYOSHKA_RESULTS_FILE
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none yet, or unreadable: the test group alone
        saved = None
    kept = []
    if isinstance(saved, dict) and saved.get("dims") == scored["dims"]:
        kept = [group for group in saved.get("evaluations", []) if group.get("name") != "test"]
    return write_json_atomic(path, {"dims": scored["dims"], "evaluations": kept + scored["evaluations"]})
