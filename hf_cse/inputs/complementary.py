"""``complementary_similarities``: the frozen complementary model of DCLR's instance weighting (and of the
``distill`` term), ``sim_C(x_i, x_j)`` for in-batch sentences."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from torch import nn
from transformers.utils.logging import tqdm

from ..content_identity import model_sha256
from ..errors import UsageError, echo
from ..modeling.backbone import CausalPoolerError
from ..modeling.encoder import SentenceEncoder
from ..registry import register_input_provider
from ..sources import resolve_model_path
from .base import (
    InputProvider,
    InputSettings,
    ProvidedInputs,
    StepContext,
    TrainingSetup,
    from_host,
    setting_names,
)

logger = logging.getLogger(__name__)

CACHE_DTYPES = {"float16": torch.float16, "float32": torch.float32}
"""Storage types of the cached embeddings. The similarities are always computed in float32 from rows renormalized
after the lookup; float16 storage moves them by at most ~1e-3 (unit vectors rounded to 11 significant bits)."""


def check_cache_dtype(cache_dtype: Any) -> None:
    """Raise a one-line :class:`~hf_cse.errors.UsageError` unless ``cache_dtype`` is a key of :data:`CACHE_DTYPES`."""
    if cache_dtype not in CACHE_DTYPES:
        raise UsageError(
            f"Unknown complementary cache_dtype {echo(cache_dtype)}; valid types are: {', '.join(CACHE_DTYPES)}."
        )


ENCODE_WINDOW_BATCHES = 64
"""Batches tokenized and length-sorted together while caching: wide enough that sorting keeps padding low, narrow
enough that the window's token ids and float32 embeddings (8,192 x 768 x 4 bytes = 25 MB) stay small beside the
table."""


class ComplementarySimilarities:
    """Cosine similarities between training sentences under a frozen model.

    The model is in eval mode and runs without gradients; it lives here, never inside the trained model, so it
    is never saved in a checkpoint. Because it is frozen and deterministic (no dropout in eval mode), every
    sentence's embedding is the same at every step: with ``cache=True`` the whole corpus is encoded once up
    front and each step is a lookup by dataset index; with ``cache=False`` each step encodes its batch again
    (a second forward pass, with tokenization, every step).

    The cache is one preallocated ``[N, D]`` table in host memory (wiki1m's 1M sentences at 768 dimensions:
    1.5 GB in float16), filled window by window: the corpus is never tokenized, or held as embeddings, all at once.

    Args:
        encoder: the complementary model and its tokenizer (a ``SentenceEncoder`` never reads past the model's
            positions).
        texts: the training sentences, indexed like the training dataset's ``sentence_index`` column. A
            ``datasets`` column (``dataset["text"]``) is read in slices from Arrow, never copied into a list; only
            ``cache=False`` keeps it, to encode each step's sentences. ``None`` for a streamed corpus: each step
            passes its sentences to :meth:`of_texts`.
        cache: encode the corpus once (default) or every batch.
        batch_size: encoding batch size.
        cache_dtype: storage type of the cached embeddings, a key of ``CACHE_DTYPES``. Defaults to ``"float16"``.
    """

    def __init__(
        self,
        encoder: SentenceEncoder,
        texts: Sequence[str] | None,
        cache: bool = True,
        batch_size: int = 128,
        cache_dtype: str = "float16",
    ) -> None:
        if texts is None:
            cache, texts = False, ()
        elif len(texts) == 0:
            raise UsageError("ComplementarySimilarities got no sentences.")
        check_cache_dtype(cache_dtype)
        self.encoder = encoder
        self.batch_size = batch_size
        self.num_sentences = len(texts)
        encoder.model.requires_grad_(False).eval()
        self.texts = None if cache else texts
        self.cached = self._embed_corpus(texts, CACHE_DTYPES[cache_dtype]) if cache else None

    @classmethod
    def from_pretrained(
        cls,
        model_name_or_path: str,
        texts: Sequence[str] | None,
        pooler: str | None = None,
        max_seq_length: int | None = None,
        cache: bool = True,
        batch_size: int = 128,
        cache_dtype: str = "float16",
        device: str | torch.device | None = None,
    ) -> ComplementarySimilarities:
        """Load the complementary model; ``max_seq_length`` should be the training one, so that it reads the same
        truncated sentences as the trained model (``None``: its saved or tokenizer limit)."""
        try:
            encoder = SentenceEncoder.from_pretrained(
                model_name_or_path, pooler=pooler, max_seq_length=max_seq_length, device=device
            )
        except CausalPoolerError as err:  # the frozen model loads as saved: its pooler is the one setting to change
            raise CausalPoolerError(
                f"complementary model {model_name_or_path!r}: {err.reason}", "; pass one of them as pooler"
            ) from None
        except UsageError as err:  # a missing folder, named by the loader
            raise UsageError(f"complementary model {model_name_or_path!r}: {err}") from err
        except OSError as err:
            raise UsageError(
                f"complementary model {model_name_or_path!r} is neither a local folder nor a reachable Hub model."
            ) from err
        return cls(encoder, texts, cache=cache, batch_size=batch_size, cache_dtype=cache_dtype)

    def __len__(self) -> int:
        return self.num_sentences

    def _embed_corpus(self, texts: Sequence[str], dtype: torch.dtype) -> torch.Tensor:
        """The cache: unit-norm embeddings ``[N, D]`` of all ``texts``, in ``dtype`` on CPU."""
        start = time.perf_counter()
        window = self.batch_size * ENCODE_WINDOW_BATCHES
        table: torch.Tensor | None = None
        with tqdm(total=len(texts), desc="Complementary embeddings", unit=" sentences") as progress:
            for first in range(0, len(texts), window):
                embeddings = self.of_texts(texts[first : first + window])
                if table is None:  # the width is known once the model has pooled something
                    table = torch.empty((len(texts), embeddings.shape[1]), dtype=dtype)
                table[first : first + len(embeddings)] = embeddings
                progress.update(len(embeddings))
        logger.info(
            "Cached complementary embeddings of %d sentences (%s, %.2f GB) in %.1fs.",
            len(texts),
            dtype,
            table.nbytes / 1e9,
            time.perf_counter() - start,
        )
        return table

    def __call__(self, sentence_index: torch.Tensor) -> torch.Tensor:
        """``[B, B]`` float32 cosine similarities of the sentences at ``sentence_index`` ``[B]``, on its device.

        The cache stays in host memory; only the ``[B, D]`` rows of the step travel, and the ``B x B`` product runs
        on the training device, where a gathered global batch of thousands costs little, in float32 whatever
        autocast is active (the similarities are compared with phi). Cached rows are renormalized in float32, so a
        sentence's similarity with itself is 1 whatever the storage type.
        """
        return cosine_similarities(self.embeddings_of(sentence_index.tolist()).to(sentence_index.device))

    def embeddings_of(self, sentence_index: Sequence[int]) -> torch.Tensor:
        """Unit-norm embeddings ``[B, D]`` (on CPU; the cache's dtype, or float32 encoded now) of the sentences at
        ``sentence_index``: cached rows, or (uncached) the sentences encoded now."""
        if self.cached is not None:  # index_select: 2.5x less host time than indexing by a list of 64 ints
            return self.cached.index_select(0, torch.as_tensor(sentence_index, dtype=torch.long))
        return self.of_texts([self.texts[i] for i in sentence_index])

    def of_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """Unit-norm float32 embeddings ``[n, D]`` (on CPU) of ``texts``, encoded now: a streamed batch's sentences,
        the same values as the uncached :meth:`__call__` gives for them."""
        return nn.functional.normalize(self.encoder.encode(texts, batch_size=self.batch_size), dim=-1)


def cosine_similarities(embeddings: torch.Tensor) -> torch.Tensor:
    """``[n, n]`` float32 cosine similarities of ``embeddings`` ``[n, D]``, whatever autocast is active (they are
    compared with phi)."""
    with torch.autocast(embeddings.device.type, enabled=False):
        embeddings = nn.functional.normalize(embeddings.float(), dim=-1)
        return embeddings @ embeddings.T


SENTENCE_INDEX = "sentence_index"
"""Column numbering the training sentences, so each step can look its sentences up."""


@dataclass
class ComplementarySettings(InputSettings):
    """Settings of the ``complementary_similarities`` provider (``input_kwargs={"complementary_similarities":
    {...}}``).

    Args:
        model_name_or_path: the frozen model: a local path, Hub id or ``pip:MODULE``; ``None`` (default): the trained
            model's starting checkpoint.
        pooler: its pooler; ``None`` (default): the one saved in it; a checkpoint without hf_cse settings: its
            sentence-transformers pooling, else ``cls``
            (:func:`~hf_cse.modeling.saved_pooling.plain_checkpoint_pooler`).
        cache: encode the corpus with it once before training (default) instead of every batch.
        cache_dtype: storage of the cached embeddings, a key of :data:`CACHE_DTYPES`: ``float16`` (default: 1.5 GB
            for 1M sentences at 768 dimensions, similarities within ~1e-3) or ``float32`` (twice the memory, exact).
    """

    model_name_or_path: str | None = None
    pooler: str | None = None
    cache: bool = True
    cache_dtype: str = "float16"

    def __post_init__(self) -> None:
        check_cache_dtype(self.cache_dtype)

    def check_inputs(self, names: Mapping[str, str]) -> None:
        """The model resolved as the base model is (:func:`~hf_cse.sources.resolve_model_path`: a model folder, a Hub
        id the Hub or its local cache has, or ``pip:MODULE``); ``None`` is the model training starts from, checked as
        that."""
        if self.model_name_or_path is None:
            return
        try:
            resolve_model_path(self.model_name_or_path)
        except UsageError as err:
            name = names["model_name_or_path"]
            raise UsageError(
                f"{name} {echo(self.model_name_or_path)} is not valid: {err} {name} takes a model folder "
                "(config.json, weights, tokenizer), a Hub id or pip:MODULE; unset, the model training starts from."
            ) from None

    def record(self) -> dict[str, Any]:
        # The names hf_cse has recorded in checkpoints since 0.1.0; the storage type only where it changes the values.
        return {
            "complementary_model": self.model_name_or_path,
            "complementary_pooler": self.pooler,
            "complementary_cache_dtype": self.cache_dtype if self.cache else None,
        }


@register_input_provider("complementary_similarities")
class ComplementaryProvider(InputProvider):
    """Loads the frozen complementary model (:class:`ComplementarySettings`; default: the trained model's starting
    checkpoint) when the corpus is prepared; each step gives ``complementary_sim``: ``[G, G]`` over the gathered
    global batch to the objective and ``[B, B]`` over this process's rows to auxiliary terms.

    Attributes:
        similarities: the :class:`ComplementarySimilarities` (``None`` until :meth:`prepare`).
        identity: its :meth:`~hf_cse.inputs.base.InputProvider.content_identity`,
            ``complementary_model_content_sha256``: the model's config, weights and tokenizer files
            (:func:`~hf_cse.content_identity.model_sha256`); ``None`` for the base model (the run identifies it) or a
            Hub id without a local copy.
    """

    Settings = ComplementarySettings
    host_columns = (SENTENCE_INDEX,)  # looked up in the host cache: never read back from the device

    def __init__(self, setup: TrainingSetup, settings: ComplementarySettings | None = None) -> None:
        super().__init__(setup, settings)
        self.similarities: ComplementarySimilarities | None = None

    def prepare(self, dataset: Dataset) -> Dataset:
        if "text" not in dataset.column_names:
            raise UsageError("The objective needs a complementary model, which needs the raw 'text' column.")
        self.similarities = self._load(dataset["text"])  # a lazy Arrow column, not a list of a million strings
        return dataset.add_column(SENTENCE_INDEX, np.arange(len(dataset)))

    def prepare_stream(self) -> None:
        """For a streamed corpus (:mod:`hf_cse.training.data.streaming`): load the model, cache nothing; each step
        encodes its batch's sentences (the batch's ``"text"``), so the corpus is never held."""
        if self.settings.cache:
            logger.info("Streaming: the complementary model encodes each batch (no cache of the whole corpus).")
        self.similarities = self._load(None)

    def _load(self, texts: Sequence[str] | None) -> ComplementarySimilarities:
        """The frozen model over ``texts`` (``None``: a stream, nothing cached), reading the same truncated sentences
        as the trained model (``max_seq_length``)."""
        settings, args = self.settings, self.setup.args
        model_name_or_path = settings.model_name_or_path or self.setup.model.config.name_or_path
        try:
            similarities = ComplementarySimilarities.from_pretrained(
                model_name_or_path,
                texts,
                pooler=settings.pooler,
                max_seq_length=args.max_seq_length,
                cache=settings.cache,
                batch_size=args.per_device_eval_batch_size,
                cache_dtype=settings.cache_dtype,
                device=args.device,
            )
        except CausalPoolerError as err:  # name this model's own pooler setting as the run was given it
            setting = setting_names(type(self))["pooler"]
            raise UsageError(f"{err.reason}; its pooler is set by {setting}.") from None
        # Once loaded (a Hub id is in the local cache then). Unset, it is the base model, which the run identifies.
        self.identity = {"complementary_model_content_sha256": model_sha256(settings.model_name_or_path)}
        return similarities

    def provide(self, step: StepContext) -> ProvidedInputs:
        rows, device = step.anchor_rows, step.anchors.device
        if SENTENCE_INDEX in step.batch:  # this process's sentences, numbered on the host by the collator
            embeddings = self.similarities.embeddings_of(step.batch[SENTENCE_INDEX])
        else:  # streamed: encode this process's sentences
            embeddings = self.similarities.of_texts(step.batch["text"])
        # Each process's rows, gathered: the global batch's similarities without any index leaving the device.
        similarities = cosine_similarities(step.gather(from_host(embeddings, device)))
        local = similarities if rows is None else similarities[rows][:, rows]
        return ProvidedInputs({"complementary_sim": similarities}, {"complementary_sim": local})
