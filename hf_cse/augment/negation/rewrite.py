"""Where and how to negate a sentence (a :class:`Target`, found by either backend) and the rewrite itself."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Token:
    """A word of the sentence and where it is."""

    text: str
    start: int  # character offsets into the sentence
    end: int


@dataclass(frozen=True)
class Target:
    """Where and how to negate: insert ``not`` after ``token``, or rewrite ``token`` with do-support."""

    token: Token
    mode: str  # "insert" | "do-support" | "imperative"
    do_form: str = ""  # "does" | "do" | "did" for do-support
    base: str = ""  # base form of the rewritten verb


def _match_case(replacement: str, original: str) -> str:
    """``replacement`` with a capital first letter when ``original`` has one."""
    return replacement[:1].upper() + replacement[1:] if original[:1].isupper() else replacement


def plausible(sentence: str, target: Target) -> bool:
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


def apply_target(sentence: str, target: Target) -> str:
    """``sentence`` negated at ``target``; everything else is copied as it is."""
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


def do_form(tag: str) -> str | None:
    """The form of "do" for do-support of a verb with a Penn Treebank tag: "VBZ" -> "does"; None for other tags."""
    return {"VBZ": "does", "VBP": "do", "VBD": "did"}.get(tag)
