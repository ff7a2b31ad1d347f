"""Rules backend, one word at a time: is this word of the main clause its finite verb, and of which kind?

:func:`verb_kind` looks at the word, its neighbours and the word before it that could be its subject; the clause scan
of :mod:`.rules` calls it from left to right. Every function takes the sentence's words (``words``), their lower-case
forms (``lower``) and indices into them.

Why not a library. Telling the finite verb of a main clause from a noun or a participle is a tagger's and parser's
job, and spaCy does it: the spaCy backend (:mod:`.spacy_backend`) is that, and ``backend="auto"`` prefers it. This
module is for the installs without it: spaCy is in the ``negation`` extra, not in hf_cse's requirements, because its
English pipelines are not on PyPI under spaCy's names (``en_core_web_sm`` installs from GitHub releases; PyPI has a
third party's re-upload) and they add a model to every install. ``lemminflect``, which gives the base form
(:mod:`.morphology`), has no tagger: it lemmatizes any word as whatever part of speech it is told (``buses`` is a
noun and a verb to it). ``tests/test_negation.py`` shows the rules negating such a sentence with spaCy
unimportable.
"""

from __future__ import annotations

import re

from .lexicon import (
    ADJECTIVES,
    ARTICLES,
    BE_FINITE,
    CLOSED_CLASS,
    CLOSERS,
    COORDINATORS,
    DO_FINITE,
    HAVE_FINITE,
    IRREGULAR_PLURALS,
    MODALS,
    NEGATORS,
    NOT_VERBS_ED,
    NOT_VERBS_S,
    NUMBERS,
    OBJECT_DETERMINERS,
    OBJECT_PRONOUNS,
    PARTICIPLE_TO_BASE,
    PAST_EQUALS_BASE,
    PAST_TO_BASE,
    PLURAL_DETERMINERS,
    PLURAL_PRONOUNS,
    PREPOSITIONS,
    QUOTES,
    SINGULAR_DETERMINERS,
    SINGULAR_PRONOUNS,
    SUBJECT_PRONOUNS,
    THAT_VERBS,
    is_adverb,
    is_negated,
    plural_shaped,
)

_CONTRACTION_KINDS = {"s": "be", "re": "be", "m": "be", "ve": "have", "d": "have", "ll": "modal"}
_OBJECT_STARTS = OBJECT_DETERMINERS | OBJECT_PRONOUNS  # words that open a verb's object
_IRREGULAR_FORMS = PAST_TO_BASE.keys() | PARTICIPLE_TO_BASE.keys()  # irregular past tenses and participles


def nominal(lower: list[str], words: list[str], index: int) -> bool:
    """A word that can end a noun phrase (a subject): noun, proper noun, pronoun, number, closing bracket."""
    low, word = lower[index], words[index]
    if word in CLOSERS or word in QUOTES or word in {"”", "’"}:
        return True
    if low in SUBJECT_PRONOUNS or low in {"who", "which"}:
        return True
    if index > 0 and word[:1].isupper():
        return True  # a name, even when it spells a closed-class word ("WILL said", "May Smith")
    if re.fullmatch(r"\d+(-\w+)+", low) or low.endswith(("-old", "-based", "-born")):
        return False  # a compound adjective: "a 60-year-old retired sergeant"
    if not word[:1].isalnum() or low in CLOSED_CLASS or is_adverb(low):
        return False
    return True


def verb_kind(i: int, words: list[str], lower: list[str], previous: int | None, start: int) -> str | None:
    """The kind of finite verb at ``i`` ("be", "have", "do", "modal", "VBD", "VBZ", "VBP"), "stop", or None.

    "stop" means the sentence must be declined (already negated, or a verb whose tense or role cannot be told);
    None that the word is no finite verb and the scan goes on. ``previous`` is the index of the previous word at the
    top level of the main clause (None at its start), ``start`` the index where the main clause starts.
    """
    word, low = words[i], lower[i]
    if is_negated(low) and previous is not None:
        return "stop"  # already negated: never double-negate
    contraction = re.fullmatch(r"[a-z]+(['’](s|re|m|ve|d|ll))", low)
    if contraction and low[: contraction.start(1)] in SUBJECT_PRONOUNS | {"who", "what", "i"}:
        return _CONTRACTION_KINDS[contraction.group(2)]
    if word != low and previous is not None:
        return None  # verbs are lower case inside a sentence; a capital is a name ("Will", "May", "Said")
    prev_low = lower[previous] if previous is not None else ""
    if low in BE_FINITE | HAVE_FINITE | MODALS | DO_FINITE:
        return _auxiliary_kind(low, prev_low)
    if previous is None or not low.isalpha():
        return None
    if low in CLOSED_CLASS and not (low == "like" and prev_low in SUBJECT_PRONOUNS):
        return None
    subj = _subject_before(lower, previous)
    if subj is None:
        return "stop"
    if lower[subj] in BE_FINITE | HAVE_FINITE | {"been", "being", "be", "get", "got", "to"}:
        return None  # a participle or an infinitive, not a finite verb
    nxt = lower[i + 1] if i + 1 < len(lower) else ""
    if words[subj] == ",":
        return _after_appositive(low, nxt)
    if not nominal(lower, words, subj):
        return None
    if low in PAST_EQUALS_BASE:
        return "stop"  # "put", "cut", "read": past or present cannot be told apart
    if low in PAST_TO_BASE or (low.endswith("ed") and len(low) > 4 and low not in NOT_VERBS_ED):
        return None if nxt == "by" else "VBD"  # "a film directed by" is a participle
    plain = _after_plain_subject(words, lower, start, subj, i)
    if plain is not None:
        return plain
    return _present_tense_kind(words, lower, subj, i)


