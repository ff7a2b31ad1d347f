"""LoRA in the trainer (issue 28, item 4): ``CSETrainer(peft_config=...)`` and ``run_unsup.py --lora_r`` train the
adapters (and SimCSE's MLP head) only; every final save writes the merged plain model at the root, which
``AutoModel``, sentence-transformers and hf_cse load without peft, and the adapter in ``adapter/``; checkpoints hold
the adapter and resume."""

from __future__ import annotations

import json
import math
import re
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from conftest import REPO_ROOT, SENTENCES, run_unsup, save_tiny_decoder, training_args, write_config, write_train_file
from datasets import Dataset
from peft import IA3Config, LoraConfig, PeftConfig, PeftModel, get_peft_model
from peft.tuners.lora import LoraLayer
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

from hf_cse import CSEModel, CSETrainer, PoolingConfig, SentenceEncoder
from hf_cse.errors import UsageError

PEFT_PREFIX = "base_model.model."


def base_name(peft_name: str) -> str:
    """The name a parameter of the wrapped model had in the plain :class:`CSEModel` (the frozen copies only)."""
    name = peft_name.removeprefix(PEFT_PREFIX)
    return name.replace(".base_layer.", ".").replace("mlp.original_module.", "mlp.")


def lora_trainer(encoder_dir: Path, output_dir: Path, **overrides: object) -> CSETrainer:
    """The tiny encoder (cls pooler: it has SimCSE's MLP head) with rank-4 LoRA, learning rate 1e-2."""
    torch.manual_seed(0)  # the MLP head is initialized before the Trainer seeds
    return CSETrainer(
        model=CSEModel.from_pretrained(encoder_dir, pooling=PoolingConfig(pooler="cls")),
        args=training_args(output_dir, learning_rate=1e-2, **overrides),
        train_dataset=Dataset.from_dict({"text": SENTENCES * 2}),
        processing_class=AutoTokenizer.from_pretrained(encoder_dir),
        peft_config=LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0),
    )


def cls_embeddings(model_dir: Path, tokenizer: AutoTokenizer) -> torch.Tensor:
    """The ``[CLS]`` states of ``AutoModel`` on ``model_dir``: the cls pooler at inference (its head is
    training-only)."""
    plain = AutoModel.from_pretrained(model_dir).eval()
    with torch.no_grad():
        return plain(**tokenizer(SENTENCES, padding=True, return_tensors="pt")).last_hidden_state[:, 0]


def assert_merged_root(root: Path, trained: PeftModel, tokenizer: AutoTokenizer) -> None:
    """``root`` holds ``trained``'s merged weights (``W + delta`` of every adapted layer) as a plain checkpoint that
    hf_cse, ``AutoModel`` and sentence-transformers load to ``trained``'s embeddings; the adapter in ``adapter/``."""
    from sentence_transformers import SentenceTransformer

    assert json.loads((root / "config.json").read_text())["model_type"] == "bert"
    assert (root / "modules.json").is_file() and (root / "sentence_bert_config.json").is_file()
    assert not (root / "adapter_config.json").exists()
    adapter_config = PeftConfig.from_pretrained(root / "adapter")
    assert isinstance(adapter_config, LoraConfig) and adapter_config.r == 4
    assert set(adapter_config.target_modules) == {"query", "value"}

    weights = load_file(root / "model.safetensors")
    assert not any("lora_" in key or key.startswith("mlp.") for key in weights)  # plain, no training-only head
    layers = [(name, module) for name, module in trained.named_modules() if isinstance(module, LoraLayer)]
    assert len(layers) == 4  # query and value of 2 layers
    for name, layer in layers:
        merged = layer.get_base_layer().weight + layer.get_delta_weight("default")
        torch.testing.assert_close(weights[base_name(name) + ".weight"], merged.detach(), rtol=0, atol=1e-6)

    trained.eval()
    in_memory = SentenceEncoder(trained, tokenizer).encode(SENTENCES)
    reloaded = SentenceEncoder(CSEModel.from_pretrained(root), tokenizer).encode(SENTENCES)
    torch.testing.assert_close(reloaded, in_memory, atol=1e-5, rtol=0)
    torch.testing.assert_close(cls_embeddings(root, tokenizer), in_memory, atol=1e-5, rtol=0)
    st_embeddings = SentenceTransformer(str(root), device="cpu").encode(SENTENCES, convert_to_tensor=True)
    torch.testing.assert_close(st_embeddings, in_memory, atol=1e-5, rtol=0)


