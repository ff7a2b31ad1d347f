"""sentence-transformers never pools another way in silence (issue 54, item 7): for every registered pooler, under
each of its settings that matters, on a tiny BERT and on tiny Qwen3, Llama and Gemma 3 models with decoder
tokenizers (tests/common/decoder_tokenizers.py), the folder hf_cse saves either loads in sentence-transformers with
hf_cse's embeddings or stops it with one line naming the hf_cse pooler and ``hf_cse.SentenceEncoder``.

Before, a ``prompt_last_token`` model saved no ``modules.json`` and sentence-transformers loaded it with mean pooling
(cosine 0.26-0.40 to hf_cse's embeddings); so did every other pooler it cannot express, and a decoder's ``avg`` that
leaves the BOS out would have loaded as sentence-transformers' ``mean``, which counts it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from common.decoder_tokenizers import FAMILIES, QUOTED_SENTENCES, save_decoder
from conftest import SENTENCES
from transformers import AutoTokenizer

from hf_cse import CSEModel, PoolingConfig, SentenceEncoder
from hf_cse.errors import UsageError
from hf_cse.export.sentence_transformers_files import expresses, write_sentence_transformers_files
from hf_cse.modeling.tokenization import use_eos_for_padding
from hf_cse.registry import POOLERS

sentence_transformers = pytest.importorskip("sentence_transformers")

TEXTS = [*QUOTED_SENTENCES, *SENTENCES[:3]]
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "cls": [{}, {"mlp_only_train": False, "normalize": True}],
    "avg": [{}, {"pooler_kwargs": {"tokens": "all"}}, {"pooler_kwargs": {"tokens": "sentence"}}],
    "weighted_mean": [{}, {"pooler_kwargs": {"tokens": "all"}}],
    "mask": [{}, {"template_denoising": True}],
    "prompt_last_token": [{}, {"pooler_kwargs": {"rewrite_at_inference": True}}],
    "echo": [{}, {"pooler_kwargs": {"strategy": "last"}}],
}
"""The settings each pooler is tried under beyond its defaults (the registry decides which poolers: a built-in pooler
added later is tried with its defaults)."""
BACKBONES = ("bert", *FAMILIES)


def cases() -> list[Any]:
    return [
        pytest.param(name, settings, backbone, id=f"{name}-{index}-{backbone}")
        for name in POOLERS
        for index, settings in enumerate(VARIANTS.get(name, [{}]))
        for backbone in BACKBONES
    ]


@pytest.fixture(scope="module")
def backbone_dirs(tmp_path_factory: pytest.TempPathFactory, tiny_encoder_dir: Path) -> dict[str, Path]:
    folders = {family: save_decoder(tmp_path_factory.mktemp(f"st_{family}"), family) for family in FAMILIES}
    return {"bert": tiny_encoder_dir, **folders}


def saved_like_a_run(backbone: Path, pooling: PoolingConfig, out: Path) -> tuple[CSEModel, Any] | None:
    """The model, tokenizer and sentence-transformers files as a run saves them
    (``training/saving/model_files.py``), or ``None`` where the pooler cannot run on the backbone (a first-token
    pooler on a causal decoder, a mask pooler without a mask token: refused in one line before anything trains)."""
    try:
        model = CSEModel.from_pretrained(backbone, pooling=pooling)
        tokenizer = AutoTokenizer.from_pretrained(backbone)
        encoder = SentenceEncoder(model, tokenizer)  # fills the pooling settings the tokenizer decides
    except (UsageError, ValueError) as refused:
        assert "\n" not in str(refused)
        return None
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_sentence_transformers_files(out, model, encoder.sentence_tokenizer.max_seq_length)
    return model, tokenizer


@pytest.mark.parametrize(("name", "settings", "backbone"), cases())
def test_sentence_transformers_gives_hf_cses_embeddings_or_stops_in_one_line(
    name: str, settings: dict[str, Any], backbone: str, backbone_dirs: dict[str, Path], tmp_path: Path
) -> None:
    pooling = PoolingConfig(pooler=name, **settings)
    saved = saved_like_a_run(backbone_dirs[backbone], pooling, tmp_path / "out")
    if saved is None:
        pytest.skip(f"{name} does not run on {backbone}")
    assert (tmp_path / "out" / "modules.json").is_file()  # never a folder sentence-transformers mean-pools
    expected = SentenceEncoder.from_pretrained(tmp_path / "out", device="cpu").encode(TEXTS)
    if not expresses(saved[0].pooling):
        with pytest.raises(ValueError) as error:
            sentence_transformers.SentenceTransformer(str(tmp_path / "out"), device="cpu")
        message = str(error.value)
        assert "\n" not in message and f"hf_cse:{name} (sentence-transformers cannot express" in message
        assert "load this model with hf_cse.SentenceEncoder.from_pretrained" in message
        return
    model = sentence_transformers.SentenceTransformer(str(tmp_path / "out"), device="cpu")
    got = torch.as_tensor(model.encode(TEXTS, convert_to_numpy=True))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("name", "settings", "backbone", "expressed"),
    [
        ("avg", {}, "bert", True),  # SimCSE's mean: every token
        ("avg", {}, "qwen", True),  # LLM2Vec's mean, and Qwen's tokenizer adds no BOS: every token
        ("avg", {}, "llama", False),  # LLM2Vec's mean leaves the BOS out; sentence-transformers' counts it
        ("avg", {"pooler_kwargs": {"tokens": "all"}}, "llama", True),
        ("weighted_mean", {}, "gemma", False),
        ("last_token", {}, "llama", True),
        ("prompt_last_token", {}, "qwen", False),
        ("echo", {}, "qwen", False),
        ("mask", {}, "bert", False),
        ("avg_top2", {}, "bert", False),
    ],
)
def test_which_settings_sentence_transformers_expresses(
    name: str, settings: dict[str, Any], backbone: str, expressed: bool, backbone_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """The grid above cannot pass by refusing everything: these are expressed, or not, as their definitions say."""
    saved = saved_like_a_run(backbone_dirs[backbone], PoolingConfig(pooler=name, **settings), tmp_path / "out")
    assert saved is not None and expresses(saved[0].pooling) is expressed


def test_a_decoder_tokenizer_with_a_chat_template_is_read_as_plain_text(
    backbone_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """sentence-transformers 6 renders every sentence through a tokenizer's chat template where the folder names a
    ``message`` modality; hf_cse's ``sentence_bert_config.json`` names none, so it reads plain text, as hf_cse."""
    base = tmp_path / "base"
    tokenizer = AutoTokenizer.from_pretrained(backbone_dirs["qwen"])
    tokenizer.chat_template = "{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}"
    CSEModel.from_pretrained(backbone_dirs["qwen"], pooling=PoolingConfig("last_token")).save_pretrained(base)
    tokenizer.save_pretrained(base)
    assert saved_like_a_run(base, PoolingConfig(pooler="last_token"), tmp_path / "out") is not None
    expected = SentenceEncoder.from_pretrained(tmp_path / "out", device="cpu").encode(TEXTS)
    model = sentence_transformers.SentenceTransformer(str(tmp_path / "out"), device="cpu")
    assert AutoTokenizer.from_pretrained(tmp_path / "out").chat_template is not None
    torch.testing.assert_close(torch.as_tensor(model.encode(TEXTS)), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["mean", "weightedmean", "lasttoken"])
