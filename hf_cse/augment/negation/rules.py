"""Rules backend: finds the main clause's finite verb of an English sentence without a model (see the package
docstring).

:func:`find_target` scans the main clause from left to right, skipping parentheses, quotes, relative clauses and a
leading subordinate or participial clause, and asks :func:`~.finite_verbs.verb_kind` about each word; the first
finite verb it trusts becomes the :class:`~.rewrite.Target`. Whenever the verb is ambiguous it returns ``None``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .finite_verbs import nominal, verb_kind
from .lexicon import (
    CLOSED_CLASS,
    CLOSERS,
    DETERMINERS,
    NEGATORS,
    NOT_VERBS_ED,
    NUMBERS,
    OBJECT_PRONOUNS,
    OPENERS,
    PARTICIPLE_TO_BASE,
    QUOTES,
    RELATIVES,
    SUBJECT_PRONOUNS,
    SUBORDINATORS,
    is_adverb,
    is_negated,
)
from .morphology import base_form
from .rewrite import Target, Token, do_form

# Words (with inner apostrophes, hyphens and dots: "don't", "spin-off", "U.S") and single punctuation marks.
_TOKEN_RE = re.compile(r"[^\W_]+(?:['’\-.][^\W_]+)*(?:['’][a-zA-Z]+)?|\S")


@dataclass
class _Scan:
    """Where the left-to-right scan of :func:`find_target` stands."""

    depth: int = 0  # open brackets
    in_quote: bool = False
    relative_pending: bool = False  # after "which/who/that": the next finite verb is the relative clause's
    previous: int | None = None  # index of the previous word at top level of the main clause

    def skips_nested(self, word: str, i: int) -> bool:
        """Whether ``word`` is a bracket or quote, or inside one: no main-clause verb is there."""
        if word in OPENERS:
            self.depth += 1
            return True
        if word in CLOSERS:
            self.depth = max(0, self.depth - 1)
            self.previous = i
            return True
        if word in QUOTES:
            self.in_quote = (word not in {"”", "»"}) and not (word == '"' and self.in_quote)
            self.previous = i
            return True
        return bool(self.depth or self.in_quote)

    def skips_relative(self, i: int, words: list[str], lower: list[str]) -> bool:
        """Whether word ``i`` opens a relative clause or is the verb of a subject relative clause."""
        word, low, previous = words[i], lower[i], self.previous
        if low in RELATIVES and previous is not None and (low != "that" or nominal(lower, words, previous)):
            self.relative_pending = True
            self.previous = i
            return True
        if (
            self.relative_pending
            and lower[previous or 0] in {"who", "which", "that"}
            and word == low
            and low.isalpha()
        ):
            # "who lives next door": right after a subject relative pronoun, an open-class word is its verb
            # (adverbs in between are skipped: "who also lives").
            if is_adverb(low):
                return True
            if low not in CLOSED_CLASS and low not in SUBJECT_PRONOUNS:
                self.relative_pending = False
                self.previous = i
                return True
        return False


def find_target(sentence: str) -> Target | None:
    """Where to negate ``sentence``: its main clause's finite verb; ``None`` when there is none we can trust."""
    tokens = [Token(m.group(), m.start(), m.end()) for m in _TOKEN_RE.finditer(sentence)]
    if not tokens:
        return None
    words = [t.text for t in tokens]
    lower = [w.lower() for w in words]
    start = _main_clause_start(tokens, lower)
    if start is None:
        return None
    scan = _Scan()
    for i in range(start, len(tokens)):
        word = words[i]
        if scan.skips_nested(word, i):
            continue
        if word in {"!", "?", ";"} or (word == "." and scan.previous is not None and _ends_sentence(lower, i)):
            return None  # end of the first clause without a verb we could trust
        if scan.skips_relative(i, words, lower):
            continue
        kind = verb_kind(i, words, lower, scan.previous, start)
        if kind == "stop":
            return None
        if kind is None:
            scan.previous = i
            continue
        if scan.relative_pending:
            # The first finite verb after "which/who/that" is the relative clause's; the main verb comes later.
            scan.relative_pending = False
            scan.previous = i
            continue
        if i == start and not re.search(r"['’]", lower[i]):
            return None  # a verb first: a question, an imperative or a fragment ("It's" holds its subject)
        return _negation_target(kind, i, tokens, lower)
    return None


