"""Loaders for the 7 standard English STS benchmarks: STS12-16, STS-Benchmark and SICK-Relatedness.

Two sources are supported:

* a local folder in the SentEval layout (the default, and the only one that works offline)::

      <sts_dir>/STS12-en-test/STS.input.<subset>.txt   sentence1 <TAB> sentence2 [<TAB> ...], one pair a line
      <sts_dir>/STS12-en-test/STS.gs.<subset>.txt      gold score per line; an EMPTY line = unscored pair
      ... STS13-en-test/ STS14-en-test/ STS15-en-test/ STS16-en-test/ (same layout)
      <sts_dir>/STSBenchmark/sts-{train,dev,test}.csv  TAB-separated: genre, file, year, id, score, s1, s2[, ...]
      <sts_dir>/SICK/SICK_{train,trial,test_annotated}.txt  TAB-separated with a header row

  ``SICK/`` may also sit beside ``<sts_dir>`` instead of inside it: SentEval (and SimCSE's ``senteval.tar``) keeps
  ``data/downstream/STS/`` and ``data/downstream/SICK/`` side by side, and the SimCSE-family papers' configs name
  ``sts_dir: SentEval/data/downstream/STS``. ``<sts_dir>/SICK`` is looked for first, then ``<sts_dir>/../SICK``.

  Both the original English text and SentEval's Moses-tokenised, lowercased copy use this layout (the
  tokenised copy has no SICK folder: SentEval does not lowercase SICK, use the raw one).

* the Hugging Face Hub copies that MTEB evaluates on (``mteb/sts12-sts`` ... ``mteb/sts16-sts``,
  ``mteb/stsbenchmark-sts``, ``mteb/sickr-sts``; columns ``sentence1``, ``sentence2``, ``score``), selected with
  ``sts_dir=None`` or ``hub=True``. They need network access (or a warm ``datasets`` cache). The Hub copies of
  STS12-16 are single tables without the SentEval subset split, and ``mteb/sickr-sts`` only holds all 9,927 SICK
  pairs (split ``"all"``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._third_party_logs import errors_only
from ..errors import UsageError, echo

#: Task names accepted by :func:`load_sts_task`, in the order papers report them.
STS_TASKS: tuple[str, ...] = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")

#: SentEval subsets of STS12-16, in SentEval's order. STS13's SMT subset is not distributed (licence).
STS_SUBSETS: dict[str, tuple[str, ...]] = {
    "sts12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "sts13": ("FNWN", "headlines", "OnWN"),
    "sts14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "sts15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "sts16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}

#: Valid ``split`` values per task; the first one is the default.
STS_SPLITS: dict[str, tuple[str, ...]] = {
    **{task: ("test",) for task in STS_SUBSETS},
    "stsb": ("test", "dev", "train"),
    "sickr": ("test", "trial", "train", "all"),
}

#: Hub dataset ids (MTEB's copies) used when loading with ``hub=True`` / ``sts_dir=None``.
STS_HUB_IDS: dict[str, str] = {
    **{task: f"mteb/{task}-sts" for task in STS_SUBSETS},
    "stsb": "mteb/stsbenchmark-sts",
    "sickr": "mteb/sickr-sts",
}

#: How tables name the tasks, in the order papers print them.
TASK_LABELS: dict[str, str] = {**{task: task.upper() for task in STS_SUBSETS}, "stsb": "STS-B", "sickr": "SICK-R"}

# Other spellings users type (MTEB task names, SentEval names); normalised to the canonical names above.
_TASK_ALIASES: dict[str, str] = {
    "sts-b": "stsb",
    "stsbenchmark": "stsb",
    "sts-benchmark": "stsb",
    "sick-r": "sickr",
    "sick": "sickr",
    "sickrelatedness": "sickr",
}

STS_DOWNLOAD_HINT = (
    "`python -m hf_cse.download senteval` fetches SentEval's STS data (once, over the network) into "
    "SentEval/data/downstream/STS; any folder in SentEval's layout will do"
)
"""What a message about a missing STS folder adds: where the data comes from."""

_STS_DIRNAMES = {task: f"STS{task[3:]}-en-test" for task in STS_SUBSETS}
_STSB_FILES = {"train": "sts-train.csv", "dev": "sts-dev.csv", "test": "sts-test.csv"}
_SICK_FILES = {"train": "SICK_train.txt", "trial": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
# Local split name -> Hub split name, per Hub dataset.
_HUB_SPLITS = {"test": "test", "dev": "validation", "train": "train", "all": "test"}


@dataclass
class STSSubset:
    """Scored sentence pairs of one STS subset (e.g. STS12 ``MSRvid``, or STS-B ``test``).

    Attributes:
        task: canonical task name, one of :data:`STS_TASKS`.
        name: subset name: the SentEval subset for STS12-16, the split for STS-B and SICK-R.
        sentences1: first sentence of each pair, length ``num_pairs``.
        sentences2: second sentence of each pair, length ``num_pairs``.
        scores: gold similarity of each pair, length ``num_pairs`` (0-5 for STS, 1-5 for SICK-R).
    """

    task: str
    name: str
    sentences1: list[str] = field(repr=False)
    sentences2: list[str] = field(repr=False)
    scores: list[float] = field(repr=False)

    def __post_init__(self) -> None:
        lengths = (len(self.sentences1), len(self.sentences2), len(self.scores))
        if len(set(lengths)) != 1:
            raise ValueError(
                f"STSSubset {self.task}/{self.name}: sentences1, sentences2 and scores must have equal lengths, "
                f"got {lengths}."
            )

    def __len__(self) -> int:
        return len(self.scores)

    def __iter__(self) -> Iterator[tuple[str, str, float]]:
        return iter(zip(self.sentences1, self.sentences2, self.scores, strict=True))


def normalize_task_name(task: str) -> str:
    """Canonical name of ``task`` (case-insensitive; ``"STSBenchmark"``, ``"SICK-R"`` etc. accepted).

    Raises:
        ValueError: for an unknown task, listing the valid ones.
    """
    key = str(task).strip().lower()
    key = _TASK_ALIASES.get(key, key)
    if key not in STS_TASKS:
        raise ValueError(f"Unknown STS task {echo(task)}. Valid tasks: {', '.join(STS_TASKS)}.")
    return key


def load_sts_task(
    task: str,
    sts_dir: str | os.PathLike | None,
    split: str | None = None,
    *,
    hub: bool = False,
    cache_dir: str | None = None,
) -> list[STSSubset]:
    """Load the scored pairs of one STS task, as a list of subsets.

    Args:
        task: one of :data:`STS_TASKS` (``"sts12"`` ... ``"sts16"``, ``"stsb"``, ``"sickr"``), case-insensitive.
        sts_dir: root of a SentEval-layout folder (see the module docstring). ``None`` loads from the Hub.
        split: ``None`` for the task's default. STS12-16: ``"test"`` only. STS-B: ``"train"``, ``"dev"`` or
            ``"test"`` (default). SICK-R: ``"train"``, ``"trial"``, ``"test"`` (default) or ``"all"``, the
            9,927 pairs of train + trial + test that MTEB's SICK-R uses (returned as 3 subsets).
        hub: load MTEB's Hub copy with ``datasets.load_dataset`` even though ``sts_dir`` would be accepted;
            then ``sts_dir`` must be ``None``. Needs network access or a warm ``datasets`` cache.
        cache_dir: ``datasets`` cache folder for Hub loading.

    Returns:
        STS12-16 from a folder: one :class:`STSSubset` per SentEval subset, unscored pairs (empty gold line)
        left out. STS-B: one subset named after the split. SICK-R: one subset per split (3 for ``"all"``).
        From the Hub, STS12-16 come as one subset named ``"default"``.

    Raises:
        ValueError: unknown task or split (the message lists the valid ones), or a malformed file.
        FileNotFoundError: ``sts_dir`` or one of the files it should hold does not exist (the exact path is named).
        UsageError: loading from the Hub, which cannot be reached (the message says to pass ``--sts_dir``).
    """
    task = normalize_task_name(task)
    valid = STS_SPLITS[task]
    split = valid[0] if split is None else split
    if split not in valid:
        raise ValueError(f"Unknown split {echo(split)} for STS task {task!r}. Valid splits: {', '.join(valid)}.")
    if hub or sts_dir is None:
        if hub and sts_dir is not None:
            raise ValueError(f"Pass either sts_dir (got {echo(str(sts_dir))}) or hub=True, not both.")
        return _load_from_hub(task, split, cache_dir=cache_dir)

    root = Path(sts_dir)
    if not root.is_dir():
        raise FileNotFoundError(
            f"STS data directory {echo(str(root))} does not exist or is not a directory; {STS_DOWNLOAD_HINT}."
        )
    if task in STS_SUBSETS:
        folder = root / _STS_DIRNAMES[task]
        return [_read_senteval_subset(task, name, folder) for name in STS_SUBSETS[task]]
    if task == "stsb":
        return [_read_stsb(root / "STSBenchmark" / _STSB_FILES[split], split)]
    splits = ("train", "trial", "test") if split == "all" else (split,)
    sick_dir = find_sick_dir(root)
    return [_read_sick(sick_dir / _SICK_FILES[name], name) for name in splits]


def find_sick_dir(sts_dir: str | os.PathLike) -> Path:
    """The SICK folder of a SentEval-layout ``sts_dir``: ``<sts_dir>/SICK``, else ``<sts_dir>/../SICK``.

    The second place is SentEval's own layout (``data/downstream/STS/`` beside ``data/downstream/SICK/``), which the
    paper configs point ``sts_dir`` into.

    Raises:
        FileNotFoundError: neither folder exists; the message names both.
    """
    root = Path(sts_dir)
    # abspath, not resolve: ".." and "." are taken lexically (sts_dir "." has a parent), symlinks are kept.
    candidates = (root / "SICK", Path(os.path.abspath(root)).parent / "SICK")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    inside, beside = (str(candidate) for candidate in candidates)
    raise FileNotFoundError(
        f"No SICK folder for task 'sickr': neither {inside!r} (inside sts_dir) nor {beside!r} (beside it, SentEval's "
        "layout) exists. It must hold SICK_train.txt, SICK_trial.txt and SICK_test_annotated.txt; or leave the task "
        "out (hf_cse.eval and hf_cse.push: --tasks sts12 sts13 sts14 sts15 sts16 stsb)."
    )


def detect_sts_text(sts_dir: str | os.PathLike) -> str | None:
    """``"raw"`` or ``"tokenized"`` (SentEval's Moses-tokenized, lower-cased copy): which STS text ``sts_dir`` holds,
    judged by letter case (the tokenized copy has no capital letter); ``None`` when no STS-B/STS12 file is found."""
    for task in ("stsb", "sts12"):
        try:
            subsets = load_sts_task(task, sts_dir, "test")
        except (FileNotFoundError, ValueError):
            continue
        sentences = [s for subset in subsets for s in (*subset.sentences1, *subset.sentences2)]
        if sentences:
            return "raw" if any(char.isupper() for sentence in sentences for char in sentence) else "tokenized"
    return None


def _checked_file(path: Path, task: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(
            f"STS file not found: {str(path)!r} (needed for task {task!r}). sts_dir must follow the SentEval "
            f"layout: STS1x-en-test/STS.{{input,gs}}.<subset>.txt, STSBenchmark/sts-<split>.csv, "
            f"SICK/SICK_<split>.txt (SICK/ inside sts_dir or beside it)."
        )
    return path


def read_lines(path: Path, encoding: str = "utf-8") -> list[str]:
    """The lines of ``path`` without their newlines (a final empty line dropped); also used for the transfer tasks."""
    # Universal newlines turn the CRLF of SICK_test_annotated.txt into "\n". Splitting on "\n" only (not
    # str.splitlines) keeps a sentence intact if it holds a form feed or another Unicode line-break character
    # (latin-1's "\x85" among them).
    with open(path, encoding=encoding) as f:
        text = f.read()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _read_senteval_subset(task: str, name: str, folder: Path) -> STSSubset:
    input_path, gs_path = (_checked_file(folder / f"STS.{kind}.{name}.txt", task) for kind in ("input", "gs"))
    pairs, gold = read_lines(input_path), read_lines(gs_path)
    if len(pairs) != len(gold):
        raise ValueError(
            f"{str(input_path)!r} has {len(pairs)} lines but {str(gs_path)!r} has {len(gold)}; they must be aligned "
            "line by line."
        )
    sentences1, sentences2, scores = [], [], []
    for lineno, (pair, score) in enumerate(zip(pairs, gold, strict=True), start=1):
        score = score.strip()
        if not score:  # an empty gold line marks a pair the organisers did not score
            continue
        fields = pair.split("\t")
        if len(fields) < 2:
            raise ValueError(f"{str(input_path)!r} line {lineno}: expected 'sentence1<TAB>sentence2', got {pair!r}.")
        # STS2016's original inputs carry 2 extra source columns: the first two are always the sentences.
        sentences1.append(fields[0].strip())
        sentences2.append(fields[1].strip())
        scores.append(_parse_score(score, gs_path, lineno))
    return STSSubset(task, name, sentences1, sentences2, scores)


def _parse_score(value: str, path: Path, lineno: int) -> float:
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{str(path)!r} line {lineno}: gold score {value!r} is not a number.") from None


def _read_stsb(path: Path, split: str) -> STSSubset:
    # TAB-separated without quoting: sentences hold '"' characters, so a csv reader with default quoting would
    # merge lines. Some lines carry 2 extra licence/source fields after sentence2; they are ignored.
    expected = "at least 7 TAB-separated fields (genre, file, year, id, score, sentence1, sentence2)"
    lines = enumerate(read_lines(_checked_file(path, "stsb")), start=1)
    return STSSubset("stsb", split, *_tab_separated_pairs(path, lines, (5, 6, 4), 7, expected))


def _read_sick(path: Path, split: str) -> STSSubset:
    lines = read_lines(_checked_file(path, "sickr"))
    required = ("sentence_A", "sentence_B", "relatedness_score")
    header = [column.strip() for column in lines[0].split("\t")] if lines else []
    if any(column not in header for column in required):
        raise ValueError(f"{str(path)!r}: the header row must name the columns {required}, got {header}.")
    columns = tuple(header.index(column) for column in required)
    expected = f"{len(header)} TAB-separated fields"
    pairs = _tab_separated_pairs(path, enumerate(lines[1:], start=2), columns, len(header), expected)
    return STSSubset("sickr", split, *pairs)


def _tab_separated_pairs(
    path: Path, lines: Iterable[tuple[int, str]], columns: Sequence[int], min_fields: int, expected: str
) -> tuple[list[str], list[str], list[float]]:
    """``(sentences1, sentences2, scores)`` of the numbered TAB-separated ``lines`` of ``path``, blank ones skipped:
    the fields at ``columns`` (sentence1, sentence2, gold score). A line of fewer than ``min_fields`` fields is a
    ``ValueError`` saying it ``expected`` more."""
    sentences1, sentences2, scores = [], [], []
    first, second, score = columns
    for lineno, line in lines:
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < min_fields:
            raise ValueError(f"{str(path)!r} line {lineno}: expected {expected}, got {len(fields)}.")
        sentences1.append(fields[first].strip())
        sentences2.append(fields[second].strip())
        scores.append(_parse_score(fields[score].strip(), path, lineno))
    return sentences1, sentences2, scores


def _load_from_hub(task: str, split: str, *, cache_dir: str | None = None) -> list[STSSubset]:
    """MTEB's Hub copy of ``task`` (the test suite only sees it fail, offline).

    Raises:
        UsageError: the Hub cannot be reached (offline, no network) and the copy is not in ``datasets``' cache.
    """
    import datasets  # deferred: only the Hub path needs it

    if task == "sickr" and split != "all":
        raise ValueError(
            f"The Hub copy of SICK-R ({STS_HUB_IDS['sickr']}) only holds all 9,927 pairs, so split {split!r} "
            "cannot be loaded from it. Valid splits from the Hub: all. Pass sts_dir for train/trial/test."
        )
    try:
        # huggingface_hub warns of each failed request and retry (a dozen over 23 s with no network, each printed
        # twice): an unreachable Hub ends in the one-line UsageError below, which says it.
        with errors_only("huggingface_hub.utils._http"):
            dataset = datasets.load_dataset(STS_HUB_IDS[task], split=_HUB_SPLITS[split], cache_dir=cache_dir)
    except (ConnectionError, TimeoutError) as err:  # datasets' own, for the Hub offline or out of reach
        cause = " ".join(f"{type(err).__name__}: {err}".split())
        raise UsageError(
            f"Cannot read STS task {task!r} from the Hugging Face Hub ({STS_HUB_IDS[task]}; {cause}): pass --sts_dir "
            "with SentEval's STS data (`python -m hf_cse.download senteval` fetches it into "
            "SentEval/data/downstream/STS), or run with the Hub reachable."
        ) from err
    name = split if task in ("stsb", "sickr") else "default"
    sentences1, sentences2 = ([str(s) for s in dataset[column]] for column in ("sentence1", "sentence2"))
    return [STSSubset(task, name, sentences1, sentences2, [float(s) for s in dataset["score"]])]
