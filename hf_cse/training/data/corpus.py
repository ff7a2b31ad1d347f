"""Training corpus: loading, cleaning, tokenizing once, and collating into padded batches."""

from __future__ import annotations

import csv
import functools
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from datasets import Dataset, load_dataset

from ...data_files import download_hint
from ...errors import UsageError, echo
from ...inputs.base import SENTENCES, InputProvider
from ...modeling.tokenization import SentenceTokenizer
from ...progress_bars import third_party_progress_bars
from ...sources import BUILTIN_CORPORA, check_builtin_corpus_name, is_builtin_corpus, load_builtin_corpus
from ...text.checks import check_text
from ..arguments.checks import file_kind
from .pair_columns import pair_columns

if TYPE_CHECKING:
    from ..training_args import CSETrainingArguments

logger = logging.getLogger(__name__)

DEFAULT_TEXT_COLUMNS = ("text", "sentence", "sent0")
TOKEN_KEYS = ("input_ids", "attention_mask", "token_type_ids")

MAX_LINE_BYTES = 1 << 20
"""The longest line a corpus file may have, and the longest text (in characters) a corpus record may hold: 1 MiB.
A sentence, a paragraph or a long-context document is far shorter; a longer line is a file without line breaks (a
100 MB one-line corpus read whole, then tokenized, took 14 GB before training on "1 sentence"). Lines are read at
most this far (memory stays bounded), and a longer one is an error naming it, before anything is tokenized."""


def _utf8_lines(path: Path, max_line_bytes: int | None = MAX_LINE_BYTES) -> Iterator[str]:
    """The lines of ``path``, line ends kept and a leading byte-order mark dropped, strictly UTF-8: a bad byte is an
    error naming the line, not a silent replacement; so is a control character
    (:func:`~hf_cse.text.checks.check_text`), and a line longer than ``max_line_bytes`` (read no further; ``None``:
    unbounded, for a JSON array read whole)."""
    limit = -1 if max_line_bytes is None else max_line_bytes + 1
    with path.open("rb") as handle:
        for number, raw in enumerate(iter(lambda: handle.readline(limit), b""), start=1):
            if max_line_bytes is not None and len(raw) > max_line_bytes:
                raise UsageError(
                    f"{path}: line {number} is longer than {max_line_bytes:,} bytes, the longest line a corpus may "
                    "have: one sentence (or record) per line. Is the file one document without line breaks? Split "
                    "it into sentences, one per line."
                )
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise UsageError(
                    f"{path}: line {number} is not valid UTF-8 (byte {raw[err.start : err.start + 1]!r} at column "
                    f"{err.start + 1}). Re-encode the file as UTF-8, e.g. iconv -f latin1 -t utf-8."
                ) from err
            line = check_text(line, lambda number=number: f"{path}: line {number}")
            yield line.removeprefix("\ufeff") if number == 1 else line


def _pick_text_column(columns: list[str], text_column: str | None, source: str) -> str:
    """The column of one sentence a row: ``text_column`` when named, else the first of :data:`DEFAULT_TEXT_COLUMNS`,
    else the only column. Labelled pairs (:func:`~hf_cse.training.data.pair_columns.pair_columns`) are refused: this
    reader would train on their anchors alone (SimCSE's ``sent0``), the positives and hard negatives silently
    dropped."""
    if text_column is None and pair_columns(columns, source) is not None:
        raise UsageError(
            f"{source} holds labelled pairs (columns {echo(columns)}): read them with hf_cse.read_pairs (or "
            "hf_cse.stream_sentences), or name text_column to train on one column as sentences."
        )
    if text_column is not None:
        if text_column not in columns:
            raise UsageError(f"{source}: text_column {echo(text_column)} not found; columns are {echo(columns)}.")
        return text_column
    only = columns[0] if len(columns) == 1 else None
    if (found := next((name for name in DEFAULT_TEXT_COLUMNS if name in columns), only)) is not None:
        return found
    raise UsageError(f"{source}: cannot tell which column holds the text among {echo(columns)}; set text_column.")


def csv_texts(path: Path, text_column: str | None) -> Iterator[str]:
    """The text column of a CSV file with a header line, record by record; every value is text, as written (no NA
    guessing). Read whole by :func:`load_sentences`, streamed by :mod:`hf_cse.training.data.streaming`.

    A row with more fields than the header (an unquoted comma in the text) is an error naming its line; a row with
    fewer fields has an empty text.
    """
    header, records = csv_table(path)
    if header is None:
        raise UsageError(f"{path} is empty; a CSV corpus starts with a header line naming its columns, e.g. 'text'.")
    index = header.index(_pick_text_column(header, text_column, str(path)))
    for _, row in records:
        yield row[index] if index < len(row) else ""