def _main_clause_start(tokens: list[Token], lower: list[str]) -> int | None:
    """Skip a leading subordinate or participial clause ("Although ..., ", "Located in ..., ") up to its comma."""
    first = lower[0]
    second = lower[1] if len(lower) > 1 else ""
    participial = (first.endswith(("ing", "ed")) and first not in CLOSED_CLASS and first not in NOT_VERBS_ED) or (
        is_adverb(first) and second.endswith(("ed", "ing"))
    )
    if first in SUBORDINATORS or participial:
        depth = 0
        for i, tok in enumerate(tokens):
            depth += tok.text in OPENERS
            depth -= tok.text in CLOSERS
            if tok.text == "," and depth <= 0:
                return i + 1 if i + 1 < len(tokens) else None
        # No comma: a subordinate clause without its end cannot be skipped; a participle-looking first word
        # may be a name ("Tremelling represented ...") or a gerund subject ("Leading the YMCA was ...").
        return 0 if participial and first not in SUBORDINATORS else None
    return 0


def _ends_sentence(lower: list[str], index: int) -> bool:
    """A full stop after a lower-case word or a number; after "St", "Dr", "U.S" it is an abbreviation."""
    before = lower[index - 1] if index > 0 else ""
    return index + 1 == len(lower) or (before.isalpha() and len(before) > 3) or before.isdigit()


def _negation_target(kind: str, i: int, tokens: list[Token], lower: list[str]) -> Target | None:
    """How to negate the finite verb ``i`` of the kind :func:`~.finite_verbs.verb_kind` found."""
    nxt = lower[i + 1] if i + 1 < len(lower) else ""
    if nxt in NEGATORS:
        return None
    if kind in ("be", "modal"):
        return Target(tokens[i], "insert")
    if kind in ("have", "do"):
        return _have_or_do_target(kind, i, tokens, lower)
    return Target(tokens[i], "do-support", do_form(kind) or "", base_form(lower[i]))


def _have_or_do_target(kind: str, i: int, tokens: list[Token], lower: list[str]) -> Target | None:
    """ "have" and "do" are auxiliaries or main verbs: the word after them (adverbs skipped) tells which."""
    tok = tokens[i]
    j = i + 1
    while j < len(lower) and is_adverb(lower[j]):
        j += 1
    following = lower[j] if j < len(lower) else ""
    if any(is_negated(w) for w in lower[i + 1 : j]):
        return None
    if kind == "have":
        participle = (
            following in PARTICIPLE_TO_BASE
            or following == "been"
            or (following.endswith("ed") and following not in NOT_VERBS_ED)
            or (following.endswith("en") and len(following) > 4 and following not in {"often", "seven"})
        )
        if participle or lower[i].startswith(("'", "’")):
            return Target(tok, "insert")  # perfect tense: "has gone" -> "has not gone"
        if following in DETERMINERS or following[:1].isdigit() or following in NUMBERS | {"to"}:
            # main verb "have": do-support ("had two sons" -> "did not have two sons")
            form = {"has": "does", "have": "do", "had": "did"}[lower[i]]
            return Target(tok, "do-support", form, "have")
        return None
    # "do" + bare verb is an auxiliary; "did his best" is the main verb "do".
    if following in DETERMINERS or following in OBJECT_PRONOUNS or following[:1].isdigit():
        return Target(tok, "do-support", lower[i], "do")
    return Target(tok, "insert")
