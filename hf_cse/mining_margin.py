"""The default relative margin of hard-negative mining (:mod:`hf_cse.mining`), apart from that module's torch code:
``python -m hf_cse.mine --help`` shows it and does without torch (``tests/test_help_imports.py``)."""

DEFAULT_MARGIN = 0.95
"""The relative margin of NV-Retriever-v1's TopK-PercPos: candidates scored above 95% of the positive's score are
skipped."""
