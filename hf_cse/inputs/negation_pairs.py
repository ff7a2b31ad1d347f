"""``negations_and_paraphrases``: each training sentence's negation and paraphrase (OssCSE's margin term), made
once before training and encoded with the live model every step."""

from __future__ import annotations

import logging

from datasets import Dataset

from ..augment.negation import negate_all
from ..augment.paraphrase import build_paraphrase_source, precompute_paraphrases
from ..registry import register_input_provider
from ..text import SentenceTokenizer
from .base import InputProvider, ProvidedInputs, StepContext, TrainingSetup, pad_and_concatenate

logger = logging.getLogger(__name__)

HAS_PAIR = "has_pair"
"""Column flagging sentences that have both a negation and a paraphrase."""
NEGATION, PARAPHRASE = "negation", "paraphrase"
"""The text columns, and token groups, of the negations and the paraphrases."""


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
    sentences = sentences.add_column(NEGATION, [n or t for n, t in zip(negations, texts, strict=True)])
    sentences = sentences.add_column(PARAPHRASE, [p or t for p, t in zip(paraphrases, texts, strict=True)])
    return sentences.add_column(HAS_PAIR, has_pair)


@register_input_provider("negations_and_paraphrases")
class NegationsAndParaphrases(InputProvider):
    """Negations (``args.negation_backend``) and paraphrases (``args.paraphrase_source``) of the corpus, tokenized
    like the sentences; each step gives the auxiliary terms their embeddings ``negations``, ``paraphrases``
    (``[B, D]``; rows without both are zeros, which the margin term skips) and ``has_pair`` (``[B]`` bool)."""

    row_columns = (HAS_PAIR,)
    embeddings = ("negations", "paraphrases")

    def __init__(self, setup: TrainingSetup) -> None:
        super().__init__(setup)
        self.negation_backend = setup.args.negation_backend
        self.paraphrase_source = setup.args.paraphrase_source
        self.pad_token_id = setup.tokenizer.pad_token_id

    def prepare(self, dataset: Dataset) -> Dataset:
        return add_negations_and_paraphrases(dataset, self.negation_backend, self.paraphrase_source)

    @property
    def token_groups(self) -> dict[str, tuple[str, SentenceTokenizer]]:
        return {
            NEGATION: (NEGATION, self.setup.sentence_tokenizer),
            PARAPHRASE: (PARAPHRASE, self.setup.sentence_tokenizer),
        }

    def provide(self, step: StepContext) -> ProvidedInputs:
        # Only rows with both are encoded: one forward pass over the negations and paraphrases stacked.
        anchors = step.anchors
        has_pair = step.batch[HAS_PAIR].bool()
        negations, paraphrases = anchors.new_zeros(anchors.shape), anchors.new_zeros(anchors.shape)
        rows = has_pair.nonzero().squeeze(1)
        if len(rows):
            selected = [
                {key: value[rows] for key, value in step.batch[group].items()} for group in (NEGATION, PARAPHRASE)
            ]
            encoded = step.model(**pad_and_concatenate(selected, self.pad_token_id)).embeddings
            negations = negations.index_copy(0, rows, encoded[: len(rows)].to(anchors.dtype))
            paraphrases = paraphrases.index_copy(0, rows, encoded[len(rows) :].to(anchors.dtype))
        return ProvidedInputs(auxiliary={"negations": negations, "paraphrases": paraphrases, "has_pair": has_pair})
