"""MTEB (the ``mteb`` package, 2.x) for hf_cse checkpoints, with no code of the user's.

:class:`MTEBEncoder` is an ``mteb`` model: ``mteb.evaluate(MTEBEncoder.from_pretrained("out/run"), tasks)`` encodes
each task's texts with the checkpoint's :class:`~hf_cse.modeling.encoder.SentenceEncoder`, so with the pooler, the
prompt template (``mask``, ``prompt_last_token``) and the truncation length it was trained with, for every pooler
(sentence-transformers' files, which ``mteb`` can also read, exist only for the poolers sentence-transformers
expresses). ``mteb``'s per-task prompts are not added: hf_cse trains no per-task instruction. A model trained with
one instruction before its anchors (``PoolingConfig.instruction``, LLM2Vec's supervised stage) gets it before
``mteb``'s queries and encodes documents as in training (:meth:`SentenceEncoder.encode`'s ``prompt_name``); any
other model encodes queries and documents alike, as it was trained. ``truncate_dim`` scores the first ``d`` dimensions
(a Matryoshka model's prefixes); the model's metadata lists the dimensions it was trained with.

``python -m hf_cse.eval --mteb_tasks TASK ...`` runs named tasks through :func:`evaluate_mteb` (``mteb``'s registry,
or an ``AbsTask`` subclass of an ``--import_module`` module: ``mteb``'s custom-task route) and puts the scores in
its JSON and, for a local hf_cse checkpoint, in its card's ``model-index`` (:func:`add_to_card`).

``mteb`` is an optional dependency (``pip install "hf_cse[mteb]"``), imported only here.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from huggingface_hub import EvalResult, ModelCard

from ..atomic_files import write_text_atomic
from ..errors import UsageError, echo
from ..modeling.encoder import SentenceEncoder
from ..run_files import TRAINING_SUMMARY_FILE
from .sts_evaluator import plain_table
from .sts_model_index import MTEB_SOURCE_NAME
from .training_record import read_training_record

try:
    import mteb
    from mteb.abstasks.abstask import AbsTask
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ModelMeta, ScoringFunction
    from mteb.types import PromptType
except ImportError as err:  # the command says so in one line when --mteb_tasks is given
    raise UsageError(f'MTEB needs the mteb package ({err}): pip install "hf_cse[mteb]".') from err

logger = logging.getLogger(__name__)

MTEB_SCORE_SCALE = 100.0
"""hf_cse reports every score x 100 (as the STS tables and the card do); ``mteb``'s own scores are in [0, 1]."""


def trained_matryoshka_dims(model_name_or_path: str | os.PathLike) -> list[int] | None:
    """The ``matryoshka_dims`` a local hf_cse checkpoint was trained with (its ``hf_cse_training.json``), or
    ``None``: no record, or a run without them."""
    record = read_training_record(model_name_or_path)
    objective_config = record.get("objective_config") if isinstance(record, dict) else None
    dims = objective_config.get("matryoshka_dims") if isinstance(objective_config, dict) else None
    return list(dims) if dims else None


