"""How a checkpoint without hf_cse settings is pooled: as its sentence-transformers Pooling module says, where one of
hf_cse's poolers computes that mode, else with ``cls`` (SimCSE's checkpoints carry no such module).

A sentence-transformers checkpoint (all-MiniLM-L6-v2: ``mean``) pooled with ``cls`` scores far below its own
pooling (73.50 against 82.03 on STS-B test), so every loader that is given no pooler reads ``modules.json`` and the
Pooling module's ``config.json`` first: :class:`~hf_cse.modeling.encoder.SentenceEncoder`, the commands, DCLR's
complementary model. Training's own default (``cls``) is not this code's.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ..errors import echo
from ..sources import hub_file
from .configuration_cse import POOLERS

logger = logging.getLogger(__name__)

POOLING_MODE_KEY = "pooling_mode"
"""sentence-transformers 6's key of the Pooling module's ``config.json``: a mode's name, or a list of modes
concatenated; the releases before wrote one boolean key per mode (:data:`POOLING_MODE_KEYS`), which 6 still reads."""

POOLING_MODE_KEYS = {
    "cls": "pooling_mode_cls_token",
    "mean": "pooling_mode_mean_tokens",
    "max": "pooling_mode_max_tokens",
    "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
    "weightedmean": "pooling_mode_weightedmean_tokens",
    "lasttoken": "pooling_mode_lasttoken",
}
"""sentence-transformers' Pooling modes by their boolean key in the module's ``config.json`` (before release 6)."""


def pooler_of_pooling_module(settings: dict[str, object]) -> tuple[str | None, str]:
    """The registered pooler that computes what sentence-transformers' Pooling module with ``settings`` (its
    ``config.json``, in either release's keys) computes, the first registered of those with its mode (``cls`` ->
    ``cls``, ``mean`` -> ``avg``, ``lasttoken`` -> ``last_token``), and the mode as a name for a message; the pooler
    is ``None`` where none computes it (``max``, ``weightedmean``, several modes concatenated, none)."""
    mode = settings.get(POOLING_MODE_KEY)
    if mode is not None:
        modes = [mode] if isinstance(mode, str) else [str(m) for m in mode] if isinstance(mode, list) else []
    else:
        modes = [mode for mode, key in POOLING_MODE_KEYS.items() if settings.get(key) is True]
    named = "+".join(modes) or "no mode"
    if len(modes) != 1:
        return None, named
    return next((name for name in POOLERS if POOLERS[name].sentence_transformers_mode == modes[0]), None), named


def plain_checkpoint_pooling(model: str, name: str | None = None) -> tuple[str, dict[str, Any]]:
    """:func:`plain_checkpoint_pooler` and the ``pooler_kwargs`` under which that pooler computes the Pooling module's
    mode whatever the tokenizer (its class's :attr:`~hf_cse.modeling.poolers.Pooler.sentence_transformers_kwargs`:
    ``avg`` counts a decoder's BOS, as sentence-transformers' ``mean`` does); ``{}`` for ``cls`` chosen for want of
    a module."""
    # A pooler read from the module computes its mode; cls chosen for want of one takes no settings either way.
    pooler = plain_checkpoint_pooler(model, name)
    return pooler, dict(POOLERS[pooler].sentence_transformers_kwargs)


def plain_checkpoint_pooler(model: str, name: str | None = None) -> str:
    """The pooler of the checkpoint ``model`` (a local folder or a Hub id, as
    :func:`~hf_cse.sources.resolve_model_path` returns it), whose ``config.json`` holds no hf_cse settings: the one
    that computes its sentence-transformers Pooling module's mode, else ``cls``; logged in one line saying why (a
    warning where the module's mode is none of hf_cse's poolers). ``name``: the model as the user wrote it, for that
    line (default ``model``)."""
    name = echo(name or model)
    modules = checkpoint_json(model, "modules.json")  # its Pooling module's folder, and that folder's config.json
    folder = next(
        (
            module["path"]
            for module in (modules if isinstance(modules, list) else [])
            if isinstance(module, dict)
            and str(module.get("type", "")).rsplit(".", 1)[-1] == "Pooling"
            and isinstance(module.get("path"), str)
        ),
        None,
    )
    settings = None if folder is None else checkpoint_json(model, f"{folder}/config.json")
    if not isinstance(settings, dict):
        logger.info(
            "Pooling %s with cls: its config.json has no hf_cse settings, and it has no sentence-transformers "
            "Pooling module (pass a pooler to choose another).",
            name,
        )
        return "cls"
    pooler, mode = pooler_of_pooling_module(settings)
    if pooler is None:
        logger.warning(
            "Pooling %s with cls: its config.json has no hf_cse settings, and its sentence-transformers pooling "
            "(%s/config.json: %s) is none of hf_cse's poolers; pass a pooler to choose one.",
            name,
            folder,
            mode,
        )
        return "cls"
    logger.info(
        "Pooling %s with %s: its config.json has no hf_cse settings, and its sentence-transformers Pooling module "
        "(%s/config.json) pools with %s (pass a pooler to choose another).",
        name,
        pooler,
        folder,
        mode,
    )
    return pooler


def plain_checkpoint_max_seq_length(model: str) -> int | None:
    """The truncation length sentence-transformers reads the checkpoint ``model`` with (``max_seq_length`` of its
    ``sentence_bert_config.json``: all-MiniLM-L6-v2 256, where its tokenizer allows 512); ``None`` without one."""
    settings = checkpoint_json(model, "sentence_bert_config.json")
    length = settings.get("max_seq_length") if isinstance(settings, dict) else None
    return length if isinstance(length, int) and not isinstance(length, bool) and length > 0 else None


def checkpoint_json(model: str, filename: str) -> Any:
    """The JSON of ``filename`` in the checkpoint ``model`` (a local folder, or a Hub id: its copy, downloaded or
    cached); ``None`` where it has no such file or the file is no JSON."""
    path: Path | None = Path(model) / filename
    if not path.is_file():
        path = None if Path(model).is_dir() else hub_file(model, filename)
        if path is None:  # no such file, or the Hub offline without a cached copy
            return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
