"""``python -m hf_cse.download``: fetch the data that the paper configs name, into the layout they name.

    python -m hf_cse.download                      # wiki1m and senteval, into the current folder
    python -m hf_cse.download --dest ~/work wiki1m  # the training corpus only
    python -m hf_cse.download nli senteval          # what the supervised configs (sup_simcse_*.yaml) read

The files are SimCSE's (Gao et al., 2021), fetched from where its own ``data/download_wiki.sh``,
``data/download_nli.sh`` and ``SentEval/data/downstream/download_dataset.sh`` fetch them, and saved where those
scripts leave them, relative to ``--dest``::

    data/wiki1m_for_simcse.txt               train_file of the unsupervised paper configs (1M Wikipedia sentences)
    data/nli_for_simcse.csv                  train_file of sup_simcse_*.yaml (SNLI + MNLI: sent0,sent1,hard_neg)
    SentEval/data/downstream/senteval.tar    kept after extraction, so that a second run can check it
    SentEval/data/downstream/STS/            sts_dir of the paper configs (STS12-16, STSBenchmark)
    SentEval/data/downstream/SICK/           SICK-R, beside STS/ as in SentEval

Without names the command fetches wiki1m and senteval, what the unsupervised paper configs read; nli is fetched only
when named, so that a user of the 1M sentences does not also download 49 MB of triplets the run never reads (and a
script that runs the command without names keeps fetching what it did).

Nothing is lost and nothing is left half done:

* a download goes to ``FILE.part`` and is renamed to ``FILE`` only once its SHA-256 matches; the ``.part`` of an
  interrupted run is resumed with an HTTP Range request (and restarted if the server ignores Range);
* a complete file is never replaced: a second run checks its checksum and says there is nothing to do, and a file in
  the way whose checksum differs is an error that names it;
* the archive is extracted (tarfile's ``"data"`` filter; members that would land outside are refused) into a hidden
  folder beside its destination, and each of its top-level folders is then moved into place with a rename; a folder
  that is already there (``STS/`` from another copy) is kept, never merged into or replaced;
* a failed download removes the folders it created that are still empty (one holding a ``.part`` to resume stays).

Every file is checked against the SHA-256 recorded in :data:`DATA_FILES`, whichever ``--base_url`` serves it: a mirror
serves the same files. ``--sha256 NAME=HEX`` replaces the expected checksum, for a mirror that serves other bytes on
purpose.

Why not a library. The files are on the Hub (:data:`DEFAULT_BASE_URL` is the ``resolve/main`` folder of the data set
``princeton-nlp/datasets-for-simcse``), so ``huggingface_hub.hf_hub_download(repo_type="dataset", local_dir=...)``
was the first candidate, and ``pooch.retrieve`` (SHA-256 checked, any URL) the second. Neither keeps the guarantees
above, as seen on the releases named (docs/development.md, "Third-party behaviour hf_cse works around"):

* ``hf_hub_download`` (huggingface_hub 2.4): a file of another checksum at the destination is deleted and replaced
  (hf_cse leaves a user's own corpus alone and names it); bytes received over HTTP (a mirror, or the Hub where the
  file is not in Xet storage) are checked for their size only, not against the SHA-256 the ``ETag`` announces (a
  corrupt or substituted file of the right size is kept); a run stopped mid-transfer (Ctrl-C, a killed job) leaves
  nothing, so the next run fetches every byte again (it resumes only within one call); a mirror must answer as the
  Hub does (``X-Repo-Commit`` and ``ETag`` headers), so a plain folder of files (a web server, a bucket) cannot be
  ``--base_url``; and it writes its ``.cache/huggingface/`` bookkeeping into the layout.
* ``pooch`` (1.9; not a dependency, so its test runs only where it is installed): no resume at all (no Range
  request: a broken transfer starts again from byte 0), and a file of another checksum at the destination is
  replaced. Its ``Untar`` extracts in place into one folder (``FILE.untar/``), and without tarfile's ``"data"``
  filter before Python 3.12.

Extraction is no library's either: moving each top-level folder into place whole, keeping one already there, is
this command's own.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import os
import posixpath
import re
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from ..atomic_files import sha256_of, write_errors_as_one_line
from ..data_files import DATA_FILES, DEFAULT_DATASETS, DataFile
from ..errors import DownloadError, UsageError
from ..links import open_no_follow
from ..version import __version__
from .cli import TRACEBACK_HELP, OneLineErrorParser, console_script

DEFAULT_BASE_URL = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main"
"""Where SimCSE's download scripts fetch ``wiki1m_for_simcse.txt``, ``nli_for_simcse.csv`` and ``senteval.tar``."""

