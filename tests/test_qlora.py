"""QLoRA on the CPU (bitsandbytes' CPU backend, the dev extra installs it): ``run_unsup.py --load_in_4bit true``
loads a tiny random Qwen3 in 4 bits, trains LoRA over it, and saves at the root the adapter merged into the
dequantized weights as a plain float32 checkpoint, which ``AutoModel`` loads without bitsandbytes and which computes
what the trained adapter over the 4-bit weights computes, up to the merge's float32 rounding; its checkpoints hold the
adapter and resume to the same adapter, bit for bit.

The reference for "what the adapter over the 4-bit weights computes" is peft's unmerged forward (``x W^T + s x A^T
B^T``) over each 4-bit layer's weight as bitsandbytes dequantizes it (``dequantize_4bit``, what a 4-bit layer
multiplies by), run in float64: the merge is not involved in it, and its own rounding is float64's."""

from __future__ import annotations

import copy
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import (
    REPO_ROOT,
    SENTENCES,
    run_unsup,
    save_tiny_decoder,
    training_args,
    write_config,
    write_train_file,
)
from datasets import Dataset
from peft import LoraConfig, PeftModel
from peft.tuners.lora import LoraLayer
from rounding import AGREEMENT
from safetensors import safe_open
from safetensors.torch import load_file
from transformers import AutoConfig, AutoTokenizer

from hf_cse import CSEModel, CSETrainer, PoolingConfig
from hf_cse.modeling.backbone import BackboneSettings
from hf_cse.modeling.lora import MERGED_DTYPE

bnb = pytest.importorskip("bitsandbytes")  # the dev extra installs it; a bare install skips

PEFT_PREFIX = "base_model.model."
UNIT_ROUNDOFF = torch.finfo(MERGED_DTYPE).eps / 2
"""float32's unit roundoff ``u = 2**-24``: a correctly rounded operation is off by at most ``u`` of its result."""
POOLING = PoolingConfig(pooler="last_token")

WITHOUT_BITSANDBYTES = """
import json, sys
sys.modules["bitsandbytes"] = None  # as if it were not installed: importing it fails, transformers finds it absent
import torch
from transformers import AutoModel, AutoTokenizer
from hf_cse import CSEModel

root, quantized, sentences = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
_, loading = AutoModel.from_pretrained(root, output_loading_info=True)
model = CSEModel.from_pretrained(root).double().eval()
with torch.no_grad():
    batch = AutoTokenizer.from_pretrained(root)(sentences, padding=True, return_tensors="pt")
    embeddings = model(**batch).embeddings
try:  # the control: a bitsandbytes checkpoint (what the root was before) does not load here
    AutoModel.from_pretrained(quantized)
    quantized_error = None
except Exception as error:
    quantized_error = type(error).__name__
print(json.dumps({"loading": {key: sorted(map(str, value)) for key, value in loading.items()},
                  "embeddings": embeddings.tolist(), "quantized_error": quantized_error}))
"""
"""Loads the root and a 4-bit checkpoint in a Python without bitsandbytes; prints what happened as JSON."""


