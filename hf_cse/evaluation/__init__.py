"""STS evaluation (data loaders, the ``sts_correlation`` evaluate metric, the evaluator) and the papers' analyses.

Analyses: alignment and uniformity (:mod:`.analysis`), in-batch negative similarities (:mod:`.analysis`), OssCSE's
surface-structure Cont./Oppn. splits (:mod:`.surface_structure`) and transformation probe (:mod:`.probe`).

Example:
    >>> from hf_cse.modeling.encoder import SentenceEncoder
    >>> from hf_cse.evaluation import evaluate_sts
    >>> encoder = SentenceEncoder.from_pretrained("path/to/checkpoint")
    >>> results = evaluate_sts(encoder.encode, sts_dir="path/to/sts")  # all 7 tasks
    >>> results.summary()  # {"sts12": ..., ..., "sickr": ..., "avg": ...}, Spearman x 100
"""

from .analysis import (
    ALIGNMENT_MIN_SCORE,
    EmbeddingCache,
    SimilarityHistogram,
    alignment,
    alignment_uniformity,
    in_batch_negative_similarities,
    positive_pairs,
    similarity_histogram,
    uniformity,
)
from .evaluators import (
    Evaluator,
    InformationRetrievalEvaluator,
    ScoredPairsEvaluator,
    SequentialEvaluator,
    STSEvaluator,
)
from .metric import STS_METRIC_PATH, load_sts_metric, sts_correlation
from .probe import (
    DEFAULT_PROBE_TSV,
    TRANSFORMATIONS,
    ProbeResults,
    ProbeSet,
    TransformationStats,
    load_probe_tsv,
    probe_transformations,
)
from .sts_data import (
    STS_HUB_IDS,
    STS_SPLITS,
    STS_SUBSETS,
    STS_TASKS,
    STSSubset,
    detect_sts_text,
    find_sick_dir,
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
    align_columns,
    encode_unique,
    evaluate_sts,
    evaluate_sts_dev,
    load_sts_dev_sets,
    pair_cosine,
    score_sts_dev,
    score_subsets,
)
from .surface_structure import (
    DEFAULT_MEDIAN_SCORE_RANGE,
    MER_FUNCTIONS,
    SURFACE_STRUCTURE_TASKS,
    SurfaceStructureResults,
    SurfaceStructureScore,
    SurfaceStructureSplit,
    evaluate_surface_structure,
    load_surface_structure_datasets,
    split_surface_structure,
)
from .transfer import (
    TRANSFER_L2_GRID,
    TRANSFER_TASKS,
    TransferSplit,
    evaluate_transfer,
    load_transfer_tasks,
    score_transfer,
)

__all__ = [
    "ALIGNMENT_MIN_SCORE",
    "DEFAULT_MEDIAN_SCORE_RANGE",
    "DEFAULT_PROBE_TSV",
    "MER_FUNCTIONS",
    "STS_DEV_SPLITS",
    "STS_HUB_IDS",
    "STS_METRIC_PATH",
    "STS_SPLITS",
    "STS_SUBSETS",
    "STS_TASKS",
    "SURFACE_STRUCTURE_TASKS",
    "TRANSFER_L2_GRID",
    "TRANSFER_TASKS",
    "TRANSFORMATIONS",
    "EmbeddingCache",
    "EncodeFn",
    "Evaluator",
    "InformationRetrievalEvaluator",
    "ProbeResults",
    "ProbeSet",
    "STSEvaluator",
    "ScoredPairsEvaluator",
    "SequentialEvaluator",
    "SimilarityHistogram",
    "STSDevSets",
    "STSResults",
    "STSSubset",
    "STSSubsetResult",
    "STSTaskResult",
    "SurfaceStructureResults",
    "SurfaceStructureScore",
    "SurfaceStructureSplit",
    "TransferSplit",
    "TransformationStats",
    "alignment",
    "align_columns",
    "alignment_uniformity",
    "detect_sts_text",
    "encode_unique",
    "evaluate_sts",
    "evaluate_sts_dev",
    "evaluate_surface_structure",
    "evaluate_transfer",
    "find_sick_dir",
    "in_batch_negative_similarities",
    "load_probe_tsv",
    "load_sts_dev_sets",
    "load_sts_metric",
    "load_sts_task",
    "positive_pairs",
    "load_surface_structure_datasets",
    "load_transfer_tasks",
    "normalize_task_name",
    "pair_cosine",
    "probe_transformations",
    "score_sts_dev",
    "score_subsets",
    "score_transfer",
    "similarity_histogram",
    "split_surface_structure",
    "sts_correlation",
    "uniformity",
]
