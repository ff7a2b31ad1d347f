"""The smoke subset: train 2 steps from the command line's entry point, save, and load the saved folder in
``AutoModel`` and sentence-transformers, with the same embeddings as hf_cse's own encoder. Full training and LoRA
(the merged save) on the tiny BERT, and last-token pooling on a tiny Qwen3 decoder; and a run resumed from its
step-1 checkpoint ends with the weights of the straight run (transformers 5.2 to 5.5 lost the LayerNorm weights there).

Part of the normal suite, and what ``.ci/lowest_versions.sh`` runs on the lowest versions setup.cfg declares
(``.ci/lowest-versions.txt``): it must not skip there, so sentence-transformers is imported, not skipped.
"""

from __future__ import annotations

import configparser
import json
import math
from pathlib import Path

import pytest
import torch
from conftest import REPO_ROOT, SENTENCES, run_unsup, save_tiny_decoder, write_config, write_train_file
from packaging.requirements import Requirement
from packaging.version import Version
from safetensors.torch import load_file
from sentence_transformers import SentenceTransformer
from transformers import AutoModel, AutoTokenizer

from hf_cse import SentenceEncoder


def train_two_steps(tmp_path: Path, model_dir: Path, *arguments: str, **settings: object) -> Path:
    """``run_unsup.py --config`` for 2 steps (the final save only, unless ``settings`` say otherwise), with
    ``arguments`` after it; the output folder."""
    config = write_config(tmp_path, model_dir, write_train_file(tmp_path, SENTENCES * 2), max_steps=2, **settings)
    metrics = run_unsup.main(["--config", str(config), *arguments])
    assert math.isfinite(metrics["train_loss"])
    out = tmp_path / "out"
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 2
    return out


def automodel_embeddings(out: Path, pooler: str) -> torch.Tensor:
    """The saved folder in plain ``AutoModel`` (no missing, unexpected or mismatched weight), pooled by hand as the
    card says: the ``[CLS]`` state (``cls``) or the last real token's (``last_token``, right padding)."""
    model, info = AutoModel.from_pretrained(out, output_loading_info=True)
    assert not any(info[kind] for kind in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    tokenizer = AutoTokenizer.from_pretrained(out)
    tokenizer.padding_side = "right"
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        states = model.eval()(**batch).last_hidden_state
    if pooler == "cls":
        return states[:, 0]
    last = batch["attention_mask"].sum(dim=1) - 1
    return states[torch.arange(len(SENTENCES)), last]


def assert_loads_everywhere(out: Path, pooler: str) -> None:
    assert (out / "model.safetensors").is_file() and (out / "modules.json").is_file()
    ours = SentenceEncoder.from_pretrained(out).encode(SENTENCES)
    assert ours.shape[0] == len(SENTENCES) and torch.isfinite(ours).all()
    torch.testing.assert_close(automodel_embeddings(out, pooler), ours, atol=1e-5, rtol=0)
    st = SentenceTransformer(str(out), device="cpu").encode(SENTENCES, convert_to_tensor=True)
    torch.testing.assert_close(st.cpu(), ours, atol=1e-5, rtol=0)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_two_steps_on_bert_save_and_load_in_automodel_and_st(
    tiny_encoder_dir: Path, tmp_path: Path, lora: bool
) -> None:
    """LoRA's final save is the merged plain model at the root (the adapter in ``adapter/``)."""
    out = train_two_steps(tmp_path, tiny_encoder_dir, pooler="cls", **({"lora_r": 4} if lora else {}))
    if lora:
        assert (out / "adapter" / "adapter_config.json").is_file() and not (out / "adapter_config.json").exists()
    assert_loads_everywhere(out, "cls")


def test_two_steps_on_a_decoder_save_and_load_in_automodel_and_st(tmp_path: Path) -> None:
    model_dir = save_tiny_decoder(tmp_path / "qwen3", "qwen3")
    out = train_two_steps(tmp_path, model_dir, pooler="last_token", dropout=0.1)
    assert_loads_everywhere(out, "last_token")


def test_a_run_resumed_from_its_step_1_checkpoint_ends_with_the_straight_runs_weights(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """Dropout on, Adam's moments and the data order carried by the checkpoint: bit-equal weights. (transformers
    5.2 to 5.5 reloaded a checkpoint's ``LayerNorm.gamma``/``beta`` as unexpected keys and left ``LayerNorm.weight``
    and ``bias`` at the base model's values: the resumed run diverged from its first step on.)"""
    every_step = {"pooler": "cls", "save_strategy": "steps", "save_steps": 1}
    out = train_two_steps(tmp_path, tiny_encoder_dir, **every_step)
    straight = load_file(out / "model.safetensors")
    checkpoint = out / "checkpoint-1"
    train_two_steps(tmp_path, tiny_encoder_dir, "--resume_from_checkpoint", str(checkpoint), **every_step)
    resumed = load_file(out / "model.safetensors")
    assert resumed.keys() == straight.keys()
    for name, weights in straight.items():
        assert torch.equal(resumed[name], weights), name


def declared_requirements() -> dict[str, Requirement]:
    """setup.cfg's ``install_requires`` and ``quickstart`` extra, by package name."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(REPO_ROOT / "setup.cfg", encoding="utf-8")
    lines = [
        *config["options"]["install_requires"].splitlines(),
        *config["options.extras_require"]["quickstart"].splitlines(),
    ]
    requirements = [Requirement(line) for line in map(str.strip, lines) if line and not line.startswith("#")]
    return {requirement.name: requirement for requirement in requirements}


def test_the_lowest_versions_job_installs_the_floors_setup_cfg_declares() -> None:
    """Each pin of .ci/lowest-versions.txt is its package's ``>=`` floor in setup.cfg, torch excepted (the file says
    why: no CPU wheel of an older torch to run), whose pin must still be within the declared range."""
    lines = (REPO_ROOT / ".ci" / "lowest-versions.txt").read_text(encoding="utf-8").splitlines()
    pins = {Requirement(line).name: Requirement(line) for line in lines if line.strip() and not line.startswith("#")}
    assert set(pins) == {"torch", "transformers", "accelerate", "datasets", "peft", "sentence-transformers"}
    declared = declared_requirements()
    for name, pin in pins.items():
        (exact,) = pin.specifier
        assert exact.operator == "==", pin
        assert declared[name].specifier.contains(exact.version), f"{pin} is outside setup.cfg's {declared[name]}"
        if name != "torch":
            (floor,) = [spec.version for spec in declared[name].specifier if spec.operator == ">="]
            assert Version(floor) == Version(exact.version), f"setup.cfg's floor {declared[name]}, pinned {pin}"