def test_peft_config_trains_only_adapters_and_the_head_and_saves_a_merged_root(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    user_config = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0)
    trainer = lora_trainer(tiny_encoder_dir, tmp_path / "run")
    model = trainer.model
    assert isinstance(model, PeftModel) and user_config.modules_to_save is None  # the user's config is not changed
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in name or ".modules_to_save.default." in name for name in trainable)
    assert any(name.startswith(PEFT_PREFIX + "mlp.modules_to_save") for name in trainable)  # the head trains fully
    before = {name: p.detach().clone() for name, p in model.named_parameters()}

    trainer.train()
    for name, parameter in model.named_parameters():
        changed = not torch.equal(parameter, before[name])
        assert changed == (name in trainable), name  # the base is untouched; every adapter and the head moved

    trained = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainer.save_model()
    root = tmp_path / "run"
    # The save merged a copy: the trained model is unchanged, its adapters unmerged, and it can train on.
    assert all(torch.equal(p, trained[name]) for name, p in model.named_parameters())
    assert any(isinstance(m, LoraLayer) and not m.merged for m in model.modules())
    assert_merged_root(root, model, tokenizer)

    # The adapter reloads with peft on a fresh base (its MLP head included) to the same embeddings.
    torch.manual_seed(1)  # another head initialization: the adapter's own head must replace it
    fresh = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls"))
    adapter = PeftModel.from_pretrained(fresh, root / "adapter").eval()
    head = PEFT_PREFIX + "mlp.modules_to_save.default.dense.weight"
    assert torch.equal(dict(model.named_parameters())[head], dict(adapter.named_parameters())[head])
    torch.testing.assert_close(
        SentenceEncoder(adapter, tokenizer).encode(SENTENCES), SentenceEncoder(model, tokenizer).encode(SENTENCES)
    )

    trainer.create_model_card()
    assert "**LoRA**" in (root / "README.md").read_text(encoding="utf-8")


def test_a_peft_model_passed_as_is_is_saved_the_same_way(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    torch.manual_seed(0)
    base = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls"))
    wrapped = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["query", "value"]))
    trainer = CSETrainer(
        model=wrapped,
        args=training_args(tmp_path / "run", learning_rate=1e-2, max_steps=2),
        train_dataset=Dataset.from_dict({"text": SENTENCES}),
        processing_class=tokenizer,
    )
    assert trainer.model is wrapped
    trainer.train()
    trainer.save_model()
    assert_merged_root(tmp_path / "run", wrapped, tokenizer)


def test_peft_config_mistakes_are_one_line(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    base = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="avg"))

    def build(model: CSEModel | PeftModel, peft_config: PeftConfig | None) -> CSETrainer:
        return CSETrainer(
            model=model, args=training_args(tmp_path), processing_class=tokenizer, peft_config=peft_config
        )

    with pytest.raises(UsageError, match=r"must be a peft LoraConfig .* got IA3Config\.$"):
        build(base, IA3Config(target_modules=["query"], feedforward_modules=[]))
    with pytest.raises(UsageError, match=r"^LoRA rank r must be >= 1, got 0\.$"):
        build(base, LoraConfig(r=0))
    wrapped = get_peft_model(base, LoraConfig(r=2, target_modules=["query"]))
    with pytest.raises(UsageError, match="got a PeftModel and a peft_config; pass the plain CSEModel"):
        build(wrapped, LoraConfig(r=2))


