"""Shared fixtures: a tiny random BERT with a WordPiece vocabulary written in-process (no network, no ../shared)."""

from __future__ import annotations

import os
import string
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA_DIR = Path(os.environ.get("HF_CSE_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))

WORDS = (
    "a an the man woman dog cat is are was plays playing guitar piano runs running in on park street house "
    "sentence this means not does do did like likes good bad big small red blue car cars child children eats food"
).split()

SENTENCES = [
    "a man is playing a guitar",
    "a woman plays the piano",
    "the dog runs in the park",
    "a cat is in the house",
    "children eat food on the street",
    "the red car is big",
    "a small blue car",
    "the child likes the dog",
    "a man eats good food",
    "the woman is running",
    "this cat is bad",
    "a dog is not a cat",
]


def build_vocab() -> list[str]:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    tokens = specials + WORDS + chars + [f"##{c}" for c in string.ascii_lowercase + string.digits]
    return list(dict.fromkeys(tokens))  # a token listed twice would shift every id after it


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import BertTokenizer

    directory = tmp_path_factory.mktemp("tiny_tokenizer")
    vocab_file = directory / "vocab.txt"
    vocab_file.write_text("\n".join(build_vocab()) + "\n", encoding="utf-8")
    BertTokenizer(str(vocab_file), model_max_length=128).save_pretrained(directory)
    return directory


def tiny_config(config_class: type, max_position_embeddings: int = 128, **overrides: int) -> Any:
    """The tiny encoder's config (hidden 32, 2 layers) over the test vocabulary."""
    values = {
        "vocab_size": len(build_vocab()),
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": max_position_embeddings,
        "pad_token_id": 0,
    }
    return config_class(**{**values, **overrides})


def save_tiny_encoder(directory: Path, tokenizer_dir: Path, architecture: str = "bert") -> Path:
    """Save a randomly initialized 2-layer encoder (hidden 32, seed 0) with the test tokenizer, like a Hub
    checkpoint. ``architecture``: ``bert``, or ``roberta`` (positions counted from ``padding_idx + 1``)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel, RobertaConfig, RobertaModel

    classes = {"bert": (BertConfig, BertModel, 128), "roberta": (RobertaConfig, RobertaModel, 140)}
    config_class, model_class, max_positions = classes[architecture]
    torch.manual_seed(0)
    model_class(tiny_config(config_class, max_positions)).save_pretrained(directory)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer_dir: Path) -> Path:
    """A randomly initialized 2-layer BERT (hidden 32) saved with its tokenizer, like a Hub checkpoint."""
    return save_tiny_encoder(tmp_path_factory.mktemp("tiny_encoder"), tiny_tokenizer_dir)


@pytest.fixture(scope="session")
def tiny_roberta_dir(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer_dir: Path) -> Path:
    """A tiny random RoBERTa (positions counted from padding_idx + 1) with the WordPiece test tokenizer."""
    return save_tiny_encoder(tmp_path_factory.mktemp("tiny_roberta"), tiny_tokenizer_dir, "roberta")


def write_stsb_dev(sts_dir: Path, n_pairs: int = 24) -> Path:
    """A small STS-B dev file in the SentEval layout (tab-separated, score in column 5)."""
    folder = sts_dir / "STSBenchmark"
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n_pairs):
        first = SENTENCES[i % len(SENTENCES)]
        second = SENTENCES[(i * 5 + 1) % len(SENTENCES)] if i % 2 else first
        score = 5.0 if first == second else (i % 5)
        lines.append(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{score:.3f}\t{first}\t{second}")
    (folder / "sts-dev.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return sts_dir


@pytest.fixture
def tiny_sts_dir(tmp_path: Path) -> Path:
    return write_stsb_dev(tmp_path / "sts")


@pytest.fixture
def shared_data_dir() -> Path:
    if not SHARED_DATA_DIR.is_dir():
        pytest.skip(f"team data folder {SHARED_DATA_DIR} is absent (set HF_CSE_DATA_DIR to point at it)")
    return SHARED_DATA_DIR
