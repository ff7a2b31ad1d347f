"""Hub plumbing shared by ``python -m hf_cse.push`` and ``CSETrainer.push_to_hub``: checking a repository id,
one-line errors when the Hub cannot be reached or refuses a request, keeping the local card when a push fails,
creating the repository (:func:`create_repository`) and uploading the files a run folder's manifest lists
(:func:`upload_run`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..atomic_files import remove_file, write_bytes_atomic
from ..errors import HubRequestError, HubUnreachableError, UsageError
from ..run_files import TRAINING_SUMMARY_FILE
from ..version import __version__

# hf_cse.sources and the upload list import transformers (seconds of CPU), and huggingface_hub is imported where it is
# used too: the push command's parser reads DEFAULT_COMMIT_MESSAGE here, and its --help does without all of them
# (tests/test_help_imports.py).
if TYPE_CHECKING:
    from .upload_list import UploadList


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


def hub_errors() -> tuple[type[BaseException], ...]:
    """What a failed Hub request raises: the connection errors (see :func:`connection_errors`) and
    huggingface_hub's ``HfHubHTTPError`` (an HTTP error status: 401, 403, 5xx, ...)."""
    from huggingface_hub.errors import HfHubHTTPError

    from ..sources import connection_errors

    return (*connection_errors(), HfHubHTTPError)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _http_error_advice(err: BaseException) -> str:
    """What to do about an ``HfHubHTTPError``, by its status (huggingface_hub turns a 401 or a 404 on a repository
    into ``RepositoryNotFoundError``: the Hub does not tell a missing repository from one the token may not see)."""
    from huggingface_hub.errors import RepositoryNotFoundError

    status = getattr(getattr(err, "response", None), "status_code", None)
    if status == 401 or isinstance(err, RepositoryNotFoundError):
        return (
            "Check the token (pass --token, set HF_TOKEN or run `hf auth login`) and that the repository's namespace "
            "is your user name or an organization you belong to"
        )
    if status == 403:
        return (
            "The token may not write there: use a token with write access (https://huggingface.co/settings/tokens) or "
            "a namespace you may write to"
        )
    if status is not None and status >= 500:
        return "The Hub had a server error: try again in a few minutes (https://status.huggingface.co)"
    return "Fix what the Hub names, then run again"


def describe_hub_error(err: BaseException, repo_id: str | None) -> str:
    """One line saying that a request about ``repo_id`` failed, why (the error's type, the HTTP status and the
    server's message) and what to do."""
    from ..sources import connection_errors

    target = f" to push {repo_id!r}" if repo_id else ""
    if isinstance(err, connection_errors()):
        return (
            f"Cannot reach the Hugging Face Hub{target} ({_one_line(f'{type(err).__name__}: {err}')}). Check the "
            "network connection (and that HF_HUB_OFFLINE is unset), then run again."
        )
    response = getattr(err, "response", None)
    status = " ".join(
        str(part) for part in (getattr(response, "status_code", ""), getattr(response, "reason_phrase", "")) if part
    )
    # huggingface_hub's message spans lines (status, URL, hints); the server's own message is the useful part.
    detail = getattr(err, "server_message", None) or next((line for line in str(err).splitlines() if line.strip()), "")
    cause = _one_line(f"{type(err).__name__}: {', '.join(part for part in (status, detail) if part)}")
    return f"The Hugging Face Hub refused the request{target} ({cause}). {_http_error_advice(err)}."


@contextmanager
def hub_connection(repo_id: str | None) -> Iterator[None]:
    """Turn a failed Hub request inside the block into one line naming ``repo_id``, the cause and what to do:
    :class:`~hf_cse.errors.HubUnreachableError` when the Hub cannot be reached, :class:`~hf_cse.errors.HubRequestError`
    when it answers with an error status (a refused token, no write access, a server error)."""
    from ..sources import connection_errors

    try:
        yield
    except hub_errors() as err:
        if isinstance(err, HubUnreachableError):  # from a nested block, already one line
            raise
        error_class = HubUnreachableError if isinstance(err, connection_errors()) else HubRequestError
        raise error_class(describe_hub_error(err, repo_id)) from err


