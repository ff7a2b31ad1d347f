"""Poolers against hand computations; checkpoints that reload in hf_cse, transformers and sentence-transformers."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from conftest import SENTENCES, run_unsup, write_config, write_train_file
from safetensors.torch import load_file, save_file
from transformers import AutoModel, AutoTokenizer

from hf_cse import CSEModel, PoolingConfig, SentenceEncoder
from hf_cse.commands.cli import run_command
from hf_cse.errors import UsageError
from hf_cse.export.sentence_transformers_files import write_sentence_transformers_files
from hf_cse.modeling.modeling_cse import masked_mean
from hf_cse.modeling.tokenization import SentenceTokenizer


def load(tiny_encoder_dir: Path, **pooling: object) -> tuple[CSEModel, SentenceTokenizer]:
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(**pooling)).eval()
    tokenizer = SentenceTokenizer(AutoTokenizer.from_pretrained(tiny_encoder_dir), model.pooling)
    return model, tokenizer


def reference_hidden_states(model: CSEModel, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    return model.encoder_model(**batch, output_hidden_states=True).hidden_states


@pytest.mark.parametrize("pooler", ["cls_before_pooler", "avg", "avg_first_last", "avg_top2"])
def test_poolers_match_hand_computation(tiny_encoder_dir: Path, pooler: str) -> None:
    model, tokenizer = load(tiny_encoder_dir, pooler=pooler)
    batch = tokenizer.batch(SENTENCES[:4])
    with torch.no_grad():
        got = model(**batch).embeddings
        layers = reference_hidden_states(model, batch)
    mask = batch["attention_mask"]
    rows = []
    for i in range(4):  # per row, over the real tokens only
        n = int(mask[i].sum())
        if pooler == "cls_before_pooler":
            rows.append(layers[-1][i, 0])
        elif pooler == "avg":
            rows.append(layers[-1][i, :n].mean(0))
        elif pooler == "avg_first_last":
            rows.append(((layers[1][i, :n] + layers[-1][i, :n]) / 2).mean(0))
        else:
            rows.append(((layers[-2][i, :n] + layers[-1][i, :n]) / 2).mean(0))
    assert torch.allclose(got, torch.stack(rows), atol=1e-5)


def test_cls_pooler_uses_mlp_in_training_only(tiny_encoder_dir: Path) -> None:
    model, tokenizer = load(tiny_encoder_dir, pooler="cls", mlp_only_train=True)
    batch = tokenizer.batch(SENTENCES[:3])
    model.config.hidden_dropout_prob = 0.0
    for module in model.modules():  # no dropout, so train and eval differ only by the head
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    with torch.no_grad():
        cls = model.encoder_model(**batch).last_hidden_state[:, 0]
        assert torch.allclose(model.eval()(**batch).embeddings, cls, atol=1e-6)
        assert torch.allclose(model.train()(**batch).embeddings, torch.tanh(model.mlp.dense(cls)), atol=1e-6)
        model.pooling.mlp_only_train = False
        assert torch.allclose(model.eval()(**batch).embeddings, torch.tanh(model.mlp.dense(cls)), atol=1e-6)


def test_mask_pooler_reads_the_mask_position_and_truncation_keeps_the_template(tiny_encoder_dir: Path) -> None:
    model, tokenizer = load(tiny_encoder_dir, pooler="mask")
    tokenizer = SentenceTokenizer(tokenizer.tokenizer, model.pooling, max_seq_length=20)
    long_sentence = " ".join(["the big red car"] * 20)
    batch = tokenizer.batch([long_sentence, SENTENCES[0]])
    ids = batch["input_ids"]
    assert ids.shape[1] == 20
    mask_id = tokenizer.tokenizer.mask_token_id
    assert model.pooling.mask_token_id == mask_id
    assert (ids == mask_id).sum(dim=1).tolist() == [1, 1]
    full = tokenizer.tokenizer(f'This sentence : "{SENTENCES[0]}" means [MASK] .')["input_ids"]
    assert ids[1, : len(full)].tolist() == full  # same ids as tokenizing the filled template as one string
    suffix = tokenizer.tokenizer('" means [MASK] .', add_special_tokens=False)["input_ids"]
    assert ids[0, -len(suffix) - 1 : -1].tolist() == suffix  # the long sentence lost words, the template did not
    with torch.no_grad():
        got = model(**batch).embeddings
        last = model.encoder_model(**batch).last_hidden_state
    positions = (ids == mask_id).int().argmax(dim=1)
    assert torch.allclose(got, last[torch.arange(2), positions], atol=1e-6)


def test_mask_pooler_rejects_rows_without_the_template(tiny_encoder_dir: Path) -> None:
    model, tokenizer = load(tiny_encoder_dir, pooler="mask")
    batch = tokenizer.tokenizer(SENTENCES[:2], padding=True, return_tensors="pt")
    with pytest.raises(ValueError, match="exactly one mask token"):
        model(**batch)


def test_a_template_that_tokenizes_to_two_masks_is_one_line_error(tiny_encoder_dir: Path) -> None:
    # A tokenizer whose mask token is written "<mask>": the template's [MASK] becomes one, the literal a second.
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir, mask_token="<mask>")
    pooling = PoolingConfig(pooler="mask", prompt_template='Fill <mask> : "{sentence}" means [MASK] .')
    with pytest.raises(UsageError, match="tokenizes to 2 mask tokens \\('<mask>'\\)") as raised:
        SentenceTokenizer(tokenizer, pooling)
    assert "\n" not in str(raised.value) and "Fill <mask>" in str(raised.value)


def test_a_training_sentence_holding_the_mask_token_stops_the_run_before_training(
    tiny_encoder_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """During training the pooler does not count mask tokens (a host read per step): the data preparation does."""
    bad = "the model reads [MASK] here"
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, [*SENTENCES[:6], bad]), pooler="mask")
    with pytest.raises(SystemExit) as exited:
        run_command(run_unsup.main, "run_unsup.py", ["--config", str(config)])
    err = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2 and err[-1].startswith("run_unsup.py: error: The sentence ")
    assert f"{bad!r} contains the mask token '[MASK]'" in err[-1]
    assert not (tmp_path / "out").exists()  # nothing trained, nothing saved


def test_bad_pooling_settings_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="valid poolers are: cls, cls_before_pooler, avg"):
        PoolingConfig(pooler="mean")
    with pytest.raises(ValueError, match=r"\[MASK\] exactly once"):
        PoolingConfig(pooler="mask", prompt_template="{sentence} means .")
    with pytest.raises(ValueError, match="Unknown hf_cse pooling settings"):
        PoolingConfig.from_dict({"pooler": "cls", "pooling": "avg"})


def test_template_longer_than_max_seq_length_is_an_error(tiny_encoder_dir: Path) -> None:
    model, tokenizer = load(tiny_encoder_dir, pooler="mask")
    with pytest.raises(ValueError, match="leaves no room for a sentence"):
        SentenceTokenizer(tokenizer.tokenizer, model.pooling, max_seq_length=8)


def save_trained_like(model: CSEModel, tokenizer: SentenceTokenizer, out: Path) -> None:
    with torch.no_grad():  # move the weights away from the initial checkpoint so reload equality means something
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    model.save_pretrained(out)
    tokenizer.tokenizer.save_pretrained(out)
    write_sentence_transformers_files(out, model, tokenizer.max_seq_length)


@pytest.mark.parametrize(
    "pooling",
    [
        {"pooler": "cls"},
        {"pooler": "cls", "mlp_only_train": False},
        {"pooler": "avg", "normalize": True},
        {"pooler": "avg_top2"},
        {"pooler": "mask"},
        {"pooler": "mask", "template_denoising": True},
        {"pooler": "mask", "template_denoising": True, "pooler_kwargs": {"denoise_at_inference": False}},
    ],
    ids=[
        "cls-mlp-train-only",
        "cls-mlp-inference",
        "avg-normalized",
        "avg_top2",
        "mask",
        "mask-denoised",
        "mask-denoised-in-training-only",
    ],
)
def test_save_reload_encodes_identically(tiny_encoder_dir: Path, tmp_path: Path, pooling: dict) -> None:
    model, tokenizer = load(tiny_encoder_dir, **pooling)
    out = tmp_path / "out"
    save_trained_like(model, tokenizer, out)
    expected = SentenceEncoder(model, tokenizer.tokenizer).encode(SENTENCES)

    reloaded = SentenceEncoder.from_pretrained(out, device="cpu")
    assert reloaded.model.pooling == model.pooling
    assert torch.allclose(reloaded.encode(SENTENCES), expected, atol=1e-6)
    assert sorted(p.name for p in out.glob("*.bin")) == []  # safetensors only
    assert not list(out.glob(".hf_cse-staging-*"))  # the staging folder is gone


def test_automodel_loads_the_trained_encoder(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    model, tokenizer = load(tiny_encoder_dir, pooler="cls")
    out = tmp_path / "out"
    save_trained_like(model, tokenizer, out)
    plain = AutoModel.from_pretrained(out).eval()  # no trust_remote_code
    assert type(plain).__name__ == "BertModel"
    batch = tokenizer.batch(SENTENCES)
    with torch.no_grad():
        assert torch.allclose(plain(**batch).last_hidden_state, model.encoder_model(**batch).last_hidden_state)
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "bert" and config["hf_cse"]["pooler"] == "cls"
    assert "auto_map" not in config


@pytest.mark.parametrize(
    "pooling",
    [
        {"pooler": "cls"},
        {"pooler": "cls_before_pooler"},
        {"pooler": "cls", "mlp_only_train": False},
        {"pooler": "avg"},
        {"pooler": "avg", "normalize": True},
    ],
    ids=["cls", "cls_before_pooler", "cls-mlp-inference", "avg", "avg-normalized"],
)
def test_sentence_transformers_gives_the_same_embeddings(
    tiny_encoder_dir: Path, tmp_path: Path, pooling: dict
) -> None:
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model, tokenizer = load(tiny_encoder_dir, **pooling)
    out = tmp_path / "out"
    save_trained_like(model, tokenizer, out)
    expected = SentenceEncoder(model, tokenizer.tokenizer).encode(SENTENCES)
    st_model = sentence_transformers.SentenceTransformer(str(out), device="cpu")
    got = torch.as_tensor(st_model.encode(SENTENCES, convert_to_numpy=True))
    assert torch.allclose(got, expected, atol=1e-5)


def test_unexpressible_pooler_writes_files_that_stop_sentence_transformers(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """Without ``modules.json`` sentence-transformers would mean-pool the folder in silence (tests/
    test_sentence_transformers_poolers.py loads every pooler)."""
    model, tokenizer = load(tiny_encoder_dir, pooler="avg_first_last")
    assert not write_sentence_transformers_files(tmp_path, model, 32)
    assert (tmp_path / "modules.json").exists() and not (tmp_path / "2_Dense").exists()
    pooling = json.loads((tmp_path / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
    assert pooling["pooling_mode"].startswith("hf_cse:avg_first_last (sentence-transformers cannot express")


def test_resaving_with_an_unexpressible_pooler_removes_the_old_sentence_transformers_files(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    cls_model, _ = load(tiny_encoder_dir, pooler="cls", mlp_only_train=False, normalize=True)
    assert write_sentence_transformers_files(tmp_path, cls_model, 32)
    assert {"1_Pooling", "2_Dense", "3_Normalize", "modules.json"} <= {p.name for p in tmp_path.iterdir()}
    mask_model, _ = load(tiny_encoder_dir, pooler="mask")
    assert not write_sentence_transformers_files(tmp_path, mask_model, 32)
    # Nothing left for sentence-transformers to pool the old way: a Pooling module it refuses, no head.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1_Pooling", "modules.json", "sentence_bert_config.json"]
    assert "hf_cse:mask" in (tmp_path / "1_Pooling" / "config.json").read_text(encoding="utf-8")


def test_interrupted_save_leaves_previous_checkpoint_intact(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, tokenizer = load(tiny_encoder_dir, pooler="avg")
    out = tmp_path / "out"
    model.save_pretrained(out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def crash(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    import transformers.modeling_utils

    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", crash)
    with torch.no_grad():
        model.encoder_model.embeddings.word_embeddings.weight.add_(1.0)
    with pytest.raises(KeyboardInterrupt):
        model.save_pretrained(out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert not list(out.glob(".hf_cse-staging-*"))
    with pytest.raises(KeyboardInterrupt):
        model.save_pretrained(tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()


def test_masked_mean_ignores_padding() -> None:
    hidden = torch.tensor([[[1.0], [3.0], [100.0]]])
    assert masked_mean(hidden, torch.tensor([[1, 1, 0]])).item() == 2.0


def test_pooler_override_keeps_other_saved_settings(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    model, tokenizer = load(tiny_encoder_dir, pooler="cls", normalize=True)
    out = tmp_path / "out"
    save_trained_like(model, tokenizer, out)
    encoder = SentenceEncoder.from_pretrained(out, pooler="avg", device="cpu")
    assert encoder.model.pooling == replace(model.pooling, pooler="avg")


def test_a_whole_pooling_config_replaces_the_saved_one_and_a_name_there_is_one_line(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """``pooling=`` went on to CSEModel.from_pretrained beside the loader's own and raised "got multiple values for
    keyword argument 'pooling'"; sentence-transformers' users write pooling="mean"."""
    model, tokenizer = load(tiny_encoder_dir, pooler="cls", normalize=True)
    out = tmp_path / "out"
    save_trained_like(model, tokenizer, out)
    pooling = PoolingConfig(pooler="avg")
    assert SentenceEncoder.from_pretrained(out, pooling=pooling, device="cpu").model.pooling == pooling
    with pytest.raises(TypeError, match=r"^pooling='mean' is no PoolingConfig: pass a pooler's name as pooler="):
        SentenceEncoder.from_pretrained(out, pooling="mean")
    with pytest.raises(TypeError, match=r"^Pass pooler='avg' or pooling=PoolingConfig\(...\), not both\.$"):
        SentenceEncoder.from_pretrained(out, pooler="avg", pooling=pooling)