def _auxiliary_kind(low: str, prev_low: str) -> str | None:
    """The kind of a finite form of "be", "have", "do" or a modal; None for a modal that is a noun."""
    if low in BE_FINITE:
        return "be"
    if low in HAVE_FINITE:
        return "have"
    if low in MODALS:
        return None if prev_low in ARTICLES else "modal"  # "the will", "a can"
    return "do"


def _subject_before(lower: list[str], previous: int) -> int | None:
    """The word that could be the subject of a verb after ``previous``, skipping adverbs back ("He also founded", "it
    later became"); None when a negation comes first."""
    subj = previous
    while subj > 0 and is_adverb(lower[subj]):
        if is_negated(lower[subj]):
            return None
        subj -= 1
    return None if lower[subj] in NEGATORS else subj


def _after_appositive(low: str, nxt: str) -> str | None:
    """The kind of the word ``low`` right after a comma, followed by ``nxt``.

    After an appositive ("Smith, a lawyer, said that ...") only a verb with its object right after it is surely
    finite; anything else might be a participle ("His works, published in 1990, ..."). Scanning on past it could land
    on a subordinate clause's verb, so a verb-shaped word that is not surely finite stops the scan.
    """
    looks_verb = low in PAST_TO_BASE or (low.endswith("ed") and low not in NOT_VERBS_ED)
    if low in PAST_TO_BASE and low not in PARTICIPLE_TO_BASE:
        return "VBD"  # "went", "became" are never participles
    if looks_verb and (nxt in _OBJECT_STARTS or nxt == "that"):
        return "VBD" if low not in PAST_EQUALS_BASE else "stop"
    return "stop" if looks_verb else None


def _after_plain_subject(words: list[str], lower: list[str], start: int, subj: int, i: int) -> str | None:
    """The verb kind ("VBZ", "VBP"), "stop" or None (other rules decide) of the word ``i`` after a plain subject.

    Why: a plain subject ("My neighbor", "The small bakery", "Our parents") followed by a verb and a bare object
    ("repairs old bicycles", "grows tomatoes") gave the verb no sign of being one (no determiner, preposition or
    pronoun after it), so it was skipped as a noun and the scan took the object's plural noun for the verb: "My
    neighbor repairs old does not bicycle in his garage", or found nothing. A word that agrees with the subject
    is now its verb when the next word can only start an object: a plural noun, a common adjective, a
    participle-only form ("broken"), a name. Any other bare word after a singular subject's -s word is ambiguous
    ("the visitor holds talks" vs "the school buses carry children"), so the sentence is declined instead of
    scanned on.
    """
    number = _subject_number(words, lower, start, subj)
    if number is None or i + 1 >= len(words):
        return None
    low, nxt, then = lower[i], lower[i + 1], (lower[i + 2] if i + 2 < len(lower) else "")
    if number == "sg" and not plural_shaped(low):
        return None  # "The old mill makes": "mill" is a noun, the verb comes next
    if number == "pl" and (
        low.endswith(("s", "ing", "ed", "ly"))
        or len(low) <= 2
        or low in _IRREGULAR_FORMS | NUMBERS | ADJECTIVES | {"why", "how"}
    ):
        return None
    kind = "VBZ" if number == "sg" else "VBP"
    if number == "sg" and words[i + 1][:1].isupper() and words[i + 1][1:].islower() and nxt != "i":
        # "The film stars Tom Hanks". Not after a plural subject: "Several months earlier Zionist leader ..."
        return kind
    if words[i + 1] != nxt or not nxt.isalpha():
        return None
    if nxt in ADJECTIVES or (nxt in PARTICIPLE_TO_BASE.keys() - PAST_TO_BASE.keys() and then != "by"):
        return kind  # "sells fresh bread", "fixes broken radios"
    if plural_shaped(nxt):
        if number == "sg":
            return kind  # "grows tomatoes": after a plural noun subject "tomatoes" could not be the verb
        # After a plural subject the -s word may be the verb of a longer subject ("the sports car costs a lot"):
        # only a plural noun's usual followers make it the object ("grow vegetables in their garden").
        if not then[:1].isalnum() or then in PREPOSITIONS or then in COORDINATORS or is_adverb(then):
            return kind
        return None
    if number == "pl":
        # "The risks contribute to", "Most visitors arrive at"; with a modifier in the subject the word may be
        # part of it ("the main watersheds adjacent to").
        adjunct = nxt in PREPOSITIONS or nxt == "to" or is_adverb(nxt) or nxt.endswith("ing")
        return kind if adjunct and subj == start + 1 else None
    verb_next = (  # the next word may be the verb of a longer subject: "The school buses arrived", "... carry the"
        nxt in CLOSED_CLASS
        or is_adverb(nxt)
        or nxt.endswith(("ed", "ing"))
        or nxt in _IRREGULAR_FORMS
        or nxt in NUMBERS
        or then in _OBJECT_STARTS
        or then[:1].isdigit()
    )
    return None if verb_next else "stop"


