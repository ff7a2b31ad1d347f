"""Streaming corpora: sentences read, shuffled and tokenized batch by batch during training, never held whole.

``--streaming true`` (or ``CSETrainer(train_dataset=stream_sentences(path))``) replaces the in-memory path of
:mod:`hf_cse.training.data.corpus` (the corpus read into a ``Dataset`` and tokenized once before step 1). Memory then
stays flat in the corpus size: what is held is a shuffle buffer of raw sentences and the batches in flight.

How a sentence travels:

- :class:`StreamingCorpus` reads a ``.txt``/``.csv``/``.jsonl`` file line by line (or a Hub dataset with
  ``datasets``' ``streaming=True``) and yields its non-blank, stripped sentences in file order; or, when its columns
  hold labelled pairs (:mod:`hf_cse.training.data.pair_columns`; ``.tsv`` too), their rows in training columns
  (``{"text": anchor, "positive": ..., "negative_k": ...}``), each checked as it is read.
- :class:`SentenceStream` (a torch ``IterableDataset``) shuffles them through a buffer seeded by ``(seed, epoch)``
  and cuts the result into *chunks* of ``per_device_train_batch_size x world_size`` sentences, the global batch of a
  step. Each dataloader worker takes every ``num_workers``-th chunk, so the batches come out in the same order
  whatever the number of workers. Every process reads the whole stream (reading is cheap; tokenizing is not) and
  accelerate's ``IterableDatasetShard`` gives each process its own slice of every chunk: the processes see
  different sentences and together the whole stream.
- :class:`StreamingCollator` tokenizes each batch (in the dataloader workers when ``dataloader_num_workers > 0``):
  the sentences, and each input provider's token group from the column it reads (labelled pairs' positives and hard
  negatives), pads it with :class:`~hf_cse.training.data.corpus.ContrastiveCollator`, and passes the raw texts on
  (DCLR's complementary model encodes them) with the batch's position in the stream.
- the trainer side, :class:`~hf_cse.training.data.stream_position.StreamPosition`, records the position of the last
  batch trained on, saves it in every checkpoint and resumes the stream right after it.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from torch.utils.data import IterableDataset, get_worker_info

from ...errors import UsageError, echo
from ...inputs.base import InputProvider
from ...modeling.tokenization import SentenceTokenizer
from ...sources import check_builtin_corpus_name, is_builtin_corpus, load_builtin_corpus
from .corpus import (
    CORPUS_FILE_READERS,
    ContrastiveCollator,
    _pick_text_column,
    _utf8_lines,
    check_train_file,
    csv_texts,
    jsonl_record,
    text_value,
    tokenize_columns,
)
from .pair_columns import ANCHOR, PAIR_LAYOUTS, PairColumns, pair_columns
from .pairs import checked_pair, file_rows

if TYPE_CHECKING:
    from ..training_args import CSETrainingArguments

logger = logging.getLogger(__name__)

TEXT = ANCHOR
"""Batch key of the raw sentences (``list[str]``, this process's rows), as the in-memory path's dataset column; the
anchors of labelled pairs."""
STREAM_POSITION = "stream_position"
"""Batch key of ``[epoch, chunks]``: the stream position right after the batch; popped before the model sees it."""
DEFAULT_SHUFFLE_BUFFER_SIZE = 10_000
STREAMABLE_SUFFIXES = (".txt", ".csv", ".tsv", ".jsonl")
"""The file types a stream reads (``.tsv``: labelled pairs only, as in memory)."""
Row = str | dict[str, str]
"""What a stream yields: a sentence, or a row of labelled pairs in training columns."""
_Item = TypeVar("_Item")


@dataclass
class StreamingCorpus:
    """A corpus read as a stream: its non-blank sentences, stripped, in corpus order, read afresh on every pass; or
    its labelled pairs (:attr:`pairs`), a row at a time, every cell checked as it is read (a row with an empty or
    missing cell is an error naming it).

    Args:
        source: a ``.txt`` (one sentence per line), ``.csv`` (a header line, then records), ``.tsv`` (labelled pairs)
            or ``.jsonl`` (one JSON object per line) file, a built-in corpus (``gensim:lee``), or a Hub dataset id.
        text_column: the text column of csv/jsonl files and Hub datasets (``None``: ``text``, ``sentence``,
            ``sent0`` or the only column; for jsonl, among the first record's keys).
        dataset_config_name: the Hub dataset's configuration.
        split: the Hub dataset's split. Defaults to ``"train"``.
        max_sentences: stop after this many sentences, or rows of labelled pairs (``None``: the whole corpus).
        shuffle_buffer_size: sentences held in the shuffle buffer (0 or 1: corpus order). Defaults to 10,000.
    """

    source: str
    text_column: str | None = None
    dataset_config_name: str | None = None
    split: str = "train"
    max_sentences: int | None = None
    shuffle_buffer_size: int = DEFAULT_SHUFFLE_BUFFER_SIZE

    def __post_init__(self) -> None:
        path = Path(self.source)
        if self.shuffle_buffer_size < 0:
            raise UsageError(f"shuffle_buffer_size {self.shuffle_buffer_size} is negative; use 0 for corpus order.")
        check_builtin_corpus_name(self.source)
        file_suffixes = {*CORPUS_FILE_READERS, *STREAMABLE_SUFFIXES}  # a name ending so is a file, never a Hub id
        if is_builtin_corpus(self.source) or not (path.exists() or path.suffix in file_suffixes):
            return  # a built-in corpus or a Hub id: checked when read
        if path.suffix == ".json" and not path.is_dir():
            raise UsageError(
                f"train_file {self.source!r}: a .json file may hold one JSON array, which cannot be streamed; with "
                "streaming, write one object per line in a .jsonl file."
            )
        # A FIFO is refused too: the corpus hash of the resume contract reads the file once, every epoch again.
        check_train_file(path, self.source, STREAMABLE_SUFFIXES, read_once=False)
        if self.pairs is None and path.suffix == ".tsv":
            raise UsageError(
                f"train_file {echo(self.source)}: a .tsv file is read as labelled pairs, and its columns are neither "
                f"layout: {PAIR_LAYOUTS}."
            )

    @functools.cached_property
    def pairs(self) -> PairColumns | None:
        """Where the source holds labelled pairs (a CSV/TSV header, the first JSON Lines record's keys, a Hub dataset's
        first row: read once, not the rows), with no ``text_column`` named; ``None`` for one sentence a row."""
        if self.text_column is not None or is_builtin_corpus(self.source) or Path(self.source).suffix == ".txt":
            return None
        columns, rows = self._records()
        if columns is None:  # JSON Lines records or Hub rows: the first one's keys
            columns = list(next(rows, (None, {}))[1])
        return pair_columns(columns, self.source)

    @property
    def column_names(self) -> list[str]:
        """The training columns its rows hold, as a ``Dataset``'s: ``["text"]``, or those of its labelled pairs."""
        return list(self.pairs.training_columns.values()) if self.pairs is not None else [TEXT]

    def __iter__(self) -> Iterator[Row]:
        return itertools.islice(self._pair_rows() if self.pairs else self._sentences(), self.max_sentences)

    def _sentences(self) -> Iterator[str]:
        return (text for raw in self._raw_texts() if (text := raw.strip()))

    def _pair_rows(self) -> Iterator[dict[str, str]]:
        for location, record in self._records()[1]:
            yield checked_pair(location, record, self.pairs, self.source)

    def _records(self) -> tuple[list[str] | None, Iterator[tuple[str, dict[str, Any]]]]:
        """The columns (a CSV/TSV header; ``None`` for JSON Lines records and Hub rows, which name their own) and the
        ``(location, record)`` rows of a source other than a ``.txt`` file or a built-in corpus, read lazily."""
        path = Path(self.source)
        if path.suffix in (".csv", ".tsv"):
            return file_rows(path)
        return None, self._jsonl_records(path) if path.suffix == ".jsonl" else self._hub_rows()

    def _raw_texts(self) -> Iterator[str]:
        path = Path(self.source)
        if is_builtin_corpus(self.source):
            yield from load_builtin_corpus(self.source)
        elif path.suffix == ".txt":
            yield from _utf8_lines(path)
        elif path.suffix == ".csv":
            yield from csv_texts(path, self.text_column)
        else:
            yield from self._record_texts(self._records()[1])

    @staticmethod
    def _jsonl_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(location, record)`` of each non-blank line, read lazily; a line that is no JSON object is an error."""
        for number, line in enumerate(_utf8_lines(path), start=1):
            if not line.strip():
                continue
            record = jsonl_record(line, number, path)
            if not isinstance(record, dict):
                raise UsageError(f"{path}: line {number} is a JSON {type(record).__name__}, not an object of fields.")
            yield f"line {number}", record

    def _hub_rows(self) -> Iterator[tuple[str, dict[str, Any]]]:
        from datasets import load_dataset

        rows = load_dataset(self.source, self.dataset_config_name, split=self.split, streaming=True)
        return ((f"row {number}", row) for number, row in enumerate(rows, start=1))

    def _record_texts(self, records: Iterator[tuple[str, dict[str, Any]]]) -> Iterator[str]:
        """The text column of JSON Lines records or Hub rows (picked from the first record's keys)."""
        column = None
        for location, record in records:
            column = column or _pick_text_column(list(record), self.text_column, self.source)
            yield text_value(record.get(column), lambda at=f"{self.source}: {location}": at) or ""

    def count(self) -> int | None:
        """The number of sentences, read once, for ``.txt`` files and built-in corpora; ``None`` for the others
        (records spanning lines, null texts, labelled pairs: only a full parse would tell)."""
        return sum(1 for _ in self) if is_builtin_corpus(self.source) or Path(self.source).suffix == ".txt" else None


def stream_sentences(
    train_file: str,
    text_column: str | None = None,
    dataset_config_name: str | None = None,
    split: str = "train",
    shuffle_buffer_size: int = DEFAULT_SHUFFLE_BUFFER_SIZE,
) -> StreamingCorpus:
    """The streaming counterpart of :func:`~hf_cse.training.data.pairs.read_pairs`: checks ``train_file`` now (a file's
    header, for labelled pairs), reads its rows during training only: sentences, or labelled pairs in training
    columns when its columns are one of their layouts."""
    return StreamingCorpus(
        train_file, text_column, dataset_config_name, split, shuffle_buffer_size=shuffle_buffer_size
    )


def shuffled(items: Iterator[_Item], buffer_size: int, rng: random.Random) -> Iterator[_Item]:
    """``items`` through a shuffle buffer: each new item takes the place of a random buffered one, which is yielded;
    the rest is shuffled at the end. ``buffer_size`` 0 or 1 keeps the order."""
    if buffer_size <= 1:
        yield from items
        return
    buffer: list[_Item] = []
    for item in items:
        if len(buffer) < buffer_size:
            buffer.append(item)
            continue
        i = rng.randrange(buffer_size)
        yield buffer[i]
        buffer[i] = item
    rng.shuffle(buffer)
    yield from buffer


class SentenceStream(IterableDataset):
    """The training stream: ``{"text": str, "stream_position": [epoch, chunk + 1]}`` per sentence (a row of labelled
    pairs adds its ``positive`` and ``negative_k`` texts), epoch after epoch from :attr:`position` on.

    Args:
        corpus: the sentences.
        batch_size: sentences per process and step (``per_device_train_batch_size``).
        num_processes: the processes reading the stream; a chunk, the sentences of one step, holds
            ``batch_size x num_processes``.
        seed: seeds the shuffle buffer, with the epoch.
        drop_last: drop an incomplete final chunk of each epoch (else only a final chunk of one sentence, which would
            have no in-batch negative). With several processes, an incomplete final chunk is filled up with the
            epoch's first sentences, so that every process gets a full batch tagged with the same position.

    Attributes:
        position: ``[epoch, chunks]``, where the next pass starts: set by the trainer from the batches it trained
            on. A pass starting at an epoch's end goes on with the next epoch.
    """

    def __init__(
        self, corpus: StreamingCorpus, batch_size: int, num_processes: int = 1, seed: int = 0, drop_last: bool = False
    ) -> None:
        self.corpus = corpus
        self.chunk_size = batch_size * num_processes
        self.num_processes = num_processes
        self.seed = seed
        self.drop_last = drop_last
        self.position = [0, 0]

    def chunks(self, epoch: int) -> Iterator[list[Row]]:
        """The chunks of ``epoch`` (every process and worker computes the same ones)."""
        rng = random.Random(f"{self.seed}-{epoch}")  # a string seed: the same stream on every platform
        chunk: list[Row] = []
        first: list[Row] | None = None
        for sentence in shuffled(iter(self.corpus), self.corpus.shuffle_buffer_size, rng):
            chunk.append(sentence)
            if len(chunk) == self.chunk_size:
                yield chunk
                first, chunk = first or chunk, []
        if len(chunk) == 1 and not self.drop_last:
            logger.warning("Epoch %d of the stream ends with a batch of 1 sentence (no negative): dropped.", epoch)
        if len(chunk) > 1 and not self.drop_last:
            # Filled here, not by accelerate's IterableDatasetShard: it would fill with earlier chunks' rows, whose
            # position would make a process whose slice holds only those resume one chunk early.
            filler = first or chunk
            while self.num_processes > 1 and len(chunk) < self.chunk_size:
                chunk += filler[: self.chunk_size - len(chunk)]
            yield chunk

    def __iter__(self) -> Iterator[dict[str, Any]]:
        worker = get_worker_info()
        worker_id, num_workers = (0, 1) if worker is None else (worker.id, worker.num_workers)
        epoch, skip = self.position
        while True:
            yielded = False
            for j, chunk in enumerate(self.chunks(epoch)):
                # Chunk j + 1 ends at chunk j; workers take turns, as the DataLoader reads them.
                if j >= skip and (j - skip) % num_workers == worker_id:
                    yielded = True
                    for row in chunk:
                        yield {**(row if isinstance(row, dict) else {TEXT: row}), STREAM_POSITION: [epoch, j + 1]}
            if yielded or skip == 0:  # a pass that started at an epoch's end goes on with the next epoch
                return
            epoch, skip = epoch + 1, 0


class StreamingCollator:
    """Tokenizes a batch of raw sentences (and the input providers' token groups, each from the column it reads),
    pads it with ``collator``, and adds ``"text"`` (the sentences, ``list[str]`` of ``B``) and ``"stream_position"``.

    Args:
        collator: pads the tokenized rows (:class:`~hf_cse.training.data.corpus.ContrastiveCollator`, whose row columns
            are dropped).
        sentence_tokenizer: tokenizes the sentences the way the model reads them.
        token_groups: ``{group: (column, tokenizer)}`` of the input providers' groups, each a column of the stream.
    """

    def __init__(
        self,
        collator: Callable[[list[dict[str, Any]]], dict[str, Any]],
        sentence_tokenizer: SentenceTokenizer,
        token_groups: dict[str, tuple[str, SentenceTokenizer]] | None = None,
    ) -> None:
        if isinstance(collator, ContrastiveCollator):
            # A stream numbers no sentence (sentence_index): DCLR reads the texts.
            collator.row_columns = collator.host_columns = ()
        self.collator = collator
        self.sentence_tokenizer = sentence_tokenizer
        self.token_groups = token_groups or {}

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        texts = [row[TEXT] for row in features]
        read = {TEXT, *(column for column, _ in self.token_groups.values())}
        batch = {column: [row[column] for row in features] for column in read}
        columns = tokenize_columns(batch, self.sentence_tokenizer, self.token_groups)
        rows = [{key: values[i] for key, values in columns.items()} for i in range(len(texts))]
        batch = self.collator(rows)
        batch[TEXT] = texts
        batch[STREAM_POSITION] = features[-1][STREAM_POSITION]
        return batch


def streaming_token_groups(
    providers: Sequence[InputProvider], columns: Sequence[str] = (TEXT,)
) -> dict[str, tuple[str, SentenceTokenizer]]:
    """``{group: (column, tokenizer)}`` of the providers' token groups, after checking that each provider can stream:
    its groups read ``columns`` (the stream's: the text, and labelled pairs' positives and hard negatives), and it
    prepares nothing over the whole corpus (or says how to stream, ``prepare_stream``).

    Raises:
        UsageError: a provider needs the whole corpus before training (OssCSE's negations and paraphrases), or reads a
            column the stream does not hold.
    """
    groups = {}
    for provider in providers:
        if hasattr(provider, "prepare_stream"):
            provider.prepare_stream()
        elif type(provider).prepare is not InputProvider.prepare:  # it prepares the whole corpus
            raise UsageError(
                f"streaming cannot serve the {provider.name!r} inputs, computed over the whole corpus up front: "
                "drop --streaming."
            )
        for group, (column, tokenizer) in provider.token_groups.items():
            if column not in columns:
                raise UsageError(
                    f"streaming cannot serve token group {group!r}: it reads column {column!r}, and the stream holds "
                    f"{echo(list(columns))}."
                )
            groups[group] = (column, tokenizer)
    return groups


def prepare_stream(
    corpus: StreamingCorpus, args: CSETrainingArguments, providers: Sequence[InputProvider]
) -> tuple[SentenceStream, dict[str, tuple[str, SentenceTokenizer]]]:
    """Check the training arguments against streaming and build the stream; returns it and the providers' token
    groups. Sets ``args.max_steps`` from the corpus's sentence count when it is unset and the count is cheap, and
    ``dispatch_batches`` to ``False`` (each process reads and tokenizes its own batches; dispatching would also
    concatenate batches of different padded lengths).

    Raises:
        UsageError: ``max_steps`` is unset and the corpus cannot be counted, or a setting streaming cannot honour.
    """
    config = args.accelerator_config
    if getattr(config, "dispatch_batches", None) or getattr(config, "split_batches", False):
        raise UsageError("streaming needs accelerator_config dispatch_batches and split_batches false.")
    config.dispatch_batches = False
    if args.dataloader_persistent_workers:
        raise UsageError(
            "streaming needs dataloader_persistent_workers false: each pass restarts its workers at the stream "
            "position."
        )
    chunk_size = args.per_device_train_batch_size * args.world_size  # sentences per step
    if args.max_steps <= 0:
        num_sentences = corpus.count()
        if num_sentences is None:
            raise UsageError(
                f"streaming {corpus.source!r} needs max_steps (e.g. --max_steps 10000): only .txt files are counted."
            )
        chunks = num_sentences // chunk_size if args.dataloader_drop_last else math.ceil(num_sentences / chunk_size)
        args.max_steps = max(1, math.ceil(args.num_train_epochs * chunks / args.gradient_accumulation_steps))
        logger.info(
            "%s: %d sentences, %d epochs of %d sentences per step: max_steps %d.",
            corpus.source,
            num_sentences,
            args.num_train_epochs,
            chunk_size,
            args.max_steps,
        )
    seed = args.data_seed if args.data_seed is not None else args.seed
    stream = SentenceStream(
        corpus, args.per_device_train_batch_size, args.world_size, seed=seed, drop_last=args.dataloader_drop_last
    )
    return stream, streaming_token_groups(providers, corpus.column_names)
