"""The registered parts the registry-wide suite (``tests/every_part/``) parametrizes its checks over, read from the
registries at collection time: a part registered later is checked by every one of them."""

from __future__ import annotations

from hf_cse.registry import OBJECTIVES

SENTENCE_OBJECTIVES = sorted(name for name in OBJECTIVES if OBJECTIVES[name].num_positive_views >= 1)
"""The objectives over two views' sentence embeddings: all but MNTP (``num_positive_views`` 0, a loss over the LM
head's logits of masked tokens), whose checks tests/test_mntp.py makes."""