@contextmanager
def card_restored_on_failure(run_dir: str | Path) -> Iterator[None]:
    """Put the :data:`CARD_FILES` of ``run_dir`` back as they were (removing the ones that did not exist) when the
    block raises: the card rendered for a push that failed must not replace the local one. Each is put back whole
    (:func:`~hf_cse.atomic_files.write_bytes_atomic`), its entry in the folder's manifest with it."""
    paths = [Path(run_dir) / name for name in CARD_FILES]
    saved = {path: path.read_bytes() if path.is_file() else None for path in paths}
    try:
        yield
    except BaseException:
        for path, content in saved.items():
            if content is None:
                remove_file(path)
            elif not path.is_file() or path.read_bytes() != content:
                write_bytes_atomic(path, content)
        raise


DEFAULT_COMMIT_MESSAGE = "Upload hf_cse sentence encoder"


def hub_api(api: Any = None) -> Any:
    """``api``, or huggingface_hub's ``HfApi`` naming hf_cse as the library (tests pass a local stand-in)."""
    if api is not None:
        return api
    from huggingface_hub import HfApi

    return HfApi(library_name="hf_cse", library_version=__version__)


def create_repository(
    api: Any, repo_id: str, token: str | None = None, private: bool | None = None, revision: str | None = None
) -> str:
    """Create the model repository ``repo_id`` (nothing happens if it exists) and its branch ``revision``: the one
    request that shows, before anything long, that the Hub answers, the token is good and may write there.

    Args:
        api: an ``HfApi``-like object (``create_repo``, ``create_branch``; :func:`hub_api`).
        token: passed to the API calls only; ``None`` lets huggingface_hub find the saved login or ``HF_TOKEN``.
        private: create the repository private (no effect on an existing one); ``None``: the account's default.
        revision: branch to commit to (created from the default branch if missing); ``None``: ``main``.

    Returns:
        The repository's full id (``NAME`` alone gets the token's user as namespace).

    Raises:
        HubUnreachableError, HubRequestError: as :func:`hub_connection`.
    """
    with hub_connection(repo_id):
        repo_url = api.create_repo(repo_id=repo_id, token=token, private=private, exist_ok=True, repo_type="model")
        repo_id = getattr(repo_url, "repo_id", None) or repo_id
        if revision is not None:
            api.create_branch(repo_id=repo_id, branch=revision, token=token, exist_ok=True, repo_type="model")
    return repo_id


def upload_run(
    run_dir: str | Path,
    repo_id: str,
    api: Any = None,
    token: str | None = None,
    revision: str | None = None,
    commit_message: str = DEFAULT_COMMIT_MESSAGE,
    run_as_future: bool = False,
    upload: UploadList | None = None,
) -> Any:
    """Upload the files of ``run_dir`` that hf_cse wrote to ``repo_id``, which :func:`create_repository` created.

    Args:
        api: an ``HfApi``-like object (``upload_folder``); default: :func:`hub_api`.
        token: passed to the API call only; ``None`` lets huggingface_hub find the saved login or ``HF_TOKEN``.
        revision: branch to commit to; ``None``: ``main``.
        upload: what to upload, :func:`~hf_cse.export.upload_list.build_upload_list` of ``run_dir`` (default: built
            here, and what it leaves out warned about).

    Returns:
        What ``upload_folder`` returns (a ``CommitInfo``, or a future with ``run_as_future=True``).

    Raises:
        HubUnreachableError: the Hub could not be reached (with ``run_as_future=True``, the future holds the upload's
            own error).
    """
    from .upload_list import build_upload_list

    api = hub_api(api)
    if upload is None:
        upload = build_upload_list(run_dir)
        upload.warn_left_out()
    with hub_connection(repo_id):
        return api.upload_folder(
            repo_id=repo_id,
            folder_path=str(run_dir),
            token=token,
            repo_type="model",
            revision=revision,
            commit_message=commit_message,
            allow_patterns=upload.allow_patterns,  # exact paths: the list and nothing else
            run_as_future=run_as_future,
        )
