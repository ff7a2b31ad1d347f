"""A griffe extension for the API pages: hf_cse's docstrings cross-reference with Sphinx roles
(``:class:`~hf_cse.x.Y```, ``:func:``, ``:meth:``, ``:mod:``, ``:data:``, ``:attr:``), which Markdown would show
as written. Each becomes inline code: the last component for ``~path``, else the path as written."""

from __future__ import annotations

import re
from typing import Any

try:
    import griffe
except ImportError:  # docs/reference_generator.py reads ROLE in the tests, which run without the docs extra
    griffe = None

ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|obj|exc):`(~?)([^`]+)`")


def _code(match: re.Match[str]) -> str:
    path = match.group(2)
    return f"`{path.rsplit('.', 1)[-1] if match.group(1) else path}`"


class RestRoles(griffe.Extension if griffe is not None else object):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(_code, obj.docstring.value)
