"""What a :class:`~hf_cse.training.trainer.CSETrainer` trains on: its training corpus, tokenized once in memory or
streamed, and the collator that pads its batches with every input provider's columns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from datasets import Dataset

from ..inputs.base import InputProvider
from ..modeling.tokenization import SentenceTokenizer
from .data import ContrastiveCollator, prepare_training_dataset
from .streaming import SentenceStream, StreamingCollator, StreamingCorpus, prepare_stream
from .training_args import CSETrainingArguments

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
            read and tokenized batch by batch (:func:`~hf_cse.training.streaming.prepare_stream`, which may set
            ``args.max_steps``); ``None`` for a trainer that only evaluates.
        providers: the run's input providers; their token groups and row columns are collated with the sentences.
        data_collator: the user's collator; default :class:`~hf_cse.training.data.ContrastiveCollator`. A stream's
            batches are tokenized first (:class:`~hf_cse.training.streaming.StreamingCollator`).

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
    dataset = prepare_training_dataset(
        corpus, sentence_tokenizer, providers, args.per_device_train_batch_size, args.dataloader_drop_last
    )
    return dataset, collator
