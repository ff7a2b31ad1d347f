"""Every registered objective under each backbone setting (issue 55, item 5): LoRA, QLoRA (4-bit weights under
LoRA), bidirectional attention and gradient checkpointing, each on a tiny random decoder, 2 steps from
``run_unsup.py``. Each cell trains (finite losses at every step, the trained weights moved) or is refused in one line
before the first training step; a traceback, a refusal after training started, or a run that moves nothing fails.
Full fine-tuning is the grid of ``test_decoder_backbones.py``, over the same objectives and poolers.

``--objective esimcse --load_in_4bit true`` was a traceback at the first step (the momentum encoder's average ran
over bitsandbytes' packed uint8 weights): a new objective or input provider that touches the weights is caught here
without being named.

QLoRA here runs on bitsandbytes' CPU backend (0.46.1 and later; ``hf_cse.modeling.backbone.BITSANDBYTES_REQUIREMENT``
says which releases were tried), which computes NF4 layers' forward and backward on this CPU: the QLoRA cells train
for real. Where bitsandbytes is not installed they check the refusal that needs no kernel: ``--load_in_4bit true``
stopped in one line naming the ``qlora`` extra, before anything loads.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from common.decoder_runs import objective_pooler, train
from conftest import save_tiny_decoder
from safetensors.torch import load_file
from transformers import AutoModel

from hf_cse import OBJECTIVES, CSETrainer
from hf_cse.errors import UsageError

SETTINGS: dict[str, tuple[str, dict[str, Any]]] = {
    "lora": ("llama", {"lora_r": 4, "lora_alpha": 8}),
    "qlora": ("qwen3", {"load_in_4bit": True, "lora_r": 4, "lora_alpha": 8}),
    "bidirectional": ("gemma3_text", {"bidirectional": True}),  # the family transformers makes attend both ways
    "activation_checkpointing": ("qwen3", {"activation_checkpointing": True}),
}
"""Each backbone setting: the decoder family it runs on and its ``run_unsup.py`` settings."""

HAS_BITSANDBYTES = importlib.util.find_spec("bitsandbytes") is not None

CELLS = [(objective, setting) for objective in sorted(OBJECTIVES) for setting in SETTINGS]


@pytest.fixture(scope="module")
def decoders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny random causal LM of each family :data:`SETTINGS` names, saved as a Hub checkpoint, by family."""
    families = sorted({family for family, _ in SETTINGS.values()})
    return {name: save_tiny_decoder(tmp_path_factory.mktemp(f"tiny_{name}"), name) for name in families}


def moved(out: Path, base: Path) -> bool:
    """Whether training changed what it trains: a LoRA run's adapter (``B`` starts at zero), else the root's
    weights against the base checkpoint's."""
    if (out / "adapter").is_dir():
        adapter = load_file(out / "adapter" / "adapter_model.safetensors")
        return any(tensor.any() for key, tensor in adapter.items() if "lora_B" in key)
    before = AutoModel.from_pretrained(base).state_dict()
    after = AutoModel.from_pretrained(out).state_dict()
    return any(not torch.equal(before[name], after[name]) for name in before)


@pytest.mark.parametrize(("objective", "setting"), CELLS, ids=[f"{o}-{s}" for o, s in CELLS])
def test_every_objective_trains_under_every_backbone_setting_or_is_refused_in_one_line_before_it_trains(
    objective: str, setting: str, decoders: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    family, settings = SETTINGS[setting]
    steps: list[int] = []
    training_step = CSETrainer.training_step

    def counted(self: CSETrainer, *args: Any, **kwargs: Any) -> torch.Tensor:
        steps.append(self.state.global_step)
        return training_step(self, *args, **kwargs)

    monkeypatch.setattr(CSETrainer, "training_step", counted)
    pooler, kwargs = objective_pooler(objective, family)
    try:
        out = train(tmp_path, decoders[family], objective, pooler, kwargs, **settings)
    except UsageError as error:
        assert "\n" not in str(error) and steps == [], (str(error), steps)
        if setting == "qlora" and not HAS_BITSANDBYTES:
            assert "qlora" in str(error)
        return
    assert setting != "qlora" or HAS_BITSANDBYTES, "load_in_4bit trained without bitsandbytes"
    state = json.loads((out / "trainer_state.json").read_text())
    logged = [entry[f"loss_{objective}"] for entry in state["log_history"] if f"loss_{objective}" in entry]
    assert len(logged) == 2 and all(math.isfinite(loss) for loss in logged)
    assert moved(out, decoders[family])