def test_resuming_from_a_lora_checkpoint_equals_training_straight_through(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    straight = lora_trainer(tiny_encoder_dir, tmp_path / "straight", max_steps=4, save_strategy="steps", save_steps=2)
    straight.train()
    checkpoint = tmp_path / "straight" / "checkpoint-2"
    # What a LoRA checkpoint holds: the adapter (the MLP head as a module to save), not a merged model.
    assert (checkpoint / "adapter_config.json").is_file() and not (checkpoint / "config.json").exists()
    assert "base_model.model.mlp.dense.weight" in load_file(checkpoint / "adapter_model.safetensors")

    resumed = lora_trainer(tiny_encoder_dir, tmp_path / "resumed", max_steps=4, save_strategy="steps", save_steps=2)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert resumed.state.global_step == 4
    losses = [[e["loss"] for e in t.state.log_history if "loss" in e and e["step"] > 2] for t in (straight, resumed)]
    assert len(losses[0]) == 2 and losses[0] == pytest.approx(losses[1], rel=1e-5)
    for (name, a), b in zip(straight.model.named_parameters(), resumed.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0, msg=name)


def test_run_unsup_with_lora_saves_the_merged_root_and_the_adapter_and_resumes(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    train_file = write_train_file(tmp_path, SENTENCES * 2)
    config = write_config(
        tmp_path, tiny_encoder_dir, train_file, lora_r=4, lora_alpha=8, lora_dropout=0.0, learning_rate=1e-2,
        max_steps=4, save_strategy="steps", save_steps=2, seed=0,
    )  # fmt: skip
    assert math.isfinite(run_unsup.main(["--config", str(config)])["train_loss"])
    out = tmp_path / "out"
    assert sorted(path.name for path in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    assert not list(out.glob(".hf_cse-staging-*")) and not list((out / "adapter").glob(".hf_cse-staging-*"))
    assert "**LoRA**" in (out / "README.md").read_text(encoding="utf-8")
    assert json.loads((out / "hf_cse_training.json").read_text())["lora"]["r"] == 4

    torch.manual_seed(0)  # a base whose base weights are the run's; its head comes from the adapter
    base = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls"))
    trained = PeftModel.from_pretrained(base, out / "adapter")
    assert_merged_root(out, trained, tokenizer)

    # Resuming from checkpoint-2 trains steps 3 and 4 again, to the same adapter.
    first = load_file(out / "adapter" / "adapter_model.safetensors")
    shutil.rmtree(out / "checkpoint-4")
    resumed = run_unsup.main(["--config", str(config), "--resume_from_checkpoint", str(out / "checkpoint-2")])
    assert math.isfinite(resumed["train_loss"])
    again = load_file(out / "adapter" / "adapter_model.safetensors")
    assert first.keys() == again.keys()
    for key, value in first.items():
        torch.testing.assert_close(again[key], value, atol=1e-6, rtol=0, msg=key)


def documented_adapter_load() -> str:
    """docs/loading-and-sharing.md's line that loads a LoRA run's ``adapter/`` over ``BASE`` into ``model``."""
    docs = (REPO_ROOT / "docs" / "loading-and-sharing.md").read_text(encoding="utf-8")
    (documented,) = re.findall(r"`(model = PeftModel\.from_pretrained\(CSEModel\.from_pretrained\(.*?)`", docs)
    return documented


def test_the_documented_adapter_load_encodes_as_the_merged_root(tmp_path: Path) -> None:
    """docs/loading-and-sharing.md's line that loads a LoRA run's ``adapter/``, run as written, on a tiny decoder
    trained with PromptEOL pooling and dropout (settings the base checkpoint lacks): it encodes as the merged root,
    where peft's own ``AutoModel`` base misses every adapter key."""
    base = save_tiny_decoder(tmp_path / "base", "qwen3")
    out = tmp_path / "out"
    config = write_config(
        tmp_path, base, write_train_file(tmp_path, SENTENCES * 2), pooler="prompt_last_token", dropout=0.1,
        lora_r=4, lora_alpha=8, lora_dropout=0.0, learning_rate=1e-2, max_steps=3, seed=0,
    )  # fmt: skip
    run_unsup.main(["--config", str(config)])
    scope = {
        "PeftModel": PeftModel,
        "AutoConfig": AutoConfig,
        "CSEModel": CSEModel,
        "BASE": str(base),
        "OUT": str(out),
    }
    exec(documented_adapter_load(), scope)  # noqa: S102
    tokenizer = AutoTokenizer.from_pretrained(out)
    adapted = SentenceEncoder(scope["model"].eval(), tokenizer).encode(SENTENCES)
    root = SentenceEncoder(CSEModel.from_pretrained(out).eval(), tokenizer).encode(SENTENCES)
    untrained = SentenceEncoder(CSEModel.from_pretrained(base, config=AutoConfig.from_pretrained(out)), tokenizer)
    # The merge rounds each weight once in float32 and both forwards round their own sums: a dot product over n
    # terms is off by at most n * eps of its magnitude (n the longest reduction, the MLP's), at the embeddings' scale.
    # Training moved them by far more, so the adapter not loaded (the base alone) fails this.
    reduction = AutoConfig.from_pretrained(out).intermediate_size
    bound = reduction * torch.finfo(torch.float32).eps * float(root.abs().max())
    assert float((root - untrained.encode(SENTENCES)).abs().max()) > 1000 * bound
    torch.testing.assert_close(adapted, root, rtol=0, atol=bound)

    with pytest.warns(UserWarning, match="Found missing adapter keys"):
        PeftModel.from_pretrained(AutoModel.from_pretrained(base), out / "adapter")


def test_the_card_lists_the_adapted_modules_in_one_order_whatever_order_peft_wrote(tmp_path: Path) -> None:
    """peft writes target_modules in a set's order, which differs from run to run (13 identical decoder runs gave
    10 orders on their cards): the card's summary sorts them."""
    from hf_cse.export.model_card import read_lora_settings

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    modules = ["v_proj", "q_proj", "down_proj", "k_proj"]
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 4, "target_modules": modules}), encoding="utf-8")
    assert read_lora_settings(tmp_path) == {"r": 4, "target_modules": sorted(modules)}