@pytest.fixture(scope="module")
def qlora_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``run_unsup.py --load_in_4bit true --lora_r 4`` for 4 steps on a tiny random Qwen3 (last-token pooling,
    dropout 0.1), saving checkpoints at steps 2 and 4; ``base``, ``config`` and ``out`` by name."""
    tmp = tmp_path_factory.mktemp("qlora")
    base = save_tiny_decoder(tmp / "base", "qwen3")
    train = write_train_file(tmp, SENTENCES * 2)
    config = write_config(
        tmp, base, train, pooler="last_token", dropout=0.1, load_in_4bit=True, lora_r=4, lora_alpha=8,
        learning_rate=1e-2, max_steps=4, save_strategy="steps", save_steps=2, seed=0,
    )  # fmt: skip
    assert math.isfinite(run_unsup.main(["--config", str(config)])["train_loss"])
    return {"base": base, "config": config, "out": tmp / "out"}


def quantized_base(base: Path, **config: float) -> CSEModel:
    """``base`` loaded in 4 bits on the CPU as ``run_unsup.py --load_in_4bit true --use_cpu true`` loads it
    (``config``: fields to set)."""
    kwargs = BackboneSettings(load_in_4bit=True).from_pretrained_kwargs(device="cpu")
    return CSEModel.from_pretrained(base, pooling=POOLING, **config, **kwargs)


def adapter_over_dequantized_base(base: Path, adapter: Path) -> PeftModel:
    """The reference (see the module's docstring): ``base`` in float64 with each 4-bit layer's weight as bitsandbytes
    dequantizes it, and the saved adapter over it, unmerged, in eval mode."""
    quantized = quantized_base(base)
    dequantized = {
        f"{name}.weight": bnb.functional.dequantize_4bit(module.weight.data, module.weight.quant_state)
        for name, module in quantized.named_modules()
        if isinstance(module, bnb.nn.Linear4bit)
    }
    plain = CSEModel.from_pretrained(base, pooling=POOLING)
    missing, unexpected = plain.load_state_dict(dequantized, strict=False)
    assert dequantized and not unexpected and len(missing) == len(plain.state_dict()) - len(dequantized)
    return PeftModel.from_pretrained(plain.double(), adapter).double().eval()


def merge_bounds(reference: PeftModel) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """For each adapted layer, by its weight's name in the plain checkpoint: the exact merge ``W + s B A`` (float64),
    the adapter's delta ``s B A``, and how far a float32 merge may be from the exact one, element by element.

    peft merges in float32: ``B A`` (``r`` products summed: off by at most ``gamma_r |B| |A|``, ``gamma_r = r u /
    (1 - r u)``), times ``s`` (``u`` of it), added to ``W`` (``u`` of the sum). To first order in ``u`` that is
    ``u |W + s B A| + (r + 1) u s |B| |A|``; one more ``u s |B| |A|`` bounds the terms in ``u^2``. ``W``, the
    dequantized weight, is the same float32 tensor on both sides."""
    bounds = {}
    for name, layer in reference.named_modules():
        if not isinstance(layer, LoraLayer):
            continue
        weight = layer.get_base_layer().weight
        a, b = layer.lora_A["default"].weight, layer.lora_B["default"].weight
        scale = layer.scaling["default"]
        delta = scale * b @ a
        exact = weight + delta
        bound = UNIT_ROUNDOFF * (exact.abs() + (a.shape[0] + 2) * scale * b.abs() @ a.abs())
        bounds[name.removeprefix(PEFT_PREFIX) + ".weight"] = (exact.detach(), delta.detach(), bound.detach())
    return bounds


def embeddings(model: torch.nn.Module, tokenizer: AutoTokenizer) -> torch.Tensor:
    """``model``'s embeddings ``[N, D]`` of :data:`SENTENCES`, in its dtype (float64 here: no float32 cast)."""
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    return model(**batch).embeddings


def first_order_bound(
    model: CSEModel, tokenizer: AutoTokenizer, bounds: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
) -> torch.Tensor:
    """How far ``model``'s float64 embeddings may move when each weight named in ``bounds`` moves by up to its bound:
    ``sum |d embedding / d W| * bound`` over those weights, for each embedding component ``[N, D]`` (first order;
    the second is ~``u`` = 6e-8 of it, which the caller's float64 allowance covers)."""
    parameters = dict(model.named_parameters())
    weights = [parameters[name] for name in bounds]
    allowed = [bound for _, _, bound in bounds.values()]
    output = embeddings(model, tokenizer)
    result = torch.zeros_like(output)
    for index in range(output.numel()):
        gradients = torch.autograd.grad(output.view(-1)[index], weights, retain_graph=True)
        result.view(-1)[index] = sum((g.abs() * bound).sum() for g, bound in zip(gradients, allowed, strict=True))
    return result.detach()


def test_a_qlora_root_is_the_adapter_merged_into_the_dequantized_weights_in_a_plain_float32_checkpoint(
    qlora_run: dict[str, Path], tmp_path: Path
) -> None:
    out, base = qlora_run["out"], qlora_run["base"]
    tokenizer = AutoTokenizer.from_pretrained(out)
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert "quantization_config" not in config and config["dtype"] == "float32"
    with safe_open(out / "model.safetensors", "pt") as weights:
        assert {weights.get_slice(key).get_dtype() for key in weights.keys()} == {"F32"}
    assert (out / "adapter" / "adapter_model.safetensors").is_file() and "**LoRA**" in (out / "README.md").read_text()
    # The card says what config.json no longer can: the base was 4-bit in training.
    assert (
        "; weights frozen in 4 bits (`nf4`, bitsandbytes) under the LoRA adapters (QLoRA), saved dequantized with the "
        "adapters merged\n"
    ) in (out / "README.md").read_text()

    # Weights: each adapted layer holds W + s B A up to the float32 merge's rounding, and the adapter moved every one
    # beyond that rounding (a merge that lost the delta, as re-quantizing to 4 bits did, fails the bound); every other
    # weight is the base checkpoint's.
    reference = adapter_over_dequantized_base(base, out / "adapter")
    bounds = merge_bounds(reference)
    root = load_file(out / "model.safetensors")
    assert len(bounds) == 14  # q, k, v, o, gate, up and down projections of 2 layers
    for name, (exact, delta, bound) in bounds.items():
        assert ((root[name].double() - exact).abs() <= bound).all(), name
        assert (delta.abs() > bound).any(), name
    plain_base = load_file(base / "model.safetensors")
    assert all(torch.equal(root[name], plain_base[name]) for name in root if name not in bounds)

    # Embeddings, float64: the root's differ from the adapter over the dequantized weights by no more than its
    # weights' rounding can move them, plus float64's reordering allowance; training moved them far more.
    merged = CSEModel.from_pretrained(out).double().eval()
    allowed = first_order_bound(merged, tokenizer, bounds)
    with torch.no_grad():
        got = embeddings(merged, tokenizer)
        expected = embeddings(reference, tokenizer)
        with reference.disable_adapter():
            untrained = embeddings(reference, tokenizer)
    allowed += AGREEMENT * expected.abs().max()
    assert ((got - expected).abs() <= allowed).all()
    assert (expected - untrained).abs().max() > allowed.max()

    # Without bitsandbytes: AutoModel finds exactly the root's weights, hf_cse embeds as here; a 4-bit checkpoint
    # (what peft's merge saved) does not load there.
    quantized_base(base).save_pretrained(tmp_path / "quantized")
    completed = subprocess.run(
        [sys.executable, "-c", WITHOUT_BITSANDBYTES, str(out), str(tmp_path / "quantized"), json.dumps(SENTENCES)],
        capture_output=True, text=True, cwd=REPO_ROOT, check=True,
    )  # fmt: skip
    loaded = json.loads(completed.stdout.strip().splitlines()[-1])
    assert {key: value for key, value in loaded["loading"].items() if value} == {}
    assert loaded["quantized_error"] is not None
    elsewhere = torch.tensor(loaded["embeddings"], dtype=torch.float64)
    assert (elsewhere - got).abs().max() <= AGREEMENT * got.abs().max()


def test_a_qlora_checkpoint_holds_the_adapter_and_resumes_to_the_same_adapter_and_root(
    qlora_run: dict[str, Path], tmp_path: Path
) -> None:
    """Resuming from ``checkpoint-2`` loads the base in 4 bits again, the adapter and the optimizer from the
    checkpoint, and trains steps 3 and 4 again: on one CPU the same operations in the same order, so the same adapter
    and merged root bit for bit."""
    out = tmp_path / "out"
    shutil.copytree(qlora_run["out"], out)
    checkpoint = out / "checkpoint-2"
    assert (checkpoint / "adapter_model.safetensors").is_file() and not (checkpoint / "config.json").exists()
    first = {name: load_file(out / name) for name in ("adapter/adapter_model.safetensors", "model.safetensors")}
    shutil.rmtree(out / "checkpoint-4")
    resume = ["--output_dir", str(out), "--resume_from_checkpoint", str(checkpoint)]
    assert math.isfinite(run_unsup.main(["--config", str(qlora_run["config"]), *resume])["train_loss"])
    for name, tensors in first.items():
        again = load_file(out / name)
        assert again.keys() == tensors.keys() and all(torch.equal(again[k], v) for k, v in tensors.items()), name


def test_saving_a_qlora_model_merges_a_copy_and_leaves_the_trained_model_as_it_was(
    qlora_run: dict[str, Path], tmp_path: Path
) -> None:
    """``CSETrainer.save_model`` mid-run: the 4-bit weights (packed bytes and block scales), the adapters (unmerged)
    and the model's 4-bit state are what they were, so training goes on from them."""
    trainer = CSETrainer(
        model=quantized_base(qlora_run["base"], attention_dropout=0.1),  # SimCSE's two views differ
        args=training_args(tmp_path / "run", learning_rate=1e-2, max_steps=2),
        train_dataset=Dataset.from_dict({"text": SENTENCES * 2}),
        processing_class=AutoTokenizer.from_pretrained(qlora_run["base"]),
        peft_config=LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0),
    )
    trainer.train()
    model = trainer.model

    def state() -> dict[str, torch.Tensor]:
        tensors = {name: p.detach().clone() for name, p in model.named_parameters()}
        for name, module in model.named_modules():
            if isinstance(module, bnb.nn.Linear4bit):
                scales = module.weight.quant_state.as_dict().items()
                tensors |= {f"{name}.{key}": value.clone() for key, value in scales if isinstance(value, torch.Tensor)}
        return tensors

    before = state()
    trainer.save_model()
    after = state()
    assert after.keys() == before.keys() and all(torch.equal(after[key], before[key]) for key in before)
    assert model.get_base_model().is_loaded_in_4bit
    layers = [layer for layer in model.modules() if isinstance(layer, LoraLayer)]
    assert len(layers) == 14 and not any(layer.merged for layer in layers)
    assert "quantization_config" not in json.loads((tmp_path / "run" / "config.json").read_text(encoding="utf-8"))


