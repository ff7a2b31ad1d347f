"""What a push uploads from a run folder: the files the run wrote, as its manifest lists them, of the kinds a model
repository holds.

Both ways of pushing go through :func:`build_upload_list`: ``python -m hf_cse.push RUN_DIR`` and the Trainer's
``--push_to_hub`` (the model at the end of training and at each checkpoint, and the ``checkpoint-N`` folder itself
with ``hub_strategy`` ``checkpoint`` / ``all_checkpoints``). The list goes to ``HfApi.upload_folder`` as
``allow_patterns`` of exact paths (:attr:`UploadList.allow_patterns`), so the upload sends those files and no other.

The rule: a file is uploaded when

1. the folder's manifest (``hf_cse_manifest.json``, :mod:`hf_cse.atomic_files`) lists it: the final model's publish
   writes the manifest, and every JSON or Markdown file hf_cse writes there afterwards (metrics, trainer state, the
   card) is added to it; a ``checkpoint-N`` has its own. A file with an uploadable name that the manifest does not
   list (a ``pytorch_model.bin``, ``merges.txt`` or ``2_Dense/model.safetensors`` planted in a finished run) is not
   hf_cse's: it is left out and named;
2. it still matches its entry (size and SHA-256): a file changed since hf_cse wrote it is left out and named;
3. its path relative to the folder is on the allowlist below: of what the run wrote, the training arguments,
   checkpoints and other local-only files stay local;
4. neither the file nor any folder between it and the run folder is a symbolic link (a link's target may lie
   outside the run: uploading it would send whatever it points to).

A folder without a manifest (saved by an older hf_cse, or not by hf_cse) uploads nothing: a one-line
:class:`~hf_cse.errors.UsageError` says so. hf_cse's own local-only files stay quietly (:data:`KEPT_LOCAL`:
``checkpoint-N`` folders, the training arguments, the lock, the manifest, staging folders and temporary files, an
earlier run set aside, ``report/``; and a checkpoint's training state, when ``python -m hf_cse.push`` pushes a
``checkpoint-N`` folder as a run); every other file and every symbolic link is named in one warning line, e.g.
``Not uploading 3 files of RUN that hf_cse did not write: .env, id_rsa, sub/credentials.json; nor 1 symbolic link
(a link's target may lie outside the run): link-to-outside`` (a folder of several such files and nothing uploaded is
named once: ``.git/ (57 files)``).

The allowlist, as paths relative to the pushed folder:

- the model (at the top level, and in ``adapter/`` for a LoRA run's adapter, :data:`MODEL_FILES`): ``README.md``
  (the card; peft writes one beside an adapter), ``config.json``, ``generation_config.json``, the weights
  (``model.safetensors``, ``pytorch_model.bin``, their ``*.index.json`` and ``*-NNNNN-of-NNNNN.*`` shards, the
  ``adapter_*`` files) and the tokenizer files ``save_pretrained`` writes for BERT, RoBERTa, XLM-R, ALBERT/T5,
  DeBERTa-v2 and Llama-style tokenizers;
- the sentence-transformers modules (:mod:`hf_cse.export.sentence_transformers_files`): ``modules.json``,
  ``sentence_bert_config.json``, ``N_Pooling/config.json``, ``N_Dense/config.json`` and ``N_Dense/model.safetensors``;
- the run's record and results (:data:`RUN_RECORD_FILES`): ``hf_cse_training.json``, ``trainer_state.json``,
  ``train_results.json``, ``all_results.json``, ``sts_results.json``, ``paper_comparison.json``,
  ``matryoshka_sts.json``;
- in a checkpoint push only, the training state a run resumes from: the Trainer's (:data:`CHECKPOINT_STATE_FILES`:
  optimizer, scheduler, scaler, RNG and trainer state, ``training_args.bin`` / ``training_args.json``, the streaming
  position, the checkpoint's manifest and run settings), and every other file the checkpoint's manifest lists, since
  the checkpoint writer lists exactly what it saved: the state an input provider saves under a name of its own (the
  momentum queue's ``momentum_queue.pt``) goes with the checkpoint it resumes. In a run push, such a listed file of no
  uploadable kind (a ``checkpoint-N`` pushed as a run) stays quietly, as hf_cse's own.

Left out of a run folder on purpose: ``training_args.bin`` (a pickle of every argument) and ``training_args.json``
(local paths), and ``report/`` (``python -m hf_cse.report``'s output, with local absolute paths).
"""

