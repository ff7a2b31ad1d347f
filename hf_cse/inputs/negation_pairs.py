"""``negations_and_paraphrases``: each training sentence's negation and paraphrase (OssCSE's margin term), made
once before training and encoded with the live model every step."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from datasets import Dataset

from ..augment.negation import BACKENDS, negate_all
from ..augment.paraphrase import build_paraphrase_source, precompute_paraphrases
from ..augment.paraphrase.precompute import BACK_TRANSLATION_SCHEME, TSV_SCHEME
from ..augment.paraphrase.source import ParaphraseSource
from ..content_identity import rows_sha256
from ..errors import UsageError, echo
from ..modeling.tokenization import SentenceTokenizer
from ..registry import register_input_provider
from ..sources import file_kind
from .base import (
    InputProvider,
    InputSettings,
    ProvidedInputs,
    StepContext,
    TrainingSetup,
    from_host,
    pad_and_concatenate,
)
from .prompt_views import second_template_pooling

logger = logging.getLogger(__name__)

HAS_PAIR = "has_pair"
"""Column flagging sentences that have both a negation and a paraphrase."""
NEGATION, PARAPHRASE = "negation", "paraphrase"
"""The text columns, and token groups, of the negations and the paraphrases."""


def add_negations_and_paraphrases(
    sentences: Dataset, negation_backend: str = "auto", paraphrase_source: str | ParaphraseSource | None = None
) -> Dataset:
    """Add ``negation`` and ``paraphrase`` columns (computed once, before training) and the ``has_pair`` flag.
    ``paraphrase_source``: a source, or its specification (:func:`~hf_cse.augment.paraphrase.build_paraphrase_source`).

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


@dataclass
class NegatorSettings(InputSettings):
    """Settings of the ``negations`` provider (``input_kwargs={"negations": {...}}``).

    Args:
        negation_backend: the negator: ``auto`` (default: spaCy when it and an English pipeline are installed, else
            the rules), ``spacy`` or ``rules`` (:func:`~hf_cse.augment.negation.negate_all`).
    """

    negation_backend: str = "auto"

    def __post_init__(self) -> None:
        if self.negation_backend not in BACKENDS:
            raise UsageError(
                f"Unknown negation_backend {echo(self.negation_backend)}; valid backends are: {', '.join(BACKENDS)}."
            )


@dataclass
class NegationAndParaphraseSettings(NegatorSettings):
    """Settings of the ``negations_and_paraphrases`` provider (OssCSE's; ``input_kwargs``, as
    :class:`NegatorSettings`).

    Args:
        paraphrase_source: ``tsv:PATH`` (precomputed), ``back-translation:de,ru`` (local or Hub MarianMT models), or
            ``None`` (default: no paraphrase, so the margin term is skipped and counted).
    """

    paraphrase_source: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        # The TSV source check_inputs read, until the provider takes it (take_paraphrase_source); not a field: never
        # compared, recorded or given.
        self._checked_source: ParaphraseSource | None = None

    def check_inputs(self, names: Mapping[str, str]) -> None:
        """The TSV file of ``paraphrase_source`` (``tsv:PATH``, or a path) must be a regular file of good rows, and the
        value of a form :func:`~hf_cse.augment.paraphrase.build_paraphrase_source` takes; ``back-translation:LANG,...``
        names models, checked as they load. The TSV is read here, whole, and its source kept for the provider built
        from these settings (:meth:`take_paraphrase_source`): a run parses the file once (9 s and 1.6 GB of peak
        memory for 1M rows of 18 words on a 2-core machine)."""
        source = self.paraphrase_source
        if source is None or source.startswith(BACK_TRANSLATION_SCHEME):
            return
        path = source.removeprefix(TSV_SCHEME)
        kind = file_kind(Path(path))
        if kind != "a file":
            name = names["paraphrase_source"]
            raise UsageError(
                f"{name} {echo(source)} is not valid: {echo(path)} is {kind}. {name} takes {TSV_SCHEME}PATH (or PATH) "
                f"of a sentence<TAB>paraphrase file, or {BACK_TRANSLATION_SCHEME}LANG[,LANG...] (e.g. "
                f"{BACK_TRANSLATION_SCHEME}de,ru)."
            )
        try:
            self._checked_source = build_paraphrase_source(source)
        except ValueError as err:
            raise UsageError(f"{names['paraphrase_source']} {echo(source)}: {err}") from err

    def take_paraphrase_source(self) -> str | ParaphraseSource | None:
        """What the provider reads the paraphrases from: the source :meth:`check_inputs` read (the TSV's table), handed
        over once and no longer held here, so that the table lives no longer than the preparation that uses it; else
        ``paraphrase_source`` itself, read then."""
        source, self._checked_source = self._checked_source, None
        return source if source is not None else self.paraphrase_source


