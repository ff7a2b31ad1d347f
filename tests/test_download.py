"""``python -m hf_cse.download`` end to end against a local HTTP server on 127.0.0.1 (a thread) that serves a tiny
wiki1m text, a tiny NLI triplet CSV and a tiny senteval.tar built here: the layout the paper configs name, resuming,
servers that ignore Range, checksum mismatches, offline and HTTP errors as one line, second runs that do nothing, safe
extraction, nli fetched only when named. What ``huggingface_hub.hf_hub_download`` and ``pooch`` lack for this command
is in the module docstring of :mod:`hf_cse.commands.download` and docs/development.md."""

from __future__ import annotations

import hashlib
import http.server
import io
import re
import socket
import tarfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from conftest import REPO_ROOT, write_senteval_dir

from hf_cse.commands.cli import run_command
from hf_cse.commands.download import DATA_FILES, build_parser, main
from hf_cse.evaluation import STS_TASKS, load_sts_task
from hf_cse.evaluation.sts_data import STS_SUBSETS

PROG = "python -m hf_cse.download"
WIKI = "".join(f"Sentence number {i} of a tiny stand-in for wiki1m.\n" for i in range(3000)).encode()
NLI = b"sent0,sent1,hard_neg\n" + b"".join(
    f"A man plays guitar number {i}.,A man plays music.,Nobody is playing.\n".encode() for i in range(300)
)
STS_TEST = b"main-captions\tMSRvid\t2012test\t0001\t5.000\tA girl is styling her hair.\tA girl is brushing her hair.\n"
SICK_TEST = b"pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n1\tA\tB\t4.5\tNEUTRAL\n"


def build_tar(files: dict[str, bytes], symlinks: dict[str, str] | None = None) -> bytes:
    """A tar archive with ``files`` (name: content), then ``symlinks`` (name: target), in that order."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return buffer.getvalue()


SENTEVAL = build_tar({"STS/STSBenchmark/sts-test.csv": STS_TEST, "SICK/SICK_test_annotated.txt": SICK_TEST})
FILES = {"wiki1m_for_simcse.txt": WIKI, "nli_for_simcse.csv": NLI, "senteval.tar": SENTEVAL}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def checksum_flags(wiki: bytes = WIKI, senteval: bytes = SENTEVAL, nli: bytes = NLI) -> list[str]:
    """``--sha256`` for the fixture files: the recorded checksums are those of the real files."""
    return [
        *("--sha256", f"wiki1m={sha256(wiki)}"),
        *("--sha256", f"senteval={sha256(senteval)}"),
        *("--sha256", f"nli={sha256(nli)}"),
    ]


class FileServer:
    """Serves ``files`` at ``base_url/NAME`` from a thread; records each GET's file name and Range header, and counts
    the body bytes sent. A HEAD gets the GET's status and headers (as any web server answers it).

    Args:
        files: file name to content.
        honour_range: answer ``Range: bytes=N-`` with 206 (or 416 past the end); False sends the whole file (200).
        break_after: the first response announces its full length but sends only this many body bytes, then closes.
    """

    def __init__(
        self,
        files: dict[str, bytes],
        *,
        honour_range: bool = True,
        break_after: int | None = None,
    ):
        self.files = files
        self.honour_range = honour_range
        self.break_after = break_after
        self.requests: list[tuple[str, str | None]] = []
        self.body_bytes_sent = 0
        serve = self._serve

        class Handler(http.server.BaseHTTPRequestHandler):  # HTTP/1.0: one request per connection
            def do_GET(self) -> None:
                serve(self)

            def do_HEAD(self) -> None:
                serve(self, head=True)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/simcse"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def _serve(self, handler: http.server.BaseHTTPRequestHandler, head: bool = False) -> None:
        name = handler.path.removeprefix("/simcse/")
        range_header = handler.headers.get("Range")
        if not head:
            self.requests.append((name, range_header))
        data = self.files.get(name)
        if data is None:
            handler.send_error(404)
            return

        start = 0
        if range_header is not None and self.honour_range:
            start = int(re.fullmatch(r"bytes=(\d+)-", range_header).group(1))
            if start >= len(data):
                handler.send_response(416)
                handler.send_header("Content-Range", f"bytes */{len(data)}")
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
            handler.send_response(206)
            handler.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            handler.send_response(200)
        body = data[start:]
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if head:
            return
        if self.break_after is not None:
            body, self.break_after = body[: self.break_after], None
        handler.wfile.write(body)
        self.body_bytes_sent += len(body)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def serve() -> Iterator[Callable[..., FileServer]]:
    """``serve(files=FILES, **options)`` starts a :class:`FileServer`; all are stopped after the test."""
    servers: list[FileServer] = []

    def start(files: dict[str, bytes] = FILES, **options: object) -> FileServer:
        servers.append(FileServer(files, **options))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def dead_url() -> str:
    """A base URL on a local port that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/simcse"