from __future__ import annotations

import glob
import logging
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from huggingface_hub.constants import REPOCARD_NAME
from transformers.tokenization_utils_base import (
    ADDED_TOKENS_FILE,
    FULL_TOKENIZER_FILE,
    SPECIAL_TOKENS_MAP_FILE,
    TOKENIZER_CONFIG_FILE,
)
from transformers.trainer import OPTIMIZER_NAME, SCALER_NAME, SCHEDULER_NAME, TRAINER_STATE_NAME, TRAINING_ARGS_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.utils import (
    ADAPTER_CONFIG_NAME,
    ADAPTER_SAFE_WEIGHTS_NAME,
    ADAPTER_WEIGHTS_NAME,
    CONFIG_NAME,
    GENERATION_CONFIG_NAME,
    SAFE_WEIGHTS_INDEX_NAME,
    SAFE_WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
)

from ..atomic_files import listed_file_problem, read_manifest
from ..errors import UsageError
from ..links import refuse_link
from ..run_files import (
    ADAPTER_DIR,
    LOCK_FILE,
    MANIFEST_FILE,
    MATRYOSHKA_RESULTS_FILE,
    PAPER_COMPARISON_FILE,
    PREVIOUS_RUN_PREFIX,
    RUN_SETTINGS_FILE,
    STAGING_PREFIX,
    STREAM_POSITION_FILE,
    STS_RESULTS_FILE,
    TEMPORARY_SUFFIX,
    TRAINING_ARGS_FILE,
    TRAINING_SUMMARY_FILE,
)

logger = logging.getLogger(__name__)

TOKENIZER_VOCAB_FILES = (
    "vocab.txt",  # WordPiece: BERT, MPNet, ELECTRA
    "vocab.json",  # byte-level BPE: RoBERTa, GPT-2
    "merges.txt",
    "sentencepiece.bpe.model",  # XLM-R, CamemBERT
    "spiece.model",  # ALBERT, T5
    "spm.model",  # DeBERTa-v2/v3
    "tokenizer.model",  # Llama-style
)
"""The ``vocab_files_names`` of the slow tokenizers of the encoders hf_cse trains (a fast tokenizer saves
``tokenizer.json``; transformers < 5 saves the slow files beside it)."""

MODEL_FILES = (
    REPOCARD_NAME,
    CONFIG_NAME,
    GENERATION_CONFIG_NAME,
    SAFE_WEIGHTS_NAME,
    SAFE_WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    ADAPTER_CONFIG_NAME,
    ADAPTER_SAFE_WEIGHTS_NAME,
    ADAPTER_WEIGHTS_NAME,
    TOKENIZER_CONFIG_FILE,
    FULL_TOKENIZER_FILE,
    SPECIAL_TOKENS_MAP_FILE,
    ADDED_TOKENS_FILE,
    *TOKENIZER_VOCAB_FILES,
)
"""The files of a saved model (``save_pretrained`` of the model, its tokenizer, or a peft adapter) and its card."""

RUN_RECORD_FILES = (
    TRAINING_SUMMARY_FILE,
    TRAINER_STATE_NAME,
    "train_results.json",  # Trainer.save_metrics("train"), which run_unsup.py calls
    "all_results.json",
    STS_RESULTS_FILE,
    PAPER_COMPARISON_FILE,
    MATRYOSHKA_RESULTS_FILE,
)
"""The run's record and results, at the top level of the run folder."""

CHECKPOINT_STATE_FILES = (
    OPTIMIZER_NAME,
    "optimizer.bin",  # Accelerate's name for an FSDP optimizer's full state dict
    SCHEDULER_NAME,
    SCALER_NAME,
    TRAINER_STATE_NAME,
    TRAINING_ARGS_NAME,
    TRAINING_ARGS_FILE,
    STREAM_POSITION_FILE,
    MANIFEST_FILE,
    RUN_SETTINGS_FILE,
)
"""What a ``checkpoint-N`` folder holds besides the model, to resume from (plus ``rng_state[_RANK].pth``)."""


def _any_of(names: Iterable[str]) -> str:
    return "|".join(re.escape(name) for name in names)


