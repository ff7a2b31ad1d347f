"""Morphology: the base form of a finite verb, which do-support needs ("went" -> "did not go"), from ``lemminflect``.

Both backends take the verb after "did not" / "does not" from :func:`base_form`, which is ``lemminflect``'s lemma of
the word as a verb: its lexicon (the irregular verbs, and spelling variants such as ``signalled``, ``burnt``) and, for
a word outside it, its suffix model. It replaced hf_cse's own suffix rules (an irregular table, undoubling, silent e),
which it beats on real text: on the 570 distinct finite verbs (VBD/VBZ, spaCy's tags) of gensim's Lee news corpus the
rules got 5 wrong (``signalled`` -> ``signall``, ``underscored`` -> ``underscor``, ``burnt``, ``bade``, ``overran``
unchanged) and ``lemminflect`` none; spaCy's own lemmatizer got 4 more wrong (``hoped`` -> ``hop``, ``staged`` ->
``stag``, ``cordoned`` -> ``cordone``), which is why the spaCy backend reads this function and not ``token.lemma_``.

``lemminflect`` is imported at the first call, not with hf_cse: importing it reads its tables (about a second) and,
where spaCy is installed, imports spaCy to register its ``Token._.lemma`` extension.

What lemminflect does not do is tell whether a word *is* a finite verb (it lemmatizes any word as the part of speech
it is given: ``buses`` -> ``bus``); that is a tagger's job, spaCy's in the spaCy backend and the rules'
(:mod:`.finite_verbs`) otherwise.
"""

from __future__ import annotations


def base_form(verb: str) -> str:
    """The base form of an English finite verb: ``likes`` -> ``like``, ``studied`` -> ``study``, ``went`` -> ``go``.

    ``lemminflect``'s first lemma of the word as a verb (``lay`` -> ``lie``, ``found`` -> ``find``). The input's case
    is ignored and the result is lower case. A word that is already a base form comes back unchanged.
    """
    from lemminflect import getLemma  # imported on first use (see the module docstring)

    word = verb.lower().replace("’", "'")
    lemmas = getLemma(word, upos="VERB")
    return lemmas[0] if lemmas else word
