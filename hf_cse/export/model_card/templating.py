"""The Jinja2 environment of the card's template (``template.md`` beside this module), escaping by default.

Like HTML autoescaping, but for Markdown: every value the template prints is written by
:func:`~hf_cse.markdown.markdown_text` (backslashes before markup, line breaks shown as ``\\n``) unless it is
:class:`Markdown`, which the filters return: ``code`` and ``cell`` (a code span, in a table cell), ``python`` and
``python_repr`` (Python literals), ``shell`` (a shell word), ``url`` (a link target), ``verbatim`` (text inside a
fenced code block, which no text can end: :func:`~hf_cse.markdown.code_block` picks a longer fence) and
``code_block``, and the globals ``table`` and ``settings_table``. ``join`` joins what it is given, each item escaped
unless it is Markdown; ``setting_change`` is one changed setting in words. A value that reaches the card without a
filter for its place therefore shows as itself, never as markup.

Why not ``huggingface_hub.ModelCard.from_template``: it renders a bare ``jinja2.Template`` (no filters, no whitespace
options), so a value would reach the card unquoted and each false ``{% if %}`` would leave its line behind; the card
is rendered here and handed to ``huggingface_hub.ModelCard``, which parses its front matter back.
"""

from __future__ import annotations

import json
import shlex
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import jinja2

from ...markdown import code_block, code_span, markdown_text, python_string, table
from .summary import describe_setting_change


class Markdown(str):
    """Text that is Markdown already: the template prints it as it is."""


def escaped(value: Any) -> Markdown:
    """``value`` as the template prints it: Markdown as it is, anything else as text (``markdown_text``)."""
    return value if isinstance(value, Markdown) else Markdown(markdown_text(value))


def _marked(function: Callable[..., str]) -> Callable[..., Markdown]:
    return lambda *args, **kwargs: Markdown(function(*args, **kwargs))


def table_cell(value: Any) -> str:
    """A table cell's code span of ``value``: floats as ``%g``, dicts and lists as JSON."""
    if isinstance(value, float):
        value = f"{value:g}"
    elif isinstance(value, dict | list):
        value = json.dumps(value)
    return code_span(value, in_table=True)


def settings_table(values: Mapping[str, Any], header: tuple[str, str] = ("setting", "value")) -> str:
    """A two-column table of ``values``, each key and value a :func:`table_cell`; ``_none_`` without any."""
    rows = [(table_cell(key), table_cell(value)) for key, value in values.items()]
    return table(header, rows) if rows else "_none_"


def _join(values: Iterable[Any], separator: str = "") -> Markdown:
    return Markdown(separator.join(escaped(value) for value in values))


ENVIRONMENT = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent),
    autoescape=False,  # Jinja's autoescaping is HTML's; Markdown's is the finalize below
    finalize=escaped,
    undefined=jinja2.StrictUndefined,  # a misspelt name fails the render instead of leaving a blank
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
ENVIRONMENT.filters.update(
    code=_marked(code_span),
    cell=_marked(table_cell),
    python=_marked(python_string),
    python_repr=_marked(repr),
    shell=_marked(shlex.quote),
    url=_marked(urllib.parse.quote),
    verbatim=_marked(str),
    code_block=_marked(lambda code, language="": code_block(str(code).strip("\n"), language)),
    json=json.dumps,
    setting_change=describe_setting_change,
    join=_join,
)
ENVIRONMENT.tests["startswith"] = str.startswith
ENVIRONMENT.globals.update(table=_marked(table), settings_table=_marked(settings_table))