def csv_table(path: Path, delimiter: str = ",") -> tuple[list[str] | None, Iterator[tuple[int, list[str]]]]:
    """The header of a CSV (or, with ``delimiter`` a tab, TSV) file (``None`` for an empty file) and its
    :func:`csv_records` after it, read lazily; a record with more fields than the header (an unquoted comma in the
    text) is an error naming its line."""
    records = csv_records(path, delimiter)
    _, header = next(records, (0, None))

    def checked() -> Iterator[tuple[int, list[str]]]:
        for line, row in records:
            if len(row) > len(header):
                raise UsageError(
                    f"{path}: line {line} has {len(row)} fields but the header has {len(header)}: quote a text that "
                    'holds a comma ("a, b").'
                )
            yield line, row

    return header, checked()


def csv_records(path: Path, delimiter: str = ",") -> Iterator[tuple[int, list[str]]]:
    """``(first line, fields)`` of each record of a CSV file (a quoted field may span lines); blank lines are not
    records, and a malformed quote is an error naming the line of its record. With ``delimiter`` a tab, a TSV file:
    every character literal (no quoting), as TSV files are written."""
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    rows = csv.reader(_utf8_lines(path), strict=True, delimiter=delimiter, quoting=quoting)
    while True:
        first_line = rows.line_num + 1
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as err:
            raise UsageError(
                f"{path}: line {first_line} is not valid CSV ({err}): quote a field that holds a comma, quote or "
                'line break whole, with quotes inside doubled ("say ""hi"", then go").'
            ) from None
        if row:
            yield first_line, row


def _read_json(path: Path, text_column: str | None) -> list[str]:
    """The text field of a JSON Lines file (one object per line), or of a ``.json`` file holding an array of objects.

    A record that is not an object is an error naming its line (its index in an array); null or missing texts are
    skipped and numbers turned into text, both counted in a warning.
    """
    records = json_records(path)
    if not records:
        return []
    for location, record in records:
        if not isinstance(record, dict):
            raise UsageError(f"{path}: {location} is a JSON {type(record).__name__}, not an object of fields.")
    columns = list(dict.fromkeys(key for _, record in records for key in record))
    column = _pick_text_column(columns, text_column, str(path))
    return _as_texts([record.get(column) for _, record in records], str(path), lambda i: records[i][0])


def json_records(path: Path) -> list[tuple[str, Any]]:
    """``(location, record)`` of each record of a JSON Lines file (``line N``), or of each item of a file holding one
    JSON array (``item I of the array``). A line that is not JSON is an error naming it."""
    records = []
    # A .json file may hold one array on one line, read whole by design; its texts are bounded by text_value.
    lines = _utf8_lines(path, None if path.suffix == ".json" else MAX_LINE_BYTES)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if not records and line.lstrip().startswith("["):
            try:
                items = json.loads(line + "".join(lines))
            except json.JSONDecodeError as err:
                raise UsageError(f"{path}: line {number + err.lineno - 1} is not valid JSON ({err.msg}).") from None
            return [(f"item {i} of the array", item) for i, item in enumerate(items)]
        records.append((f"line {number}", jsonl_record(line, number, path)))
    return records


