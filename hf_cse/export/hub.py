"""Hub plumbing shared by ``python -m hf_cse.push`` and ``CSETrainer.push_to_hub``: checking a repository id,
one-line errors when the Hub cannot be reached, and keeping the local card when a push fails."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import HubUnreachableError, UsageError
from .model_card import TRAINING_SUMMARY_FILE


def check_repo_id(repo_id: str) -> None:
    """Raise :class:`~hf_cse.errors.UsageError` unless ``repo_id`` is a Hub repository id by the Hub's own rule
    (``huggingface_hub.utils.validate_repo_id``): ``NAMESPACE/NAME`` or ``NAME``, of letters, digits, ``-``, ``_``
    and ``.``."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        raise UsageError(
            f"Invalid Hub repository id {repo_id!r}: use NAMESPACE/NAME of letters, digits, '-', '_' and '.' (at most "
            "96 characters, no '--' or '..', not starting or ending with '-' or '.')."
        ) from err


#: Files a push renders into the run folder; they replace the local ones only once the upload succeeded.
CARD_FILES = ("README.md", TRAINING_SUMMARY_FILE)


def _connection_errors() -> tuple[type[BaseException], ...]:
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


@contextmanager
def hub_connection(repo_id: str | None) -> Iterator[None]:
    """Turn a failure to reach the Hub inside the block into a one-line :class:`~hf_cse.errors.HubUnreachableError`
    naming ``repo_id`` and the cause. Other errors (e.g. the Hub refusing a token) pass through unchanged."""
    try:
        yield
    except _connection_errors() as err:
        if isinstance(err, HubUnreachableError):  # from a nested block, already one line
            raise
        target = f" to push {repo_id!r}" if repo_id else ""
        cause = " ".join(f"{type(err).__name__}: {err}".split())
        raise HubUnreachableError(
            f"Cannot reach the Hugging Face Hub{target} ({cause}). Check the network connection (and that "
            "HF_HUB_OFFLINE is unset), then run again."
        ) from err


@contextmanager
def card_restored_on_failure(run_dir: str | Path) -> Iterator[None]:
    """Put the :data:`CARD_FILES` of ``run_dir`` back as they were (removing the ones that did not exist) when the
    block raises: the card rendered for a push that failed must not replace the local one."""
    paths = [Path(run_dir) / name for name in CARD_FILES]
    saved = {path: path.read_bytes() if path.is_file() else None for path in paths}
    try:
        yield
    except BaseException:
        for path, content in saved.items():
            if content is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(content)
        raise
