"""Paraphrases from a user-supplied ``sentence<TAB>paraphrase`` file, and writing such a file."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from ...atomic_files import sha256_of, write_text_atomic
from ...text.checks import check_text
from .source import DEFAULT_MER_FILTER, MERFilter, ParaphraseSource

logger = logging.getLogger(__name__)

TSV_HEADER = ("sentence", "paraphrase")
ROW_FORM = "sentence<TAB>paraphrase, both non-empty"
"""What each row of the file must be, for error messages."""


def _lookup_key(sentence: str) -> str:
    """TSV rows match corpus sentences up to surrounding and repeated whitespace."""
    return " ".join(sentence.split())


class TSVParaphrases(ParaphraseSource):
    """Paraphrases from a user-supplied tab-separated file.

    Format (UTF-8, an optional byte-order mark is ignored):

    - one ``sentence<TAB>paraphrase`` pair per line, exactly two fields; no quoting (a ``"`` is text); ``\\n`` or
      ``\\r\\n`` line ends; surrounding whitespace of each field is ignored;
    - an optional header on the first line, exactly ``sentence<TAB>paraphrase`` (any case), is skipped;
    - blank lines are skipped;
    - several rows with the same sentence give several candidates, tried in file order (see ``selection``);
      a row repeated exactly is one candidate.

    Sentences are matched up to surrounding and repeated whitespace; a sentence absent from the file gets ``None``.
    Rows are checked when the file is loaded, in the constructor (a run builds its source before its model loads:
    :meth:`~hf_cse.inputs.negation_pairs.NegationAndParaphraseSettings.check_inputs`): a row with another number of
    fields, an empty field, or bytes that are not UTF-8 raises a ``ValueError`` naming the file, the line number
    (from 1), the problem and the form of a row. A file with no pair at all is an error too.

    Args:
        path: the TSV file.
        mer_filter: MER bounds applied to the file's paraphrases too (default OssCSE's [0.15, 0.6]); ``None`` trusts
            the file.
        selection: which kept paraphrase of a sentence to use; see :class:`ParaphraseSource`.

    Attributes:
        content_sha256: the SHA-256 of the file's bytes, which the resume contract identifies the paraphrases by.
    """

    def __init__(
        self, path: str | Path, mer_filter: MERFilter | None = DEFAULT_MER_FILTER, selection: str = "first"
    ) -> None:
        super().__init__(mer_filter=mer_filter, selection=selection)
        self.path = Path(path)
        self.table = read_paraphrase_table(self.path)
        # Streamed once more (the parse reads it whole, as a table): a file edited in place is another source.
        self.content_sha256 = sha256_of(self.path)
        num_pairs = sum(len(paraphrases) for paraphrases in self.table.values())
        logger.info("%s: %d paraphrases of %d sentences.", self.path, num_pairs, len(self.table))

    def candidates(self, sentences: list[str]) -> list[list[str]]:
        return [list(self.table.get(_lookup_key(sentence), ())) for sentence in sentences]


def read_paraphrase_table(path: str | Path) -> dict[str, list[str]]:
    """The paraphrases of the file at ``path`` by sentence (whitespace-normalized), in file order (the format:
    :class:`TSVParaphrases`); ValueError on a bad row, naming the file and the line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Paraphrase file {str(path)!r} does not exist.")
    table: dict[str, dict[str, None]] = {}  # sentence -> ordered set of paraphrases
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(
                f"{path}, line {number}: not valid UTF-8 ({err.reason} at byte {err.start} of the line); each "
                f"row is {ROW_FORM}, in UTF-8."
            ) from err
        line = check_text(line.removesuffix("\r"), lambda number=number: f"{path}, line {number}")
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split("\t")]
        if len(fields) != 2:
            raise ValueError(
                f"{path}, line {number}: expected 2 tab-separated fields ({ROW_FORM}), found {len(fields)}: "
                f"{line[:80]!r}."
            )
        if number == 1 and tuple(field.lower() for field in fields) == TSV_HEADER:
            continue
        for field, name in zip(fields, TSV_HEADER, strict=True):
            if not field:
                raise ValueError(f"{path}, line {number}: the {name} field is empty ({ROW_FORM}): {line[:80]!r}.")
        table.setdefault(_lookup_key(fields[0]), {})[fields[1]] = None
    if not table:
        raise ValueError(f"Paraphrase file {str(path)!r} contains no sentence<TAB>paraphrase pair.")
    return {sentence: list(paraphrases) for sentence, paraphrases in table.items()}


def write_paraphrase_tsv(path: str | Path, sentences: Sequence[str], paraphrases: Sequence[str | None]) -> int:
    """Write the ``sentence<TAB>paraphrase`` file :class:`TSVParaphrases` reads, header included; ``None`` rows
    are left out. Returns the number of rows written."""
    sentences, paraphrases = list(sentences), list(paraphrases)
    if len(sentences) != len(paraphrases):
        raise ValueError(f"Got {len(sentences)} sentences but {len(paraphrases)} paraphrases; they must pair up.")
    lines = ["\t".join(TSV_HEADER)]
    for index, (sentence, paraphrase) in enumerate(zip(sentences, paraphrases, strict=True)):
        if paraphrase is None:
            continue
        for name, text in (("sentence", sentence), ("paraphrase", paraphrase)):
            if any(char in text for char in "\t\r\n") or not text.strip():
                raise ValueError(
                    f"Cannot write {name} {index} to a TSV: it is empty or has a tab or line break: {text!r}."
                )
        lines.append(f"{sentence.strip()}\t{paraphrase.strip()}")
    write_text_atomic(path, "\n".join(lines) + "\n")  # whole or not at all; a full disk is one line
    return len(lines) - 1