def test_a_4bit_model_keeps_its_trainable_layout_through_eval_forwards_on_the_cpu(
    tiny_decoder_dirs: dict[str, Path],
) -> None:
    """Gemma 3 made bidirectional, with the cls pooler: ``CSEModel.from_pretrained`` probes its attention with an eval
    forward without gradients, which bitsandbytes' CPU backend would answer by repacking each 4-bit weight for its
    inference kernel (on a CPU with AVX512-BF16; elsewhere there is nothing to keep). After the probe and one more
    such forward, every 4-bit layer is as a load without any forward left it (the avg pooler probes nothing): the same
    dequantized weight, and the same gradient to its input in a training forward (a repacked layer gives none)."""
    backbone = BackboneSettings(load_in_4bit=True, bidirectional=True)
    config = AutoConfig.from_pretrained(tiny_decoder_dirs["gemma3_text"])
    backbone.apply(config)

    def load(pooler: str) -> CSEModel:
        return CSEModel.from_pretrained(
            tiny_decoder_dirs["gemma3_text"], config=copy.deepcopy(config), pooling=PoolingConfig(pooler=pooler),
            **backbone.from_pretrained_kwargs(device="cpu"),
        )  # fmt: skip

    probed, untouched = load("cls"), load("avg")
    # SimCSE's MLP head, which LoRA trains whole, is not quantized.
    assert type(probed.mlp.dense) is torch.nn.Linear and probed.mlp.dense.weight.dtype == torch.float32
    probed.eval()
    with torch.no_grad():
        probed(input_ids=torch.tensor([[2, 3, 4, 5]]), attention_mask=torch.ones(1, 4, dtype=torch.long))
    pairs = [
        (module, dict(untouched.named_modules())[name])
        for name, module in probed.named_modules()
        if isinstance(module, bnb.nn.Linear4bit)
    ]
    assert len(pairs) == 14  # 7 projections of 2 layers
    for layer, fresh in pairs:
        weights = [bnb.functional.dequantize_4bit(m.weight.data, m.weight.quant_state) for m in (layer, fresh)]
        assert torch.equal(*weights)
        inputs = torch.randn(3, layer.in_features, generator=torch.Generator().manual_seed(0))
        gradients = []
        for module in (layer, fresh):
            leaf = inputs.clone().requires_grad_()
            module.train()(leaf).sum().backward()
            gradients.append(leaf.grad)
        assert gradients[0] is not None and torch.equal(*gradients)