@pytest.mark.parametrize(
    ("changed", "refused"),
    [(["--lora_r", "8"], True), (["--lora_alpha", "16"], False)],
    ids=["rank", "alpha"],
)
def test_a_resume_that_reshapes_the_adapter_is_refused_even_with_the_opt_in(
    changed: list[str], refused: bool, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """--allow_changed_settings let a resume with another LoRA rank through the contract, into peft's 60-line
    size-mismatch traceback: the checkpoint's adapter cannot load into an adapter of another shape (rank, modules).
    Its scale (lora_alpha) may change."""
    train_file = write_train_file(tmp_path, SENTENCES * 2)
    config = write_config(
        tmp_path, tiny_encoder_dir, train_file, lora_r=4, lora_alpha=8, lora_dropout=0.0, max_steps=4,
        save_strategy="steps", save_steps=2, seed=0,
    )  # fmt: skip
    run_unsup.main(["--config", str(config)])
    checkpoint = tmp_path / "out" / "checkpoint-2"
    resume = ["--config", str(config), "--resume_from_checkpoint", str(checkpoint), *changed]
    resume += ["--allow_changed_settings", "true", "--max_steps", "3"]
    if not refused:
        assert math.isfinite(run_unsup.main(resume)["train_loss"])
        return
    with pytest.raises(UsageError) as error:
        run_unsup.main(resume)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{checkpoint} holds a LoRA adapter of other shape: lora: ")
    assert "'r': 4" in message and "'r': 8" in message
    assert message.endswith(
        ". Its weights cannot load into this one, even with --allow_changed_settings: resume with the rank and "
        "modules it was trained with, or start a new run."
    )


def test_every_loader_given_an_adapter_only_folder_names_the_merged_run_folder(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A LoRA run's checkpoint-N (and adapter/) holds the adapter, no config.json: evaluating, reporting or pushing
    it printed transformers' "Unrecognized model ... Should have a `model_type` key", or the report's "Pass a
    checkpoint-N folder as RUN_DIR" (it was one). Every loader now names the run folder whose root is the merged
    model; an adapter copied away from its run is sent to its base model."""
    from hf_cse.commands import eval as eval_command
    from hf_cse.commands import push, report
    from hf_cse.commands.cli import run_command

    train_file = write_train_file(tmp_path, SENTENCES * 2)
    config = write_config(
        tmp_path, tiny_encoder_dir, train_file, lora_r=4, save_strategy="steps", save_steps=2, max_steps=2
    )
    run_unsup.main(["--config", str(config)])
    out = tmp_path / "out"
    merged = f"pass the run folder {str(out)!r}, whose root is the merged model."
    commands = {
        "eval": (eval_command.main, ["--model_name_or_path", "FOLDER", "--sts_dir", str(tmp_path)]),
        "report": (report.main, ["FOLDER"]),
        "push": (push.main, ["FOLDER", "--repo_id", "user/model", "--dry_run"]),
        "run_unsup": (
            run_unsup.main,
            ["--config", str(config), "--model_name_or_path", "FOLDER", "--output_dir", str(tmp_path / "again")],
        ),
    }
    for folder in (out / "checkpoint-2", out / "adapter"):
        for name, (main, argv) in commands.items():
            with pytest.raises(SystemExit) as exit_info:
                run_command(main, name, [str(folder) if arg == "FOLDER" else arg for arg in argv])
            line = capsys.readouterr().err.splitlines()[-1]
            assert exit_info.value.code == 2, (name, folder)
            assert line == (
                f"{name}: error: Model {str(folder)!r} holds a LoRA adapter only (adapter_config.json, no "
                f"config.json), as a LoRA run's checkpoint-N and adapter/ do: {merged}"
            ), line

    away = shutil.copytree(out / "adapter", tmp_path / "copied_adapter")
    with pytest.raises(UsageError, match=f"or load the adapter over its base model {str(tiny_encoder_dir)!r} as"):
        SentenceEncoder.from_pretrained(away)


def test_wrapping_for_lora_passes_on_no_deprecation_warning_of_peft_s_own_code(tiny_encoder_dir: Path) -> None:
    """peft's PeftModel reads transformers' deprecated is_gradient_checkpointing: a FutureWarning before every LoRA
    run's first step, with nothing for the user to change."""
    from hf_cse.modeling.lora import PEFT_CHECKPOINTING_WARNING, wrap_for_training

    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wrap_for_training(model, LoraConfig(r=4))
        model.is_gradient_checkpointing  # noqa: B018  (a user's own read still warns)
    assert [str(w.message).startswith(PEFT_CHECKPOINTING_WARNING) for w in caught] == [True]


def test_a_bfloat16_lora_root_is_merged_in_float32_and_encodes_as_its_adapter(tmp_path: Path) -> None:
    """``--torch_dtype bfloat16 --lora_r``: the root holds ``W + s B A`` over the run's bfloat16 weights in float32
    (issue 54, item 4). Against the float64 merge of the saved adapter, each adapted weight is off by at most the
    float32 merge's rounding (``B A``: ``r`` products summed, off by ``r u |B| |A|`` to first order; times ``s``; the
    sum: ``u`` of it; one more ``u s |B| |A|`` for the second-order terms), and cast once to bfloat16 by at most one
    bfloat16 rounding more. The root then encodes as the adapter over the bfloat16 base (the page's line, with the
    base checkpoint in bfloat16 as decoders ship), up to the float32 rounding of a dot product; the root rounded to
    bfloat16, as a bfloat16 merge saved it, does not."""
    unit_roundoff = {dtype: torch.finfo(dtype).eps / 2 for dtype in (torch.float32, torch.bfloat16)}
    base = save_tiny_decoder(tmp_path / "float32_base", "qwen3")
    AutoModelForCausalLM.from_pretrained(base, dtype=torch.bfloat16).save_pretrained(tmp_path / "base")
    AutoTokenizer.from_pretrained(base).save_pretrained(tmp_path / "base")
    base, out = tmp_path / "base", tmp_path / "out"
    config = write_config(
        tmp_path, base, write_train_file(tmp_path, SENTENCES * 2), pooler="last_token", dropout=0.1,
        torch_dtype="bfloat16", lora_r=4, lora_alpha=8, lora_dropout=0.0, learning_rate=1e-4, max_steps=3, seed=0,
    )  # fmt: skip
    run_unsup.main(["--config", str(config)])
    assert json.loads((out / "config.json").read_text())["dtype"] == "float32"
    root = load_file(out / "model.safetensors")
    assert {tensor.dtype for tensor in root.values()} == {torch.float32}
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "weights trained in `bfloat16` under the LoRA adapters, saved in `float32` with the adapters merged" in card

    scope = {"PeftModel": PeftModel, "AutoConfig": AutoConfig, "CSEModel": CSEModel}
    scope |= {"BASE": str(base), "OUT": str(out)}
    exec(documented_adapter_load(), scope)  # noqa: S102
    adapted = scope["model"].double().eval()
    layers = {base_name(n): m for n, m in adapted.named_modules() if isinstance(m, LoraLayer)}
    assert len(layers) == 14  # q, k, v, o, gate, up and down projections of 2 layers
    plain_base = load_file(base / "model.safetensors")
    for name, layer in layers.items():
        a, b = layer.lora_A["default"].weight.detach(), layer.lora_B["default"].weight.detach()
        scale = layer.scaling["default"]
        exact = layer.get_base_layer().weight.detach() + scale * b @ a
        merge_rounding = unit_roundoff[torch.float32] * (exact.abs() + (a.shape[0] + 2) * scale * b.abs() @ a.abs())
        merged = root[name + ".weight"].double()
        assert ((merged - exact).abs() <= merge_rounding).all(), name
        cast_once = root[name + ".weight"].to(torch.bfloat16).double()
        assert ((cast_once - exact).abs() <= merge_rounding + unit_roundoff[torch.bfloat16] * merged.abs()).all()
    others = [name for name in root if name.removesuffix(".weight") not in layers]
    assert all(torch.equal(root[name], plain_base[name].float()) for name in others)

    tokenizer = AutoTokenizer.from_pretrained(out)
    encoded = {
        "adapter": SentenceEncoder(adapted, tokenizer).encode(SENTENCES),
        "root": SentenceEncoder(CSEModel.from_pretrained(out).double().eval(), tokenizer).encode(SENTENCES),
        "root in bfloat16": SentenceEncoder(
            CSEModel.from_pretrained(out, dtype=torch.bfloat16).double().eval(), tokenizer
        ).encode(SENTENCES),
    }
    with adapted.disable_adapter():
        untrained = SentenceEncoder(adapted, tokenizer).encode(SENTENCES)
    # A dot product over n terms is off by at most n * eps of its magnitude (n the longest reduction, the MLP's).
    reduction = AutoConfig.from_pretrained(out).intermediate_size
    bound = reduction * torch.finfo(torch.float32).eps * float(encoded["adapter"].abs().max())
    assert float((encoded["adapter"] - untrained).abs().max()) > 1000 * bound
    torch.testing.assert_close(encoded["root"], encoded["adapter"], rtol=0, atol=bound)
    assert float((encoded["root in bfloat16"] - encoded["adapter"]).abs().max()) > bound
