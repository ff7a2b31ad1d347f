"""Decoder LLMs as backbones (issue 37), on tiny random Qwen3, Llama and Gemma 3 text models built in-process: the
last-token poolers, the refusal of a pooler that cannot see the sentence under causal attention, identical dropout
views stopped at the first step, ``--dropout``, ``--bidirectional`` and padding with eos."""

from __future__ import annotations

import configparser
import importlib.metadata
import json
import logging
import shutil
from pathlib import Path

import pytest
import torch
from conftest import (
    DECODER_ARCHITECTURES,
    REPO_ROOT,
    SENTENCES,
    make_tiny_trainer,
    run_unsup,
    save_tiny_decoder,
    write_config,
    write_train_file,
)
from packaging.requirements import Requirement
from packaging.version import Version
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModel, AutoTokenizer

from hf_cse import CSEModel, CSETrainer, PoolingConfig, SentenceEncoder
from hf_cse.errors import UsageError
from hf_cse.inputs.complementary import ComplementarySimilarities
from hf_cse.modeling.attention_kernels import check_kernel_trains_on, flex_attention_trains_on
from hf_cse.modeling.backbone import (
    BIDIRECTIONAL_FIELD,
    BITSANDBYTES_REQUIREMENT,
    BackboneSettings,
    bidirectional_model_types,
    check_attention,
)
from hf_cse.modeling.poolers import PROMPTEOL_TEMPLATE
from hf_cse.modeling.tokenization import SentenceTokenizer
from hf_cse.training.record.run_settings import RUN_SETTINGS_FILE

FLOAT64_EPS = torch.finfo(torch.float64).eps


def decoder_config(tmp_path: Path, model_dir: Path, **overrides: object) -> Path:
    """A run_unsup config of 2 steps on ``model_dir`` (a decoder: last-token pooling, dropout 0.1 by default)."""
    train = write_train_file(tmp_path, SENTENCES * 2)
    values = {"pooler": "last_token", "dropout": 0.1, **overrides}
    return write_config(tmp_path, model_dir, train, **{k: v for k, v in values.items() if v is not None})


def later_token_changes_first_state(model: torch.nn.Module) -> bool:
    """In plain transformers (a 2D mask), in a right-padded batch of 4-token rows: whether the first position's state
    of a row changes when its third token does (independent of :func:`attention_is_bidirectional`'s probe)."""
    input_ids = torch.tensor([[3, 4, 5, 6], [3, 4, 7, 6], [3, 4, 5, 0]])
    attention_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 0]])
    with torch.no_grad():
        states = model.eval()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return not torch.equal(states[0, 0], states[1, 0])


@pytest.mark.parametrize("architecture", DECODER_ARCHITECTURES)
def test_last_token_pooling_gives_the_same_embeddings_under_left_and_right_padding(
    architecture: str, tiny_decoder_dirs: dict[str, Path]
) -> None:
    """The last real token is found from the mask. In float64 the two paddings differ only in the rounding of the
    rotary angles of shifted positions (left padding moves every real token's absolute position; attention sees only
    their differences): a bound of 2^10 float64 ulps of the embedding's scale is 10^6 below any state a wrong position
    would give (the test checks that too)."""
    model_dir = tiny_decoder_dirs[architecture]
    model = CSEModel.from_pretrained(model_dir, pooling=PoolingConfig(pooler="last_token")).double().eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    sentences = ["a man is playing a guitar", "a dog", "the woman plays the piano in the park"]
    embeddings = {}
    for side in ("left", "right"):
        tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
        batch = tokenizer(sentences, padding=True, padding_side=side, return_tensors="pt")
        with torch.no_grad():
            embeddings[side] = model(**batch).embeddings
    scale = embeddings["right"].abs().max()
    assert (embeddings["left"] - embeddings["right"]).abs().max() <= 2**10 * FLOAT64_EPS * scale
    with torch.no_grad():  # the state at the batch's last column is another token's for the shorter rows
        batch = tokenizer(sentences, padding=True, padding_side="right", return_tensors="pt")
        last_column = model.encoder_model(**batch).last_hidden_state[:, -1]
    assert (last_column[1] - embeddings["right"][1]).abs().max() > 2**20 * FLOAT64_EPS * scale


@pytest.mark.parametrize("architecture", DECODER_ARCHITECTURES)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_the_model_attends_as_its_config_says(
    architecture: str, bidirectional: bool, tiny_decoder_dirs: dict[str, Path]
) -> None:
    """Through CSEModel's forward (training mode, SDPA, its own attention mask), a later token changes the first
    token's state exactly when the attention is bidirectional: a 4D padding mask handed to a decoder would silently
    make it attend both ways."""
    if bidirectional and architecture not in bidirectional_model_types():
        pytest.skip(f"{architecture} has no bidirectional setting")
    config = AutoConfig.from_pretrained(tiny_decoder_dirs[architecture])
    if bidirectional:
        setattr(config, BIDIRECTIONAL_FIELD, True)
    model = CSEModel.from_pretrained(tiny_decoder_dirs[architecture], config=config, pooling=PoolingConfig("avg"))
    assert model.config._attn_implementation == "sdpa"
    input_ids = torch.tensor([[3, 4, 5, 6], [3, 4, 5, 7]])
    with torch.no_grad():
        states = model.eval()(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).last_hidden_state
    assert torch.equal(states[0, :3], states[1, :3]) != bidirectional