def test_template_denoising_subtracts_the_template_at_the_sentence_positions(tiny_encoder_dir: Path) -> None:
    model, tokenizer = load(tiny_encoder_dir, pooler="mask", template_denoising=True)
    batch = tokenizer.batch([SENTENCES[0], SENTENCES[5] + " in the park"])
    with torch.no_grad():
        got = model(**batch).embeddings
        for row in range(2):
            ids = batch["input_ids"][row, : int(batch["attention_mask"][row].sum())]
            prefix, suffix = model.pooling.template_prefix_length, model.pooling.template_suffix_length
            template = torch.cat([ids[:prefix], ids[-suffix:]]).unsqueeze(0)
            positions = torch.cat([torch.arange(prefix), torch.arange(len(ids) - suffix, len(ids))]).unsqueeze(0)
            full = model.encoder_model(input_ids=ids.unsqueeze(0)).last_hidden_state[0]
            # An explicit mask: given position ids without one, transformers >= 5.25 reads a jump in the positions as
            # the start of a packed sequence, and the template's prefix and suffix would not see each other.
            alone = model.encoder_model(
                input_ids=template, attention_mask=torch.ones_like(template), position_ids=positions
            ).last_hidden_state[0]
            mask_id = tokenizer.tokenizer.mask_token_id
            expected = full[ids == mask_id][0] - alone[template[0] == mask_id][0]
            assert torch.allclose(got[row], expected, atol=1e-5)
    with pytest.raises(ValueError, match="template_denoising needs pooler='mask'"):
        PoolingConfig(pooler="cls", template_denoising=True)


