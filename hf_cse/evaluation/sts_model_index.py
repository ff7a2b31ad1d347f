"""How STS scores appear in a Hub ``model-index``: each task's display name, Hub data set and split, and the entries of
the STS dev scores (STS-B dev, SICK-R trial) that :class:`~hf_cse.evaluation.evaluators.STSEvaluator` reports and
the model card shows. Entries are ``huggingface_hub.EvalResult`` keyword dicts; the card builds the results."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..json_types import is_finite_number
from .sts_data import STS_HUB_IDS, STS_TASKS, TASK_LABELS

# STS tasks in the order papers report them: (display name, dataset id for the model-index). SICK-R's own splits are
# SICK's ("sick"); MTEB's Hub copy of it holds all 9,927 pairs (``sts_dataset``'s split "all").
STS_DISPLAY = {task: (TASK_LABELS[task], "sick" if task == "sickr" else STS_HUB_IDS[task]) for task in STS_TASKS}
STS_METRIC_NAME = "Spearman correlation x 100 of cosine similarities"
MTEB_SOURCE_NAME = "MTEB"
"""The ``source`` name of the MTEB entries ``python -m hf_cse.eval --mteb_tasks`` adds to a card's model-index, by
which ``python -m hf_cse.push`` finds them to keep."""


def sts_dataset(task: str, split: str) -> tuple[str, str, str]:
    """``(display name, dataset type, split)`` of a task for the model-index."""
    name, dataset_type = STS_DISPLAY[task]
    if task == "sickr" and split == "all":  # MTEB's SICK-R: all 9,927 pairs, its Hub copy's "test" split
        return name, STS_HUB_IDS["sickr"], "test"
    # STS-B's dev split is the Hub's "validation"; SICK keeps its own train / trial / test split.
    hub_split = {"dev": "validation"}.get(split, split) if task == "stsb" else split if task == "sickr" else "test"
    return name, dataset_type, hub_split


def sts_entry(
    task: str, split: str, value: float, text: str | None = None, split_in_name: bool = False, dim: int | None = None
) -> dict[str, Any]:
    """The model-index entry of one STS score (Spearman x 100 of cosine, rounded to 2 decimals; ``config`` ``all``
    for STS12-16), as ``EvalResult`` keywords, those without a value left out: ``text`` the STS text (raw or
    tokenized), ``split_in_name`` names the split after the dataset (``STS-B (dev)``), ``dim`` the embedding prefix
    scored."""
    name, dataset_type, hub_split = sts_dataset(task, split)
    entry = {
        "task_type": "sentence-similarity",
        "task_name": "Semantic Textual Similarity",
        "dataset_type": dataset_type,
        "dataset_name": f"{name} ({split})" if split_in_name else name,
        "dataset_split": hub_split,
        "dataset_config": text,
        "metric_type": "cosine_spearman",
        "metric_name": STS_METRIC_NAME if dim is None else f"{STS_METRIC_NAME}, first {dim} dimensions",
        "metric_config": "all" if task.startswith("sts1") else None,
        "metric_args": None if dim is None else {"truncate_dim": dim},
        "metric_value": round(float(value), 2),
    }
    return {key: value for key, value in entry.items() if value is not None}


def sts_dev_entries(metrics: Mapping[str, Any], prefix: str = "") -> list[dict[str, Any]]:
    """One :func:`sts_entry` per STS dev score in ``metrics`` (``{prefix}stsb_spearman``: STS-B dev,
    ``{prefix}sickr_spearman``: SICK-R trial)."""
    splits = {"stsb": "dev", "sickr": "trial"}
    scores = {task: metrics.get(f"{prefix}{task}_spearman") for task in splits}
    return [
        sts_entry(task, splits[task], value, split_in_name=True)
        for task, value in scores.items()
        if is_finite_number(value)
    ]
