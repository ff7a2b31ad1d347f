"""hf_cse in other training libraries. Each integration imports its library, an optional dependency: importing
``hf_cse`` imports none of them.

- :class:`CSELoss` (:mod:`hf_cse.integrations.sentence_transformers`): an hf_cse objective as a
  sentence-transformers loss, in ``SentenceTransformerTrainer`` and ``MatryoshkaLoss``.
"""

from .sentence_transformers import CSELoss, supported_objectives

__all__ = ["CSELoss", "supported_objectives"]
