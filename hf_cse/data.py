"""Training corpus: loading, cleaning, tokenizing once, and collating into padded batches."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset, load_dataset

from .sources import is_builtin_corpus, load_builtin_corpus
from .text import SentenceTokenizer

logger = logging.getLogger(__name__)

TEXT_FILE_SUFFIXES = (".txt",)
TABLE_FILE_SUFFIXES = {".csv": "csv", ".json": "json", ".jsonl": "json"}
DEFAULT_TEXT_COLUMNS = ("text", "sentence", "sent0")
SENTENCE_INDEX = "sentence_index"
"""Column numbering the training sentences, for objectives that look sentences up (complementary model)."""


def _read_text_file(path: Path) -> list[str]:
    """One sentence per line, strictly UTF-8 (a bad byte is an error naming the line, not a silent replacement)."""
    lines = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError as err:
                raise ValueError(
                    f"{path}: line {number} is not valid UTF-8 (byte {raw[err.start : err.start + 1]!r} at column "
                    f"{err.start + 1}). Re-encode the file as UTF-8, e.g. iconv -f latin1 -t utf-8."
                ) from err
    return lines


def _pick_text_column(columns: list[str], text_column: str | None, source: str) -> str:
    if text_column is not None:
        if text_column not in columns:
            raise ValueError(f"{source}: text_column {text_column!r} not found; columns are {columns}.")
        return text_column
    for candidate in DEFAULT_TEXT_COLUMNS:
        if candidate in columns:
            return candidate
    if len(columns) == 1:
        return columns[0]
    raise ValueError(f"{source}: cannot tell which column holds the text among {columns}; set text_column.")


def _read_table_file(path: Path, text_column: str | None) -> list[str]:
    try:
        table = load_dataset(TABLE_FILE_SUFFIXES[path.suffix], data_files=str(path), split="train")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not valid UTF-8 ({err}). Re-encode the file as UTF-8.") from err
    column = _pick_text_column(table.column_names, text_column, str(path))
    return ["" if value is None else str(value) for value in table[column]]


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
    if is_builtin_corpus(train_file):
        raw = load_builtin_corpus(train_file)
    elif path.suffix in TEXT_FILE_SUFFIXES or path.suffix in TABLE_FILE_SUFFIXES:
        if not path.is_file():
            raise FileNotFoundError(f"train_file {train_file!r} does not exist.")
        raw = _read_text_file(path) if path.suffix in TEXT_FILE_SUFFIXES else _read_table_file(path, text_column)
    elif path.exists():
        valid = ", ".join((*TEXT_FILE_SUFFIXES, *TABLE_FILE_SUFFIXES))
        raise ValueError(f"train_file {train_file!r} has an unsupported extension; valid extensions are: {valid}.")
    else:  # a Hub dataset id; needs the network
        table = load_dataset(train_file, dataset_config_name, split=split)
        raw = [str(v) for v in table[_pick_text_column(table.column_names, text_column, train_file)]]
    sentences = [line.strip() for line in raw]
    kept = [s for s in sentences if s]
    skipped = len(sentences) - len(kept)
    if skipped:
        logger.warning("%s: skipped %d empty lines of %d.", train_file, skipped, len(sentences))
    if not kept:
        raise ValueError(f"train_file {train_file!r} contains no sentences ({len(sentences)} lines, all empty).")
    logger.info("%s: %d training sentences.", train_file, len(kept))
    return Dataset.from_dict({"text": kept})


def tokenize_dataset(sentences: Dataset, sentence_tokenizer: SentenceTokenizer) -> Dataset:
    """Tokenize once, before training, so tokenization never sits on the training step's hot path."""
    return sentences.map(
        lambda batch: sentence_tokenizer(batch["text"]),
        batched=True,
        remove_columns=["text"],
        desc="Tokenizing",
    )


def drop_singleton_final_batch(dataset: Dataset, batch_size: int) -> Dataset:
    """Drop one sentence when the last batch would hold a single sentence (it would have no negative)."""
    if len(dataset) > 1 and len(dataset) % batch_size == 1:
        logger.warning(
            "%d sentences with batch size %d leave a final batch of 1 sentence, which has no in-batch negative: "
            "dropping the last sentence.",
            len(dataset),
            batch_size,
        )
        return dataset.select(range(len(dataset) - 1))
    return dataset


class ContrastiveCollator:
    """Pads tokenized sentences into ``{"input_ids": [B, L], "attention_mask": [B, L], ...}``.

    The two views are made in :meth:`hf_cse.trainer.CSETrainer.compute_loss` by stacking this batch with itself
    (dropout noise makes them differ), so each sentence is padded once and encoded in one forward pass.
    """

    def __init__(self, sentence_tokenizer: SentenceTokenizer) -> None:
        self.sentence_tokenizer = sentence_tokenizer

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        rows = [{key: value for key, value in row.items() if key != SENTENCE_INDEX} for row in features]
        batch = self.sentence_tokenizer.pad(rows)
        if SENTENCE_INDEX in features[0]:
            batch[SENTENCE_INDEX] = torch.tensor([row[SENTENCE_INDEX] for row in features])
        return batch
