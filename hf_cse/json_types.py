"""The types of values read from JSON files (a checkpoint's ``config.json``, ``training_args.json``, ...), checked
against the type annotations of the settings they fill: a loaded setting of the wrong type is one line naming it,
never a ``TypeError`` deep in the code that uses it."""

from __future__ import annotations

import math
import types
import typing
from enum import Enum
from typing import Any

_JSON_NAMES = {str: "string", bool: "true or false", int: "integer", float: "number", dict: "object", list: "array"}


def json_type(value: Any) -> str:
    """The JSON name of ``value``'s type: ``string``, ``number``, ``boolean``, ``object``, ``array``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", dict: "object", list: "array"}.get(type(value), type(value).__name__)


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is an ``int``/``float`` (not a ``bool``) and finite."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def json_matches(value: Any, annotation: Any) -> bool:
    """Whether a value read from JSON has the type ``annotation`` declares (``str``, ``bool``, ``int``, ``float``,
    ``dict[...]``, ``list[...]``, ``X | None``, ``Any``); a boolean is no number, an integer is a float."""
    if annotation is Any:
        return True
    members = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(json_matches(value, member) for member in members)
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if (origin or annotation) is dict:
        return isinstance(value, dict)
    if (origin or annotation) in (list, tuple):
        return isinstance(value, list) and (not members or all(json_matches(item, members[0]) for item in value))
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return isinstance(value, str) or isinstance(value, annotation)  # JSON holds an enum's value
    return True  # a type JSON cannot tell apart


def describe_json_type(annotation: Any) -> str:
    """``a string``, ``an integer or null``, ``true or false``, ... for :func:`json_matches`' message."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " or ".join(describe_json_type(member) for member in typing.get_args(annotation))
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "a string"
    name = _JSON_NAMES.get(typing.get_origin(annotation) or annotation, getattr(annotation, "__name__", "value"))
    return name if annotation is bool else f"an {name}" if name[0] in "aeiou" else f"a {name}"


def check_json_fields(cls: type, values: Any, source: str) -> None:
    """Refuse ``values`` (read from JSON to fill the dataclass ``cls``) unless it is an object that holds every field
    of ``cls`` without a default, each field it holds of that field's type (:func:`json_matches`); keys of no field
    are left alone.

    Raises:
        UsageError: one line naming ``source``, the field, the value and the type it must have.
    """
    from dataclasses import MISSING, fields

    from .errors import UsageError, echo

    if not isinstance(values, dict):
        raise UsageError(f"{source} holds a JSON {json_type(values)}, not an object.")
    hints = typing.get_type_hints(cls)
    for item in fields(cls):
        if item.name not in values:
            if item.default is MISSING and item.default_factory is MISSING and item.init:
                raise UsageError(f"{source} has no {item.name!r}, which it must hold.")
            continue
        value = values[item.name]
        if not json_matches(value, hints[item.name]):
            raise UsageError(
                f"{source}: {item.name} is {echo(value)} (a JSON {json_type(value)}); it must be "
                f"{describe_json_type(hints[item.name])}."
            )
