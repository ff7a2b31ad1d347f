"""Every command of the docs' shell blocks, so that a page cannot drift from the code: each ``python run_unsup.py`` and
``python -m hf_cse.*`` command that can run offline runs, in the page's order, in a scratch folder holding small
copies of what the page reads (SentEval's STS layout, the corpus, pairs, a retrieval folder, trained runs); the tiny
model stands in for every model, runs are 2 steps, Matryoshka dimensions shrink to the tiny model's. A command that
needs the network, or the runs of other tests, is parsed by its own parser; every other program (pip, ln, accelerate,
...) is named below with why it is not run, so that a new command must be placed here.

docs/decoders.md and docs/objectives/mntp.md are left to the decoder pages' own test (tiny decoders stand in for their
models there).
"""

from __future__ import annotations

import importlib
import json
import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from common.commands import run_unsup_argv
from conftest import REPO_ROOT, SENTENCES, run_unsup, write_senteval_downstream

DOCS_DIR = REPO_ROOT / "docs"
OTHER_TESTS_PAGES = {"decoders.md", "objectives/mntp.md"}
SHELL_BLOCK = re.compile(r"^[ \t]*```(?:bash|sh|shell|console)[^\n]*\n(.*?)^[ \t]*```", flags=re.S | re.M)

#: Programs the docs show that this test does not run, and why.
NOT_RUN = {
    "pip": "installs packages (the README's set-up commands are checked against CI's in tests/test_examples.py)",
    "ln": "links the reader's own data",
    "mkdir": "makes the folder of the reader's links",
    "mkdocs": "builds the site (CI runs it)",
    "hf": "logs in to the Hub",
    "accelerate": "launches several processes or machines (tests/test_distributed*.py launch them)",
    "python -m pytest": "the test suite itself",
}


def needs_network_or_other_tests(command: list[str]) -> str | None:
    """Why an hf_cse command is parsed only, or ``None`` when it runs here."""
    program = " ".join(command[:3])
    if program == "python -m hf_cse.download":
        return "fetches SimCSE's data over the network (tests/test_download.py serves it from a local server)"
    if "--mteb_tasks" in command:
        return "mteb downloads its tasks from the Hub (tests/test_mteb.py builds a task in the test)"
    if "--push_to_hub" in command:
        return "creates a Hub repository"
    if program == "python -m hf_cse.sweep":
        return "twelve trainings (tests/test_sweep.py runs the command)"
    if program == "python -m hf_cse.transfer":
        return "SentEval's transfer data (tests/test_transfer.py writes it in the test)"
    return None


@dataclass
class DocCommand:
    page: str
    argv: list[str]
    """The words of the command, optional ``[...]`` parts left out."""

    @property
    def program(self) -> str:
        if self.argv[:2] == ["python", "-m"]:
            return " ".join(self.argv[:3])
        if self.argv[:2] == ["python", "run_unsup.py"]:
            return "python run_unsup.py"
        return self.argv[0]


def without_optional_parts(words: list[str]) -> list[str]:
    """``words`` without the ``[--flag VALUE ...]`` parts the docs mark optional."""
    kept, depth = [], 0
    for word in words:
        depth += word.startswith("[")
        if depth == 0:
            kept.append(word)
        depth -= word.endswith("]")
    return kept


def doc_commands() -> list[DocCommand]:
    """Each command of each shell block of docs/ (``&&`` and lines split, ``\\`` continuations joined)."""
    commands = []
    for page in sorted(DOCS_DIR.rglob("*.md")):
        name = page.relative_to(DOCS_DIR).as_posix()
        if name in OTHER_TESTS_PAGES:
            continue
        for block in SHELL_BLOCK.findall(page.read_text(encoding="utf-8")):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                for part in line.split("&&"):
                    words = without_optional_parts(shlex.split(part, comments=True))
                    if words:
                        commands.append(DocCommand(name, words))
    return commands


def hf_cse_main(program: str) -> Callable[[list[str]], object]:
    """The ``main(argv)`` of ``python run_unsup.py`` or ``python -m hf_cse.NAME``."""
    if program == "python run_unsup.py":
        return run_unsup.main
    return importlib.import_module(f"hf_cse.commands.{program.rsplit('.', 1)[1]}").main


def parse_only(command: DocCommand) -> None:
    """Parse the command with its own parser: a flag renamed or removed fails here."""
    if command.program == "python run_unsup.py":
        run_unsup.parse_args(command.argv[2:])
        return
    module = importlib.import_module(f"hf_cse.commands.{command.program.rsplit('.', 1)[1]}")
    words = command.argv[3:]
    own = words[: words.index("--")] if "--" in words else words  # a sweep passes what follows to run_unsup.py
    module.build_parser().parse_args(own)


#: The docs' Matryoshka dimensions (all-MiniLM-L6-v2's 384 and prefixes) as the tiny model's (32 wide).
TINY_DIMENSIONS = {"384": "32", "256": "16", "128": "8", "64": "4"}
DIMENSION_FLAGS = ("--matryoshka_dims", "--truncate_dim")
#: Run folders the pages read without training them there: a tiny run (avg pooling, as the hard-negative miner
#: needs from a random model: its cls embeddings are near alike) is put there first.
RUN_FOLDERS = re.compile(r"^(outputs|result)/[\w.-]+$")