class _FlaggedRows:
    """The negation providers' common step, a mixin before :class:`~hf_cse.inputs.base.InputProvider` in their bases
    (not a provider itself, so that every provider class of the package is a registered one): the rows flagged by
    the provider's one host column (``host_columns[0]``, a flag per sentence, picked on the host) are encoded in each
    of its token groups by the live model (:func:`encode_flagged_rows`), and the auxiliary terms get them, in the
    order of the groups, by the names of :attr:`~hf_cse.inputs.base.InputProvider.embeddings`, and the flags
    (``[B]`` bool) by the column's name.

    Attributes:
        every_row: encode every row of the groups (:func:`encodes_every_row`, set by ``prepare``).
    """

    def __init__(self, setup: TrainingSetup, settings: NegatorSettings | None = None) -> None:
        super().__init__(setup, settings)  # InputProvider's, next in the provider's bases
        self.pad_token_id = setup.tokenizer.pad_token_id
        self.every_row = setup.args.pad_to_max_seq_length  # until prepare reads the flags

    def provide(self, step: StepContext) -> ProvidedInputs:
        (flag,) = self.host_columns
        flags, groups = step.batch[flag], tuple(self.token_groups)
        encoded = encode_flagged_rows(step, flags, groups, self.pad_token_id, every_row=self.every_row)
        values = dict(zip(self.embeddings, encoded, strict=True))
        values[flag] = from_host(torch.tensor(flags, dtype=torch.bool), step.anchors.device)
        return ProvidedInputs(auxiliary=values)


@register_input_provider("negations_and_paraphrases")
class NegationsAndParaphrases(_FlaggedRows, InputProvider):
    """Negations and paraphrases of the corpus (:class:`NegationAndParaphraseSettings`), tokenized like the
    sentences; each step gives the auxiliary terms their embeddings ``negations``, ``paraphrases`` (``[B, D]``; rows
    without both are zeros, which the margin term skips) and ``has_pair`` (``[B]`` bool).

    Its :meth:`~hf_cse.inputs.base.InputProvider.content_identity`: ``negations_content_sha256`` (the negations made,
    one per sentence) and ``paraphrase_source_content_sha256`` (the TSV's bytes; another source's paraphrases as made;
    ``None`` without a source)."""

    Settings = NegationAndParaphraseSettings
    host_columns = (HAS_PAIR,)  # the rows to encode are picked on the host
    embeddings = ("negations", "paraphrases")

    def prepare(self, dataset: Dataset) -> Dataset:
        settings = self.settings
        source = settings.take_paraphrase_source()
        source = None if source is None else build_paraphrase_source(source)
        dataset = add_negations_and_paraphrases(dataset, settings.negation_backend, source)
        self.every_row = encodes_every_row(self.setup, dataset[HAS_PAIR])
        # The paraphrases by the source's file (a TSV's bytes), else as made (back-translation's models); the
        # negations as made: the negator's lexicon, rules or parser have no file of the run's.
        paraphrases = None
        if source is not None:
            paraphrases = source.content_sha256 or rows_sha256(zip(dataset[PARAPHRASE], strict=True))
        self.identity = {
            "negations_content_sha256": negations_sha256(dataset[NEGATION]),
            "paraphrase_source_content_sha256": paraphrases,
        }
        return dataset

    @property
    def token_groups(self) -> dict[str, tuple[str, SentenceTokenizer]]:
        return {
            NEGATION: (NEGATION, self.setup.sentence_tokenizer),
            PARAPHRASE: (PARAPHRASE, self.setup.sentence_tokenizer),
        }


