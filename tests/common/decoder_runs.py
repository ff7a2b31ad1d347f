"""Training runs on the tiny random decoders (``conftest.save_tiny_decoder``) that the decoder checks share: the
pooler each objective trains with on a decoder family, and a 2-step ``run_unsup.py`` run."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from conftest import SENTENCES, run_unsup, write_config, write_train_file

from hf_cse import OBJECTIVES
from hf_cse.objectives.promptbert import PROMPTEOL_SECOND_TEMPLATE

HAS_MASK_TOKEN = {"qwen3": False, "llama": False, "gemma3_text": True}  # conftest's tiny_decoder_tokenizer


def objective_pooler(objective: str, architecture: str) -> tuple[str, dict[str, Any]]:
    """The pooler an objective trains with on ``architecture``, and its objective kwargs: the prompt objectives'
    ``mask`` pooler where the tokenizer has a mask token, else PromptEOL's with a second template of its kind."""
    if objective == "dcl":
        # At 0.05, DCL's debiased negative term sits at its floor for every anchor of the tiny decoder (its dropout
        # views are near-identical): the loss is exactly 0 and nothing moves. At 1 it is off the floor.
        return "last_token", {"temperature": 1.0}
    if "second_prompt_template" not in OBJECTIVES[objective]().get_config_dict():
        return "last_token", {}
    if HAS_MASK_TOKEN[architecture]:
        return "mask", {}
    return "prompt_last_token", {"second_prompt_template": PROMPTEOL_SECOND_TEMPLATE}


def train(tmp_path: Path, model_dir: Path, objective: str, pooler: str, kwargs: dict, **overrides: Any) -> Path:
    """``run_unsup.py`` for 2 steps of batch 4 on ``model_dir`` (dropout 0.3), asserting a finite training loss;
    returns the output folder. ``overrides``: more settings of the run."""
    if objective == "dclr":  # the complementary model is the decoder itself, which cannot pool at its first token
        overrides.setdefault("input_kwargs", {"complementary_similarities": {"pooler": "last_token"}})
    config = write_config(
        tmp_path,
        model_dir,
        write_train_file(tmp_path, SENTENCES),
        objective=objective,
        objective_kwargs=json.dumps(kwargs),
        pooler=pooler,
        dropout=0.3,  # LLM2Vec's: attention dropout alone at 0.1 leaves the views so close that DCL's loss is 0
        **overrides,
    )
    metrics = run_unsup.main(["--config", str(config)])
    assert math.isfinite(metrics["train_loss"])
    return tmp_path / "out"
