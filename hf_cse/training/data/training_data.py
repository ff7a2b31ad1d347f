"""What a :class:`~hf_cse.training.trainer.CSETrainer` trains on: its training corpus, tokenized once in memory or
streamed, and the collator that pads its batches with every input provider's columns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from datasets import Dataset

from ...errors import UsageError, echo
from ...inputs.base import InputProvider
from ...modeling.tokenization import SentenceTokenizer
from ..training_args import CSETrainingArguments
from .corpus import DEFAULT_TEXT_COLUMNS, ContrastiveCollator, prepare_training_dataset
from .streaming import SentenceStream, StreamingCollator, StreamingCorpus, prepare_stream

Collator = Callable[[list[dict[str, Any]]], dict[str, Any]]


def prepare_training_data(
    corpus: Dataset | StreamingCorpus | None,
    args: CSETrainingArguments,
    sentence_tokenizer: SentenceTokenizer,
    providers: Sequence[InputProvider],
    data_collator: Collator | None = None,
) -> tuple[Dataset | SentenceStream | None, Collator]:
    """The training dataset and collator of a run.

    Args:
        corpus: sentences, raw (a ``"text"`` column; tokenized here, once) or already tokenized; or a streaming corpus,
            read and tokenized batch by batch (:func:`~hf_cse.training.data.streaming.prepare_stream`, which may set
            ``args.max_steps``); ``None`` for a trainer that only evaluates.
        providers: the run's input providers; their token groups and row columns are collated with the sentences.
        data_collator: the user's collator; default :class:`~hf_cse.training.data.corpus.ContrastiveCollator`. A
            stream's batches are tokenized first (:class:`~hf_cse.training.data.streaming.StreamingCollator`).

    Returns:
        ``(dataset, collator)`` for the Trainer.
    """
    collator = data_collator or ContrastiveCollator(
        sentence_tokenizer,
        [group for provider in providers for group in provider.token_groups],
        [column for provider in providers for column in provider.row_columns],
        pad_to_multiple_of=args.pad_to_multiple_of,
        host_columns=[column for provider in providers for column in provider.host_columns],
    )
    if isinstance(corpus, StreamingCorpus):
        stream, token_groups = prepare_stream(corpus, args, providers)
        # Tokenizes each batch (in the dataloader workers), then pads it as above.
        return stream, StreamingCollator(collator, sentence_tokenizer, token_groups)
    if corpus is None:
        return None, collator
    check_training_corpus(corpus)
    dataset = prepare_training_dataset(
        corpus,
        sentence_tokenizer,
        providers,
        args.per_device_train_batch_size,
        args.dataloader_drop_last,
        show_progress=not args.disable_tqdm,
    )
    return dataset, collator


def check_training_corpus(corpus: object) -> None:
    """Refuse, in one line, a ``train_dataset`` that is no ``datasets.Dataset`` with a ``"text"`` column (or token
    columns, already tokenized): a list, a DataFrame, a ``DatasetDict``, a streamed ``IterableDataset``, or a column
    of another name (sentence-transformers' ``"anchor"``, ``"sentence"``), which failed later in transformers' or
    datasets' words ("Column name ['input_ids'] not in the dataset", "The training corpus has 1 sentence").

    Raises:
        UsageError: naming what was given and how to make the dataset.
    """
    if isinstance(corpus, Dataset):
        if "text" in corpus.column_names or "input_ids" in corpus.column_names:
            return
        named = next((column for column in DEFAULT_TEXT_COLUMNS + ("anchor",) if column in corpus.column_names), None)
        rename = named or "COLUMN"
        raise UsageError(
            f"train_dataset has no 'text' column (its columns: {echo(corpus.column_names)}): hf_cse trains on the "
            f"sentences of 'text'; rename yours, e.g. dataset.rename_column({rename!r}, 'text')."
        )
    kind = type(corpus).__name__
    hints = {
        "DatasetDict": "pass one split, e.g. dataset['train']",
        "IterableDataset": "stream the file or Hub dataset with hf_cse.stream_sentences(NAME) instead",
    }
    hint = hints.get(kind, "make one with datasets.Dataset.from_dict({'text': sentences})")
    raise UsageError(f"train_dataset must be a datasets.Dataset with a 'text' column; got type {kind}: {hint}.")