def test_denoising_in_training_only_leaves_inference_the_plain_mask_state(tiny_encoder_dir: Path) -> None:
    """``denoise_at_inference=False`` (PromptBERT's released evaluation): training mode subtracts the template's mask
    state as with the default, eval mode returns the plain mask state; the setting is the pooler's own."""
    denoised, tokenizer = load(tiny_encoder_dir, pooler="mask", template_denoising=True)
    plain, _ = load(tiny_encoder_dir, pooler="mask")
    training_only, _ = load(
        tiny_encoder_dir, pooler="mask", template_denoising=True, pooler_kwargs={"denoise_at_inference": False}
    )
    assert training_only.pooling.get_pooler().denoise_at_inference is False
    assert denoised.pooling.get_pooler().denoise_at_inference is True  # the default: checkpoints without the key
    batch = tokenizer.batch(SENTENCES[:4])
    with torch.no_grad():
        at_inference = training_only(**batch).embeddings
        assert torch.equal(at_inference, plain(**batch).embeddings)
        assert not torch.allclose(at_inference, denoised(**batch).embeddings, atol=1e-3)
        # Training mode (dropout off through the encoder's config: the two models then compute the same thing).
        for model in (training_only, denoised):
            model.train()
            model.encoder_model.eval()
        assert torch.equal(training_only(**batch).embeddings, denoised(**batch).embeddings)


