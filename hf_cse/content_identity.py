"""What identifies an input a run reads by its content, for the resume contract
(:mod:`hf_cse.training.record.run_settings`):
an input edited in place (same path, same size, other content) is another input, and a resume from a checkpoint
trained on the first is refused.

One SHA-256 (hex) per input, of its bytes or of its parsed content, each file read once, in 1 MiB chunks
(:func:`~hf_cse.atomic_files.sha256_of`), never loaded whole to be hashed:

- a file: its bytes (:func:`path_sha256`); a file already read whole to be parsed (a paraphrase TSV) is hashed from
  the bytes parsed (``hashlib.sha256(data)``), not read again;
- a folder (a BEIR data set): every file under it, by relative path, size and SHA-256 (:func:`path_sha256`);
- a model (:func:`model_sha256`): the files a loader reads (config, weights, tokenizer), wherever the name leads: a
  local folder, ``pip:MODULE``, or a Hub id's snapshot in the local cache;
- a Hub dataset read as a stream: the commit the Hub serves (:func:`hub_dataset_revision`);
- what a run made from an input that is no file (negations from the negator's lexicon and parser, STS dev sets read
  from the Hub): its rows (:func:`rows_sha256`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi, snapshot_download
from huggingface_hub.errors import HfHubHTTPError, HFValidationError, LocalEntryNotFoundError

from .atomic_files import sha256_of
from .sources import PIP_MODEL_SCHEME, resolve_model_path

MODEL_FILE_SUFFIXES = (".json", ".safetensors", ".bin", ".model", ".txt", ".tiktoken", ".py")
"""The files of a model folder that identify the model: its configs (model, tokenizer, pooling, hf_cse's),
weights (safetensors or PyTorch's), tokenizer vocabularies (``vocab.txt``, ``merges.txt``, SentencePiece's
``.model``, tiktoken's) and remote code; the folder's top level and the sentence-transformers module folders its
``modules.json`` names. A run's other files there (``checkpoint-N/``, ``optimizer.pt``, logs) are left out: they
change nothing the loader reads."""


ROWS_PER_UPDATE = 10_000
"""Rows encoded together per update of :func:`rows_sha256`'s hash: few calls, memory flat in the rows' number."""


def path_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes; of a folder, over every file under it (links followed, hidden entries such as
    ``.cache`` left out) by :func:`files_sha256`."""
    path = Path(path)
    if not path.is_dir():
        return sha256_of(path)
    files = []
    for folder, subfolders, names in os.walk(path):
        subfolders[:] = [name for name in subfolders if not name.startswith(".")]
        files += [Path(folder, name) for name in names if not name.startswith(".")]
    return files_sha256(path, files)


def files_sha256(root: Path, files: Iterable[Path]) -> str:
    """One SHA-256 over ``files`` (under ``root``), in order of their relative paths: each one's relative path, size
    and SHA-256 as a JSON line, so that a renamed, moved or edited file changes it."""
    digest = hashlib.sha256()
    for file in sorted(files, key=lambda file: file.relative_to(root).as_posix()):
        entry = [file.relative_to(root).as_posix(), file.stat().st_size, sha256_of(file)]
        digest.update((json.dumps(entry) + "\n").encode("utf-8"))
    return digest.hexdigest()


def model_sha256(name_or_path: str | os.PathLike | None) -> str | None:
    """The SHA-256 of the model that ``name_or_path`` names (:data:`MODEL_FILE_SUFFIXES`'s files of its folder, by
    :func:`files_sha256`); ``None`` where no local copy is found (a Hub id not in the local cache, ``None``): the run
    then identifies the model by its name alone."""
    folder = local_model_folder(name_or_path)
    if folder is None:
        return None
    folders = [folder]
    modules = folder / "modules.json"  # a sentence-transformers model: its modules' folders (1_Pooling, ...)
    if modules.is_file():
        try:
            listed = json.loads(modules.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            listed = []  # hashed as a file all the same; the loader says what is wrong with it
        names = [entry.get("path") for entry in listed if isinstance(entry, dict)] if isinstance(listed, list) else []
        folders += [folder / name for name in names if isinstance(name, str) and name and (folder / name).is_dir()]
    files = [
        file
        for place in folders
        for file in place.iterdir()
        if file.is_file() and file.suffix in MODEL_FILE_SUFFIXES and not file.name.startswith(".")
    ]
    return files_sha256(folder, files)


def local_model_folder(name_or_path: str | os.PathLike | None) -> Path | None:
    """The local folder of the model ``name_or_path`` names: the folder itself, ``pip:MODULE``'s, or a Hub id's
    snapshot in the local cache (never downloaded here); ``None`` where there is none."""
    name = str(name_or_path or "")
    if not name:  # a model built in memory has no name: not the working folder ("" as a path)
        return None
    if name.startswith(PIP_MODEL_SCHEME):
        return Path(resolve_model_path(name))
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    try:
        return Path(snapshot_download(name, local_files_only=True))
    except (HFValidationError, LocalEntryNotFoundError, OSError, ValueError):
        return None


def hub_dataset_revision(name: str) -> str | None:
    """The commit of the Hub dataset ``name`` that a stream of it reads now (a Git commit names its files' content,
    so the stream is identified without being read twice); ``None`` where the Hub does not say (offline, no such
    dataset, a name that is no Hub id): the run then identifies the stream by its name alone."""
    try:
        return HfApi().dataset_info(name).sha
    except (HfHubHTTPError, HFValidationError, OSError, ValueError):  # offline mode raises a ConnectionError
        return None


def rows_sha256(rows: Iterable[Sequence[Any]]) -> str:
    """The SHA-256 of ``rows`` (each a sequence of JSON values: texts, flags, scores) as JSON arrays of
    :data:`ROWS_PER_UPDATE` rows each (one C-level encoding per chunk: 1M rows of 65 characters in about 1.4 s on the
    2-core development machine): parsed content, where no file holds it as the run reads it. Unambiguous: a tab, a
    line break or ``None`` in a text is not a column, a row or a missing value."""
    digest = hashlib.sha256()
    rows = iter(rows)
    while chunk := list(islice(rows, ROWS_PER_UPDATE)):
        digest.update(json.dumps(chunk, ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()