def fails(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the command as its console script does; returns its exit status and the last line of stderr (the error
    line; a progress bar drawn before it comes first)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        run_command(main, PROG, argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return exit_info.value.code, err.splitlines()[-1]


def downstream(dest: Path) -> Path:
    return dest / "SentEval" / "data" / "downstream"


def test_fresh_download_gives_the_layout_the_paper_configs_name(
    serve: Callable[..., FileServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve()
    paths = main(["--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags()])

    # Without names: wiki1m and senteval, not the NLI triplets (fetched only when named).
    assert paths == {name: tmp_path / DATA_FILES[name].path for name in ("wiki1m", "senteval")}
    assert (tmp_path / "data" / "wiki1m_for_simcse.txt").read_bytes() == WIKI
    # The archive is kept beside what it held, as SimCSE's own script leaves it; no .part, no staging folder.
    assert sorted(path.name for path in downstream(tmp_path).iterdir()) == ["SICK", "STS", "senteval.tar"]
    assert (downstream(tmp_path) / "senteval.tar").read_bytes() == SENTEVAL
    assert (downstream(tmp_path) / "STS" / "STSBenchmark" / "sts-test.csv").read_bytes() == STS_TEST
    assert (downstream(tmp_path) / "SICK" / "SICK_test_annotated.txt").read_bytes() == SICK_TEST
    assert sorted(path.name for path in (tmp_path / "data").iterdir()) == ["wiki1m_for_simcse.txt"]
    assert server.requests == [("wiki1m_for_simcse.txt", None), ("senteval.tar", None)]
    out, err = capsys.readouterr()
    assert f"SHA-256 {sha256(WIKI)}, verified" in out
    assert "extracted STS/, SICK/ into" in out
    assert "wiki1m_for_simcse.txt: 100%" in err  # the progress bar

    assert main(["nli", "--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags()]) == {
        "nli": tmp_path / "data" / "nli_for_simcse.csv"
    }
    assert (tmp_path / "data" / "nli_for_simcse.csv").read_bytes() == NLI
    assert server.requests[2:] == [("nli_for_simcse.csv", None)]

    # Every shipped config reads what this command wrote (the quickstart's corpus comes with gensim: a source name).
    for config_path in sorted((REPO_ROOT / "examples" / "configs").rglob("*.yaml")):
        config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
        if config["train_file"] == "gensim:lee":
            continue
        assert (tmp_path / config["train_file"]).is_file(), config_path.name
        if "sts_dir" in config:
            assert (tmp_path / config["sts_dir"] / "STSBenchmark").is_dir(), config_path.name


def test_second_run_downloads_nothing_and_says_so(
    serve: Callable[..., FileServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve()
    main(["--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags()])
    files = sorted(path for path in tmp_path.rglob("*"))
    stamps = [path.stat().st_mtime_ns for path in files]
    capsys.readouterr()

    # No server at all this time: everything is checked on disk.
    main(["--dest", str(tmp_path), "--base_url", dead_url(), *checksum_flags()])

    assert sorted(path for path in tmp_path.rglob("*")) == files
    assert [path.stat().st_mtime_ns for path in files] == stamps
    out = capsys.readouterr().out
    assert "data/wiki1m_for_simcse.txt is already there and its SHA-256 matches; nothing to download." in out
    assert f"senteval: STS/, SICK/ already in {downstream(tmp_path)}; nothing to extract." in out
    assert out.endswith(f"Nothing to do: wiki1m and senteval already in place in {tmp_path}\n")
    assert len(server.requests) == 2


def test_a_second_run_into_the_current_folder_names_it(
    serve: Callable[..., FileServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # the default --dest, "."
    main(["wiki1m", "--base_url", serve().base_url, *checksum_flags()])
    capsys.readouterr()
    main(["wiki1m", "--base_url", dead_url(), *checksum_flags()])
    assert capsys.readouterr().out.endswith(f"Nothing to do: wiki1m already in place in {tmp_path}\n")


def test_only_wiki1m(serve: Callable[..., FileServer], tmp_path: Path) -> None:
    server = serve()
    main(["wiki1m", "--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags()])
    assert server.requests == [("wiki1m_for_simcse.txt", None)]
    assert sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*")) == [
        "data",
        "data/wiki1m_for_simcse.txt",
    ]


def test_only_nli_and_a_second_run_of_it_downloads_nothing(
    serve: Callable[..., FileServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve()
    main(["nli", "--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags()])
    assert server.requests == [("nli_for_simcse.csv", None)]
    assert sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*")) == [
        "data",
        "data/nli_for_simcse.csv",
    ]
    capsys.readouterr()

    main(["nli", "--dest", str(tmp_path), "--base_url", dead_url(), *checksum_flags()])
    assert capsys.readouterr().out.endswith(f"Nothing to do: nli already in place in {tmp_path}\n")


def test_a_partial_download_resumes_without_fetching_its_bytes_again(
    serve: Callable[..., FileServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve()
    part = tmp_path / "data" / "wiki1m_for_simcse.txt.part"
    part.parent.mkdir()
    part.write_bytes(WIKI[:1000])

    main(["wiki1m", "--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags()])

    assert server.requests == [("wiki1m_for_simcse.txt", "bytes=1000-")]
    assert server.body_bytes_sent == len(WIKI) - 1000
    assert (tmp_path / "data" / "wiki1m_for_simcse.txt").read_bytes() == WIKI
    assert not part.exists()
    assert "resuming" in capsys.readouterr().out


def test_a_broken_transfer_keeps_its_part_and_the_next_run_resumes_it(
    serve: Callable[..., FileServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(break_after=5000)
    argv = ["wiki1m", "--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags()]
    target = tmp_path / "data" / "wiki1m_for_simcse.txt"

    code, line = fails(argv, capsys)

    url = f"{server.base_url}/wiki1m_for_simcse.txt"
    assert (code, line) == (
        1,
        f"{PROG}: error: the download of {url} broke off at byte 5,000 of {len(WIKI):,}; run the command again to "
        f"resume it from {target}.part.",
    )
    assert not target.exists()
    assert target.with_name(target.name + ".part").read_bytes() == WIKI[:5000]

    main(argv)
    assert server.requests[-1] == ("wiki1m_for_simcse.txt", "bytes=5000-")
    assert server.body_bytes_sent == len(WIKI)  # 5,000 bytes, then the rest: none twice
    assert target.read_bytes() == WIKI


def test_a_server_that_ignores_range_restarts_the_download(
    serve: Callable[..., FileServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(honour_range=False)
    part = tmp_path / "data" / "wiki1m_for_simcse.txt.part"
    part.parent.mkdir()
    part.write_bytes(b"not the start of the file\n" * 40)

    main(["wiki1m", "--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags()])

    assert server.requests == [("wiki1m_for_simcse.txt", f"bytes={40 * 26}-")]
    assert (tmp_path / "data" / "wiki1m_for_simcse.txt").read_bytes() == WIKI
    assert not part.exists()
    assert "the server does not resume downloads; downloading" in capsys.readouterr().out


def test_a_complete_part_left_before_the_rename_is_not_downloaded_again(
    serve: Callable[..., FileServer], tmp_path: Path
) -> None:
    server = serve()
    part = tmp_path / "data" / "wiki1m_for_simcse.txt.part"
    part.parent.mkdir()
    part.write_bytes(WIKI)

    main(["wiki1m", "--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags()])

    assert server.requests == [("wiki1m_for_simcse.txt", f"bytes={len(WIKI)}-")]  # answered 416
    assert server.body_bytes_sent == 0
    assert (tmp_path / "data" / "wiki1m_for_simcse.txt").read_bytes() == WIKI


def test_a_corrupt_archive_is_deleted_and_nothing_is_extracted(
    serve: Callable[..., FileServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corrupt = bytearray(SENTEVAL)
    corrupt[600] ^= 0xFF  # inside the first member's content
    server = serve({"senteval.tar": bytes(corrupt)})

    code, line = fails(["senteval", "--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags()], capsys)

    url = f"{server.base_url}/senteval.tar"
    assert (code, line) == (
        1,
        f"{PROG}: error: {url} served a file whose SHA-256 is {sha256(bytes(corrupt))}, not {sha256(SENTEVAL)}; it "
        f"was deleted and nothing was saved at {downstream(tmp_path) / 'senteval.tar'}. Run again; if --base_url "
        f"serves another file on purpose, pass --sha256 senteval={sha256(bytes(corrupt))}.",
    )
    assert list(tmp_path.iterdir()) == []  # no archive, no .part, no STS/ or SICK/, no empty SentEval/ tree


def test_a_mirror_is_checked_against_the_recorded_checksums(
    serve: Callable[..., FileServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve()
    argv = ["wiki1m", "--dest", str(tmp_path), "--base_url", server.base_url]

    code, line = fails(argv, capsys)

    assert code == 1
    assert f"whose SHA-256 is {sha256(WIKI)}, not {DATA_FILES['wiki1m'].sha256};" in line
    assert not (tmp_path / "data" / "wiki1m_for_simcse.txt").exists()
    # What the message suggests works.
    main([*argv, "--sha256", f"wiki1m={sha256(WIKI)}"])
    assert (tmp_path / "data" / "wiki1m_for_simcse.txt").read_bytes() == WIKI


def test_offline_is_one_line_naming_the_url_and_suggesting_a_mirror(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base_url = dead_url()
    code, line = fails(["--dest", str(tmp_path), "--base_url", base_url], capsys)

    assert code == 1
    assert re.fullmatch(
        rf"{re.escape(PROG)}: error: cannot reach {re.escape(base_url)}/wiki1m_for_simcse\.txt \(.*refused.*\)\. "
        r"Check the network, or pass --base_url with a mirror that serves wiki1m_for_simcse\.txt and senteval\.tar\. "
        r"Any text file of one sentence a line serves as train_file\.",
        line,
    ), line
    assert list(tmp_path.iterdir()) == []  # no empty data/ left behind


def test_nli_offline_names_its_own_file_and_what_serves_instead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base_url = dead_url()
    code, line = fails(["nli", "--dest", str(tmp_path), "--base_url", base_url], capsys)

    assert code == 1
    assert line.startswith(f"{PROG}: error: cannot reach {base_url}/nli_for_simcse.csv (")
    # A mirror for this run needs the NLI file only, not the default datasets' files.
    assert line.endswith(
        "). Check the network, or pass --base_url with a mirror that serves nli_for_simcse.csv. Any CSV with "
        "sent0,sent1[,hard_neg] or anchor,positive[,negative] columns serves as train_file."
    )
    assert list(tmp_path.iterdir()) == []


def test_senteval_offline_says_that_any_folder_in_sentevals_layout_serves_and_what_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base_url = dead_url()
    code, line = fails(["senteval", "--dest", str(tmp_path / "dest"), "--base_url", base_url], capsys)

    assert code == 1
    assert line.startswith(f"{PROG}: error: cannot reach {base_url}/senteval.tar (")
    assert line.endswith(
        "senteval.tar. Any folder in SentEval's layout serves as --sts_dir: STS12-en-test/ to STS16-en-test/ "
        "(STS.input.SUBSET.txt and STS.gs.SUBSET.txt for each of SentEval's subsets), STSBenchmark/"
        "sts-{train,dev,test}.csv and SICK/SICK_{train,trial,test_annotated}.txt (SICK/ inside it or beside it)."
    )
    # A folder of exactly the files the line names (SUBSET: each of SentEval's) serves every STS task.
    named = {
        *(
            f"STS{task[3:]}-en-test/STS.{kind}.{subset}.txt"
            for task, subsets in STS_SUBSETS.items()
            for subset in subsets
            for kind in ("input", "gs")
        ),
        *(f"STSBenchmark/sts-{split}.csv" for split in ("train", "dev", "test")),
        *(f"SICK/SICK_{split}.txt" for split in ("train", "trial", "test_annotated")),
    }
    sts_dir = write_senteval_dir(tmp_path / "sts")
    assert {path.relative_to(sts_dir).as_posix() for path in sts_dir.rglob("*") if path.is_file()} == named
    for task in STS_TASKS:
        assert load_sts_task(task, sts_dir, split="all" if task == "sickr" else None)


def test_a_failed_download_removes_only_the_empty_folders_it_created(
    serve: Callable[..., FileServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = fails(["--dest", str(tmp_path / "new" / "dest"), "--base_url", dead_url()], capsys)
    assert code == 1
    assert list(tmp_path.iterdir()) == []  # --dest too, created by the run

    (tmp_path / "SentEval").mkdir()  # the user's: kept
    server = serve({"wiki1m_for_simcse.txt": WIKI})  # senteval.tar: 404
    code, _ = fails(["--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags()], capsys)
    assert code == 1
    assert sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")) == [
        "SentEval",
        "data",
        "data/wiki1m_for_simcse.txt",
    ]


def test_help_describes_download_errors() -> None:
    epilog = build_parser().epilog
    assert "a failed download (server out of reach, HTTP error, broken transfer, checksum mismatch)" in epilog
    assert "resume a broken transfer. --traceback (or HF_CSE_TRACEBACK=1) shows the traceback." in epilog
    assert "diverged" not in epilog and "output folder locked" not in epilog


def test_an_http_error_is_one_line_naming_the_url(
    serve: Callable[..., FileServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve({"wiki1m_for_simcse.txt": WIKI})
    code, line = fails(["--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags()], capsys)

    assert (code, line) == (
        1,
        f"{PROG}: error: HTTP error 404 (Not Found) for {server.base_url}/senteval.tar. Check the network, or pass "
        "--base_url with a mirror that serves wiki1m_for_simcse.txt and senteval.tar. Any folder in SentEval's layout "
        "serves as --sts_dir: STS12-en-test/ to STS16-en-test/ (STS.input.SUBSET.txt and STS.gs.SUBSET.txt for each "
        "of SentEval's subsets), STSBenchmark/sts-{train,dev,test}.csv and SICK/SICK_{train,trial,test_annotated}.txt "
        "(SICK/ inside it or beside it).",
    )
    assert (tmp_path / "data" / "wiki1m_for_simcse.txt").read_bytes() == WIKI  # what did arrive is kept


def test_a_different_file_in_the_way_is_left_alone(
    serve: Callable[..., FileServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve()
    mine = tmp_path / "data" / "wiki1m_for_simcse.txt"
    mine.parent.mkdir()
    mine.write_bytes(b"my own corpus\n")
    digest = sha256(mine.read_bytes())

    code, line = fails(["wiki1m", "--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags()], capsys)

    assert code == 2
    assert line.startswith(f"{PROG}: error: {mine} is already there but its SHA-256 is {digest}")
    assert mine.read_bytes() == b"my own corpus\n"
    assert server.requests == []


def test_extraction_keeps_an_existing_folder_and_adds_the_missing_ones(
    serve: Callable[..., FileServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve()
    mine = downstream(tmp_path) / "STS" / "mine.txt"
    mine.parent.mkdir(parents=True)
    mine.write_text("an STS folder from elsewhere\n")

    main(["senteval", "--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags()])

    assert sorted(path.name for path in (downstream(tmp_path) / "STS").iterdir()) == ["mine.txt"]  # not merged into
    assert (downstream(tmp_path) / "SICK" / "SICK_test_annotated.txt").read_bytes() == SICK_TEST
    out = capsys.readouterr().out
    assert f"kept the existing {downstream(tmp_path) / 'STS'} (not replaced by the archive's copy)." in out
    assert "extracted SICK/ into" in out


@pytest.mark.parametrize(
    ("archive", "message"),
    [
        (
            build_tar({"STS/a.txt": b"a\n", "../evil.txt": b"evil\n"}),
            "holds '../evil.txt', which would be extracted outside",
        ),
        # SICK/ is extracted before the link fails tarfile's "data" filter: the failure happens half way through.
        (build_tar({"SICK/a.txt": b"a\n"}, symlinks={"STS/link": "../../../../outside"}), "cannot extract"),
    ],
    ids=["path-outside", "link-outside"],
)
def test_an_unsafe_archive_extracts_nothing(
    serve: Callable[..., FileServer],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    archive: bytes,
    message: str,
) -> None:
    server = serve({"senteval.tar": archive})
    argv = ["senteval", "--dest", str(tmp_path), "--base_url", server.base_url, *checksum_flags(senteval=archive)]

    code, line = fails(argv, capsys)

    assert code == 1
    assert message in line, line
    # The verified archive stays; no partial SICK/ or STS/, no staging folder, nothing outside.
    assert sorted(path.name for path in downstream(tmp_path).iterdir()) == ["senteval.tar"]
    assert not (downstream(tmp_path).parent / "evil.txt").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["wikipedia"], "unknown dataset 'wikipedia'; valid: wiki1m, nli, senteval."),
        (
            ["--sha256", "wiki=" + "0" * 64],
            f"--sha256 wiki={'0' * 64}: unknown dataset 'wiki'; valid: wiki1m, nli, senteval.",
        ),
        (["--sha256", "wiki1m=abc"], "--sha256 wiki1m=abc: expected wiki1m=HEX with the 64 hex digits of a SHA-256."),
        (
            ["--base_url", "ftp://mirror/simcse"],
            "--base_url must be an http:// or https:// URL, got 'ftp://mirror/simcse'.",
        ),
    ],
    ids=["dataset", "sha256-name", "sha256-digest", "base_url"],
)
def test_bad_arguments_name_the_value_and_what_is_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, line = fails([*argv, "--dest", str(tmp_path)], capsys)
    assert (code, line) == (2, f"{PROG}: error: {message}")
    assert list(tmp_path.iterdir()) == []
