"""Match error rate (MER, Morris et al. 2004) between two sentences, on words.

The paraphrase augmentation filters back-translations by it (OssCSE, Appendix A) and the evaluation measures surface
similarity with it (the surface-structure split, the probes); both import it from here so that they compare words in
exactly the same way.
"""

from __future__ import annotations

import unicodedata

import jiwer


def _strip_punctuation(word: str) -> str:
    """``word`` without leading and trailing Unicode punctuation: ``"off,"`` -> ``"off"``, ``"„Bad“"`` -> ``"Bad"``."""
    start, end = 0, len(word)
    while start < end and unicodedata.category(word[start]).startswith("P"):
        start += 1
    while end > start and unicodedata.category(word[end - 1]).startswith("P"):
        end -= 1
    return word[start:end]


def mer_words(text: str) -> list[str]:
    """The words :func:`match_error_rate` compares: the normalization of ``text`` before the alignment.

    1. Unicode NFKC (full-width letters, ligatures and compatibility spaces become their plain forms);
    2. lower-casing, because translation models often change case ("breaking bad" -> "Breaking Bad") and case is
       not surface *structure*;
    3. splitting on whitespace;
    4. stripping punctuation at both ends of each word, and dropping words that were only punctuation: ``"off,"``
       and ``"off"`` are the same word, and a Moses-tokenized ``"claims ."`` equals ``"claims."``. Punctuation
       inside a word stays (``"spin-off"`` is one word, different from ``"spin off"``; ``"don't"`` stays).

    Example: ``mer_words("Breaking Bad spin-off, report claims.")`` is
    ``["breaking", "bad", "spin-off", "report", "claims"]``.
    """
    words = (_strip_punctuation(word) for word in unicodedata.normalize("NFKC", text).lower().split())
    return [word for word in words if word]


def match_error_rate(reference: str, hypothesis: str) -> float:
    """Match error rate (Morris et al., 2004) of ``hypothesis`` against ``reference``, on words, in [0, 1].

    MER = (S + D + I) / (S + D + I + C), with S, D, I, C the substituted, deleted, inserted and correct words of a
    minimum edit-distance word alignment (OssCSE, Eq. 1), computed by ``jiwer.mer`` on the words of
    :func:`mer_words` (lower-cased, edge punctuation stripped). 0 means the same words in the same order, 1 no word
    in common. When a side has no word left after normalization the MER is 0 if both are empty and 1 otherwise
    (``jiwer`` rejects an empty reference).

    Example: one substitution among four words, ``match_error_rate("the cat sat down", "the dog sat down")``, is
    1 / (1 + 3) = 0.25.
    """
    return plain_match_error_rate(" ".join(mer_words(reference)), " ".join(mer_words(hypothesis)))


def plain_match_error_rate(reference: str, hypothesis: str) -> float:
    """``jiwer.mer`` on the text as it is (punctuation tokens count as words); 0 for two empty strings, 1 for one.

    The surface-structure split's ``mer="plain"`` (:mod:`hf_cse.evaluation.surface_structure`): the paper's apparent
    choice, kept next to :func:`match_error_rate` so the two variants differ only in the normalization.
    """
    if not reference.strip() or not hypothesis.strip():
        return 0.0 if reference.strip() == hypothesis.strip() else 1.0
    return float(jiwer.mer(reference, hypothesis))
