"""Text handling shared by augmentation and evaluation, knowing nothing of the model: the match error rate between
sentences (:mod:`~hf_cse.text.metrics`). Tokenizing sentences for the model is
:mod:`hf_cse.modeling.tokenization`."""

from .metrics import match_error_rate, mer_words, plain_match_error_rate

__all__ = ["match_error_rate", "mer_words", "plain_match_error_rate"]
