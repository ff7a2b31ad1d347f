"""Sequence-length limits against the models' position embeddings, and DCLR's complementary cache: truncated at the
training length, encoded window by window into a float16 table."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import SENTENCES, complementary_of, dclr_trainer, tiny_config, training_args
from datasets import Dataset
from transformers import AutoTokenizer, BertConfig

from hf_cse import CSEModel, CSETrainer, PoolingConfig, SentenceEncoder
from hf_cse.errors import UsageError
from hf_cse.inputs import complementary
from hf_cse.modeling.encoder import check_max_seq_length, max_input_length

FLOAT16_SIMILARITY_TOLERANCE = 2**-9
"""Float16 keeps 11 significant bits: each stored component is off by at most 2^-11 of itself, so the product of two
unit rows moves by at most 2 * 2^-11 (Cauchy-Schwarz), and renormalizing both rows by as much again."""


def tiny_bert(max_position_embeddings: int) -> CSEModel:
    config = tiny_config(BertConfig, max_position_embeddings, num_hidden_layers=1)
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


def test_padding_past_the_position_embeddings_fails_at_construction(tiny_tokenizer_dir: Path, tmp_path: Path) -> None:
    """BERT numbers padded tokens too: 62 tokens padded to a multiple of 24 (72) overflow 64 positions, as a forward
    pass shows; a multiple of 16 (64) fits."""
    model = tiny_bert(64)
    with pytest.raises(
        RuntimeError, match="expanded size of the tensor \\(72\\) must match the existing size \\(64\\)"
    ):
        model(input_ids=torch.full((1, 72), 7), attention_mask=(torch.arange(72) < 62).long()[None])
    check_max_seq_length(62, model, pad_to_multiple_of=16)
    with pytest.raises(
        UsageError, match=r"^pad_to_multiple_of=24 pads max_seq_length=62 up to 72 tokens, past the 64"
    ):
        CSETrainer(
            model,
            training_args(tmp_path, max_seq_length=62, pad_to_multiple_of=24),
            Dataset.from_dict({"text": SENTENCES}),
            processing_class=AutoTokenizer.from_pretrained(tiny_tokenizer_dir),
        )


def test_roberta_padding_takes_padding_idx_so_any_multiple_fits(tiny_roberta_dir: Path) -> None:
    model = CSEModel.from_pretrained(tiny_roberta_dir).eval()  # 139 tokens at most
    check_max_seq_length(139, model, pad_to_multiple_of=8)  # padded to 144: the padding's position is padding_idx
    pad = model.config.pad_token_id
    ids = torch.cat([torch.full((1, 139), pad + 1), torch.full((1, 5), pad)], dim=1)
    model(input_ids=ids, attention_mask=(ids != pad).long())


def test_complementary_model_shorter_than_max_seq_length_fails_at_construction(
    tiny_encoder_dir: Path, tiny_tokenizer_dir: Path, tmp_path: Path
) -> None:
    short = tmp_path / "short"
    tiny_bert(64).save_pretrained(short)
    AutoTokenizer.from_pretrained(tiny_tokenizer_dir).save_pretrained(short)
    with pytest.raises(
        UsageError, match=r"^complementary model .*short': max_seq_length=100 is longer than the model .* at most 64"
    ):
        dclr_trainer(tiny_encoder_dir, tmp_path, complementary_model_name_or_path=str(short), max_seq_length=100)


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
    uncached = complementary_of(dclr_trainer(tiny_encoder_dir, tmp_path / "uncached", complementary_cache=False))(
        index
    )
    difference = (cached - uncached).abs()
    assert difference.max() <= FLOAT16_SIMILARITY_TOLERANCE
    assert difference.max() > 0  # float16 storage does round: the tolerance is not vacuous
    assert torch.allclose(cached.diagonal(), torch.ones(len(SENTENCES)))


def test_unknown_cache_dtype_names_the_valid_ones(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"cache_dtype 'bfloat16'; valid types are: float16, float32\.$"):
        dclr_trainer(tiny_encoder_dir, tmp_path, complementary_cache_dtype="bfloat16")


def test_the_encoder_reads_no_more_tokens_than_the_positions_hold(tiny_tokenizer_dir: Path, tmp_path: Path) -> None:
    """Evaluation too: a tokenizer without a length limit is capped at the model's; a longer explicit one fails."""
    folder = tmp_path / "short"
    tiny_bert(64).save_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(tiny_tokenizer_dir, model_max_length=100_000)
    tokenizer.save_pretrained(folder)
    encoder = SentenceEncoder.from_pretrained(folder, device="cpu")
    assert encoder.sentence_tokenizer.max_seq_length == 64
    assert encoder.encode(["a man is playing a guitar " * 30]).shape == (1, 32)
    with pytest.raises(UsageError, match="max_seq_length=100 is longer than the model .* at most 64 tokens"):
        SentenceEncoder.from_pretrained(folder, max_seq_length=100, device="cpu")