def _shards(weights_name: str) -> str:
    """The shards of ``weights_name`` as ``save_pretrained`` names them: ``model-00001-of-00003.safetensors``."""
    stem, suffix = os.path.splitext(weights_name)
    return rf"{re.escape(stem)}-\d+-of-\d+{re.escape(suffix)}"


_MODEL_FILE = rf"(?:{_any_of(MODEL_FILES)}|{_shards(SAFE_WEIGHTS_NAME)}|{_shards(WEIGHTS_NAME)})"
_RUN_FILES = (
    rf"(?:{re.escape(ADAPTER_DIR)}/)?{_MODEL_FILE}",
    _any_of(("modules.json", "sentence_bert_config.json")),
    r"\d+_Pooling/config\.json",
    r"\d+_Dense/(?:config\.json|model\.safetensors)",
    _any_of(RUN_RECORD_FILES),
)
RUN_FILES = re.compile("|".join(_RUN_FILES), re.ASCII)  # \d: 0-9 only
"""The paths of a run folder that are uploaded (matched whole)."""
CHECKPOINT_FILES = re.compile(
    "|".join((*_RUN_FILES, _any_of(CHECKPOINT_STATE_FILES), r"rng_state(?:_\d+)?\.pth")), re.ASCII
)
"""The paths of a ``checkpoint-N`` folder that a checkpoint push uploads (matched whole)."""

KEPT_LOCAL = re.compile(
    "|".join(
        (
            rf"{PREFIX_CHECKPOINT_DIR}-\d+/",  # the checkpoints, with their optimizer state
            rf"\.{PREFIX_CHECKPOINT_DIR}-\d+\.[^/]*/",  # a checkpoint being written, replaced or deleted
            rf"(?:{re.escape(ADAPTER_DIR)}/)?{re.escape(STAGING_PREFIX)}[^/]*/",  # a model being saved
            rf"{re.escape(PREVIOUS_RUN_PREFIX)}[^/]*/",  # an earlier run, set aside by --overwrite_output_dir
            rf"(?:[^/]*/)*\.[^/]*{re.escape(TEMPORARY_SUFFIX)}",  # an atomic write's temporary file, left by a kill
            re.escape(LOCK_FILE),
            # The training arguments: the pickle holds every argument, the JSON local paths.
            rf"(?:{re.escape(ADAPTER_DIR)}/)?(?:{_any_of((TRAINING_ARGS_NAME, TRAINING_ARGS_FILE))})",
            r"report/",  # python -m hf_cse.report's default output folder: local absolute paths
        )
    ),
    re.ASCII,
)
"""Paths hf_cse writes into a run folder and never uploads (matched whole; one ending in ``/`` is a folder, left
out with all it holds)."""


@dataclass(frozen=True)
class UploadList:
    """What a push sends from ``folder``, and what it leaves there. Paths are relative to ``folder``, ``/``-separated
    and sorted; a folder's ends with ``/``.

    Attributes:
        folder: the folder pushed.
        files: the files uploaded.
        kept_local: files and folders hf_cse writes but does not upload (:data:`KEPT_LOCAL`, and in a run push
            :data:`CHECKPOINT_STATE_FILES`).
        foreign: files hf_cse did not write, by the folder's manifest (nor anything else that is not a regular
            file), left out.
        symlinks: symbolic links to files or folders, left out (a folder's contents unlisted).
        changed: files the manifest lists that no longer match it (size or SHA-256), left out.
    """

    folder: Path
    files: list[str]
    kept_local: list[str]
    foreign: list[str]
    symlinks: list[str]
    changed: list[str] = field(default_factory=list)

    @property
    def allow_patterns(self) -> list[str]:
        """:attr:`files` as huggingface_hub ``allow_patterns``: each glob-escaped (``[``, ``*``, ``?``), so that each
        matches its own path only, and ``upload_folder`` sends exactly :attr:`files`."""
        return [glob.escape(path) for path in self.files]

    def left_out_message(self) -> str | None:
        """One line naming :attr:`foreign`, :attr:`changed` and :attr:`symlinks` (``None`` when there are none). A
        folder whose files are all left out and that holds more than one is named once, with its count
        (``.git/ (57 files)``)."""
        parts = []
        if self.foreign:
            parts.append(
                f"Not uploading {_count(len(self.foreign), 'file')} of {self.folder} that hf_cse did not write: "
                f"{', '.join(_grouped(self.foreign, self.files))}"
            )
        for paths, noun, why in (
            (self.changed, "file", "changed since hf_cse wrote them (the manifest's size or SHA-256 differs)"),
            (self.symlinks, "symbolic link", "(a link's target may lie outside the run)"),
        ):
            if paths:
                lead = "nor" if parts else f"Not uploading from {self.folder}"
                parts.append(f"{lead} {_count(len(paths), noun)} {why}: {', '.join(paths)}")
        return "; ".join(parts) or None

    def warn_left_out(self) -> None:
        """Log :meth:`left_out_message` as a warning, if there is one."""
        message = self.left_out_message()
        if message is not None:
            logger.warning(message)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _grouped(paths: list[str], uploaded: list[str]) -> list[str]:
    """``paths`` with each top-level folder that holds several of them and nothing uploaded named once."""
    tops = Counter(path.split("/", 1)[0] for path in paths if "/" in path)
    whole = {top for top, number in tops.items() if number > 1} - {path.split("/", 1)[0] for path in uploaded}
    named = [path for path in paths if path.split("/", 1)[0] not in whole]
    named += [f"{top}/ ({tops[top]} files)" for top in whole]
    return sorted(named)


