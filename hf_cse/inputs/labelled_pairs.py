"""``labelled_pairs``: the views of a run on labelled pairs (supervised SimCSE; sentence-transformers' anchor/positive
data with hard negatives): view 1 the anchors, view 2 their given positives, then one view per hard negative column.

The training data hold the columns :data:`ANCHOR` (``text``), :data:`POSITIVE` and ``negative_1..negative_k``
(:func:`negative_column`), as :mod:`hf_cse.training.data.pairs` reads them from SimCSE's or sentence-transformers'
layout. Every column is tokenized once as its own token group and all of them are encoded in the step's one forward
pass, so the hard negatives are gathered across processes, cached in chunks under gradient caching and truncated by
Matryoshka exactly as the views are; the objective reads them as
:attr:`~hf_cse.objectives.contract.StepInputs.hard_negatives`. The trainer builds this provider as the run's view maker
whenever ``num_hard_negatives`` is set (:func:`~hf_cse.inputs.run_providers.run_input_providers`).

A model with an instruction (``PoolingConfig.instruction``: LLM2Vec's supervised stage) reads its anchors after it:
they are tokenized a second time, as queries, into their own token group (:data:`INSTRUCTED_ANCHORS`), the
positives and hard negatives as documents (after the instruction too where ``instruct_positives``), and each row's
span to average goes to the model as ``template_lengths``, so that the mean leaves the instruction out of the rows
that have it and only of those.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import torch

from ..device_copies import DeviceCopies
from ..errors import UsageError
from ..modeling.tokenization import SentenceTokenizer
from ..registry import register_input_provider
from .base import SENTENCES, InputProvider, TrainingSetup, pad_and_concatenate

ANCHOR, POSITIVE = "text", "positive"
"""The training columns of labelled pairs: the anchor (``text``, the column every input provider reads) and its
positive."""
POSITIVES = "positives"
"""The token group of the positives."""
INSTRUCTED_ANCHORS = "instructed_anchors"
"""The token group of the anchors after the model's instruction (a model with one)."""


def negative_column(k: int) -> str:
    """The training column, and token group, of every row's ``k``-th hard negative (``k`` from 1)."""
    return f"negative_{k}"


def hard_negative_columns(names: Collection[str]) -> list[str]:
    """The hard negatives' columns (or token groups) among ``names``, in order: ``negative_1``, ``negative_2``, ... as
    long as they follow each other."""
    found: list[str] = []
    while negative_column(len(found) + 1) in names:
        found.append(negative_column(len(found) + 1))
    return found


@register_input_provider("labelled_pairs")
class LabelledPairs(InputProvider):
    """Stacks the anchors, their positives and the ``num_hard_negatives`` hard negatives of each row as the views of
    one forward pass (``[(2 + K) * B, L]``), each group padded on its own then to the longest.

    Raises:
        UsageError: ``num_views`` is not ``2 + K`` (an objective with several positive views per anchor).
    """

    makes_views = True
    views_made_with = "the training data's labelled pairs"
    takes_labelled_pairs = True

    def __init__(self, setup: TrainingSetup) -> None:
        super().__init__(setup)
        self.num_hard_negatives = int(setup.args.num_hard_negatives or 0)
        self.pad_token_id = setup.tokenizer.pad_token_id
        self.instructed = setup.model.pooling.instruction is not None
        # Positives and hard negatives read as the anchors are (prompt template, truncation): one model, one reading;
        # with an instruction, the anchors as queries and the others as documents.
        self.anchor_tokenizer = self.document_tokenizer = setup.sentence_tokenizer
        self._row_spans = None
        if self.instructed:
            self.anchor_tokenizer, self.document_tokenizer = (
                SentenceTokenizer(setup.tokenizer, setup.model.pooling, setup.args.max_seq_length, prompt_name=name)
                for name in ("query", "document")
            )
            documents = [self.document_tokenizer.row_span] * (1 + self.num_hard_negatives)
            self._row_spans = DeviceCopies(torch.tensor([self.anchor_tokenizer.row_span, *documents]))

    @property
    def token_groups(self) -> dict[str, tuple[str, SentenceTokenizer]]:
        tokenizer = self.document_tokenizer
        groups = {INSTRUCTED_ANCHORS: (ANCHOR, self.anchor_tokenizer)} if self.instructed else {}
        groups[POSITIVES] = (POSITIVE, tokenizer)
        groups.update({negative_column(k): (negative_column(k), tokenizer) for k in self.hard_negative_range})
        return groups

    @property
    def hard_negative_range(self) -> range:
        return range(1, self.num_hard_negatives + 1)

    def stack_views(self, batch: Mapping[str, Any], num_views: int) -> dict[str, torch.Tensor]:
        anchors = batch[INSTRUCTED_ANCHORS if self.instructed else SENTENCES]
        groups = [anchors, batch[POSITIVES], *(batch[negative_column(k)] for k in self.hard_negative_range)]
        if num_views != len(groups):
            raise UsageError(
                f"Labelled pairs with {self.num_hard_negatives} hard negatives make {len(groups)} views (anchor, "
                f"positive, hard negatives), not {num_views}: the objective must take one positive view per anchor."
            )
        stacked = pad_and_concatenate(groups, self.pad_token_id)
        if self._row_spans is not None:
            spans = self._row_spans.on(anchors["input_ids"].device)
            stacked["template_lengths"] = spans.repeat_interleave(len(anchors["input_ids"]), dim=0)
        return stacked
