"""The frozen complementary model of DCLR's instance weighting: ``sim_C(x_i, x_j)`` for in-batch sentences."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import torch
from torch import nn

from .encoder import SentenceEncoder

logger = logging.getLogger(__name__)


class ComplementarySimilarities:
    """Cosine similarities between training sentences under a frozen model.

    The model is in eval mode and runs without gradients; it lives here, never inside the trained model, so it
    is never saved in a checkpoint. Because it is frozen and deterministic (no dropout in eval mode), every
    sentence's embedding is the same at every step: with ``cache=True`` the whole corpus is encoded once up
    front and each step is a lookup by dataset index; with ``cache=False`` each step encodes its batch again
    (a second forward pass, with tokenization, every step).

    Args:
        encoder: the complementary model and its tokenizer.
        texts: the training sentences, indexed like the training dataset's ``sentence_index`` column.
        cache: encode the corpus once (default) or every batch.
        batch_size: encoding batch size.
    """

    def __init__(self, encoder: SentenceEncoder, texts: Sequence[str], cache: bool = True, batch_size: int = 128):
        self.encoder = encoder
        self.texts = list(texts)
        self.batch_size = batch_size
        self.cached: torch.Tensor | None = None
        encoder.model.requires_grad_(False).eval()
        if cache:
            start = time.perf_counter()
            self.cached = self._embed(self.texts)
            logger.info(
                "Cached complementary embeddings of %d sentences in %.1fs.", len(texts), time.perf_counter() - start
            )

    @classmethod
    def from_pretrained(
        cls,
        model_name_or_path: str,
        texts: Sequence[str],
        pooler: str | None = None,
        cache: bool = True,
        batch_size: int = 128,
        device: str | torch.device | None = None,
    ) -> ComplementarySimilarities:
        try:
            encoder = SentenceEncoder.from_pretrained(model_name_or_path, pooler=pooler, device=device)
        except OSError as err:
            raise FileNotFoundError(
                f"complementary model {model_name_or_path!r} is neither a local folder nor a reachable Hub model."
            ) from err
        return cls(encoder, texts, cache=cache, batch_size=batch_size)

    def _embed(self, texts: list[str]) -> torch.Tensor:
        return nn.functional.normalize(self.encoder.encode(texts, batch_size=self.batch_size), dim=-1)

    def __call__(self, sentence_index: torch.Tensor) -> torch.Tensor:
        """``[B, B]`` float32 cosine similarities of the sentences at ``sentence_index`` ``[B]``, on its device.

        The cache stays in host memory (the full wiki1m at 768 dimensions is 3 GB); only the ``[B, D]`` rows of
        the step travel, and the ``B x B`` product runs on the training device, where a gathered global batch of
        thousands costs little, in float32 whatever autocast is active (the similarities are compared with phi).
        """
        index = sentence_index.detach().cpu()
        embeddings = self.cached[index] if self.cached is not None else self._embed([self.texts[i] for i in index])
        embeddings = embeddings.to(sentence_index.device)
        with torch.autocast(embeddings.device.type, enabled=False):
            return embeddings @ embeddings.T
