"""Every registered objective over sentence embeddings, with its defaults and in its variants, trains from
``run_unsup.py`` on the tiny model: finite logged losses at every step, and each variant's diagnostics."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from common.parts import SENTENCE_OBJECTIVES
from conftest import SENTENCES, run_unsup, write_config, write_train_file

from hf_cse import OBJECTIVES

# Every registered objective over sentence embeddings with its defaults, then variants: OBJECTIVE-what or
# OBJECTIVE+form. MNTP (a decoder's LM head, no positive view) trains in test_mntp.py and test_decoder_backbones.py.
OBJECTIVE_RUNS = {name: {} for name in SENTENCE_OBJECTIVES} | {
    "dcl-3-positives": {"num_positive_views": 3},
    "dclr-lower-phi": {"phi": 0.5, "k": 1.0},
    "dclr-without-noise": {"phi": 0.5, "k": 0},
    "dclr-without-weighting": {"weighting": "none"},
    "dclr-random-noise": {"phi": 0.5, "ascent_steps": 0},
    "dclr-self-weighting": {"phi": 0.5, "weighting": "self"},
    "dclr-quantile-phi": {"phi": 0.9, "phi_mode": "quantile"},
    "dclr+focal": {"phi": 0.5, "loss_form": "focal", "hardness": 0.3},
}


@pytest.mark.parametrize("run", list(OBJECTIVE_RUNS))
def test_every_objective_trains_from_run_unsup(tiny_encoder_dir: Path, tmp_path: Path, run: str) -> None:
    objective = run.split("-")[0].split("+")[0]
    config = write_config(
        tmp_path,
        tiny_encoder_dir,
        write_train_file(tmp_path, SENTENCES),
        objective=objective,
        objective_kwargs=json.dumps(OBJECTIVE_RUNS[run]),
        pooler=OBJECTIVES[objective].required_pooler or "cls",
        max_steps=3,
    )
    metrics = run_unsup.main(["--config", str(config)])
    assert math.isfinite(metrics["train_loss"])
    state = json.loads((tmp_path / "out" / "trainer_state.json").read_text())
    logged = [entry for entry in state["log_history"] if f"loss_{objective}" in entry]
    assert len(logged) == 3 and all(math.isfinite(entry[f"loss_{objective}"]) for entry in logged)
    if objective == "dclr" and OBJECTIVE_RUNS[run].get("weighting") != "none":
        assert all(0.0 <= entry["masked_negative_share"] <= 1.0 for entry in logged)
    if objective == "dclr" and OBJECTIVE_RUNS[run].get("k", 1) > 0:
        assert all("uniformity_loss_before" in entry and "uniformity_loss_after" in entry for entry in logged)