@pytest.mark.parametrize(
    ("pooling", "message"),
    [
        (
            {"pooler_kwargs": {"denoise_at_inference": False}},
            "^The mask pooler's denoise_at_inference=false needs template_denoising: true",
        ),
        (
            {"template_denoising": True, "pooler_kwargs": {"denoise_at_inference": "no"}},
            "^The mask pooler's denoise_at_inference must be true or false, got 'no'.$",
        ),
        (
            {"template_denoising": True, "pooler_kwargs": {"denoise": False}},
            "does not take pooler_kwargs .*unexpected keyword argument 'denoise'",
        ),
    ],
    ids=["without-denoising", "not-a-bool", "unknown-key"],
)
def test_mask_pooler_settings_are_refused_in_one_line(pooling: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        PoolingConfig(pooler="mask", **pooling)
    assert "\n" not in str(caught.value)


def test_denoising_a_batch_that_mixes_two_templates_uses_each_rows_template(tiny_encoder_dir: Path) -> None:
    from hf_cse.inputs.base import pad_and_concatenate

    model, first = load(tiny_encoder_dir, pooler="mask", template_denoising=True)
    second_pooling = replace(model.pooling, prompt_template='This sentence of "{sentence}" means [MASK] .')
    second = SentenceTokenizer(first.tokenizer, second_pooling)
    batch_a, batch_b = first.batch(SENTENCES[:3]), second.batch(SENTENCES[:3])
    lengths = torch.tensor(
        [[p.template_prefix_length, p.template_suffix_length] for p in (model.pooling, second_pooling)]
    ).repeat_interleave(3, dim=0)
    with torch.no_grad():
        mixed = model(**pad_and_concatenate([batch_a, batch_b], 0), template_lengths=lengths).embeddings
        alone_a = model(**batch_a).embeddings
        model.pooling = second_pooling
        alone_b = model(**batch_b).embeddings
    assert torch.allclose(mixed, torch.cat([alone_a, alone_b]), atol=1e-5)


@pytest.fixture
def transformers_records(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """caplog, with transformers' log records propagated to it (transformers keeps them to its own handler)."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.enable_propagation()
    try:
        with caplog.at_level(logging.INFO):
            yield caplog
    finally:
        transformers_logging.disable_propagation()


def test_a_task_model_s_head_is_left_out_without_a_load_report_but_missing_encoder_weights_are_reported(
    tiny_encoder_dir: Path, tmp_path: Path, transformers_records: pytest.LogCaptureFixture
) -> None:
    """bert-base-uncased is a BertForPreTraining checkpoint and a Qwen3 a Qwen3ForCausalLM one: transformers listed
    each tensor of their heads (cls.*, lm_head) as UNEXPECTED, "not ok if you expect identical arch", in a table
    before every run. The head is no part of a sentence encoder: left out silently, the encoder's weights loaded;
    an encoder weight the checkpoint lacks is still reported."""
    from transformers import AutoConfig, BertForPreTraining

    pretraining = BertForPreTraining(AutoConfig.from_pretrained(tiny_encoder_dir))
    pretraining.save_pretrained(tmp_path / "pretraining")
    model = CSEModel.from_pretrained(tmp_path / "pretraining")
    for name, tensor in pretraining.bert.state_dict().items():
        assert torch.equal(model.encoder_model.state_dict()[name], tensor), name
    said = "\n".join(record.getMessage() for record in transformers_records.records)
    assert "LOAD REPORT" not in said and "UNEXPECTED" not in said

    weights = load_file(tmp_path / "pretraining" / "model.safetensors")
    del weights["bert.encoder.layer.0.output.dense.weight"]
    save_file(weights, tmp_path / "pretraining" / "model.safetensors", metadata={"format": "pt"})
    CSEModel.from_pretrained(tmp_path / "pretraining")
    said = "\n".join(record.getMessage() for record in transformers_records.records)
    assert "bert.encoder.layer.0.output.dense.weight | MISSING" in said and "UNEXPECTED" not in said


def test_one_sentence_as_a_string_is_one_embedding_and_a_non_string_is_one_line(tiny_encoder_dir: Path) -> None:
    """list("A man plays.") is 12 one-character sentences: encode(str) gave 12 embeddings without a word, where
    sentence-transformers gives the sentence's embedding [D]."""
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="avg"))
    encoder = SentenceEncoder(model, AutoTokenizer.from_pretrained(tiny_encoder_dir))
    one = encoder.encode(SENTENCES[0])
    assert one.shape == (model.config.hidden_size,)
    assert torch.equal(one, encoder.encode(SENTENCES[:1])[0])
    with pytest.raises(TypeError, match=r"^encode\(\) takes strings; got None \(NoneType\) among the sentences\.$"):
        encoder.encode([SENTENCES[0], None])