def read_run_manifest(root: Path) -> dict[str, dict[str, Any]]:
    """The files ``root``'s manifest lists (:func:`~hf_cse.atomic_files.read_manifest`).

    Raises:
        UsageError: ``root`` has no readable manifest: which files the run wrote cannot be told; nothing is uploaded.
            Or the manifest is a symbolic link: its file, outside the run, would say what the run wrote.
    """
    refuse_link(root / MANIFEST_FILE)
    listed = read_manifest(root)
    if listed is None:
        raise UsageError(
            f"{root} has no readable {MANIFEST_FILE}, the list of the files an hf_cse run wrote there (it was saved "
            "by an hf_cse from before that list, or not by hf_cse), so nothing is uploaded: a push sends only what "
            "the run wrote. For a run of an older hf_cse, check the folder's files, then push with --write_manifest, "
            "which lists those of an uploadable kind as the run's; or upload the folder with huggingface_hub yourself."
        )
    return listed


def build_upload_list(folder: str | Path, checkpoint: bool = False) -> UploadList:
    """Sort the files under ``folder`` into what a push uploads and what it leaves (see the module docstring).

    Args:
        folder: a run's output folder, or with ``checkpoint=True`` one of its ``checkpoint-N`` folders.
        checkpoint: allow the training state too (:data:`CHECKPOINT_FILES`, and whatever else the checkpoint's
            manifest lists), for the Trainer's checkpoint pushes.

    Returns:
        The :class:`UploadList`; nothing is logged (:meth:`UploadList.warn_left_out` does).

    Raises:
        UsageError: ``folder`` has no readable manifest: which files the run wrote cannot be told.
    """
    root = Path(folder)
    listed = read_run_manifest(root)
    allowed = CHECKPOINT_FILES if checkpoint else RUN_FILES
    files, kept_local, foreign, symlinks, changed = [], [], [], [], []
    for current, dirnames, filenames in os.walk(root):  # links to folders are listed, never entered
        base = Path(current).relative_to(root)
        for name in list(dirnames):
            path = (base / name).as_posix() + "/"
            if os.path.islink(os.path.join(current, name)):
                symlinks.append(path)
                dirnames.remove(name)
            elif KEPT_LOCAL.fullmatch(path):
                kept_local.append(path)
                dirnames.remove(name)
        for name in filenames:
            path = (base / name).as_posix()
            full = os.path.join(current, name)
            if os.path.islink(full):
                symlinks.append(path)
            elif (allowed.fullmatch(path) or (checkpoint and path in listed)) and os.path.isfile(full):
                if checkpoint and path == MANIFEST_FILE:  # the list itself: what the checkpoint holds
                    files.append(path)
                elif path not in listed:
                    foreign.append(path)
                elif listed_file_problem(root, path, listed[path]) is not None:
                    changed.append(path)
                else:
                    files.append(path)
            elif KEPT_LOCAL.fullmatch(path) or CHECKPOINT_FILES.fullmatch(path) or path in listed:
                kept_local.append(path)  # hf_cse's, of no uploadable kind here: e.g. a checkpoint pushed as a run
            else:
                foreign.append(path)
    return UploadList(root, sorted(files), sorted(kept_local), sorted(foreign), sorted(symlinks), sorted(changed))
