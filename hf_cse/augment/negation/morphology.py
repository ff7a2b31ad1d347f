"""Morphology: the base form of a finite verb, which do-support needs ("went" -> "did not go").

Irregular verbs come from the table in :mod:`.lexicon`; regular ones from suffix rules. Both backends use
:func:`base_form` (:mod:`.spacy_backend` says why it wins over spaCy's lemmatizer).
"""

from __future__ import annotations

import re

from .lexicon import PARTICIPLE_TO_BASE, PAST_TO_BASE

# Third-person forms the -s rules below get wrong.
_THIRD_PERSON_IRREGULAR = {"has": "have", "does": "do", "is": "be", "goes": "go", "undergoes": "undergo"}

_VOWELS = "aeiou"
# -ed forms the suffix rules below get wrong.
_ED_EXCEPTIONS = {
    "added": "add", "erred": "err", "egged": "egg", "ebbed": "ebb", "purred": "purr", "owed": "owe", "eyed": "eye",
    "dyed": "dye", "focused": "focus", "biased": "bias", "unrolled": "unroll", "enrolled": "enroll",
    "created": "create", "recreated": "recreate", "completed": "complete", "deleted": "delete",
    "depleted": "deplete", "competed": "compete", "secreted": "secrete", "interfered": "interfere",
    "adhered": "adhere", "persevered": "persevere", "welcomed": "welcome", "debuted": "debut",
    "persuaded": "persuade", "dissuaded": "dissuade", "boycotted": "boycott", "gazetted": "gazette",
    "delineated": "delineate", "wasted": "waste", "pasted": "paste", "tasted": "taste", "winged": "wing",
}  # fmt: skip
_IT_TAKES_E = frozenset({"cit", "recit", "invit", "unit", "reunit", "ignit", "excit", "incit", "expedit"})
_OT_NO_E = frozenset({"pivot", "pilot", "ballot", "divot"})
# Several-syllable stems in -or/-on/-op/-om/-al that take a silent e (one-syllable stems always do: scored, phoned).
_SILENT_E_STEMS = frozenset(
    "explor ignor restor ador implor deplor postpon aton condon dethron exhal inhal telephon".split()
)
_S_EXCEPTIONS = {"focuses": "focus", "biases": "bias", "dies": "die", "lies": "lie", "ties": "tie", "vies": "vie"}


def _syllables(word: str) -> int:
    """Vowel groups of ``word``: enough to tell one-syllable stems (scored) from longer ones (honored)."""
    return len(re.findall(r"[aeiouy]+", word))


def _needs_silent_e(stem: str) -> bool:
    """Whether ``stem + "ed"`` comes from ``stem + "e"`` (liked -> like) rather than ``stem`` (worked -> work)."""
    if len(stem) < 2 or stem.endswith(("ss", "zz")):
        return False
    last, vowel = stem[-1], stem[-2]
    if last == "g" and stem.endswith(("ong", "ang")):  # belonged, banged; but changed, arranged
        return stem.endswith(("chang", "rang"))
    # No English verb ends in -v, -c (-ce), -g after a single letter (-ge, doubled -gg is handled before), -z or -u.
    if last in "vcgzu":
        return True
    if last == "s":  # based, caused, released, licensed; -ssed and focused/biased are handled elsewhere
        return True
    if (last == "l" and vowel in "bcdfgkpstz") or (last == "r" and vowel in "bcgt"):  # settled, handled, centred
        return True
    if stem.endswith("th"):  # bathed, breathed, soothed; but berthed
        return len(stem) >= 3 and stem[-3] in _VOWELS
    if last in "wxyh" or last in _VOWELS:
        return False
    before = stem[-3] if len(stem) >= 3 else ""
    if stem.endswith("at") and before in "iu":  # negotiated, graduated, evaluated
        return True
    if vowel == "e":  # opened, entered, targeted; but preceded, intervened
        return (last == "d" and before not in _VOWELS) or stem.endswith("ven")
    if vowel not in "aiouy":
        return False
    # A single vowel after a consonant ("qu", "gu" count as one): consonant-vowel-consonant, the silent-e pattern.
    consonant_before = bool(before) and (
        before not in _VOWELS or (before == "u" and len(stem) >= 4 and stem[-4] in "qg")
    )
    if not consonant_before:
        return False
    if last == "t":
        if vowel == "i":
            return stem in _IT_TAKES_E  # visited, edited, limited; but invited
        if vowel == "o":
            return stem not in _OT_NO_E  # promoted, voted; but piloted
        return True
    if (vowel == "o" and last in "rpnm") or (vowel == "a" and last == "l"):
        return _syllables(stem) == 1 or stem in _SILENT_E_STEMS  # scored/honored, hoped/developed, scaled/signaled
    return True


def base_form(verb: str) -> str:
    """The base form of an English finite verb: ``likes`` -> ``like``, ``studied`` -> ``study``, ``went`` -> ``go``.

    Irregular verbs come from a table; regular ones from suffix rules (undoubling, silent e, -ies/-ied). The input's
    case is ignored and the result is lower case. A word that is already a base form comes back unchanged.
    """
    word = verb.lower().replace("’", "'")
    if word in _THIRD_PERSON_IRREGULAR:
        return _THIRD_PERSON_IRREGULAR[word]
    if word in PAST_TO_BASE:
        return PAST_TO_BASE[word]
    if word in PARTICIPLE_TO_BASE:
        return PARTICIPLE_TO_BASE[word]
    if word in _S_EXCEPTIONS:
        return _S_EXCEPTIONS[word]
    if word in _ED_EXCEPTIONS:
        return _ED_EXCEPTIONS[word]
    if word.endswith("ed") and len(word) > 3:
        if word.endswith("ied"):
            return word[:-3] + ("ie" if len(word) <= 4 else "y")  # died -> die, studied -> study
        if word.endswith("eed"):
            return word[:-1]  # agreed, guaranteed
        stem = word[:-2]
        if stem[-1] == stem[-2] and stem[-1] in "bdgkmnprtv":
            return stem[:-1]  # stopped, planned, admitted, occurred
        if stem.endswith("ick") and _syllables(stem) > 1:
            return stem[:-1]  # panicked, trafficked, mimicked; but picked
        if stem.endswith("ll"):
            # travelled, controlled (British doubling of a final l); but called, installed, spelled
            return stem[:-1] if _syllables(stem) > 1 and stem[-3] in "eo" else stem
        return stem + "e" if _needs_silent_e(stem) else stem
    if word.endswith("s") and len(word) > 2 and not word.endswith(("ss", "us", "is")):
        if word.endswith("ies"):
            return word[:-3] + "y"  # studies, carries
        if word.endswith(("sses", "shes", "ches", "xes", "zzes", "oes")):
            return word[:-2]  # passes, pushes, watches, fixes, goes
        return word[:-1]
    return word