_CHUNK_BYTES = 1 << 20
# Per connection attempt and per read: a stalled transfer fails (and can be resumed) instead of hanging.
_TIMEOUT_S = 60


def _mirror_hint(data_file: DataFile) -> str:
    """The offline line's advice on a mirror: one for a run without names must serve every default dataset's file;
    for a file fetched only when named (nli), its own file is enough."""
    filenames = [DATA_FILES[name].filename for name in DEFAULT_DATASETS] if data_file.by_default else []
    return (
        f"Check the network, or pass --base_url with a mirror that serves "
        f"{' and '.join(filenames or [data_file.filename])}."
    )


DOWNLOAD_ERRORS_HELP = (
    "A bad argument, or a file in the way whose checksum differs, prints one line and exits with 2; a failed "
    "download (server out of reach, HTTP error, broken transfer, checksum mismatch) or extraction prints one line and "
    f"exits with 1; run again to resume a broken transfer. {TRACEBACK_HELP}"
)
"""The ``--help`` epilog: what this command's errors are, not a training run's."""


def fetch(
    data_file: DataFile, dest: str | os.PathLike, *, base_url: str = DEFAULT_BASE_URL, sha256: str | None = None
) -> bool:
    """Download ``data_file`` under ``dest`` (and extract it if it is an archive) unless it is already there.

    Args:
        data_file: what to fetch; one of :data:`DATA_FILES`.
        dest: the folder its ``path`` is relative to.
        base_url: the folder URL that serves its ``filename``.
        sha256: the expected checksum; defaults to ``data_file.sha256``.

    Returns:
        Whether anything was downloaded or extracted (False: all was already in place).

    Raises:
        DownloadError: the server could not be reached or answered with an error, the transfer broke off (run again
            to resume) or the downloaded file's checksum differs (it is deleted).
        UsageError: a file with another checksum is in the way at the final path (it is left alone).
    """
    expected = (sha256 or data_file.sha256).lower()
    target = Path(dest) / data_file.path
    changed = _download(data_file, target, f"{base_url.rstrip('/')}/{data_file.filename}", expected)
    if data_file.extract:
        changed = _extract(data_file, target) or changed
    return changed


