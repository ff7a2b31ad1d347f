"""STS evaluation: data loaders, the ``sts_correlation`` evaluate metric and the evaluator.

Example:
    >>> from hf_cse.encoder import SentenceEncoder
    >>> from hf_cse.evaluation import evaluate_sts
    >>> encoder = SentenceEncoder.from_pretrained("path/to/checkpoint")
    >>> results = evaluate_sts(encoder.encode, sts_dir="path/to/sts")  # all 7 tasks
    >>> results.summary()  # {"sts12": ..., ..., "sickr": ..., "avg": ...}, Spearman x 100
"""

from .metric import STS_METRIC_PATH, load_sts_metric, sts_correlation
from .sts_data import (
    STS_HUB_IDS,
    STS_SPLITS,
    STS_SUBSETS,
    STS_TASKS,
    STSSubset,
    load_sts_task,
    normalize_task_name,
)
from .sts_evaluator import (
    STS_DEV_SPLITS,
    EncodeFn,
    STSDevSets,
    STSResults,
    STSSubsetResult,
    STSTaskResult,
    encode_unique,
    evaluate_sts,
    evaluate_sts_dev,
    load_sts_dev_sets,
    pair_cosine,
    score_sts_dev,
    score_subsets,
)

__all__ = [
    "STS_DEV_SPLITS",
    "STS_HUB_IDS",
    "STS_METRIC_PATH",
    "STS_SPLITS",
    "STS_SUBSETS",
    "STS_TASKS",
    "EncodeFn",
    "STSDevSets",
    "STSResults",
    "STSSubset",
    "STSSubsetResult",
    "STSTaskResult",
    "encode_unique",
    "evaluate_sts",
    "evaluate_sts_dev",
    "load_sts_dev_sets",
    "load_sts_metric",
    "load_sts_task",
    "normalize_task_name",
    "pair_cosine",
    "score_sts_dev",
    "score_subsets",
    "sts_correlation",
]