@pytest.mark.parametrize(
    ("logger_name", "dropped", "words"),
    [
        ("BITSANDBYTES_CPU_KERNEL_LOGGER", "BITSANDBYTES_KERNELS_HINT", '"{}: %s.'),
        ("KERNELS_HUB_LOGGER", "KERNELS_OFFLINE_TRUST_NOTE", "f\"Skipping publisher trust check for '{{repo_id}}'"),
    ],
    ids=["bitsandbytes-kernel-missing", "kernels-offline-trust-check"],
)
def test_bitsandbytes_kernels_hint_is_dropped_and_its_other_warnings_pass(
    caplog: pytest.LogCaptureFixture, logger_name: str, dropped: str, words: str
) -> None:
    """bitsandbytes tries, at every import on an AVX512-BF16 CPU, to fetch a CPU kernel through ``kernels``, and the
    two log what stopped it; hf_cse drops those messages (they came before every command's one-line error), and no
    other warning of those loggers."""
    import importlib.util
    import logging

    from hf_cse import _third_party_logs as third_party

    name, message = getattr(third_party, logger_name), getattr(third_party, dropped)
    source = Path(importlib.util.find_spec(name).origin).read_text("utf-8")
    assert words.format(message.split("'")[0]) in source  # the library still words it so, in that module
    logger = logging.getLogger(name)
    with caplog.at_level(logging.WARNING, logger=name):
        logger.warning(f"{message}: %s. Please ...", "No module named 'kernels'")
        logger.warning("Another warning.")
    assert [record.getMessage() for record in caplog.records] == ["Another warning."]
