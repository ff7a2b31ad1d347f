"""Markdown for model cards, reports and benchmark pages: tables, and quoting user strings (repository ids, prompt
templates, file names) for each place a card puts them.

A card mixes several languages: YAML front matter, Markdown text and tables, code spans, fenced code blocks, and the
Python and shell code of its usage snippets. Each user string goes in through the function for its place, so a quote,
backtick, ``|``, ``<tag>``, ``#`` or line break in it shows as itself instead of changing the card or its code. The
YAML front matter needs no function here: ``huggingface_hub.ModelCardData`` dumps it with PyYAML, which quotes every
value that needs it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

# The ASCII punctuation that can start markup inside a line of CommonMark + GFM (+ the Hub's math): a backslash
# escape, code span, emphasis, strikethrough, link or image bracket, HTML tag or autolink, entity, table pipe, math
# delimiter; and the heading and block-quote markers, in case the text starts a line. Commas, quotes, parentheses and
# the rest render as themselves (a ``(`` only means something after a ``]``, which is escaped), so they are left
# alone: a card reads "SimCSE, BERT-base", not "SimCSE\\, BERT-base".
_MARKUP_PUNCTUATION = frozenset("\\`*_~[]<>&|$#")


def _show_line_breaks(text: str) -> str:
    """``text`` on one line: CommonMark's line endings (``\\n``, ``\\r``) written as the escapes ``\\n``, ``\\r``.
    A raw one would end the line, and the next could start a heading or end a table row."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def markdown_text(value: Any) -> str:
    """``value`` (``str()``-ed) as inline Markdown text that renders as itself, on one line.

    The punctuation that can start markup (``\\ ` * _ ~ [ ] < > & | $ #``) is backslash-escaped (CommonMark renders
    ``\\X`` as ``X``), so no emphasis, link, HTML tag, entity, heading marker, table pipe or math delimiter can start;
    other punctuation is left as it is; line breaks are shown as ``\\n``.
    """
    escaped = "".join("\\" + char if char in _MARKUP_PUNCTUATION else char for char in str(value))
    return _show_line_breaks(escaped)


def code_span(value: Any, in_table: bool = False) -> str:
    """``value`` (``str()``-ed) in an inline code span that shows it verbatim, line breaks shown as ``\\n``.

    The span is delimited by one backtick more than the longest run of backticks inside it (CommonMark), and padded
    with a space on each side when the text would otherwise lose or merge a space or backtick at its ends.

    Args:
        in_table: the span sits in a table cell: ``|`` is written ``\\|`` (GFM splits cells at a raw ``|`` even
            inside a code span, and removes the backslash).
    """
    text = _show_line_breaks(str(value))
    longest_run = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest_run + 1)
    # CommonMark strips one space from both ends of a span's text that starts and ends with one (and is not all
    # spaces); a backtick at either end would merge with the fence.
    if "`" in (text[:1], text[-1:]) or (text[:1] == text[-1:] == " " and text.strip(" ")):
        text = f" {text} "
    if in_table:
        text = text.replace("|", "\\|")
    return f"{fence}{text}{fence}"


def code_block(code: str, language: str = "") -> str:
    """``code`` in a fenced code block whose fence (at least 3 backticks) is longer than any run of backticks in
    ``code``, so no line of it can close the block."""
    longest_run = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest_run + 1)
    return f"{fence}{language}\n{code}\n{fence}"


def python_string(value: str) -> str:
    """A double-quoted Python string literal of ``value``.

    JSON's string syntax is a subset of Python's with the same escapes (``\\"``, ``\\\\``, ``\\n``, ``\\uXXXX``, ...),
    so ``ast.literal_eval(python_string(s)) == s``; non-ASCII characters are kept as they are, for readability.
    """
    return json.dumps(value, ensure_ascii=False)


def table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None) -> str:
    """A GitHub-flavoured Markdown table of already-formatted cells (quote user strings with the functions above).

    Args:
        header: one label per column.
        rows: each row's cells, as many as ``header``.
        align: one character per column, ``l`` (left) or ``r`` (right); default: no alignment marker.
    """
    if align is not None and (len(align) != len(header) or set(align) - {"l", "r"}):
        raise ValueError(f"align must be one 'l' or 'r' per column ({len(header)}), got {align!r}")
    rule = ["---:" if side == "r" else "---" for side in align] if align else ["---"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