def jsonl_record(line: str, number: int, path: Path) -> Any:
    """The JSON value on line ``number`` of the JSON Lines file ``path``; invalid JSON is an error naming the line."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as err:
        raise UsageError(
            f"{path}: line {number} is not valid JSON ({err.msg}, column {err.colno}); JSON Lines holds one "
            "object per line."
        ) from None


def _as_texts(values: list[Any], source: str, location: Callable[[int], str]) -> list[str]:
    """Strings as they are; nulls dropped and numbers turned into text, both counted in one warning.

    Numbers are kept rather than rejected: a CSV file hands over the same value as text (``"5"``), so the corpus
    trains the same in either format, and the warning says how many there were. A list, mapping or boolean is no
    sentence (most likely the wrong column): an error naming ``location(i)``.
    """
    texts = [text_value(value, lambda i=i: f"{source}: {location(i)}") for i, value in enumerate(values)]
    num_nulls, num_numbers = texts.count(None), sum(not isinstance(value, str | None) for value in values)
    counts = [f"skipped {num_nulls} rows whose text is null or missing"] if num_nulls else []
    counts += [f"turned {num_numbers} numbers into text"] if num_numbers else []
    if counts:
        logger.warning("%s: %s (of %d rows).", source, ", ".join(counts), len(values))
    return [text for text in texts if text is not None]


def text_value(value: Any, location: Callable[[], str]) -> str | None:
    """A record's text: a string as it is, a number as text, ``None`` for null; a list, mapping or boolean is no
    sentence (most likely the wrong column), nor is a string with a control character (a JSON ``"\\u0000"``,
    :func:`~hf_cse.text.checks.check_text`) or of more than :data:`MAX_LINE_BYTES` characters: an error naming
    ``location()``."""
    if isinstance(value, str):
        if len(value) > MAX_LINE_BYTES:
            raise UsageError(
                f"{location()}: the text has {len(value):,} characters, more than {MAX_LINE_BYTES:,}, the longest a "
                "corpus record may hold: one sentence (or paragraph) per record. Split it into sentences."
            )
        return check_text(value, location)
    if value is None:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise UsageError(f"{location()}: the text is a {type(value).__name__} ({str(value)[:40]!r}), not a string.")


CORPUS_FILE_READERS: dict[str, Callable[[Path, str | None], list[str]]] = {
    ".txt": lambda path, text_column: list(_utf8_lines(path)),  # one sentence per line: no column
    ".csv": lambda path, text_column: list(csv_texts(path, text_column)),
    ".json": _read_json,
    ".jsonl": _read_json,
}
"""``suffix: reader(path, text_column)`` of the local corpus files; read without a cache, so a rewritten file is
always read anew (``datasets`` reused its cache when a file kept its size and modification time)."""


def load_sentences(
    train_file: str,
    text_column: str | None = None,
    dataset_config_name: str | None = None,
    split: str = "train",
) -> Dataset:
    """The training sentences as a ``Dataset`` with one column, ``"text"``.

    ``train_file`` is a ``.txt`` file (one sentence per line), a ``.csv``/``.json``/``.jsonl`` file with a text
    column, a built-in offline corpus (``gensim:lee``), or a Hub dataset id. Blank lines are skipped and counted
    in the log; a file with no sentence left is an error.
    """
    path = Path(train_file)
    check_builtin_corpus_name(train_file)
    if is_builtin_corpus(train_file):
        raw = load_builtin_corpus(train_file)
    elif path.suffix in CORPUS_FILE_READERS or path.exists():
        check_train_file(path, train_file, CORPUS_FILE_READERS, read_once=True)
        raw = CORPUS_FILE_READERS[path.suffix](path, text_column)
    else:  # a Hub dataset id; needs the network
        table = load_dataset(train_file, dataset_config_name, split=split)
        column = table[_pick_text_column(table.column_names, text_column, train_file)]
        raw = _as_texts(list(column), train_file, lambda i: f"row {i + 1}")
    sentences = [line.strip() for line in raw]
    kept = [s for s in sentences if s]
    skipped = len(sentences) - len(kept)
    if skipped:
        logger.warning("%s: skipped %d empty lines of %d.", train_file, skipped, len(sentences))
    if not kept:
        raise UsageError(f"train_file {echo(train_file)} contains no sentences ({len(sentences)} lines, all empty).")
    logger.info("%s: %d training sentences.", train_file, len(kept))
    return Dataset.from_dict({"text": kept})


def train_file_forms(suffixes: Iterable[str]) -> str:
    """What a ``train_file`` may be, for a message: ``a file (.txt, ...), gensim:lee or a Hub id``, with
    ``suffixes`` the file types the reader takes."""
    return f"a file ({', '.join(suffixes)}), {', '.join(BUILTIN_CORPORA)} or a Hub id"


def check_train_file(path: Path, train_file: str, suffixes: Iterable[str], read_once: bool) -> None:
    """Refuse a ``train_file`` read as a file (``path``) that is a folder or has none of ``suffixes`` (the file types
    the reader takes), then as :func:`check_corpus_file` does.

    Raises:
        FileNotFoundError, UsageError: naming ``train_file`` and what it may be.
    """
    if path.is_dir():
        raise UsageError(f"train_file {echo(train_file)} is a folder; expected {train_file_forms(suffixes)}.")
    if path.suffix not in suffixes:
        raise UsageError(
            f"train_file {echo(train_file)} has an unsupported extension; valid extensions are: {', '.join(suffixes)}."
        )
    check_corpus_file(path, train_file, read_once, tuple(suffixes))


def check_corpus_file(
    path: Path, train_file: str, read_once: bool, suffixes: Iterable[str] = tuple(CORPUS_FILE_READERS)
) -> None:
    """Refuse a corpus path that is no file the run can read: absent (``FileNotFoundError``, listing what a
    ``train_file`` may be, with ``suffixes`` the file types the reader takes), or a socket or device; a FIFO too
    unless ``read_once`` (the in-memory path reads the corpus once; a stream reads it to identify it for the resume
    contract, then once per epoch, and a FIFO gives its content once).

    Raises:
        FileNotFoundError: nothing at ``path``.
        UsageError: ``path`` is no regular file, naming what it is.
    """
    kind = file_kind(path)
    if kind == "a file" or (kind == "a FIFO" and read_once):
        return
    if kind in ("absent", "a broken symbolic link"):
        broken = " (a broken symbolic link)" if kind != "absent" else ""
        hint = download_hint(path) or f"expected {train_file_forms(suffixes)}."
        raise FileNotFoundError(f"train_file {echo(train_file)} does not exist{broken}; {hint}")
    if kind == "a FIFO":
        raise UsageError(
            f"train_file {echo(train_file)} is a FIFO, which gives its content once; a streamed corpus is read once "
            "to identify it (the resume contract's hash) and again every epoch: give a regular file, or drop "
            "--streaming to read it once into memory."
        )
    raise UsageError(f"train_file {echo(train_file)} is {kind}, not a file: give a corpus file.")


def check_full_batch(num_sentences: int, args: CSETrainingArguments, source: str) -> None:
    """Refuse a corpus that fills no batch with ``dataloader_drop_last``: fewer sentences than one step takes
    (``per_device_train_batch_size`` x processes) would train no step, and the Trainer would save the untrained
    model (or fail with a message about ``max_steps``). Without ``dataloader_drop_last`` any corpus of 2 sentences
    or more fills a batch.

    Raises:
        UsageError: naming ``source``, the counts and what to change.
    """
    step_size = args.per_device_train_batch_size * args.world_size
    if args.dataloader_drop_last and num_sentences < step_size:
        raise UsageError(
            f"train_file {echo(source)}: its {num_sentences} sentences fill no batch of {step_size} "
            f"(per_device_train_batch_size {args.per_device_train_batch_size} x world size {args.world_size}) and "
            "dataloader_drop_last drops an incomplete one, so no step would train: set per_device_train_batch_size "
            f"to at most {num_sentences // args.world_size}, or dataloader_drop_last false."
        )


def group_column(group: str, key: str) -> str:
    """The dataset column of token field ``key`` (``input_ids``, ...) of token group ``group``."""
    return key if group == SENTENCES else f"{group}.{key}"


def tokenize_dataset(
    sentences: Dataset,
    sentence_tokenizer: SentenceTokenizer,
    token_groups: Mapping[str, tuple[str, SentenceTokenizer]] | None = None,
    show_progress: bool = True,
) -> Dataset:
    """Tokenize once, before training, so tokenization never sits on the training step's hot path.

    ``"text"`` goes through ``sentence_tokenizer``; each ``group: (column, tokenizer)`` of ``token_groups`` adds
    that group's token columns (see :func:`group_column`): a second prompt template, negations, paraphrases.
    ``show_progress``: datasets' "Tokenizing" bar (off with the Trainer's ``disable_tqdm``:
    :func:`~hf_cse.progress_bars.third_party_progress_bars`).
    """
    token_groups = token_groups or {}
    tokenize = functools.partial(tokenize_columns, sentence_tokenizer=sentence_tokenizer, token_groups=token_groups)
    text_columns = sorted({"text", *(column for column, _ in token_groups.values())})
    with third_party_progress_bars(show_progress):
        return sentences.map(tokenize, batched=True, remove_columns=text_columns, desc="Tokenizing")


def tokenize_columns(
    batch: Mapping[str, list[str]],
    sentence_tokenizer: SentenceTokenizer,
    token_groups: Mapping[str, tuple[str, SentenceTokenizer]],
) -> dict[str, list]:
    """The token columns of a batch of text columns: ``"text"`` through ``sentence_tokenizer``, and the column of each
    ``group: (column, tokenizer)`` of ``token_groups`` into that group's (:func:`group_column`). Before training
    (:func:`tokenize_dataset`), or batch by batch in a stream
    (:class:`~hf_cse.training.data.streaming.StreamingCollator`)."""
    encoded = dict(sentence_tokenizer(batch["text"]))
    for group, (column, tokenizer) in token_groups.items():
        encoded.update({group_column(group, key): value for key, value in tokenizer(batch[column]).items()})
    return encoded


def prepare_training_dataset(
    dataset: Dataset,
    sentence_tokenizer: SentenceTokenizer,
    providers: Sequence[InputProvider],
    batch_size: int,
    drop_last: bool,
    show_progress: bool = True,
) -> Dataset:
    """The corpus as the trainer reads it: each input provider's columns added (from the raw ``"text"``), then
    tokenized once with the providers' token groups (unless already tokenized), and without a final batch of one
    sentence unless ``drop_last`` (the dataloader drops incomplete batches itself). ``show_progress``: datasets'
    progress bars while the providers prepare and the corpus is tokenized."""
    with third_party_progress_bars(show_progress):
        for provider in providers:
            dataset = provider.prepare(dataset)
    if "text" in dataset.column_names:
        token_groups = {group: spec for provider in providers for group, spec in provider.token_groups.items()}
        dataset = tokenize_dataset(dataset, sentence_tokenizer, token_groups, show_progress)
    if not drop_last:
        dataset = drop_singleton_final_batch(dataset, batch_size)
    return dataset


def drop_singleton_final_batch(dataset: Dataset, batch_size: int) -> Dataset:
    """Drop one sentence when the last batch would hold a single sentence (it would have no negative).

    Raises:
        ValueError: the corpus has a single sentence.
    """
    if len(dataset) < 2:
        raise ValueError(f"The training corpus has {len(dataset)} sentence; contrastive training needs 2 or more.")
    if len(dataset) % batch_size == 1:
        logger.warning(
            "%d sentences with batch size %d leave a final batch of 1 sentence, which has no in-batch negative: "
            "dropping the last sentence.",
            len(dataset),
            batch_size,
        )
        return dataset.select(range(len(dataset) - 1))
    return dataset


class ContrastiveCollator:
    """Pads tokenized sentences into nested token groups: ``{"sentences": {"input_ids": [B, L], "attention_mask":
    [B, L], ...}, <group>: {...}, <row column>: [B]}``, each group padded on its own.

    The views are made in :meth:`hf_cse.training.trainer.CSETrainer.compute_loss` from the ``sentences`` group
    (stacked with itself: dropout noise makes the copies differ), so each sentence is padded once and every view
    is encoded in one forward pass.

    Args:
        sentence_tokenizer: pads every group.
        token_groups: the input providers' group names, besides ``sentences``.
        row_columns: per-sentence columns passed through as ``[B]`` tensors (e.g. ``has_pair``).
        host_columns: per-sentence columns passed through as lists of ``B`` values, which the Trainer leaves on the
            host (e.g. ``sentence_index``).
        pad_to_multiple_of: round each group's padded length up to a multiple of this (default ``None``: the
            longest row). Under ``torch.compile`` it bounds the distinct shapes a graph sees (lengths up to 32 give
            4 with 8), and multiples of 8 suit tensor cores.
    """

    def __init__(
        self,
        sentence_tokenizer: SentenceTokenizer,
        token_groups: Sequence[str] = (),
        row_columns: Sequence[str] = (),
        pad_to_multiple_of: int | None = None,
        host_columns: Sequence[str] = (),
    ) -> None:
        self.sentence_tokenizer = sentence_tokenizer
        self.groups = (SENTENCES, *token_groups)
        self.row_columns = tuple(row_columns)
        self.host_columns = tuple(host_columns)
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        batch: dict[str, Any] = {}
        for group in self.groups:
            keys = [key for key in TOKEN_KEYS if group_column(group, key) in features[0]]
            rows = [{key: row[group_column(group, key)] for key in keys} for row in features]
            batch[group] = dict(self.sentence_tokenizer.pad(rows, self.pad_to_multiple_of))
        for column in self.row_columns:
            batch[column] = torch.tensor([row[column] for row in features])
        for column in self.host_columns:
            batch[column] = [row[column] for row in features]
        return batch