def _subject_number(words: list[str], lower: list[str], start: int, subj: int) -> str | None:
    """The number ("sg", "pl") of a plain subject ``start..subj`` (see :func:`_after_plain_subject`), or None."""
    if subj <= start:
        return None
    first = lower[start]
    possessive = re.fullmatch(r"([^\W\d_]+)['’]s", first)
    if first not in OBJECT_DETERMINERS and not (
        possessive and possessive.group(1) not in SUBJECT_PRONOUNS | CLOSED_CLASS | {"let", "how"}
    ):
        return None  # "It's", "Let's" are no possessives
    for k in range(start + 1, subj + 1):
        low = lower[k]
        if (
            words[k] != low
            or not re.fullmatch(r"[a-z]+(-[a-z]+)*(['’]s)?", low)
            or low in CLOSED_CLASS | SUBJECT_PRONOUNS | NUMBERS
            or is_adverb(low)
        ):
            return None
    head = lower[subj]
    if head.endswith(("'s", "’s")) or head in ADJECTIVES:
        return None  # "My neighbor's dog", "The old farmers": the head noun comes later
    plural = first in PLURAL_DETERMINERS or head in IRREGULAR_PLURALS or plural_shaped(head)
    if plural and first in SINGULAR_DETERMINERS:
        return None
    return "pl" if plural else "sg"


def _present_tense_kind(words: list[str], lower: list[str], subj: int, i: int) -> str | None:
    """ "VBZ" or "VBP" when the word ``i`` agrees with the subject ``subj`` and what follows it can only follow a
    verb (an object, a preposition, an adverb, ...); None otherwise."""
    low, subj_low = lower[i], lower[subj]
    nxt = lower[i + 1] if i + 1 < len(lower) else ""
    after_verb = (
        nxt in _OBJECT_STARTS
        or nxt in PREPOSITIONS
        or nxt == "to"
        or (nxt == "that" and low in THAT_VERBS)  # "claims that"; but "plants that had been ..." is a noun
        or is_adverb(nxt)
        or nxt[:1].isdigit()
        or nxt in NUMBERS
        or nxt.endswith("ing")
        # after "he", "she", "it" a lower-case -s word is the verb even before a bare noun ("she studies law")
        or (subj_low in {"he", "she", "it"} and nxt.isalpha() and nxt == words[i + 1])
    )
    if (
        low.endswith("s")
        and not low.endswith(("ss", "us", "is", "ous", "'s", "’s"))
        and low not in NOT_VERBS_S
        and (subj_low in SINGULAR_PRONOUNS or not subj_low.endswith("s") or words[subj][:1].isupper())
        and subj_low not in PLURAL_PRONOUNS
        and after_verb
    ):
        return "VBZ"
    if (
        not low.endswith(("s", "ing", "ed", "ly"))
        and len(low) > 2
        and (
            # right after "they", a lower-case open-class word is the verb; after a plural noun it needs an
            # object right after it to be told from a noun ("the awards include the ..." vs "the awards list")
            subj_low in PLURAL_PRONOUNS
            or (subj_low.endswith("s") and not subj_low.endswith("ss") and nxt in _OBJECT_STARTS)
        )
    ):
        return "VBP"
    return None
