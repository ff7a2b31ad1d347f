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


def sts_dev_entries(metrics: Mapping[str, Any], prefix: str = "") -> list[dict[str, Any]]:
    """One ``sentence-similarity`` entry per STS dev score in ``metrics`` (``{prefix}stsb_spearman``: STS-B dev,
    ``{prefix}sickr_spearman``: SICK-R trial; metric ``cosine_spearman`` x 100, rounded to 2 decimals), as
    ``EvalResult`` keywords."""
    entries = []
    for task, split in (("stsb", "dev"), ("sickr", "trial")):
        value = metrics.get(f"{prefix}{task}_spearman")
        if is_finite_number(value):
            name, dataset_type, hub_split = sts_dataset(task, split)
            entries.append(
                {
                    "task_type": "sentence-similarity",
                    "task_name": "Semantic Textual Similarity",
                    "dataset_type": dataset_type,
                    "dataset_name": f"{name} ({split})",
                    "dataset_split": hub_split,
                    "metric_type": "cosine_spearman",
                    "metric_name": STS_METRIC_NAME,
                    "metric_value": round(float(value), 2),
                }
            )
    return entries
