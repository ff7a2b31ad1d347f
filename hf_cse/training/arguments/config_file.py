"""``--config FILE``: the argument values of a YAML or JSON file, checked against the argument dataclasses.

``HfArgumentParser.set_defaults`` takes the values as they are: argparse converts only string defaults, so a list
where a number belongs reached the Trainer (``TypeError: '<=' not supported between 'float' and 'list'``). Here
every value is checked against the type annotation of its dataclass field, and strings are converted as argparse
would (``3e-5`` is a string to YAML), so a wrong value is one error naming the file, the key and the expected type.

YAML aliases (``*name``) are refused: a few lines of nested aliases (a "billion laughs") expand to more values than
memory holds, and their mere repetition in an error message took minutes and gigabytes. Anchors alone are harmless.

Why not the libraries' own reading. ``run_unsup.py`` follows TRL's ``TrlParser.parse_args_and_config`` pattern: the
file's values become the parser's defaults (``HfArgumentParser.set_defaults``), then the command line is parsed over
them, so a flag overrides the file. What this module adds is what neither that pattern nor ``HfArgumentParser``'s own
``parse_yaml_file`` / ``parse_json_file`` / ``parse_dict`` (transformers 5) does (docs/development.md, "Third-party
behaviour hf_cse works around", lists them):

* no flags over the file: ``parse_yaml_file`` builds the dataclasses from the file alone;
* no types: ``parse_dict`` passes values as YAML read them (``learning_rate: 3e-5`` is the string ``"3e-5"``) and
  ``set_defaults`` passes any non-string value unconverted (a list where a number belongs); here each value is
  checked against its field and converted, and a wrong one is one line naming the file, the key and the type;
* no ``paper_results``: the block is an unknown key to ``parse_dict``, and ``allow_extra_keys=True`` would also let a
  misspelt argument be dropped silently; here the block is read apart (:func:`paper_results_in`) and typos refused;
* no safe YAML: ``yaml.safe_load`` expands aliases, and a YAML error is several lines without the file's name; here
  one line with the file, line and column;
* an unknown key is ``ValueError: Some keys are not used by the HfArgumentParser: [...]``, without the file.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import functools
import json
import os
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from transformers.hf_argparser import string_to_bool

from ...errors import UsageError, echo
from ...evaluation.paper_comparison import PAPER_RESULTS_KEY, PaperResults, paper_results_in

_NAMES = {type(None): "null", bool: "true or false", int: "an integer", float: "a number", str: "a string"}
_PLURALS = {bool: "booleans", int: "integers", float: "numbers", str: "strings"}


@dataclasses.dataclass(frozen=True)
class ConfigFile:
    """What a ``--config`` file holds, read once.

    Attributes:
        arguments: ``{field name: value}`` of the argument dataclasses, converted to their field types.
        paper_results: the checked ``paper_results`` block, or ``None`` without one.
    """

    arguments: dict[str, Any]
    paper_results: PaperResults | None


class _Mismatch(Exception):
    """A value that does not fit a type annotation."""


def read_config_file(path: str | Path, dataclass_types: Sequence[type]) -> ConfigFile:
    """The values of a YAML (or ``.json``) mapping of argument names to values, converted to their field types.

    Args:
        path: the file; ``.json`` is read as JSON, anything else as YAML.
        dataclass_types: the argument dataclasses whose fields the keys name.

    Returns:
        The arguments (``{field name: value}``, with strings of numbers and booleans converted and a scalar given for
        a list field wrapped in a list) and, apart, the top-level ``paper_results`` block (the paper's STS test
        scores, see :mod:`hf_cse.evaluation.paper_comparison`), which is no argument.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        UsageError: ``path`` is a folder, does not parse (the message gives the line), is not a mapping, names an
            unknown argument, holds a value of the wrong type, or has a malformed ``paper_results`` block.
    """
    path = Path(path)
    values = load_config_mapping(path)
    paper_results = paper_results_in(values, str(path))  # checked now, so a typo fails before any training
    values = {key: value for key, value in values.items() if key != PAPER_RESULTS_KEY}
    fields = {}
    for dataclass_type in dataclass_types:
        hints = typing.get_type_hints(dataclass_type)
        fields.update({field.name: (field, hints[field.name]) for field in dataclasses.fields(dataclass_type)})
    unknown = sorted(set(values) - {name for name, (field, _) in fields.items() if field.init})
    if unknown:
        raise UsageError(f"Unknown keys {echo(unknown)} in {path}; see `python run_unsup.py --help`.")
    converted = {}
    for key, value in values.items():
        field, annotation = fields[key]
        try:  # some fields default to None without Optional in their type
            converted[key] = None if value is None and field.default is None else _convert(value, annotation)
        except _Mismatch:
            raise UsageError(
                f"{path}: {key} must be {_describe(annotation)}, got {echo(value)} ({_describe(type(value))})."
            ) from None
    return ConfigFile(converted, paper_results)


def load_config_mapping(path: str | Path, flag: str = "--config") -> dict[str, Any]:
    """The top-level mapping of the YAML (or ``.json``) file ``path``, unchecked; ``flag`` names it in the errors.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        UsageError: ``path`` is a folder, does not parse (the message gives the line), or is not a mapping.
    """
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{flag} {echo(str(path))} is a folder; expected a YAML or JSON file of argument values.")
    if not path.is_file():
        raise FileNotFoundError(f"{flag} file {echo(str(path))} does not exist.")
    values = _parse(path)
    if not isinstance(values, dict):
        raise UsageError(f"{flag} file {echo(str(path))} must hold a mapping of argument names to values.")
    return values


def read_paper_results(path: str | os.PathLike, flag: str = "--compare_to") -> PaperResults:
    """The ``paper_results`` block of the YAML/JSON config ``path`` (given as ``flag``, named in the errors).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        UsageError: ``path`` is a folder, does not parse, has no ``paper_results`` block, or the block is malformed.
    """
    values = load_config_mapping(path, flag)
    paper = paper_results_in(values, str(path))
    if paper is None:
        raise UsageError(
            f"{flag} {str(path)!r} has no {PAPER_RESULTS_KEY} block: compare with a paper config from "
            "examples/configs/paper/, or add the paper's scores to yours (see its files)."
        )
    return paper


def _parse(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            return json.loads(text, object_pairs_hook=functools.partial(_without_duplicate_keys, path))
        except json.JSONDecodeError as err:
            raise UsageError(f"{path}: not valid JSON: line {err.lineno}, column {err.colno}: {err.msg}.") from None
    try:
        return yaml.load(text, Loader=_NoAliasLoader)
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: not valid YAML: {_describe_yaml_error(err)}.") from None


def _without_duplicate_keys(path: Path, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict, refusing a key given twice (``json`` keeps the last one without a word)."""
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise UsageError(f"{path}: {echo(twice)} given more than once; keep one of each.")
    return dict(pairs)


