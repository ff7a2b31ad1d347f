"""A tiny ``SentenceTransformer`` over the tiny random BERT of ``conftest.py``, for the sentence-transformers loss
tests (tests/test_st_loss.py and the processes of tests/distributed_st_loss.py). Import it after
``pytest.importorskip("sentence_transformers")``: sentence-transformers is an optional dependency."""

from __future__ import annotations

from pathlib import Path

import torch
from sentence_transformers import SentenceTransformer

try:  # sentence-transformers >= 6 moved the modules; `models` still works there, with a warning
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
except ImportError:
    from sentence_transformers.models import Pooling, Transformer

HIDDEN = 32  # the tiny encoder's hidden size: mean pooling keeps it


def tiny_st(encoder_dir: Path) -> SentenceTransformer:
    """A SentenceTransformer over the tiny random BERT with mean pooling, built in-process (no Hub)."""
    transformer = Transformer(str(encoder_dir), max_seq_length=32)
    return SentenceTransformer(modules=[transformer, Pooling(HIDDEN, "mean")], device="cpu")


def features(model: SentenceTransformer, texts: list[str]) -> dict[str, torch.Tensor]:
    return model.preprocess(texts) if hasattr(model, "preprocess") else model.tokenize(texts)
