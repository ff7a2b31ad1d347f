"""Sequence-length limits against the models' position embeddings: a max_seq_length (or the padding of one) past them
fails when the trainer or encoder is built, in one line naming the limit, and RoBERTa's numbering from padding_idx
is counted as the model counts it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import (
    SENTENCES,
    make_tiny_trainer,
    run_unsup,
    tiny_config,
    training_args,
    write_config,
    write_train_file,
)
from datasets import Dataset
from rounding import assert_equal_up_to_float64_rounding
from transformers import AutoTokenizer, BertConfig

from hf_cse import CSEModel, CSETrainer, PoolingConfig, SentenceEncoder
from hf_cse.errors import UsageError
from hf_cse.modeling.encoder import check_max_seq_length, max_input_length


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
    """RoBERTa numbers real tokens from ``padding_idx + 1`` and gives padding ``padding_idx``: 139 tokens padded to a
    multiple of 8 (144) fit its 140 positions, where BERT's numbering would overflow them, and the padded row encodes
    as the encoder encodes the sentence alone (float64: equal up to rounding, tests/rounding.py)."""
    model = CSEModel.from_pretrained(tiny_roberta_dir, pooling=PoolingConfig(pooler="cls_before_pooler"))
    model = model.double().eval()
    check_max_seq_length(139, model, pad_to_multiple_of=8)  # no error: padded to 144
    pad, positions = model.config.pad_token_id, model.config.max_position_embeddings
    ids = torch.cat([torch.full((1, 139), pad + 1), torch.full((1, 5), pad)], dim=1)
    assert ids.shape[1] > positions
    numbered = model.encoder_model.embeddings.create_position_ids_from_input_ids(ids, pad)  # transformers' own
    assert numbered[0].tolist() == list(range(pad + 1, pad + 140)) + [pad] * 5
    assert int(numbered.max()) < positions
    padded = model(input_ids=ids, attention_mask=(ids != pad).long()).embeddings
    with torch.no_grad():
        alone = model.encoder_model(input_ids=ids[:, :139], attention_mask=torch.ones(1, 139, dtype=torch.long))
    assert_equal_up_to_float64_rounding(
        {"embedding": padded.detach()}, {"embedding": alone.last_hidden_state[:, 0]}, "embeddings"
    )


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


@pytest.mark.parametrize("given", [None, 40])
def test_a_run_from_a_sentence_transformers_checkpoint_keeps_its_inference_length(
    tiny_encoder_dir: Path, tmp_path: Path, given: int | None
) -> None:
    """A run from all-MiniLM-L6-v2 (sentence_bert_config.json: 256, tokenizer: 512) saved 512 in every file, so the
    trained model read twice the tokens sentence-transformers read the base with. Unless --inference_max_seq_length
    is given, the run now saves the base's length, in sentence_bert_config.json, config.json and the card alike."""
    base = shutil.copytree(tiny_encoder_dir, tmp_path / "st_base")  # tokenizer 128, positions 128
    (base / "sentence_bert_config.json").write_text('{"max_seq_length": 48, "do_lower_case": false}')
    overrides = {} if given is None else {"inference_max_seq_length": given}
    config = write_config(tmp_path, base, write_train_file(tmp_path, SENTENCES), **overrides)
    run_unsup.main(["--config", str(config)])
    out, expected = tmp_path / "out", given or 48
    assert SentenceEncoder.from_pretrained(out, device="cpu").sentence_tokenizer.max_seq_length == expected
    assert json.loads((out / "sentence_bert_config.json").read_text(encoding="utf-8"))["max_seq_length"] == expected
    assert f"max_length = {expected}  # hf_cse's truncation length at inference" in (out / "README.md").read_text()


def test_a_length_that_leaves_no_room_for_a_sentence_is_refused_before_training(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """With BERT's tokenizer a length of 2 keeps [CLS] [SEP] alone: every sentence trained, or was saved to embed, as
    the same row. The training length and the saved inference length are both checked when the trainer is built."""
    with pytest.raises(UsageError, match=r"^max_seq_length=2 leaves no room for a sentence: BertTokenizer") as error:
        make_tiny_trainer(tiny_encoder_dir, tmp_path / "train", max_seq_length=2)
    assert "\n" not in str(error.value)
    with pytest.raises(UsageError, match=r"^max_seq_length=2 is no valid truncation length: use an integer >= 3"):
        make_tiny_trainer(tiny_encoder_dir, tmp_path / "saved", pooling=PoolingConfig(pooler="cls", max_seq_length=2))
