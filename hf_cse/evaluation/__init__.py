"""STS evaluation (data loaders, the ``sts_correlation`` evaluate metric, the evaluator) and the papers' analyses.

Analyses: alignment and uniformity (:mod:`.analysis`), in-batch negative similarities (:mod:`.analysis`), OssCSE's
surface-structure Cont./Oppn. splits (:mod:`.surface_structure`) and transformation probe (:mod:`.probe`).

The names below are imported from their submodules on first use (PEP 562 ``__getattr__``, as ``hf_cse``'s own): most
of those import torch (seconds of CPU); every ``hf_cse.evaluation.*`` import runs this package first, and a command's
``--help``, which reads settings of :mod:`.options` and :mod:`.sts_data`, needs none of it
(``tests/test_help_imports.py``).

Example:
    >>> from hf_cse.modeling.encoder import SentenceEncoder
    >>> from hf_cse.evaluation import evaluate_sts
    >>> encoder = SentenceEncoder.from_pretrained("path/to/checkpoint")
    >>> results = evaluate_sts(encoder.encode, sts_dir="path/to/sts")  # all 7 tasks
    >>> results.summary()  # {"sts12": ..., ..., "sickr": ..., "avg": ...}, Spearman x 100
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_attributes, type_checking_exports

if TYPE_CHECKING:
    from .analysis import EmbeddingCache as EmbeddingCache
    from .analysis import SimilarityHistogram as SimilarityHistogram
    from .analysis import alignment as alignment
    from .analysis import alignment_uniformity as alignment_uniformity
    from .analysis import in_batch_negative_similarities as in_batch_negative_similarities
    from .analysis import positive_pairs as positive_pairs
    from .analysis import similarity_histogram as similarity_histogram
    from .analysis import uniformity as uniformity
    from .evaluators import Evaluator as Evaluator
    from .evaluators import InformationRetrievalEvaluator as InformationRetrievalEvaluator
    from .evaluators import ScoredPairsEvaluator as ScoredPairsEvaluator
    from .evaluators import SequentialEvaluator as SequentialEvaluator
    from .evaluators import STSEvaluator as STSEvaluator
    from .metric import STS_METRIC_PATH as STS_METRIC_PATH
    from .metric import load_sts_metric as load_sts_metric
    from .metric import sts_correlation as sts_correlation
    from .options import ALIGNMENT_MIN_SCORE as ALIGNMENT_MIN_SCORE
    from .options import DEFAULT_MEDIAN_SCORE_RANGE as DEFAULT_MEDIAN_SCORE_RANGE
    from .options import DEFAULT_PROBE_TSV as DEFAULT_PROBE_TSV
    from .options import MER_FUNCTIONS as MER_FUNCTIONS
    from .options import TRANSFER_TASKS as TRANSFER_TASKS
    from .probe import TRANSFORMATIONS as TRANSFORMATIONS
    from .probe import ProbeResults as ProbeResults
    from .probe import ProbeSet as ProbeSet
    from .probe import TransformationStats as TransformationStats
    from .probe import load_probe_tsv as load_probe_tsv
    from .probe import probe_transformations as probe_transformations
    from .sts_data import STS_HUB_IDS as STS_HUB_IDS
    from .sts_data import STS_SPLITS as STS_SPLITS
    from .sts_data import STS_SUBSETS as STS_SUBSETS
    from .sts_data import STS_TASKS as STS_TASKS
    from .sts_data import STSSubset as STSSubset
    from .sts_data import detect_sts_text as detect_sts_text
    from .sts_data import find_sick_dir as find_sick_dir
    from .sts_data import load_sts_task as load_sts_task
    from .sts_data import normalize_task_name as normalize_task_name
    from .sts_evaluator import STS_DEV_SPLITS as STS_DEV_SPLITS
    from .sts_evaluator import EncodeFn as EncodeFn
    from .sts_evaluator import STSDevSets as STSDevSets
    from .sts_evaluator import STSResults as STSResults
    from .sts_evaluator import STSSubsetResult as STSSubsetResult
    from .sts_evaluator import STSTaskResult as STSTaskResult
    from .sts_evaluator import encode_unique as encode_unique
    from .sts_evaluator import evaluate_sts as evaluate_sts
    from .sts_evaluator import evaluate_sts_dev as evaluate_sts_dev
    from .sts_evaluator import load_sts_dev_sets as load_sts_dev_sets
    from .sts_evaluator import pair_cosine as pair_cosine
    from .sts_evaluator import plain_table as plain_table
    from .sts_evaluator import score_sts_dev as score_sts_dev
    from .sts_evaluator import score_subsets as score_subsets
    from .surface_structure import SURFACE_STRUCTURE_TASKS as SURFACE_STRUCTURE_TASKS
    from .surface_structure import SurfaceStructureResults as SurfaceStructureResults
    from .surface_structure import SurfaceStructureScore as SurfaceStructureScore
    from .surface_structure import SurfaceStructureSplit as SurfaceStructureSplit
    from .surface_structure import evaluate_surface_structure as evaluate_surface_structure
    from .surface_structure import load_surface_structure_datasets as load_surface_structure_datasets
    from .surface_structure import split_surface_structure as split_surface_structure
    from .transfer import TRANSFER_L2_GRID as TRANSFER_L2_GRID
    from .transfer import TransferSplit as TransferSplit
    from .transfer import evaluate_transfer as evaluate_transfer
    from .transfer import load_transfer_tasks as load_transfer_tasks
    from .transfer import score_transfer as score_transfer

# The public names are the imports above, read from this file; each is imported from its submodule on first use.
_EXPORTS = type_checking_exports(__file__)
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