def test_a_decoder_sentence_transformers_saved_is_pooled_by_hf_cse_as_it_pools(
    mode: str, backbone_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """The other way: a Llama-like decoder saved by sentence-transformers with its own pooling, loaded in hf_cse
    without a pooler, gives sentence-transformers' embeddings: its ``mean`` counts the BOS, so hf_cse reads it as
    ``avg`` with ``tokens: all``, not as a decoder's default (LLM2Vec's mean, without the BOS)."""
    from sentence_transformers import SentenceTransformer, models

    tokenizer = AutoTokenizer.from_pretrained(backbone_dirs["llama"])
    use_eos_for_padding(tokenizer)
    tokenizer.padding_side = "right"
    folder = tmp_path / "base"
    CSEModel.from_pretrained(backbone_dirs["llama"], pooling=PoolingConfig("last_token")).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    transformer = models.Transformer(str(folder))
    pooling = models.Pooling(transformer.get_embedding_dimension(), pooling_mode=mode)
    SentenceTransformer(modules=[transformer, pooling], device="cpu").save_pretrained(str(tmp_path / "st"))
    config = tmp_path / "st" / "config.json"
    values = json.loads(config.read_text(encoding="utf-8"))
    values.pop("hf_cse", None)  # a plain sentence-transformers checkpoint: no hf_cse settings
    config.write_text(json.dumps(values), encoding="utf-8")
    theirs = SentenceTransformer(str(tmp_path / "st"), device="cpu").encode(TEXTS, convert_to_tensor=True)
    encoder = SentenceEncoder.from_pretrained(tmp_path / "st", device="cpu")
    assert encoder.model.pooling.template_prefix_length is None  # nothing left out: the BOS counts
    torch.testing.assert_close(encoder.encode(TEXTS), theirs.cpu(), atol=1e-5, rtol=1e-5)