def encode_flagged_rows(
    step: StepContext, flagged: Sequence[bool], groups: tuple[str, ...], pad_token_id: int, every_row: bool = False
) -> list[torch.Tensor]:
    """For each token group in ``groups``, its embeddings ``[B, D]`` by the live model (with gradients) on the rows
    where ``flagged`` (``B`` flags, on the host) holds, zeros elsewhere, from one forward pass over every group's rows
    stacked. The rows are picked on the host, so the step never waits for the device.

    By default only the flagged rows are encoded: the forward's row count changes from step to step. ``every_row``
    (a run padded to ``max_seq_length``, for CUDA graphs) encodes all ``B`` rows of each group and zeroes the others'
    embeddings: the same shape at every step, one recorded graph, at the cost of the unflagged rows' compute.
    """
    anchors = step.anchors
    if every_row:
        keep = from_host(torch.as_tensor(flagged, dtype=torch.bool), anchors.device)[:, None]
        stacked = pad_and_concatenate([step.batch[group] for group in groups], pad_token_id)
        encoded = step.model(**stacked).embeddings.to(anchors.dtype)
        return [torch.where(keep, part, 0.0) for part in encoded.split(len(keep))]
    outputs = [anchors.new_zeros(anchors.shape) for _ in groups]
    picked = [row for row, flag in enumerate(flagged) if flag]
    if picked:
        rows = from_host(torch.tensor(picked), anchors.device)
        selected = [{key: value[rows] for key, value in step.batch[group].items()} for group in groups]
        encoded = step.model(**pad_and_concatenate(selected, pad_token_id)).embeddings.to(anchors.dtype)
        parts = encoded.split(len(picked))
        outputs = [out.index_copy(0, rows, part) for out, part in zip(outputs, parts, strict=True)]
    return outputs


def negations_sha256(negations: Sequence[str]) -> str:
    """The SHA-256 of a corpus's ``negation`` column (a sentence without a negation holds its own text): what the
    negator made of it, whatever decided that (the rules' lexicon, spaCy's pipeline, ``lemminflect``)."""
    return rows_sha256(zip(negations, strict=True))


def encodes_every_row(setup: TrainingSetup, flags: Sequence[bool]) -> bool:
    """Whether a provider encodes every row of its groups (:func:`encode_flagged_rows`): in a run padded to
    ``max_seq_length`` (one shape per forward), unless no sentence of the corpus (``flags``) is flagged, where no
    step encodes any row."""
    return setup.args.pad_to_max_seq_length and any(flags)


HAS_NEGATION = "has_negation"
"""Column flagging sentences with a confident negation (the ``negations`` provider)."""


@register_input_provider("negations")
class Negations(_FlaggedRows, InputProvider):
    """Each sentence's negation alone (:class:`NegatorSettings`; SNCSE's soft negatives), made once before training
    (:func:`~hf_cse.augment.negation.negate_all`) and tokenized like the sentences; each step gives the auxiliary
    terms ``negations`` (``[B, D]``, encoded by the live model with gradients; zeros where none) and
    ``has_negation`` (``[B]`` bool). A sentence without a confident negation gets its own text as a placeholder and
    ``has_negation = False``; the counts are logged. It gives the same ``negations`` name as
    ``negations_and_paraphrases``, so one run takes one of the two.

    Under an objective with a ``second_prompt_template`` (SNCSE's), the negations are tokenized under that template,
    as the positive view: SNCSE's code encodes the positive and the negation with ``This sentence of ...``.

    Its :meth:`~hf_cse.inputs.base.InputProvider.content_identity`: ``negations_content_sha256``, the negations made,
    one per sentence (:func:`negations_sha256`).

    Raises:
        UsageError: a second template with ``template_denoising`` (the negation's template bias is not subtracted).
    """

    Settings = NegatorSettings
    host_columns = (HAS_NEGATION,)  # the rows to encode are picked on the host
    embeddings = ("negations",)

    def __init__(self, setup: TrainingSetup, settings: NegatorSettings | None = None) -> None:
        super().__init__(setup, settings)
        self.tokenizer = setup.sentence_tokenizer
        template = setup.objective.get_config_dict().get("second_prompt_template")
        if isinstance(template, str):
            if setup.model.pooling.template_denoising:
                raise UsageError(
                    f"Objective {setup.objective.name!r} encodes negations under its second_prompt_template, whose "
                    "bias template denoising does not subtract from them; set template_denoising false (SNCSE's code "
                    "does not denoise)."
                )
            # Where the pooler keeps its template (prompt_last_token: in its own settings, not prompt_template).
            pooling = second_template_pooling(setup, template)
            self.tokenizer = SentenceTokenizer(setup.tokenizer, pooling, setup.args.max_seq_length)

    def prepare(self, dataset: Dataset) -> Dataset:
        texts = dataset["text"]
        negations = negate_all(texts, backend=self.settings.negation_backend)
        found = [n is not None for n in negations]
        logger.info("Negated %d of %d sentences; the others have no soft negative.", sum(found), len(texts))
        self.every_row = encodes_every_row(self.setup, found)
        dataset = dataset.add_column(NEGATION, [n or t for n, t in zip(negations, texts, strict=True)])
        self.identity = {"negations_content_sha256": negations_sha256(dataset[NEGATION])}
        return dataset.add_column(HAS_NEGATION, found)

    @property
    def token_groups(self) -> dict[str, tuple[str, SentenceTokenizer]]:
        return {NEGATION: (NEGATION, self.tokenizer)}