@pytest.mark.parametrize("architecture", DECODER_ARCHITECTURES)
@pytest.mark.parametrize("pooler", ["cls", "cls_before_pooler"])
def test_a_first_token_pooler_on_a_causal_decoder_is_refused_in_one_line(
    architecture: str, pooler: str, tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    with pytest.raises(UsageError) as error:
        CSEModel.from_pretrained(tiny_decoder_dirs[architecture], pooling=PoolingConfig(pooler=pooler))
    message = str(error.value)
    assert "\n" not in message and f"pooler={pooler!r} reads the first token" in message
    assert "'last_token'" in message and "'prompt_last_token'" in message and "'cls'" not in message.split("(")[1]
    # The model does not know whether its tokenizer has a mask token (the tiny Qwen3's has none): 'mask' is offered
    # only under that condition.
    assert "; with a tokenizer that has a mask token: 'mask')" in message
    assert ("--bidirectional true" in message) == (architecture in bidirectional_model_types())
    if architecture in bidirectional_model_types():  # the Python way the line names works
        assert message.endswith(f"in Python, CSEModel.from_pretrained(..., {BIDIRECTIONAL_FIELD}=True)).")
        kwargs = {BIDIRECTIONAL_FIELD: True}
        model = CSEModel.from_pretrained(tiny_decoder_dirs[architecture], pooling=PoolingConfig(pooler), **kwargs)
        assert getattr(model.config, BIDIRECTIONAL_FIELD) is True
    # The same line from the command, before any training.
    config = decoder_config(tmp_path, tiny_decoder_dirs[architecture], pooler=pooler)
    with pytest.raises(UsageError, match="reads the first token"):
        run_unsup.main(["--config", str(config)])
    assert not (tmp_path / "out" / "config.json").exists()


@pytest.mark.parametrize(
    ("overrides", "setting"),
    [
        ({}, "input_kwargs complementary_similarities.pooler"),
        (
            {"input_kwargs": '{"complementary_similarities": {"pooler": "cls"}}'},
            "input_kwargs complementary_similarities.pooler",
        ),
    ],
    ids=["default", "input-kwargs"],
)
@pytest.mark.parametrize("architecture", ["qwen3", "gemma3_text"])
def test_dclr_s_complementary_first_token_pooler_on_a_causal_decoder_names_the_complementary_setting(
    overrides: dict[str, str], setting: str, architecture: str, tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """DCLR's complementary model defaults to the starting checkpoint, which (no hf_cse settings, no
    sentence-transformers Pooling module) pools with cls: the refusal names the complementary model's own pooler
    setting as the run was given it, not only the trained model's --pooler, which is fine. It never offers
    --bidirectional, which applies to the trained model only (the frozen model loads as saved), even on Gemma 3, where
    the trained model's refusal does."""
    extra = {"bidirectional": True} if architecture == "gemma3_text" else {}
    model_dir = tiny_decoder_dirs[architecture]
    config = decoder_config(tmp_path, model_dir, objective="dclr", **overrides, **extra)
    with pytest.raises(UsageError) as error:
        run_unsup.main(["--config", str(config)])
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"complementary model {str(model_dir)!r}: ")
    assert "pooler='cls' reads the first token" in message and "bidirectional" not in message
    usable = "'prompt_last_token', 'echo'; with a tokenizer that has a mask token: 'mask')"
    assert message.endswith(f"{usable}; its pooler is set by {setting}.")
    assert not (tmp_path / "out" / "config.json").exists()
    # Loaded in Python, the same line names the loader's own argument.
    with pytest.raises(UsageError) as error:
        ComplementarySimilarities.from_pretrained(str(model_dir), SENTENCES, pooler="cls")
    assert str(error.value) == message.replace(f"its pooler is set by {setting}", "pass one of them as pooler")


def test_a_decoder_run_aligns_the_config_s_pad_token_with_the_tokenizer_s_eos_padding_without_a_second_warning(
    tiny_decoder_dirs: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The tiny Qwen3, like Llama, has no pad token: hf_cse pads with eos and says so once; the Trainer's own token
    alignment then found the config's pad_token_id unset and warned again in three sentences. The saved config holds
    the eos id as pad_token_id, as the Trainer would have set it."""
    model_dir = tiny_decoder_dirs["qwen3"]
    assert AutoTokenizer.from_pretrained(model_dir).pad_token is None
    with caplog.at_level(logging.INFO):
        run_unsup.main(["--config", str(decoder_config(tmp_path, model_dir))])
    said = [record.getMessage() for record in caplog.records]
    assert sum("padding with its eos token" in line for line in said) == 1
    assert not [line for line in said if "PAD/BOS/EOS" in line]
    saved = json.loads((tmp_path / "out" / "config.json").read_text(encoding="utf-8"))
    assert saved["pad_token_id"] == AutoTokenizer.from_pretrained(tmp_path / "out").eos_token_id


@pytest.mark.parametrize("architecture", ["qwen3", "llama"])
def test_identical_dropout_views_stop_the_run_at_the_first_step_naming_the_dropout_fields(
    architecture: str, tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """Qwen3 and Llama ship attention_dropout 0.0 and no hidden dropout: SimCSE's two views are equal."""
    config = decoder_config(tmp_path, tiny_decoder_dirs[architecture], dropout=None, save_strategy="steps")
    with pytest.raises(UsageError) as error:
        run_unsup.main(["--config", str(config)])
    message = str(error.value)
    assert "\n" not in message and "two views of the first batch are identical" in message
    assert "attention_dropout=0" in message and "--dropout" in message and "'simcse'" in message
    assert not list((tmp_path / "out").glob("checkpoint-*")) and not (tmp_path / "out" / "config.json").exists()


def test_a_view_augmentation_that_changes_the_text_needs_no_dropout(
    tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    config = decoder_config(tmp_path, tiny_decoder_dirs["qwen3"], dropout=None, view_augmentation="shuffle")
    run_unsup.main(["--config", str(config)])
    assert AutoConfig.from_pretrained(tmp_path / "out").attention_dropout == 0.0


def test_dropout_sets_every_dropout_field_of_any_backbone_and_is_saved_and_recorded(
    tiny_encoder_dir: Path, tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    for name, model_dir, fields in (
        ("bert", tiny_encoder_dir, ("attention_probs_dropout_prob", "hidden_dropout_prob")),
        ("qwen3", tiny_decoder_dirs["qwen3"], ("attention_dropout",)),
    ):
        folder = tmp_path / name
        folder.mkdir()
        pooler = "avg" if name == "bert" else "last_token"
        config = decoder_config(folder, model_dir, dropout=0.3, pooler=pooler, save_strategy="steps", save_steps=1)
        run_unsup.main(["--config", str(config)])
        saved = AutoConfig.from_pretrained(folder / "out")
        assert all(getattr(saved, field) == 0.3 for field in fields)
        recorded = json.loads((folder / "out" / "checkpoint-1" / RUN_SETTINGS_FILE).read_text())["settings"]
        assert recorded["encoder"]["dropout"] == dict.fromkeys(fields, 0.3)
        # A resume with another dropout is a changed setting, refused in one line.
        resumed = decoder_config(folder, model_dir, dropout=0.2, pooler=pooler, max_steps=3)
        with pytest.raises(UsageError, match=r"trained with other settings: max_steps: 2 -> 3; encoder: "):
            run_unsup.main(
                ["--config", str(resumed), "--resume_from_checkpoint", str(folder / "out" / "checkpoint-1")]
            )


def test_a_bfloat16_checkpoint_trains_float32_weights_unless_asked_and_a_resume_keeps_the_dtype(
    tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """Decoders ship bfloat16 weights, which transformers 5 loads as such by default: hf_cse loads float32 unless
    --torch_dtype says otherwise (auto: the checkpoint's), and records the dtype, so a resume in another is refused."""
    bf16_dir = tmp_path / "bf16"
    AutoModel.from_pretrained(tiny_decoder_dirs["qwen3"]).to(torch.bfloat16).save_pretrained(bf16_dir)
    AutoTokenizer.from_pretrained(tiny_decoder_dirs["qwen3"]).save_pretrained(bf16_dir)
    for torch_dtype, expected in ((None, torch.float32), ("auto", torch.bfloat16)):
        folder = tmp_path / str(torch_dtype)
        folder.mkdir()
        config = decoder_config(folder, bf16_dir, torch_dtype=torch_dtype, save_strategy="steps", save_steps=1)
        run_unsup.main(["--config", str(config)])
        assert {tensor.dtype for tensor in load_file(folder / "out" / "model.safetensors").values()} == {expected}
        recorded = json.loads((folder / "out" / "checkpoint-1" / RUN_SETTINGS_FILE).read_text())["settings"]
        assert recorded["weights"] == {"dtype": str(expected).removeprefix("torch."), "quantization": None}
    resumed = decoder_config(tmp_path / "auto", bf16_dir, torch_dtype="float32")
    with pytest.raises(UsageError, match=r"trained with other settings: weights: .*bfloat16.*float32"):
        run_unsup.main(
            ["--config", str(resumed), "--resume_from_checkpoint", str(tmp_path / "auto" / "out" / "checkpoint-1")]
        )
    # The Python API takes dtype="auto" too (transformers' own keyword, not a config field).
    assert (
        next(CSEModel.from_pretrained(bf16_dir, pooling=PoolingConfig("avg"), dtype="auto").parameters()).dtype
        == torch.bfloat16
    )


@pytest.mark.parametrize("value", ["1.0", "-0.1", "nan"])
def test_a_dropout_outside_zero_to_one_is_one_line(
    value: str, tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    config = decoder_config(tmp_path, tiny_decoder_dirs["qwen3"])
    in_range = r"dropout takes unset \(the checkpoint's\) or a finite number in \[0, 1\)\.$"
    with pytest.raises(UsageError, match=rf"^dropout {value} is not valid: {in_range}"):
        run_unsup.main(["--config", str(config), "--dropout", value])


def test_bidirectional_gemma_is_saved_so_that_automodel_loads_it_bidirectional(
    tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """Changing a later token changes an earlier token's hidden state: in the trained model, and after a save and a
    plain AutoModel reload; the first-token pooler is then accepted."""
    model_dir = tiny_decoder_dirs["gemma3_text"]
    assert not later_token_changes_first_state(AutoModel.from_pretrained(model_dir))
    config = decoder_config(tmp_path, model_dir, bidirectional=True, pooler="cls")
    run_unsup.main(["--config", str(config)])
    reloaded = AutoModel.from_pretrained(tmp_path / "out")
    assert getattr(reloaded.config, BIDIRECTIONAL_FIELD) is True
    assert later_token_changes_first_state(reloaded)
    assert later_token_changes_first_state(CSEModel.from_pretrained(tmp_path / "out").encoder_model)


@pytest.mark.parametrize(
    ("settings", "warned"),
    [
        ({"torch_dtype": "bfloat16"}, "bfloat16 weights: an AdamW update smaller than 2^-9 "),
        ({"torch_dtype": "float16"}, "float16 weights: an AdamW update smaller than 2^-12 "),
        ({"torch_dtype": "bfloat16", "lora_r": 4}, None),
        ({}, None),
    ],
    ids=["bfloat16", "float16", "bfloat16-lora", "float32"],
)
def test_full_fine_tuning_of_half_precision_weights_is_warned_once(
    settings: dict[str, object],
    warned: str | None,
    tiny_decoder_dirs: dict[str, Path],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """--torch_dtype bfloat16 without LoRA trained bfloat16 weights without a word (2 steps at lr 3e-5 changed 26% of
    them, 88% in float32): one warning naming the float32 default and LoRA; a LoRA run's base is frozen, no warning.
    The half-steps: 8 significant bits (bfloat16) and 11 (float16) put neighbouring values at least 2^-8 and 2^-11 of
    the value apart."""
    assert torch.finfo(torch.bfloat16).eps == 2.0**-7 and torch.finfo(torch.float16).eps == 2.0**-10
    with caplog.at_level(logging.WARNING, logger="hf_cse.modeling.backbone"):
        run_unsup.main(["--config", str(decoder_config(tmp_path, tiny_decoder_dirs["qwen3"], **settings))])
    said = [record.getMessage() for record in caplog.records if "Full fine-tuning" in record.getMessage()]
    assert len(said) == (warned is not None)
    if warned is not None:
        assert said[0].startswith(f"Full fine-tuning of {warned}")
        assert said[0].endswith("Leave --torch_dtype unset for float32 weights (--bf16 still computes in bfloat16), "
                                "or train LoRA (--lora_r).")  # fmt: skip


@pytest.mark.parametrize(("flag", "bidirectional"), [([], True), (["--bidirectional", "false"], False)])
def test_a_bidirectional_checkpoint_stays_bidirectional_unless_bidirectional_false_says_otherwise(
    flag: list[str], bidirectional: bool, tmp_path: Path
) -> None:
    """LLM2Vec's run 1 saves a bidirectional Gemma 3; a run from it keeps that attention unless told --bidirectional
    false (the flag defaulted to false, so that an explicit false was the same as unset and silently ignored)."""
    model_dir = save_tiny_decoder(tmp_path / "bidirectional", "gemma3_text", **{BIDIRECTIONAL_FIELD: True})
    assert later_token_changes_first_state(AutoModel.from_pretrained(model_dir))
    run_unsup.main(["--config", str(decoder_config(tmp_path, model_dir)), *flag])
    reloaded = AutoModel.from_pretrained(tmp_path / "out")
    assert getattr(reloaded.config, BIDIRECTIONAL_FIELD) is bidirectional
    assert later_token_changes_first_state(reloaded) is bidirectional


@pytest.mark.parametrize("architecture", ["qwen3", "llama"])
def test_bidirectional_on_an_architecture_transformers_cannot_read_it_for_is_refused(
    architecture: str, tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    config = decoder_config(tmp_path, tiny_decoder_dirs[architecture], bidirectional=True)
    with pytest.raises(UsageError) as error:
        run_unsup.main(["--config", str(config)])
    message = str(error.value)
    assert "\n" not in message and f"model type {architecture!r}" in message and "gemma3_text" in message
    assert not (tmp_path / "out" / "config.json").exists()


@pytest.mark.parametrize("architecture", ["gemma", "gemma2"])
def test_bidirectional_that_transformers_drops_on_padded_batches_is_refused_whatever_sets_it(
    architecture: str, tmp_path: Path
) -> None:
    """Gemma 1 and 2 have the field, but plain transformers keeps them causal on a padded batch (Gemma 2 always), while
    hf_cse's forward would attend both ways: the flag, and a checkpoint whose config already sets the field, are
    refused in one line before anything is trained or saved."""
    model_dir = save_tiny_decoder(tmp_path / "model", architecture)
    config = decoder_config(tmp_path, model_dir, bidirectional=True, pooler="avg")
    with pytest.raises(UsageError) as error:
        run_unsup.main(["--config", str(config)])
    message = str(error.value)
    assert "\n" not in message and f"keeps {architecture!r} attention causal on padded batches" in message
    assert "gemma3_text" in message and not (tmp_path / "out" / "config.json").exists()
    preset = save_tiny_decoder(tmp_path / "preset", architecture, **{BIDIRECTIONAL_FIELD: True})
    with pytest.raises(UsageError, match="attention causal on padded batches"):
        CSEModel.from_pretrained(preset, pooling=PoolingConfig(pooler="avg"))


def test_the_bidirectional_model_types_are_those_automodel_loads_bidirectional(tmp_path: Path) -> None:
    """Each listed type, saved with the field and reloaded by plain AutoModel, attends both ways in a padded batch;
    the Gemma types left out have the field but do not."""
    listed = bidirectional_model_types()
    assert "gemma3_text" in listed and "gemma" not in listed and "gemma2" not in listed
    for architecture in ["gemma", "gemma2", *(a for a in listed if a in {"gemma3_text"})]:
        saved = save_tiny_decoder(tmp_path / architecture, architecture, **{BIDIRECTIONAL_FIELD: True})
        assert later_token_changes_first_state(AutoModel.from_pretrained(saved)) == (architecture in listed)


def test_an_encoder_without_sdpa_loads_with_the_attention_it_supports(tmp_path: Path) -> None:
    """transformers picks the kernel from the model's support flags: a CSEModel takes its encoder's, so Gemma 2 (no
    SDPA) loads with eager attention, as AutoModel loads it, instead of failing in a traceback; and a kernel the
    encoder has (flex attention) can be asked for."""
    model_dir = save_tiny_decoder(tmp_path / "gemma2", "gemma2")
    model = CSEModel.from_pretrained(model_dir, pooling=PoolingConfig(pooler="avg"))
    assert (
        model.encoder_model.config._attn_implementation
        == AutoModel.from_pretrained(model_dir).config._attn_implementation
        == "eager"
    )
    flex = CSEModel.from_pretrained(
        model_dir, pooling=PoolingConfig(pooler="avg"), attn_implementation="flex_attention"
    )
    assert flex.encoder_model.config._attn_implementation == "flex_attention"


@pytest.mark.parametrize(
    ("kernel", "said"),
    [
        ("fast", "attn_implementation 'fast' is not one of: eager, sdpa, flash_attention_2, flash_attention_3, "),
        ("flash_attention_2", "attn_implementation 'flash_attention_2' runs on CUDA GPUs only, and this run trains"),
        ("flex_attention", "attn_implementation 'flex_attention' cannot train on cpu: torch "),
    ],
)
def test_an_attention_kernel_that_cannot_train_here_is_refused_in_one_line_before_anything_loads(
    kernel: str, said: str, tiny_decoder_dirs: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """transformers said these late and at length: an unknown name after the corpus was read (listing "paged|eager"),
    flash attention without its package in a traceback as the weights loaded, flex attention's missing CPU backward
    pass in a traceback at the first step (torch refuses inputs that need gradients there: the probe's answer is the
    real kernel's)."""
    config = decoder_config(tmp_path, tiny_decoder_dirs["qwen3"], attn_implementation=kernel, use_cpu=True)
    with caplog.at_level(logging.INFO), pytest.raises(UsageError) as error:
        run_unsup.main(["--config", str(config)])
    assert "\n" not in str(error.value) and str(error.value).startswith(said)
    assert not [record for record in caplog.records if "training sentences" in record.getMessage()]  # corpus unread
    assert not (tmp_path / "out").exists()
    if kernel == "flex_attention":
        from torch.nn.attention.flex_attention import flex_attention

        assert not flex_attention_trains_on(torch.device("cpu"))
        with pytest.raises(NotImplementedError):
            flex_attention(*(torch.randn(1, 2, 8, 16, requires_grad=True) for _ in range(3)))


def test_a_flash_kernel_on_a_gpu_without_its_package_names_the_package() -> None:
    """transformers' own availability check decides (flash-attn is not installed here)."""
    with pytest.raises(UsageError, match=r"^attn_implementation 'flash_attention_2' needs the flash-attn package \("):
        check_kernel_trains_on("flash_attention_2", torch.device("cuda"))
    check_kernel_trains_on("sdpa", torch.device("cpu"))  # the kernels with nothing to install pass
    check_kernel_trains_on(None, torch.device("cpu"))


def test_a_kernel_the_encoder_lacks_and_flex_attention_with_attention_dropout_are_refused_before_the_weights_load(
    tmp_path: Path,
) -> None:
    """Gemma 2 has no SDPA (transformers' error was a multi-line traceback as the weights loaded); flex attention
    refuses attention dropout in training, which transformers said only at the first step."""
    gemma2 = AutoConfig.from_pretrained(save_tiny_decoder(tmp_path / "gemma2", "gemma2"))
    with pytest.raises(UsageError) as error:
        BackboneSettings(attn_implementation="sdpa").apply(gemma2)
    assert str(error.value) == (
        "attn_implementation 'sdpa': transformers' 'gemma2' model does not support it; it supports: eager, "
        "flash_attention_2, flash_attention_3, flex_attention."
    )
    BackboneSettings(attn_implementation="flex_attention").apply(gemma2)  # attention_dropout 0.0: fine
    with pytest.raises(UsageError) as error:
        BackboneSettings(attn_implementation="flex_attention", dropout=0.1).apply(gemma2)
    assert str(error.value) == (
        "attn_implementation 'flex_attention' does not support attention dropout in training (attention_dropout=0.1): "
        "use sdpa or eager, or --dropout 0."
    )


@pytest.mark.parametrize("installed", [None, "0.45.0", "0.46.1"])
def test_load_in_4bit_names_the_qlora_extra_when_bitsandbytes_is_missing_or_too_old(
    installed: str | None, tiny_decoder_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bitsandbytes faked absent (``None``), below the floor, or at it: the first two stop run_unsup in one line
    naming the ``qlora`` extra before any model loads (transformers would raise its ImportError in a traceback as the
    weights load); at the floor, 4-bit loading is accepted, with or without CUDA (tests/test_qlora.py trains on the
    CPU)."""
    real_version = importlib.metadata.version

    def version(name: str) -> str:
        if name != "bitsandbytes":
            return real_version(name)
        if installed is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed

    monkeypatch.setattr(importlib.metadata, "version", version)
    if installed == "0.46.1":  # loaded where the run trains: nothing moves a 4-bit model after
        kwargs = BackboneSettings(load_in_4bit=True).from_pretrained_kwargs(device="cpu")
        assert kwargs["quantization_config"].load_in_4bit and kwargs["device_map"] == {"": "cpu"}
        assert "device_map" not in BackboneSettings().from_pretrained_kwargs(device="cpu")
        return
    config = decoder_config(tmp_path, tiny_decoder_dirs["qwen3"], load_in_4bit=True, lora_r=4)
    with pytest.raises(UsageError) as error:
        run_unsup.main(["--config", str(config)])
    message = str(error.value)
    found = "is not installed" if installed is None else f"is {installed}"
    assert message == (
        f"load_in_4bit loads the weights 4-bit through bitsandbytes, which {found} here; it needs "
        f'{BITSANDBYTES_REQUIREMENT}: pip install "hf_cse[qlora]" (in a clone of hf_cse: pip install -e ".[qlora]").'
    )
    assert not (tmp_path / "out" / "config.json").exists()


def test_the_qlora_extra_declares_what_load_in_4bit_checks_at_transformers_floor_or_above() -> None:
    """setup.cfg's ``qlora`` extra is exactly :data:`BITSANDBYTES_REQUIREMENT`, whose floor is not below the one
    transformers' 4-bit quantizer refuses under; the ``dev`` extra installs it (the QLoRA tests run on the CPU), at the
    version constraints.txt pins, which meets it."""
    from transformers.utils.import_utils import BITSANDBYTES_MIN_VERSION

    config = configparser.ConfigParser(interpolation=None)
    config.read(REPO_ROOT / "setup.cfg", encoding="utf-8")
    extras = config["options.extras_require"]

    def requirements(extra: str) -> list[str]:
        lines = [line.strip() for line in extras[extra].splitlines()]
        return [line for line in lines if line and not line.startswith("#")]

    assert requirements("qlora") == [BITSANDBYTES_REQUIREMENT] and "%(qlora)s" in requirements("dev")
    requirement = Requirement(BITSANDBYTES_REQUIREMENT)
    (floor,) = [spec.version for spec in requirement.specifier if spec.operator == ">="]
    assert Version(floor) >= Version(BITSANDBYTES_MIN_VERSION)
    lines = (REPO_ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    pins = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    (pin,) = [pin for pin in pins if pin.name == requirement.name]
    (pinned,) = [spec.version for spec in pin.specifier if spec.operator == "=="]
    assert requirement.specifier.contains(pinned)


@pytest.mark.parametrize("architecture", ["qwen3", "llama"])
def test_a_tokenizer_without_a_pad_token_pads_with_eos_and_is_saved_with_it(
    architecture: str, tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    model_dir = tiny_decoder_dirs[architecture]
    assert AutoTokenizer.from_pretrained(model_dir).pad_token is None
    run_unsup.main(["--config", str(decoder_config(tmp_path, model_dir))])
    saved = AutoTokenizer.from_pretrained(tmp_path / "out")
    assert saved.pad_token == saved.eos_token is not None


def test_the_prompteol_pooler_wraps_the_sentence_and_truncates_only_the_sentence(
    tiny_decoder_dirs: dict[str, Path],
) -> None:
    model_dir = tiny_decoder_dirs["llama"]  # a BOS before the template
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    pooling = PoolingConfig(pooler="prompt_last_token")
    prefix, suffix = PROMPTEOL_TEMPLATE.split("{sentence}")
    prefix_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"]
    suffix_ids = tokenizer(suffix, add_special_tokens=False)["input_ids"]
    sentence_ids = tokenizer("a man is playing a guitar", add_special_tokens=False)["input_ids"]
    row = SentenceTokenizer(tokenizer, pooling)(["a man is playing a guitar"])["input_ids"][0]
    assert row == [tokenizer.bos_token_id, *prefix_ids, *sentence_ids, *suffix_ids]
    budget = 1 + len(prefix_ids) + len(suffix_ids) + 2
    short = SentenceTokenizer(tokenizer, pooling, max_seq_length=budget)(["a man is playing a guitar"])["input_ids"][0]
    assert short == [tokenizer.bos_token_id, *prefix_ids, *sentence_ids[:2], *suffix_ids]
    # The embedding is the state of the prompt's last token.
    model = CSEModel.from_pretrained(model_dir, pooling=pooling).eval()
    encoder = SentenceEncoder(model, tokenizer)
    with torch.no_grad():
        states = model.encoder_model(input_ids=torch.tensor([row])).last_hidden_state
    torch.testing.assert_close(encoder.encode(["a man is playing a guitar"])[0], states[0, -1], rtol=0, atol=0)


@pytest.mark.parametrize("template", ["no placeholder", "{sentence} and {sentence}"])
def test_a_prompteol_template_without_one_sentence_placeholder_is_one_line(template: str) -> None:
    with pytest.raises(ValueError, match=r"template .* must contain \{sentence\} exactly once") as error:
        PoolingConfig(pooler="prompt_last_token", pooler_kwargs={"template": template})
    assert "\n" not in str(error.value)


def test_the_mask_pooler_names_the_missing_mask_token_of_a_decoder_tokenizer(
    tiny_decoder_dirs: dict[str, Path],
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_decoder_dirs["qwen3"])
    with pytest.raises(ValueError, match="needs a tokenizer with a mask token; .* has none") as error:
        SentenceTokenizer(tokenizer, PoolingConfig(pooler="mask"))
    assert "\n" not in str(error.value) and "prompt_last_token" in str(error.value)


def decoder_trainer(model_dir: Path, output_dir: Path, **overrides: object) -> CSETrainer:
    """conftest's make_tiny_trainer on a decoder: last-token pooling, attention dropout 0.1."""
    config = AutoConfig.from_pretrained(model_dir)
    BackboneSettings(dropout=0.1).apply(config)
    pooling = PoolingConfig(pooler="last_token")
    return make_tiny_trainer(model_dir, output_dir, pooling, model_kwargs={"config": config}, **overrides)


@pytest.mark.parametrize("architecture", DECODER_ARCHITECTURES)
def test_activation_checkpointing_with_dropout_views_resumes_bit_equal(
    architecture: str, tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """The recomputed forward of a checkpointed layer draws the dropout masks of the first (torch.utils.checkpoint
    restores the RNG state), so a checkpointed run trains the weights of one without checkpointing, bit for bit (the
    same operations on the same numbers; a recompute with fresh masks would give other gradients); and a resumed run
    restores the RNG: the resumed run ends with the straight run's weights, bit for bit."""
    straight = decoder_trainer(tiny_decoder_dirs[architecture], tmp_path / "a", activation_checkpointing=True)
    initial = {name: p.detach().clone() for name, p in straight.model.named_parameters()}
    straight.train()
    assert straight.model.is_activation_checkpointing
    assert all(
        not torch.equal(initial[name], p) for name, p in straight.model.named_parameters() if "norm" not in name
    )
    unchecked = decoder_trainer(tiny_decoder_dirs[architecture], tmp_path / "c")
    unchecked.train()
    assert not unchecked.model.is_activation_checkpointing
    for (name, expected), got in zip(straight.model.named_parameters(), unchecked.model.parameters(), strict=True):
        assert torch.equal(expected, got), name
    resumed = decoder_trainer(tiny_decoder_dirs[architecture], tmp_path / "b", activation_checkpointing=True)
    resumed.train(resume_from_checkpoint=str(tmp_path / "a" / "checkpoint-4"))
    for (name, expected), got in zip(straight.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(expected, got), name


def test_the_card_states_the_backbone_dropout_and_attention_as_trained(
    tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    run_unsup.main(["--config", str(decoder_config(tmp_path, tiny_decoder_dirs["gemma3_text"], bidirectional=True))])
    card = (tmp_path / "out" / "README.md").read_text()
    assert (
        "- **Backbone**: dropout `attention_dropout` 0.1; attention bidirectional (`use_bidirectional_attention`); "
        "both saved in `config.json`; weights trained in `float32`\n"
    ) in card


def test_a_model_whose_weights_are_not_here_is_not_probed_and_says_so(
    tiny_decoder_dirs: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """DeepSpeed ZeRO-3 partitions and meta-device models have no weights to run a probe with."""
    with torch.device("meta"):
        encoder = AutoModel.from_config(AutoConfig.from_pretrained(tiny_decoder_dirs["qwen3"]))
    with caplog.at_level("WARNING", logger="hf_cse.modeling.backbone"):
        check_attention(encoder, PoolingConfig(pooler="cls"))
    assert "Cannot probe Qwen3Model's attention" in caplog.text


def test_identical_views_of_a_model_left_in_eval_mode_say_so(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """BERT has dropout, but a step computed in eval mode has none: the message names the mode, not the fields."""
    trainer = make_tiny_trainer(tiny_encoder_dir, tmp_path)
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(4)])
    with pytest.raises(UsageError, match="the model is in eval mode, so its dropout is off") as error:
        trainer.compute_loss(trainer.model.eval(), batch)
    assert "\n" not in str(error.value)


def test_a_left_padding_tokenizer_is_saved_padding_on_the_right_as_hf_cse_pads(
    tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """sentence-transformers pads as the saved tokenizer says; hf_cse pads on the right."""
    model_dir = tmp_path / "left"
    shutil.copytree(tiny_decoder_dirs["qwen3"], model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(model_dir)
    run_unsup.main(["--config", str(decoder_config(tmp_path, model_dir))])
    assert AutoTokenizer.from_pretrained(tmp_path / "out").padding_side == "right"


def test_a_causal_decoders_eager_step_syncs_only_in_transformers_mask_and_a_compiled_step_not_at_all(
    tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """Host synchronizations of a Qwen3 SimCSE step, counted as tests/every_part/test_host_sync.py counts them: in
    eager mode only transformers' causal-mask builder reads the device back (``masking_utils``: it asks whether the
    batch has padding, to hand SDPA ``is_causal=True`` instead of a mask); under ``--torch_compile`` transformers skips
    that question while tracing, and the step reads nothing back."""
    from host_sync_probe import counting

    counted = {}
    for compiled in (False, True):
        run_dir = tmp_path / f"compiled={compiled}"
        run_dir.mkdir()
        compile_settings = {"torch_compile": True, "torch_compile_backend": "eager"} if compiled else {}
        config = decoder_config(run_dir, tiny_decoder_dirs["qwen3"], max_steps=4, **compile_settings)
        with counting(CSETrainer) as counts:
            run_unsup.main(["--config", str(config)])
        counted[compiled] = dict(counts)
    assert counted[False], "the eager step was expected to sync in transformers' mask builder"
    assert all("masking_utils.py" in where.split(" <- ")[0] for where in counted[False]), counted[False]
    assert counted[True] == {}


def test_a_tokenizer_claiming_more_tokens_than_the_positions_truncates_alike_in_every_saved_file(
    tmp_path: Path,
) -> None:
    """Decoders ship tokenizers whose model_max_length exceeds the model's positions (Qwen3: 131,072 over 40,960).
    hf_cse truncates at the positions; sentence_bert_config.json said 100,000 and the card's transformers code
    min(model_max_length, 100_000), so a long sentence embedded differently in each. All three now say the same."""
    model_dir = save_tiny_decoder(tmp_path / "qwen3", "qwen3")  # 128 positions
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.model_max_length = 131_072
    tokenizer.save_pretrained(model_dir)
    run_unsup.main(["--config", str(decoder_config(tmp_path, model_dir))])
    out = tmp_path / "out"
    assert SentenceEncoder.from_pretrained(out, device="cpu").sentence_tokenizer.max_seq_length == 128
    assert json.loads((out / "sentence_bert_config.json").read_text(encoding="utf-8"))["max_seq_length"] == 128
    assert "max_length = 128  # hf_cse's truncation length at inference" in (out / "README.md").read_text("utf-8")


def test_an_empty_sentence_under_a_tokenizer_that_adds_no_token_is_one_line(
    tiny_decoder_dirs: dict[str, Path],
) -> None:
    """Qwen3's tokenizer gives "" no token: alone it was a reshape error deep in attention, in a batch an embedding
    read from padding, without a word."""
    encoder = SentenceEncoder.from_pretrained(tiny_decoder_dirs["qwen3"], pooler="last_token", device="cpu")
    with pytest.raises(UsageError, match=r"^The sentence '' gives no token \(this tokenizer adds no special token"):
        encoder.encode([SENTENCES[0], ""])
    assert encoder.encode([SENTENCES[0]]).shape[0] == 1
