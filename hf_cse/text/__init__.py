"""Text handling shared by training, augmentation and evaluation: tokenization of sentences for the model
(:mod:`~hf_cse.text.tokenization`) and the match error rate between sentences (:mod:`~hf_cse.text.metrics`)."""

from .metrics import match_error_rate, mer_words, plain_match_error_rate
from .tokenization import SentenceTokenizer

__all__ = ["SentenceTokenizer", "match_error_rate", "mer_words", "plain_match_error_rate"]
