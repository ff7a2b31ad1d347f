"""Sequence-length limits against the models' position embeddings."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import SENTENCES, build_vocab
from datasets import Dataset
from test_training import training_args
from transformers import AutoTokenizer, BertConfig

from hf_cse import CSEModel, CSETrainer, PoolingConfig
from hf_cse.encoder import check_max_seq_length, max_input_length
from hf_cse.errors import UsageError


def tiny_bert(max_position_embeddings: int) -> CSEModel:
    config = BertConfig(
        vocab_size=len(build_vocab()),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=max_position_embeddings,
        pad_token_id=0,
    )
    return CSEModel(config, PoolingConfig(pooler="cls"))


def test_max_seq_length_beyond_the_position_embeddings_fails_at_construction(
    tiny_tokenizer_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match=r"^max_seq_length=100 is longer than the model .* at most 64 tokens"):
        CSETrainer(
            tiny_bert(64),
            training_args(tmp_path, max_seq_length=100),
            Dataset.from_dict({"text": SENTENCES}),
            processing_class=AutoTokenizer.from_pretrained(tiny_tokenizer_dir),
        )


def test_roberta_limit_leaves_out_the_positions_before_padding_idx(tiny_roberta_dir: Path) -> None:
    model = CSEModel.from_pretrained(tiny_roberta_dir).eval()  # 140 positions, tokens numbered from pad_token_id + 1
    assert max_input_length(model) == 139
    check_max_seq_length(139, model)
    with pytest.raises(UsageError, match=r"max_seq_length=140 .* at most 139 tokens \(max_position_embeddings=140\)"):
        check_max_seq_length(140, model)
    model(input_ids=torch.full((1, 139), 7), attention_mask=torch.ones(1, 139, dtype=torch.long))
    with pytest.raises(RuntimeError, match="index 140 is out of bounds"):  # one token more overflows the positions
        model(input_ids=torch.full((1, 140), 7), attention_mask=torch.ones(1, 140, dtype=torch.long))
