"""The analyses' defaults and valid values that the commands' ``--help`` shows, apart from the code that uses them.

That code (:mod:`.analysis`, :mod:`.transfer`, :mod:`.surface_structure`, :mod:`.probe`) imports torch, seconds of
CPU that a ``--help`` does without (``tests/test_help_imports.py``); each name is defined here once, and imported
from here by that code and by the parsers.
"""

from __future__ import annotations

from pathlib import Path

from ..text import match_error_rate, plain_match_error_rate

#: Default gold-score threshold (inclusive) of the positive pairs used for alignment, on STS's 0-5 scale.
ALIGNMENT_MIN_SCORE: float = 4.0

#: Task names accepted by :func:`~hf_cse.evaluation.transfer.evaluate_transfer`, in SentEval's reporting order.
TRANSFER_TASKS: tuple[str, ...] = ("mr", "cr", "subj", "mpqa", "sst2", "trec", "mrpc")

#: OssCSE's range of median gold scores (inclusive) of the datasets its Cont./Oppn. analysis keeps.
DEFAULT_MEDIAN_SCORE_RANGE: tuple[float, float] = (2.0, 3.5)

#: MER functions by name: ``normalized`` (words only, lower-cased) and ``plain`` (jiwer on the raw text).
MER_FUNCTIONS = {"normalized": match_error_rate, "plain": plain_match_error_rate}

#: The probe file shipped with hf_cse: 30 sentences, each with all six transformations.
DEFAULT_PROBE_TSV: Path = Path(__file__).resolve().parent / "data" / "probe.tsv"