class _NoAliasLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses aliases (see the module docstring) with an error at the alias's line, and a
    key given twice in one mapping (PyYAML keeps the last one without a word) at the second one's line."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice: keep one", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None,
                None,
                f"found the alias *{event.anchor}; aliases are not allowed in a config file: write the value out",
                event.start_mark,
            )
        return super().compose_node(parent, index)


def _describe_yaml_error(err: yaml.YAMLError) -> str:
    """``line 3, column 9: expected ',' or ']', but got ':' (while parsing a flow sequence from line 2, column 9)``."""
    if not isinstance(err, yaml.MarkedYAMLError) or err.problem_mark is None:
        return str(err)
    mark, context_mark = err.problem_mark, err.context_mark
    message = f"line {mark.line + 1}, column {mark.column + 1}: {err.problem}"
    if err.context and context_mark is not None:
        message += f" ({err.context} from line {context_mark.line + 1}, column {context_mark.column + 1})"
    return message


def _convert(value: Any, annotation: Any) -> Any:
    """``value`` as the type ``annotation`` describes; raises :class:`_Mismatch` when it does not fit.

    A union takes the first member the value fits as it is, then the first it converts to (``"3e-5"`` for
    ``float | None``). Annotations other than unions, ``Literal``, enums, lists, dicts and the scalar types (e.g. a
    config class) take the value unchecked.
    """
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        for exact in (True, False):
            for member in args:
                try:
                    converted = _convert(value, member)
                except _Mismatch:
                    continue
                if not exact or converted is value:
                    return converted
        raise _Mismatch
    if annotation is Any:
        return value
    if annotation is type(None) or value is None:
        return _fits(annotation is type(None) and value is None, None)
    if origin is typing.Literal:
        return _fits(value in args, value)
    if origin is list or annotation is list:
        items = value if isinstance(value, list) else [value]
        return [_convert(item, args[0]) for item in items] if args else items
    if origin is dict or annotation is dict:
        _fits(isinstance(value, dict), value)
        return {key: _convert(item, args[1]) for key, item in value.items()} if args else value
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _fits(isinstance(value, annotation) or value in {member.value for member in annotation}, value)
    if annotation in (bool, int, float) and isinstance(value, str):  # as argparse converts a flag's text
        try:
            return string_to_bool(value) if annotation is bool else annotation(value)
        except (ValueError, argparse.ArgumentTypeError):
            raise _Mismatch from None
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    # Else the type itself: no bool for a number, no 1.5 steps (no silent truncation), no number for a name or path
    # (YAML turned it into one; quote it).
    return _fits(type(value) is annotation, value) if annotation in (bool, int, float, str) else value


def _fits(fits: bool, value: Any) -> Any:
    """``value`` when it ``fits`` the annotation, else :class:`_Mismatch`."""
    if not fits:
        raise _Mismatch
    return value


def _describe(annotation: Any) -> str:
    """``float | None`` -> ``"a number or null"``, ``list[str]`` -> ``"a list of strings"``, for error messages."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(_describe(member) for member in args))
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(arg) for arg in args)
    if origin is list or annotation is list:
        return f"a list of {_PLURALS.get(args[0], 'values')}" if args else "a list"
    if origin is dict or annotation is dict:
        return "a mapping"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(repr(member.value) for member in annotation)
    return _NAMES.get(annotation, f"a {getattr(annotation, '__name__', annotation)}")