def tiny_command(argv: list[str], tiny_model: Path) -> list[str]:
    """``argv`` with the tiny model for every model, the tiny Matryoshka dimensions, a 2-step CPU run for a training,
    a push as a dry run."""
    words, flag = [], None
    for word in argv:
        if flag == "--model_name_or_path" and not RUN_FOLDERS.match(word):
            word = str(tiny_model)
        elif flag in DIMENSION_FLAGS and word.isdigit():
            word = TINY_DIMENSIONS[word]
        flag = word if word.startswith("--") else flag if flag in DIMENSION_FLAGS else None
        words.append(word)
    if argv[:2] == ["python", "run_unsup.py"]:
        if "--model_name_or_path" not in words:  # the config's model
            words += ["--model_name_or_path", str(tiny_model)]
        words += ["--max_steps", "2", "--per_device_train_batch_size", "4", "--use_cpu", "true"]
        words += ["--report_to", "none", "--max_seq_length", "24"]
    if argv[:3] == ["python", "-m", "hf_cse.push"]:
        words.append("--dry_run")
    return words


#: Pairs whose positives share most words with their anchors: a random model scores them close enough to leave
#: candidates under the miner's margin (as tests/test_mine.py's do).
MINABLE_PAIRS = [
    ("a man is playing a guitar", "a man plays a guitar"),
    ("a woman plays the piano", "the woman is playing a piano"),
    ("the dog runs in the park", "a dog is running in a park"),
    ("a cat is in the house", "the cat is inside the house"),
    ("children eat food on the street", "kids eat food on the street"),
    ("the red car is big", "the big red car"),
    ("a small blue car", "a small blue car is here"),
    ("the child likes the dog", "the kid likes a dog"),
    ("the woman is running", "the woman is running fast"),
    ("a man cooks pasta", "a man is cooking pasta"),
    ("a boy reads a book", "a boy is reading a book"),
    ("two men ride horses", "two men are riding horses"),
    ("the girl sings a song", "the girl is singing a song"),
    ("a chef slices onions", "a chef is slicing onions"),
    ("people walk on the beach", "people are walking on the beach"),
    ("the sun is hot", "the sun is hot today"),
]


def write_page_data(folder: Path) -> None:
    """What the pages' commands read, under the names they give, in ``folder``, which stands for the repository
    root the commands run from (its ``examples/`` linked in)."""
    (folder / "examples").symlink_to(REPO_ROOT / "examples", target_is_directory=True)
    write_senteval_downstream(folder)
    (folder / "data").mkdir()
    (folder / "data" / "wiki1m_for_simcse.txt").write_text("\n".join(SENTENCES * 2) + "\n", encoding="utf-8")
    pairs = MINABLE_PAIRS
    for name in ("pairs.csv", "my_pairs.csv"):
        (folder / name).write_text("sent0,sent1\n" + "".join(f"{a},{b}\n" for a, b in pairs), encoding="utf-8")
    triplets = [(a, b, SENTENCES[(i + 5) % len(SENTENCES)]) for i, (a, b) in enumerate(pairs)]
    (folder / "data" / "nli_for_simcse.csv").write_text(
        "sent0,sent1,hard_neg\n" + "".join(f"{a},{b},{c}\n" for a, b, c in triplets), encoding="utf-8"
    )
    beir = folder / "data" / "my_docs"
    (beir / "qrels").mkdir(parents=True)
    (beir / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": a}) + "\n" for i, (a, _) in enumerate(pairs)), encoding="utf-8"
    )
    (beir / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": b}) + "\n" for i, (_, b) in enumerate(pairs)), encoding="utf-8"
    )
    (beir / "qrels" / "dev.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(len(pairs))), encoding="utf-8"
    )


@pytest.fixture(scope="module")
def tiny_run(tiny_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny run with avg pooling, STS results and all: what a page's ``outputs/...`` stands for."""
    work = tmp_path_factory.mktemp("stand_in_run")
    run_unsup.main(run_unsup_argv(tiny_encoder_dir, work, max_steps=2, pooler="avg", save_strategy="no"))
    return work / "out"


COMMANDS = doc_commands()
PAGES = sorted({command.page for command in COMMANDS})


def test_every_program_of_the_docs_is_run_parsed_or_named() -> None:
    for command in COMMANDS:
        if command.program in ("python run_unsup.py",) or command.program.startswith("python -m hf_cse."):
            continue
        assert command.program in NOT_RUN, f"docs/{command.page}: {shlex.join(command.argv)}: run it or name why not"


@pytest.mark.parametrize("page", PAGES)
def test_the_commands_of_each_page_run(
    page: str, tiny_encoder_dir: Path, tiny_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_page_data(tmp_path)
    for command in (command for command in COMMANDS if command.page == page):
        if command.program in NOT_RUN:
            continue
        if needs_network_or_other_tests(command.argv) is not None:
            parse_only(command)
            continue
        argv = tiny_command(command.argv, tiny_encoder_dir)
        for word in argv:
            if RUN_FOLDERS.match(word) and not Path(word).exists() and "--output_dir" not in argv:
                shutil.copytree(tiny_run, word)
        start = 2 if command.program == "python run_unsup.py" else 3
        try:
            hf_cse_main(command.program)(argv[start:])
        except (Exception, SystemExit) as err:
            raise AssertionError(f"docs/{page}: {shlex.join(command.argv)}\nran as: {shlex.join(argv)}") from err