class MTEBEncoder(AbsEncoder):
    """An hf_cse :class:`~hf_cse.modeling.encoder.SentenceEncoder` as an ``mteb`` encoder (its ``EncoderProtocol``).

    Args:
        encoder: the loaded encoder; it pools, fills its prompt template and truncates as saved.
        model_name: the name results are filed under (``mteb``'s ``ModelMeta.name``), e.g. the checkpoint path.
        truncate_dim: keep the first ``truncate_dim`` dimensions of each embedding (1 to the embedding size);
            ``None`` (default): the whole embedding.
        matryoshka_dims: the prefix sizes the model was trained with (:func:`trained_matryoshka_dims`), listed in
            the metadata's ``embed_dim``; ``None`` (default): the embedding size alone.

    Similarity is cosine, as hf_cse trains and scores. The metadata's ``experiment_kwargs`` hold ``truncate_dim``,
    so ``mteb``'s result cache files a truncated evaluation apart from the whole embedding's.
    """

    def __init__(
        self,
        encoder: SentenceEncoder,
        model_name: str,
        truncate_dim: int | None = None,
        matryoshka_dims: Sequence[int] | None = None,
    ) -> None:
        size = encoder.model.config.hidden_size
        if truncate_dim is not None and not 1 <= truncate_dim <= size:
            raise UsageError(f"truncate_dim={echo(truncate_dim)}: use an integer in [1, {size}] (the embedding size).")
        self.model = encoder
        self.truncate_dim = truncate_dim
        self.mteb_model_meta = ModelMeta.create_empty(
            {
                "name": model_name,
                "embed_dim": list(matryoshka_dims) if matryoshka_dims else size,
                "max_tokens": encoder.sentence_tokenizer.max_seq_length,
                "similarity_fn_name": ScoringFunction.COSINE,
                "framework": ["PyTorch"],
                "use_instructions": False,
                "experiment_kwargs": None if truncate_dim is None else {"truncate_dim": truncate_dim},
            }
        )

    @classmethod
    def from_pretrained(
        cls, model_name_or_path: str | os.PathLike, truncate_dim: int | None = None, **encoder_kwargs: Any
    ) -> MTEBEncoder:
        """Load ``model_name_or_path`` (an hf_cse checkpoint or any encoder checkpoint) with
        :meth:`SentenceEncoder.from_pretrained` (``encoder_kwargs``: ``pooler``, ``max_seq_length``, ``device``,
        ...), its trained Matryoshka dimensions read from its record."""
        encoder = SentenceEncoder.from_pretrained(model_name_or_path, **encoder_kwargs)
        return cls(encoder, str(model_name_or_path), truncate_dim, trained_matryoshka_dims(model_name_or_path))

    def prompt_name(self, prompt_type: PromptType | None) -> str | None:
        """The :meth:`SentenceEncoder.encode` ``prompt_name`` of ``mteb``'s texts of ``prompt_type``: ``"query"`` or
        ``"document"`` for a model with an instruction (a task without query/document roles, e.g. STS: documents),
        ``None`` (the texts as they are) for any other."""
        if self.model.model.pooling.instruction is None:
            return None
        return "query" if prompt_type == PromptType.query else "document"

    def encode(
        self,
        inputs: Iterable[Mapping[str, Any]],
        *,
        task_metadata: Any,
        hf_split: str,
        hf_subset: str,
        prompt_type: PromptType | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """Embeddings ``[N, D]`` (float32; ``D`` = ``truncate_dim`` or the embedding size) of the ``N`` texts of
        ``mteb``'s batches (``batch["text"]``), in order; ``kwargs``: ``mteb``'s ``batch_size`` (sentences per
        forward pass) and ``show_progress_bar``."""
        texts = [text for batch in inputs for text in batch["text"]]
        embeddings = self.model.encode(
            texts,
            batch_size=kwargs.get("batch_size", 128),
            show_progress_bar=kwargs.get("show_progress_bar", False),
            prompt_name=self.prompt_name(prompt_type),
        )
        return embeddings[:, : self.truncate_dim].to(torch.float32).numpy()  # truncate_dim None: the whole embedding


def _custom_tasks() -> dict[str, type[AbsTask]]:
    """The concrete ``AbsTask`` subclasses defined outside ``mteb`` (an ``--import_module`` module's), by name."""
    found: dict[str, type[AbsTask]] = {}
    pending = list(AbsTask.__subclasses__())
    while pending:
        task = pending.pop()
        pending += task.__subclasses__()
        metadata = getattr(task, "metadata", None)
        if not task.__module__.startswith("mteb.") and metadata is not None:
            found[metadata.name] = task
    return found


def resolve_mteb_tasks(names: Sequence[str]) -> list[AbsTask]:
    """The tasks ``names`` name: ``mteb``'s own (``mteb.get_task``), else a custom ``AbsTask`` subclass that an
    imported module defines (its ``metadata.name``).

    Raises:
        UsageError: a name neither knows, with the closest names.
    """
    custom = _custom_tasks()
    tasks = []
    for name in names:
        if name in custom:
            tasks.append(custom[name]())
            continue
        try:
            tasks.append(mteb.get_task(name))
        except KeyError:
            known = [task.metadata.name for task in mteb.get_tasks()] + list(custom)
            near = difflib.get_close_matches(name, known, n=3)
            hint = f"did you mean {', '.join(near)}? " if near else ""
            raise UsageError(
                f"--mteb_tasks {echo(name)}: no MTEB task of that name; {hint}mteb.get_tasks() lists mteb's tasks, "
                "and a task of your own is an AbsTask subclass in an --import_module module."
            ) from None
    return tasks


def evaluate_mteb(
    encoders: Mapping[int | None, MTEBEncoder],
    tasks: Sequence[AbsTask],
    batch_size: int = 128,
    show_progress_bar: bool = True,
) -> list[dict[str, Any]]:
    """Run ``tasks`` for each encoder of ``encoders`` (``{truncate_dim: encoder}``; ``None``: the whole embedding),
    with no result cache (nothing written under ``~/.cache/mteb``). Each dimension encodes the texts again: a
    retrieval corpus's embeddings are not held in memory between them.

    Returns:
        One record per task, split, subset and dimension: ``{"task", "type", "hub_task_type", "dataset",
        "revision", "split", "subset", "metric", "score" (x 100), "truncate_dim", "scores" (every metric mteb
        computed, as it reports them)}``.
    """
    records = []
    by_name = {task.metadata.name: task for task in tasks}
    for dim, encoder in encoders.items():
        result = mteb.evaluate(
            encoder,
            list(tasks),
            cache=None,
            encode_kwargs={"batch_size": batch_size, "show_progress_bar": show_progress_bar},
            show_progress_bar=show_progress_bar,
        )
        for task_result in result.task_results:
            metadata = by_name[task_result.task_name].metadata
            for split, subsets in task_result.scores.items():
                for scores in subsets:
                    records.append(
                        {
                            "task": metadata.name,
                            "type": metadata.type,
                            # mteb's own map from its task types to the Hub's (what its Hub export uses)
                            "hub_task_type": metadata._hf_task_type()[0],
                            "dataset": metadata.dataset["path"],
                            "revision": metadata.dataset["revision"],
                            "split": split,
                            "subset": scores.get("hf_subset", "default"),
                            "metric": metadata.main_score,
                            "score": MTEB_SCORE_SCALE * float(scores["main_score"]),
                            "truncate_dim": dim,
                            "scores": scores,
                        }
                    )
    return records


def format_mteb_table(records: Sequence[Mapping[str, Any]]) -> str:
    """Plain-text table of :func:`evaluate_mteb`'s records: task, split, subset, dimension, metric, score x 100."""
    rows = [
        (r["task"], r["split"], r["subset"], str(r["truncate_dim"] or "all"), r["metric"], f"{r['score']:.2f}")
        for r in records
    ]
    return plain_table([("MTEB task", "split", "subset", "dim", "metric", "score"), *rows], text_columns=5)


def model_index_entries(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``model-index`` entries (``huggingface_hub.EvalResult`` keywords) of :func:`evaluate_mteb`'s records: the
    Hub task type ``mteb`` maps the task's type to, the task's data set, split and subset (as ``config``), its main
    metric x 100 (a truncated embedding's with ``metric_args`` ``truncate_dim: d``, as the card's Matryoshka
    entries), and MTEB as the source."""
    return [
        {
            "task_type": record["hub_task_type"],
            "task_name": record["type"],
            "dataset_type": record["dataset"],
            "dataset_name": f"MTEB {record['task']} ({record['subset']})",
            "dataset_config": record["subset"],
            "dataset_split": record["split"],
            "dataset_revision": record["revision"],
            "metric_type": record["metric"],
            "metric_name": f"{record['metric']} x 100" + (f", first {dim} dimensions" if dim else ""),
            "metric_args": {"truncate_dim": dim} if dim else None,
            "metric_value": round(record["score"], 2),
            "source_name": MTEB_SOURCE_NAME,
            "source_url": "https://github.com/embeddings-benchmark/mteb",
        }
        for record in records
        for dim in [record["truncate_dim"]]
    ]


def _entry_key(result: EvalResult) -> tuple:
    """What one model-index entry scores: a newer score of the same key replaces it."""
    return (
        result.dataset_type,
        result.dataset_config,
        result.dataset_split,
        result.metric_type,
        json.dumps(result.metric_args, sort_keys=True),
    )


def add_to_card(model_dir: str | os.PathLike, entries: Sequence[Mapping[str, Any]]) -> Path | None:
    """Add ``entries`` (:func:`model_index_entries`) to the ``model-index`` of the card ``model_dir/README.md``
    beside the STS entries, replacing an entry of the same data set, subset, split, metric and ``metric_args``;
    the rest of the card is kept. Returns the card's path, or ``None`` when ``model_dir`` holds no hf_cse card (no
    ``README.md`` beside ``hf_cse_training.json``: another model's card is not hf_cse's to change).

    The card is rewritten atomically, with ``huggingface_hub.ModelCard`` (which parses and dumps its YAML front
    matter). ``python -m hf_cse.push`` renders the card anew from the run's record and keeps these entries (found
    by their source, :data:`~hf_cse.evaluation.sts_model_index.MTEB_SOURCE_NAME`).
    """
    card_path = Path(model_dir) / "README.md"
    if not card_path.is_file() or not (Path(model_dir) / TRAINING_SUMMARY_FILE).is_file():
        return None
    card = ModelCard.load(card_path)
    new = [EvalResult(**entry) for entry in entries]
    replaced = {_entry_key(result) for result in new}
    kept = [result for result in card.data.eval_results or [] if _entry_key(result) not in replaced]
    card.data.eval_results = kept + new
    card.data.model_name = card.data.model_name or Path(model_dir).resolve().name
    return write_text_atomic(card_path, str(card))
