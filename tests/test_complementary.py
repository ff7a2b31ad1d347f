"""DCLR's complementary model and its cache: no longer than the training length, reading sentences truncated at it,
encoded window by window into a float16 table within a stated tolerance of encoding every step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import SENTENCES, complementary_of, dclr_trainer, tiny_config
from transformers import AutoTokenizer, BertConfig

from hf_cse import CSEModel, PoolingConfig
from hf_cse.errors import UsageError
from hf_cse.inputs import complementary

FLOAT16_SIMILARITY_TOLERANCE = 2**-9
"""Float16 keeps 11 significant bits: each stored component is off by at most 2^-11 of itself, so the product of two
unit rows moves by at most 2 * 2^-11 (Cauchy-Schwarz), and renormalizing both rows by as much again."""


def test_complementary_model_shorter_than_max_seq_length_fails_at_construction(
    tiny_encoder_dir: Path, tiny_tokenizer_dir: Path, tmp_path: Path
) -> None:
    short = tmp_path / "short"
    CSEModel(tiny_config(BertConfig, 64, num_hidden_layers=1), PoolingConfig(pooler="cls")).save_pretrained(short)
    AutoTokenizer.from_pretrained(tiny_tokenizer_dir).save_pretrained(short)
    with pytest.raises(
        UsageError, match=r"^complementary model .*short': max_seq_length=100 is longer than the model .* at most 64"
    ):
        dclr_trainer(
            tiny_encoder_dir,
            tmp_path,
            input_kwargs={"complementary_similarities": {"model_name_or_path": str(short)}},
            max_seq_length=100,
        )


def test_complementary_model_reads_sentences_truncated_at_max_seq_length(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    # SENTENCES[0] "a man is playing a guitar" and [8] "a man eats good food" share their first two words:
    # [CLS] a man [SEP] is all of either at max_seq_length=4.
    truncated = complementary_of(dclr_trainer(tiny_encoder_dir, tmp_path / "4", max_seq_length=4))
    assert torch.equal(truncated.cached[0], truncated.cached[8])
    whole = complementary_of(dclr_trainer(tiny_encoder_dir, tmp_path / "32", max_seq_length=32))
    assert (whole.cached[0].float() - whole.cached[8].float()).abs().max() > 1e-3  # ten float16 steps apart


def test_cache_is_a_float16_table_filled_window_by_window(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(complementary, "ENCODE_WINDOW_BATCHES", 2)
    encoded_sizes = []
    encode = complementary.SentenceEncoder.encode

    def recording_encode(self, sentences, batch_size=128):
        encoded_sizes.append(len(sentences))
        return encode(self, sentences, batch_size)

    monkeypatch.setattr(complementary.SentenceEncoder, "encode", recording_encode)
    cached = complementary_of(dclr_trainer(tiny_encoder_dir, tmp_path, per_device_eval_batch_size=5))
    assert encoded_sizes == [10, 2]  # 12 sentences in windows of 2 batches of 5, never the corpus at once
    assert cached.cached.dtype == torch.float16 and cached.cached.shape == (len(SENTENCES), 32)
    assert cached.texts is None and len(cached) == len(SENTENCES)


def test_float16_cache_matches_encoding_every_step_within_the_stated_tolerance(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    index = torch.arange(len(SENTENCES))
    cached = complementary_of(dclr_trainer(tiny_encoder_dir, tmp_path / "cached"))(index)
    uncached_trainer = dclr_trainer(
        tiny_encoder_dir, tmp_path / "uncached", input_kwargs={"complementary_similarities": {"cache": False}}
    )
    uncached = complementary_of(uncached_trainer)(index)
    difference = (cached - uncached).abs()
    assert difference.max() <= FLOAT16_SIMILARITY_TOLERANCE
    assert difference.max() > 0  # float16 storage does round: the tolerance is not vacuous
    assert torch.allclose(cached.diagonal(), torch.ones(len(SENTENCES)))


def test_unknown_cache_dtype_names_the_valid_ones(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"cache_dtype 'bfloat16'; valid types are: float16, float32\.$"):
        dclr_trainer(
            tiny_encoder_dir, tmp_path, input_kwargs={"complementary_similarities": {"cache_dtype": "bfloat16"}}
        )
