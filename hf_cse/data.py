"""Training corpus: loading, cleaning, tokenizing once, and collating into padded batches."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset, load_dataset
from datasets.exceptions import DatasetGenerationError
from torch import nn

from .augment.negation import negate_all
from .augment.paraphrase import build_paraphrase_source, precompute_paraphrases
from .sources import is_builtin_corpus, load_builtin_corpus
from .text import SentenceTokenizer

logger = logging.getLogger(__name__)

TEXT_FILE_SUFFIXES = (".txt",)
TABLE_FILE_SUFFIXES = {".csv": "csv", ".json": "json", ".jsonl": "json"}
DEFAULT_TEXT_COLUMNS = ("text", "sentence", "sent0")
SENTENCE_INDEX = "sentence_index"
"""Column numbering the training sentences, for objectives that look sentences up (complementary model)."""
HAS_PAIR = "has_pair"
"""Column flagging sentences that have both a negation and a paraphrase (OssCSE's margin term)."""
TOKEN_KEYS = ("input_ids", "attention_mask", "token_type_ids")
VIEW2, NEGATION, PARAPHRASE = "view2_", "negation_", "paraphrase_"
"""Prefixes of the token columns of the second prompt view, the negations and the paraphrases."""


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
        column = table[_pick_text_column(table.column_names, text_column, str(path))]
        return ["" if value is None else str(value) for value in column]  # a lazy column decodes here
    except (DatasetGenerationError, UnicodeDecodeError):
        # datasets reports a bad byte as a generic DatasetGenerationError (csv) or a bare UnicodeDecodeError when the
        # column is read (jsonl): the strict line reader names the line; any other cause is re-raised as it was.
        _read_text_file(path)
        raise


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


def tokenize_dataset(
    sentences: Dataset,
    sentence_tokenizer: SentenceTokenizer,
    prefixed: dict[str, tuple[str, SentenceTokenizer]] | None = None,
) -> Dataset:
    """Tokenize once, before training, so tokenization never sits on the training step's hot path.

    ``"text"`` goes through ``sentence_tokenizer``; each ``prefix: (column, tokenizer)`` of ``prefixed`` adds
    token columns named ``prefix + "input_ids"`` etc. (a second prompt template, negations, paraphrases).
    """
    prefixed = prefixed or {}

    def tokenize(batch: dict[str, list]) -> dict[str, list]:
        encoded = sentence_tokenizer(batch["text"])
        for prefix, (column, tokenizer) in prefixed.items():
            encoded.update({prefix + key: value for key, value in tokenizer(batch[column]).items()})
        return encoded

    text_columns = sorted({"text", *(column for column, _ in prefixed.values())})
    return sentences.map(tokenize, batched=True, remove_columns=text_columns, desc="Tokenizing")


def add_negations_and_paraphrases(
    sentences: Dataset, negation_backend: str = "auto", paraphrase_source: str | None = None
) -> Dataset:
    """Add ``negation`` and ``paraphrase`` columns (computed once, before training) and the ``has_pair`` flag.

    A sentence without a confident negation or without a paraphrase that passes the MER filter gets its own text
    as a placeholder and ``has_pair = False``: the margin term skips it. The counts are logged.
    """
    texts = sentences["text"]
    negations = negate_all(texts, backend=negation_backend)
    if paraphrase_source is None:
        paraphrases: list[str | None] = [None] * len(texts)
        logger.warning("No paraphrase_source: OssCSE's margin term is skipped for every sentence.")
    else:
        paraphrases, _ = precompute_paraphrases(texts, build_paraphrase_source(paraphrase_source))
    has_pair = [n is not None and p is not None for n, p in zip(negations, paraphrases, strict=True)]
    logger.info(
        "Negated %d of %d sentences; %d have a paraphrase; %d have both (margin term), %d skip it.",
        sum(n is not None for n in negations),
        len(texts),
        sum(p is not None for p in paraphrases),
        sum(has_pair),
        len(texts) - sum(has_pair),
    )
    sentences = sentences.add_column("negation", [n or t for n, t in zip(negations, texts, strict=True)])
    sentences = sentences.add_column("paraphrase", [p or t for p, t in zip(paraphrases, texts, strict=True)])
    return sentences.add_column(HAS_PAIR, has_pair)


def split_prefixed(inputs: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    """``{"input_ids": .., "view2_input_ids": ..}`` -> ``{"": {"input_ids": ..}, "view2_": {"input_ids": ..}}``."""
    groups: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in inputs.items():
        for token_key in TOKEN_KEYS:
            if key.endswith(token_key):
                groups.setdefault(key[: -len(token_key)], {})[token_key] = value
    return groups


def pad_and_concatenate(batches: list[dict[str, torch.Tensor]], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Stack token batches of different lengths along the batch axis, right-padding to the longest."""
    length = max(batch["input_ids"].shape[1] for batch in batches)
    result = {}
    for key in batches[0]:
        fill = pad_token_id if key == "input_ids" else 0
        result[key] = torch.cat(
            [nn.functional.pad(batch[key], (0, length - batch[key].shape[1]), value=fill) for batch in batches]
        )
    return result


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
    """Pads tokenized sentences into ``{"input_ids": [B, L], "attention_mask": [B, L], ...}``.

    The two views are made in :meth:`hf_cse.trainer.CSETrainer.compute_loss` by stacking this batch with itself
    (dropout noise makes them differ), so each sentence is padded once and encoded in one forward pass.
    """

    def __init__(self, sentence_tokenizer: SentenceTokenizer) -> None:
        self.sentence_tokenizer = sentence_tokenizer

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch: dict[str, torch.Tensor] = {}
        prefixes = [key[: -len("input_ids")] for key in features[0] if key.endswith("input_ids")]
        for prefix in prefixes:  # each group (sentence, second view, negation, paraphrase) padded on its own
            rows = [{key: row[prefix + key] for key in TOKEN_KEYS if prefix + key in row} for row in features]
            batch.update({prefix + key: value for key, value in self.sentence_tokenizer.pad(rows).items()})
        for key in (SENTENCE_INDEX, HAS_PAIR):
            if key in features[0]:
                batch[key] = torch.tensor([row[key] for row in features])
        return batch
