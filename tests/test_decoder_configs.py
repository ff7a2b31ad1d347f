"""The decoder example configs (``examples/configs/decoder/*.yaml``) run: each parses with ``run_unsup.py``'s parser
and trains 2 steps with its model swapped for the tiny random decoder of its family, its corpus for the test
sentences (as triplets for a pairs file), a longer max_seq_length for the tiny decoder's 128, on the CPU in float32
(every other setting as shipped: pooler, objective, instruction, dropout, LoRA, ...)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from common.config_stand_ins import stand_in_corpus, stand_in_max_seq_length
from conftest import REPO_ROOT, run_unsup

CONFIGS = sorted((REPO_ROOT / "examples" / "configs" / "decoder").glob("*.yaml"))
FAMILIES = {"qwen": "qwen3", "llama": "llama", "mistral": "llama", "gemma": "gemma3_text"}
"""The tiny decoder standing in for a config's model, by a word of its name."""

CPU_SETTINGS = {"bf16": False, "torch_dtype": None, "attn_implementation": None, "load_in_4bit": False}
"""What the CPU cannot run as shipped: half precision and 4-bit weights (the GPU's)."""


def test_there_are_decoder_configs() -> None:
    assert CONFIGS


@pytest.mark.parametrize("config_path", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_a_decoder_config_trains_on_its_tiny_stand_in(
    config_path: Path, tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    values = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    model = values["model_name_or_path"].lower()
    family = next((FAMILIES[word] for word in FAMILIES if word in model), "qwen3")  # a run's own output: any
    values.update(
        {
            **{key: value for key, value in CPU_SETTINGS.items() if key in values},
            "model_name_or_path": str(tiny_decoder_dirs[family]),
            "train_file": str(stand_in_corpus(values["train_file"], tmp_path)),
            "output_dir": str(tmp_path / "out"),
            "per_device_train_batch_size": 4,
            "max_steps": 2,
            "logging_steps": 1,
            "eval_strategy": "no",
            "load_best_model_at_end": False,
            "save_strategy": "no",
            "report_to": "none",
            "use_cpu": True,
        }
    )
    values["max_seq_length"] = stand_in_max_seq_length(values.get("max_seq_length"))
    values = {key: value for key, value in values.items() if value is not None}
    config = tmp_path / config_path.name
    config.write_text(yaml.safe_dump(values), encoding="utf-8")
    metrics = run_unsup.main(["--config", str(config)])
    assert math.isfinite(metrics["train_loss"]) and (tmp_path / "out" / "model.safetensors").is_file()
