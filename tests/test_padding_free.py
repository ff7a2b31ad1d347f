"""Padding-free batches (``hf_cse/modeling/packing.py``): a packed forward gives the padded forward's embeddings, and
every objective's loss and gradients, on tiny BERT, RoBERTa, Qwen3 and Llama models built in-process.

Flex attention (the document-mask kernel that runs on a CPU) has no backward pass on a CPU, so the values are
compared through it with gradients off, and the gradients through ``eager`` attention, for which transformers builds
the same document mask from the packed ``position_ids``, densely. Both sides run in float64 with dropout off (a
packed row draws its dropout masks over other shapes): they differ by the order of their sums alone, within
``sqrt(eps)`` of the values' scale (``tests/rounding.py``), where a sentence attending to another's tokens, a
position counted from the wrong token or a state put back in the wrong place moves them by ~1e-2 or more.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from common.parts import SENTENCE_OBJECTIVES
from conftest import SENTENCES, make_tiny_trainer, run_unsup, save_tiny_decoder, write_config, write_train_file
from rounding import assert_equal_up_to_float64_rounding
from transformers import AutoConfig, AutoTokenizer

from hf_cse import OBJECTIVES, POOLERS, CSEModel, PoolingConfig
from hf_cse.errors import UsageError
from hf_cse.modeling.packing import PackedBatch, check_padding_free, keeps_packed_sentences_apart
from hf_cse.modeling.tokenization import SentenceTokenizer
from hf_cse.run_files import RUN_SETTINGS_FILE

FLEX = "flex_attention"
FLOAT32_AGREEMENT = math.sqrt(torch.finfo(torch.float32).eps)
ENCODER_NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
NO_DROPOUT = {"bert": ENCODER_NO_DROPOUT, "roberta": ENCODER_NO_DROPOUT}
"""Dropout off: a packed row draws its masks over ``[1, T, H]``, a padded batch over ``[B, L, H]``. The decoders
ship without dropout."""


def test_packing_puts_every_real_token_back_in_place_on_either_padding_side() -> None:
    mask = torch.tensor([[1, 1, 1, 0], [0, 0, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1]])
    values = torch.arange(16.0).view(4, 4, 1).expand(4, 4, 2)
    packing = PackedBatch.from_attention_mask(mask)
    packed = packing.pack(values)
    assert packed[0, :, 0].tolist() == [0, 1, 2, 6, 7, 12, 13, 14, 15]
    assert packing.cu_seq_lens.tolist() == [0, 3, 5, 5, 9] and packing.max_length == 4
    assert torch.equal(packing.unpack(packed), values * mask[..., None])


def load(model_dir: Path, pooler: str, kernel: str, **pooling: Any) -> tuple[CSEModel, dict[str, torch.Tensor]]:
    """The model of ``model_dir`` under ``kernel``, and :data:`SENTENCES` tokenized for ``pooler``."""
    model_type = AutoConfig.from_pretrained(model_dir).model_type
    model = CSEModel.from_pretrained(
        model_dir,
        pooling=PoolingConfig(pooler=pooler, **pooling),
        attn_implementation=kernel,
        **NO_DROPOUT.get(model_type, {}),
    )
    tokenizer = SentenceTokenizer(AutoTokenizer.from_pretrained(model_dir), model.pooling)
    return model, tokenizer.batch(SENTENCES[:6])


@pytest.fixture(scope="module")
def model_dirs(tiny_encoder_dir: Path, tiny_roberta_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    decoders = {name: save_tiny_decoder(tmp_path_factory.mktemp(name), name) for name in ("qwen3", "llama")}
    return {"bert": tiny_encoder_dir, "roberta": tiny_roberta_dir, **decoders}


def pooler_cases() -> list[tuple[str, str, dict]]:
    """Each registered pooler on the encoders (``mask`` with and without template denoising), and those that see the
    whole sentence under causal attention on the decoders (whose tokenizers have no mask token)."""
    cases = [("bert", name, {}) for name in POOLERS] + [("roberta", "avg", {}), ("roberta", "mask", {})]
    cases.append(("bert", "mask", {"template_denoising": True}))
    for decoder in ("qwen3", "llama"):
        cases += [
            (decoder, name, {})
            for name, pooler in POOLERS.items()
            if not pooler.needs_bidirectional_attention and not pooler.needs_mask_token
        ]
    return cases


POOLER_CASES = pooler_cases()
DECODERS = ("qwen3", "llama")


def encode(model: CSEModel, batch: dict[str, torch.Tensor], padding_free: bool) -> dict[str, torch.Tensor]:
    """The embeddings ``[B, H]`` and the real tokens' last states ``[N, H]`` of ``batch``, padded or packed, in
    training mode (the MLP head, template denoising; dropout is off)."""
    model.train()
    model.padding_free = padding_free
    output = model(**batch)
    return {"embeddings": output.embeddings, "states": output.last_hidden_state[batch["attention_mask"].bool()]}


@pytest.mark.parametrize(
    ("architecture", "pooler", "pooling"), POOLER_CASES, ids=[f"{a}-{p}-{len(k)}" for a, p, k in POOLER_CASES]
)
def test_a_packed_forward_gives_the_padded_embeddings_and_gradients(
    model_dirs: dict, architecture: str, pooler: str, pooling: dict
) -> None:
    """Under eager attention, in float64; the loss weighs every embedding dimension."""
    model, batch = load(model_dirs[architecture], pooler, "eager", **pooling)
    model.double()
    assert bool((batch["attention_mask"] == 0).any())  # sentences of several lengths: padding to leave out
    weights = torch.randn(6, model.config.hidden_size, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    results = {}
    for padding_free in (False, True):
        model.zero_grad()
        values = encode(model, batch, padding_free)
        (values["embeddings"] * weights).sum().backward()
        gradients = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        results[padding_free] = {**{name: value.detach() for name, value in values.items()}, **gradients}
    if architecture in DECODERS:
        # Their RMSNorm normalizes in float32 whatever the weights' dtype: a float32 rounding per norm on each side.
        assert_within_float32_rounding(results[True], results[False], "embeddings, states and gradients")
    else:
        assert_equal_up_to_float64_rounding(results[True], results[False], "embeddings, states and gradients")
    assert sum(1 for name in results[True] if name not in ("embeddings", "states")) > 10


def one_step(
    model_dir: Path, tmp_path: Path, objective: str, kernel: str, padding_free: bool, **settings: Any
) -> dict:
    """The loss and gradients of ``objective``'s first batch of 8 under ``kernel`` (``settings``: more training
    arguments): in float64 under ``eager``; in float32 under flex attention (the only dtypes of its CPU kernel), with
    gradients off (it has no CPU backward)."""
    pooler = OBJECTIVES[objective].required_pooler or "cls"
    trainer = make_tiny_trainer(
        model_dir,
        tmp_path / f"{kernel}-{padding_free}",
        pooling=PoolingConfig(pooler=pooler),
        model_kwargs={"attn_implementation": kernel, **ENCODER_NO_DROPOUT},
        objective=objective,
        max_steps=1,
        **settings,
    )
    trainer.stop_on_identical_views = False  # dropout is off: SimCSE's two views are equal, and that is no matter here
    model = trainer.model.train()
    if kernel != FLEX:
        model.double()
    model.padding_free = padding_free
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(8)])
    torch.manual_seed(1)  # the same random draws on both sides (views, DCLR's noise, ...)
    with torch.set_grad_enabled(kernel != FLEX):
        loss = trainer.compute_loss(model, batch)
    if kernel == FLEX:
        return {"loss": loss.double()}
    loss.backward()
    gradients = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    return {"loss": loss.detach(), **gradients}


OBJECTIVE_CASES = [(name, {}) for name in SENTENCE_OBJECTIVES] + [
    ("simcse", {"gradient_cache_chunk_size": 3}),  # each chunk packed on its own, in both of its passes
    ("simcse", {"matryoshka_dims": [16, 32]}),
    ("simcse", {"view_augmentation": "token_cutoff"}),  # views as inputs_embeds, packed with the ids beside them
]


@pytest.mark.parametrize(
    ("objective", "settings"), OBJECTIVE_CASES, ids=[f"{o}-{sorted(s)}" for o, s in OBJECTIVE_CASES]
)
def test_every_objective_gives_the_padded_loss_and_gradients_when_packed(
    tiny_encoder_dir: Path, tmp_path: Path, objective: str, settings: dict
) -> None:
    padded = one_step(tiny_encoder_dir, tmp_path, objective, "eager", padding_free=False, **settings)
    packed = one_step(tiny_encoder_dir, tmp_path, objective, "eager", padding_free=True, **settings)
    assert_equal_up_to_float64_rounding(packed, padded, "loss and gradients")
    assert any(value.abs().sum() > 0 for name, value in packed.items() if name != "loss")


def assert_within_float32_rounding(
    got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], what: str, scale: float = 0.0
) -> None:
    """Every entry of ``got`` equal to ``expected``'s within ``sqrt(eps32) = 3.5e-4`` of the largest magnitude of all
    of ``expected`` (or ``scale``, when larger: that of the terms a value was summed from), for computations that
    round in float32: float32 rounding over these reductions (hidden size 32, rows of at most ~40 tokens, 2 layers)
    moves a value by ~n * eps32 ~ 1e-5 of the scale, a sentence attending to another's tokens by ~1e-2 or more
    (``tests/rounding.py``'s argument, at float32's epsilon)."""
    assert got.keys() == expected.keys(), (what, sorted(got), sorted(expected))
    scale = max(scale, *(value.abs().max().item() for value in expected.values()))
    for name, value in expected.items():
        error = (got[name].double() - value.double()).abs().max().item()
        beyond = f"{what} {name}: differ by {error:.3g}, beyond sqrt(eps32) x {scale:.3g}"
        assert error <= FLOAT32_AGREEMENT * scale, beyond


FLEX_POOLER_CASES = [
    ("bert", "cls", {}),
    ("bert", "avg_first_last", {}),
    ("bert", "mask", {"template_denoising": True}),
    ("roberta", "avg", {}),
    ("qwen3", "last_token", {}),
    ("llama", "prompt_last_token", {}),
]


@pytest.mark.slow  # flex attention compiles on a CPU: ~40 s per new kind of shape on 2 cores
@pytest.mark.parametrize(
    ("architecture", "pooler", "pooling"),
    FLEX_POOLER_CASES,
    ids=[f"{a}-{p}-{len(k)}" for a, p, k in FLEX_POOLER_CASES],
)
def test_under_flex_attention_packed_and_padded_forwards_give_the_float64_embeddings(
    model_dirs: dict, architecture: str, pooler: str, pooling: dict
) -> None:
    """Flex attention runs float32 on a CPU: both its packed and its padded forward are compared with the padded
    forward in float64 (eager attention)."""
    reference, batch = load(model_dirs[architecture], pooler, "eager", **pooling)
    model, _ = load(model_dirs[architecture], pooler, FLEX, **pooling)
    model.load_state_dict(reference.state_dict())  # the MLP head, initialized at random in each
    with torch.no_grad():
        expected = encode(reference.double(), batch, padding_free=False)
        assert keeps_packed_sentences_apart(model)
        check_padding_free(model)
        for padding_free in (False, True):
            assert_within_float32_rounding(encode(model, batch, padding_free), expected, "embeddings and states")


@pytest.mark.slow  # flex attention compiles on a CPU
@pytest.mark.parametrize("objective", SENTENCE_OBJECTIVES)
def test_under_flex_attention_every_objective_gives_the_float64_padded_loss_when_packed(
    tiny_encoder_dir: Path, tmp_path: Path, objective: str
) -> None:
    """The loss is a log-sum-exp of similarities over the temperature, each up to ``1 / temperature``: float32 rounds
    it at that scale, however small the loss itself (DCLR's, with equal views, is ~1e-7)."""
    padded = one_step(tiny_encoder_dir, tmp_path, objective, "eager", padding_free=False)
    flex = one_step(tiny_encoder_dir, tmp_path, objective, FLEX, padding_free=True)
    logit_scale = 1 / OBJECTIVES[objective]().get_config_dict()["temperature"]
    assert_within_float32_rounding(flex, {"loss": padded["loss"]}, "losses", scale=logit_scale)


@pytest.mark.parametrize("architecture", ["bert", "roberta", "qwen3", "llama"])
def test_the_probe_finds_that_packed_sentences_are_kept_apart(model_dirs: dict, architecture: str) -> None:
    """Under eager attention, as fast as the probe runs (flex attention's: the slow test above)."""
    model, _ = load(model_dirs[architecture], "avg", "eager")
    assert keeps_packed_sentences_apart(model)


def test_the_probe_sees_a_model_that_attends_across_packed_sentences(
    model_dirs: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transformers that did not read the sentences' boundaries from the position ids would see one long
    sentence: the probe's second sentence then changes with the first, and padding_free is refused."""
    model, _ = load(model_dirs["bert"], "avg", "eager")
    monkeypatch.setattr("transformers.masking_utils.find_packed_sequence_indices", lambda position_ids: None)
    assert not keeps_packed_sentences_apart(model)
    monkeypatch.setattr("hf_cse.modeling.packing.PACKING_KERNELS", ("eager",))  # past the kernel check, to the probe
    with pytest.raises(UsageError, match="attends across packed sentences under eager") as error:
        check_padding_free(model)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("kernel", ["sdpa", "eager"])
def test_padding_free_refuses_a_kernel_that_masks_the_packed_row_densely(model_dirs: dict, kernel: str) -> None:
    model, _ = load(model_dirs["bert"], "avg", kernel)
    with pytest.raises(UsageError, match=f"padding_free needs attn_implementation .*runs '{kernel}'") as error:
        check_padding_free(model)
    assert "\n" not in str(error.value)


def test_run_unsup_refuses_padding_free_under_its_default_kernel_before_the_data_loads(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    config = write_config(tmp_path, tiny_encoder_dir, tmp_path / "not_read.txt", padding_free=True)
    with pytest.raises(UsageError, match="padding_free needs attn_implementation .* runs None") as error:
        run_unsup.main(["--config", str(config)])
    assert "\n" not in str(error.value)


def test_a_padding_free_run_packs_every_forward_and_records_it_in_its_run_settings(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under eager attention, let through for the test (it trains on a CPU, where the packing kernels do not)."""
    monkeypatch.setattr("hf_cse.modeling.packing.PACKING_KERNELS", ("eager",))
    packed_rows = []
    packing = PackedBatch.from_attention_mask.__func__

    def counted(cls: type[PackedBatch], attention_mask: torch.Tensor) -> PackedBatch:
        packed_rows.append(len(attention_mask))
        return packing(cls, attention_mask)

    monkeypatch.setattr(PackedBatch, "from_attention_mask", classmethod(counted))
    train = write_train_file(tmp_path, SENTENCES)
    config = write_config(tmp_path, tiny_encoder_dir, train, padding_free=True, attn_implementation="eager",
                          save_strategy="steps", save_steps=2)  # fmt: skip
    run_unsup.main(["--config", str(config)])
    assert packed_rows[:2] == [2, 8]  # the probe's two sentences, then the first step's 4 sentences x 2 views
    settings = json.loads((tmp_path / "out" / "checkpoint-2" / RUN_SETTINGS_FILE).read_text(encoding="utf-8"))
    assert settings["settings"]["padding_free"] is True