def _download(data_file: DataFile, target: Path, url: str, expected: str) -> bool:
    """Put the file of ``url`` at ``target`` through ``TARGET.part``, checked against ``expected``; False when a file
    with that checksum is already there."""
    if target.is_file():
        actual = sha256_of(target)
        if actual != expected:
            raise UsageError(
                f"{target} is already there but its SHA-256 is {actual}, not {expected}; it is left as it is. Move it "
                f"away and run again, or pass --sha256 {data_file.name}={actual} to accept it."
            )
        print(f"{data_file.name}: {target} is already there and its SHA-256 matches; nothing to download.")
        return False
    if target.exists():
        raise UsageError(f"{target} exists and is not a file; move it away and run again.")
    created = _missing_folders(target.parent)
    part = target.with_name(target.name + ".part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _fetch_into(data_file, url, part, expected)
        actual = sha256_of(part)
        if actual != expected:
            part.unlink()
            raise DownloadError(
                f"{url} served a file whose SHA-256 is {actual}, not {expected}; it was deleted and nothing was saved "
                f"at {target}. Run again; if --base_url serves another file on purpose, pass --sha256 "
                f"{data_file.name}={actual}."
            )
        if target.exists():  # appeared while downloading (another run): keep it, never replace a file
            part.unlink()
            raise UsageError(f"{target} appeared while downloading; it is left as it is, the download was deleted.")
    except BaseException:
        # A first run offline would otherwise leave an empty data/ that looks like a download; a folder holding a
        # .part to resume is kept.
        _remove_empty_folders(created)
        raise
    os.replace(part, target)  # atomic: the final path holds the whole verified file or nothing
    print(f"{data_file.name}: saved {target} (SHA-256 {actual}, verified).")
    return True


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first."""
    return list(itertools.takewhile(lambda path: not os.path.lexists(path), (folder, *folder.parents)))


def _remove_empty_folders(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) while they are empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except FileNotFoundError:
            continue
        except OSError:  # not empty: the folders above it are not empty either
            return


def _fetch_into(data_file: DataFile, url: str, part: Path, expected: str) -> None:
    """Download ``url`` into ``part``, resuming from the bytes already in it; a progress bar shows the transfer."""
    offset = part.stat().st_size if part.is_file() else 0
    response = _open(data_file, url, offset)
    if response is None:  # 416: the .part holds at least as many bytes as the file
        # A previous run got every byte but stopped before the rename; anything else is not worth resuming.
        if sha256_of(part) == expected:
            return
        print(f"{data_file.name}: {part} does not match the file on the server; downloading it again.")
        offset = 0
        response = _open(data_file, url, offset)
    if offset:
        start = _content_range_start(response) if response.status == 206 else None
        if start == offset:
            print(f"{data_file.name}: resuming {url} at byte {offset:,}.")
        else:
            # The server sent the whole file (it ignores Range) or another range: start again from byte 0.
            print(f"{data_file.name}: the server does not resume downloads; downloading {url} from the start.")
            if start is not None:
                response.close()
                response = _open(data_file, url, 0)
            offset = 0
    else:
        print(f"{data_file.name}: downloading {url}")
    # The .part is written in place, not through the atomic writer: the bytes it holds so far are what the next run
    # resumes from. The file's own path gets it only by os.replace once its SHA-256 matches (_download), so it holds
    # the whole verified file or nothing. A failed write (a full disk, a quota, an I/O error) is one line naming the
    # .part to resume from; a failed read, the server's side, is a broken transfer.
    # transformers' tqdm (its progress-bar switches apply), imported here: transformers costs a second of CPU to
    # import, which the parser and its --help do not need.
    from transformers.utils.logging import tqdm

    resume = f"run the command again, which resumes from {part}"
    with response, write_errors_as_one_line(data_file.filename, part.parent, then=resume):
        length = response.headers.get("Content-Length")
        total = offset + int(length) if length is not None and length.isdigit() else None
        with open_no_follow(part, "ab" if offset else "wb") as f:  # a link planted at FILE.part: refused
            with tqdm(
                total=total, initial=offset, unit="B", unit_scale=True, unit_divisor=1024, desc=data_file.filename
            ) as progress:
                while True:
                    try:
                        chunk = response.read(_CHUNK_BYTES)
                    except (OSError, http.client.HTTPException) as err:
                        raise DownloadError(
                            f"the download of {url} broke off at byte {f.tell():,} ({err}); run the command again "
                            f"to resume it from {part}."
                        ) from None
                    if not chunk:
                        break
                    f.write(chunk)
                    progress.update(len(chunk))
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the file is renamed into place
            received = f.tell()
    if total is not None and received != total:
        raise DownloadError(
            f"the download of {url} broke off at byte {received:,} of {total:,}; run the command again to resume it "
            f"from {part}."
        )


def _open(data_file: DataFile, url: str, offset: int) -> http.client.HTTPResponse | None:
    """The response to a GET of ``url`` (which serves ``data_file``) from byte ``offset``; None when the server
    answers 416 to a Range request."""
    headers = {"User-Agent": f"hf_cse/{__version__}"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=_TIMEOUT_S)
    except urllib.error.HTTPError as err:
        err.close()
        if err.code == 416 and offset:
            return None
        failure = f"HTTP error {err.code} ({err.reason}) for {url}"
    except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
        failure = f"cannot reach {url} ({err.reason if isinstance(err, urllib.error.URLError) else err})"
    hints = (_mirror_hint(data_file), data_file.without_download)
    raise DownloadError(f"{failure}. {' '.join(filter(None, hints))}") from None


def _content_range_start(response: http.client.HTTPResponse) -> int | None:
    """The first byte of a 206 response, from its ``Content-Range: bytes START-END/TOTAL``."""
    match = re.fullmatch(r"bytes (\d+)-\d+/(?:\d+|\*)", response.headers.get("Content-Range", "").strip())
    return int(match.group(1)) if match else None


def _extract(data_file: DataFile, archive: Path) -> bool:
    """Extract the top-level folders of ``archive`` that are missing beside it; False when none is missing."""
    into = archive.parent
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            tops = _top_level_names(members, archive)
            kept = [top for top in tops if os.path.lexists(into / top)]
            missing = [top for top in tops if top not in kept]
            if not missing:
                print(
                    f"{data_file.name}: {', '.join(top + '/' for top in tops)} already in {into}; nothing to extract."
                )
                return False
            for top in kept:
                _say_kept(data_file, into / top)
            if not hasattr(tarfile, "data_filter"):
                raise DownloadError(
                    f"extracting {archive} safely needs tarfile's extraction filters (Python 3.10.12+, 3.11.4+ or "
                    "3.12+); upgrade Python and run again."
                )
            # Extract into a hidden folder beside the destination (same file system, so the renames below are
            # atomic): a failure leaves no half-extracted tree where the configs look.
            extracted: list[str] = []
            staging = Path(tempfile.mkdtemp(prefix=f".{archive.name}.extracting-", dir=into))
            try:
                tar.extractall(
                    staging,
                    members=[member for member in members if _top_level(member.name) in missing],
                    filter="data",
                )
                for top in missing:
                    if os.path.lexists(into / top):  # appeared meanwhile (another run): keep it
                        _say_kept(data_file, into / top)
                    else:
                        os.rename(staging / top, into / top)
                        extracted.append(top)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except (tarfile.TarError, OSError) as err:
        if isinstance(err, DownloadError):
            raise
        raise DownloadError(
            f"cannot extract {archive}: {err}. The archive is kept; no partly extracted folder was left in {into}."
        ) from None
    print(f"{data_file.name}: extracted {', '.join(top + '/' for top in extracted)} into {into}.")
    return bool(extracted)


def _say_kept(data_file: DataFile, folder: Path) -> None:
    print(f"{data_file.name}: kept the existing {folder} (not replaced by the archive's copy).")


def _top_level(name: str) -> str:
    """The first component of a member name, ``./`` and ``a/../`` resolved (``"."`` for the archive's root)."""
    return posixpath.normpath(name).split("/", 1)[0]


def _top_level_names(members: list[tarfile.TarInfo], archive: Path) -> list[str]:
    """The top-level entries of the archive, in order; a member that would land outside the folder is an error."""
    tops: list[str] = []
    for member in members:
        top = _top_level(member.name)
        if posixpath.isabs(member.name) or top == "..":
            raise DownloadError(
                f"{archive} holds {member.name!r}, which would be extracted outside {archive.parent}; refusing to "
                "extract anything from it."
            )
        if top != ".":
            tops.append(top)
    return list(dict.fromkeys(tops))


def _checksum_overrides(parser: argparse.ArgumentParser, values: Sequence[str]) -> dict[str, str]:
    """``{name: sha256}`` from the ``--sha256 NAME=HEX`` flags; a malformed one exits with a usage error."""
    checksums = {}
    for value in values:
        name, _, digest = value.partition("=")
        if name not in DATA_FILES:
            parser.error(f"--sha256 {value}: unknown dataset {name!r}; valid: {', '.join(DATA_FILES)}.")
        if not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
            parser.error(f"--sha256 {value}: expected {name}=HEX with the 64 hex digits of a SHA-256.")
        checksums[name] = digest.lower()
    return checksums


def build_parser() -> OneLineErrorParser:
    """The argument parser of ``python -m hf_cse.download``."""
    parser = OneLineErrorParser(
        prog="python -m hf_cse.download",
        epilog=DOWNLOAD_ERRORS_HELP,
        description="Download SimCSE's training data (wiki1m; nli, its NLI triplets) and SentEval's evaluation data "
        "(senteval) into the layout that examples/configs/paper/*.yaml name, checking each file's SHA-256. A second "
        "run checks what is there and downloads nothing; an interrupted download resumes.",
    )
    parser.add_argument(
        "datasets",
        nargs="*",
        metavar="DATASET",
        help=f"What to fetch (default: {' and '.join(DEFAULT_DATASETS)}, what the unsupervised paper configs read): "
        f"wiki1m ({DATA_FILES['wiki1m'].path}), nli ({DATA_FILES['nli'].path}, SimCSE's NLI triplets that "
        f"sup_simcse_*.yaml read; only when named), senteval ({DATA_FILES['senteval'].path}, extracted beside it "
        "into STS/, SICK/, ...).",
    )
    parser.add_argument(
        "--dest",
        default=".",
        help="Folder the layout is relative to (default: the current folder); created if needed.",
    )
    parser.add_argument(
        "--base_url",
        default=DEFAULT_BASE_URL,
        help=f"URL of a folder serving the datasets' files ({', '.join(f.filename for f in DATA_FILES.values())}; "
        f"default: SimCSE's, {DEFAULT_BASE_URL}). The files must have the recorded checksums unless --sha256 says "
        "otherwise.",
    )
    parser.add_argument(
        "--sha256",
        action="append",
        default=[],
        metavar="NAME=HEX",
        help="Expect this SHA-256 for dataset NAME instead of the recorded one (a mirror serving other bytes on "
        "purpose); repeatable.",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, Path]:
    """Fetch the datasets named in ``argv``; returns ``{name: path of its file}``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # Checked here, not with argparse's choices: given no name, argparse (3.11) checks the empty list itself against
    # the choices of a nargs="*" positional, and fails.
    for name in args.datasets:
        if name not in DATA_FILES:
            parser.error(f"unknown dataset {name!r}; valid: {', '.join(DATA_FILES)}.")
    names = list(dict.fromkeys(args.datasets)) or DEFAULT_DATASETS
    checksums = _checksum_overrides(parser, args.sha256)
    url = urllib.parse.urlsplit(args.base_url)
    if url.scheme not in ("http", "https") or not url.netloc:
        parser.error(f"--base_url must be an http:// or https:// URL, got {args.base_url!r}.")
    dest = Path(args.dest)
    if dest.exists() and not dest.is_dir():
        parser.error(f"--dest {args.dest!r} exists and is not a directory.")

    changed = [fetch(DATA_FILES[name], dest, base_url=args.base_url, sha256=checksums.get(name)) for name in names]
    if not any(changed):
        # The absolute folder: "under ." (the default --dest) ended the sentence as "under ..", the parent folder.
        print(f"Nothing to do: {' and '.join(names)} already in place in {os.path.abspath(dest)}")
    return {name: dest / DATA_FILES[name].path for name in names}


def console_main() -> None:
    """The command-line entry point: ``python -m hf_cse.download`` and the ``hf-cse-download`` console script."""
    console_script(main, build_parser().prog)
