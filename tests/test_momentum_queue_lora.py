"""The momentum queue (ESimCSE's) over LoRA and QLoRA (issue 55, item 5): the momentum encoder averages the parameters
that train (the adapters), leaves the frozen base as copied (a 4-bit base is packed uint8, which no average runs
over), and a checkpoint's ``momentum_queue.pt`` holds the averaged parameters only, so that a run resumes to the
same adapter, queue and averages, bit for bit."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from conftest import SENTENCES, run_unsup, save_tiny_decoder, write_config, write_train_file
from safetensors.torch import load_file

from hf_cse import CSEModel, PoolingConfig
from hf_cse.errors import UsageError
from hf_cse.inputs.momentum_queue import MOMENTUM_QUEUE_FILE, MomentumEncoder
from hf_cse.objectives.base import MomentumQueueSettings

BACKBONES = {"lora": {}, "qlora": {"load_in_4bit": True}}


@pytest.mark.parametrize("backbone", list(BACKBONES))
def test_an_esimcse_lora_run_resumed_from_a_checkpoint_ends_as_a_straight_one(backbone: str, tmp_path: Path) -> None:
    if backbone == "qlora":
        pytest.importorskip("bitsandbytes")  # the dev extra installs it; its CPU backend trains 4-bit layers here
    base = save_tiny_decoder(tmp_path / "base", "qwen3")
    config = write_config(
        tmp_path, base, write_train_file(tmp_path, SENTENCES * 2), objective="esimcse", pooler="last_token",
        dropout=0.1, lora_r=4, lora_alpha=8, learning_rate=1e-2, max_steps=4, save_strategy="steps", save_steps=2,
        seed=0, **BACKBONES[backbone],
    )  # fmt: skip
    run_unsup.main(["--config", str(config)])
    out = tmp_path / "out"
    straight_adapter = load_file(out / "adapter" / "adapter_model.safetensors")
    straight_queue = torch.load(out / "checkpoint-4" / MOMENTUM_QUEUE_FILE, weights_only=True)
    assert straight_queue["model"] and all("lora_" in name for name in straight_queue["model"])

    shutil.rmtree(out / "checkpoint-4")
    run_unsup.main(["--config", str(config), "--resume_from_checkpoint", str(out / "checkpoint-2")])
    resumed_adapter = load_file(out / "adapter" / "adapter_model.safetensors")
    resumed_queue = torch.load(out / "checkpoint-4" / MOMENTUM_QUEUE_FILE, weights_only=True)
    assert straight_adapter.keys() == resumed_adapter.keys()
    assert all(torch.equal(straight_adapter[key], resumed_adapter[key]) for key in straight_adapter)
    assert torch.equal(straight_queue["queue"], resumed_queue["queue"])
    assert straight_queue["model"].keys() == resumed_queue["model"].keys()
    assert all(torch.equal(value, resumed_queue["model"][key]) for key, value in straight_queue["model"].items())


def test_a_momentum_file_holding_every_weight_still_loads(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """Checkpoints written before the file held the averaged parameters only hold every weight of the copy."""
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls"))
    settings = MomentumQueueSettings(size=5, momentum=0.9)
    saved = MomentumEncoder(model, settings)
    with torch.no_grad():
        for parameter in saved.model.parameters():
            parameter.add_(1.0)
    former = saved.state_dict() | {"model": dict(saved.model.state_dict())}
    resumed = MomentumEncoder(model, settings)
    resumed.load_state_dict(former, tmp_path / MOMENTUM_QUEUE_FILE)
    averages = dict(resumed.model.named_parameters())
    assert all(torch.equal(averages[name], former["model"][name]) for name in resumed.averaged)
    frozen = {name: p for name, p in model.named_parameters() if not p.requires_grad}  # BERT's own pooler
    assert frozen and all(torch.equal(averages[name], p) for name, p in frozen.items())
    with pytest.raises(UsageError, match="holds no momentum average of the parameters") as error:
        resumed.load_state_dict(former | {"model": {}}, tmp_path / MOMENTUM_QUEUE_FILE)
    assert "\n" not in str(error.value)
