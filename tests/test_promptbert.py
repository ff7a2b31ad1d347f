"""PromptBERT (issue #29): its loss against a row-by-row loop written from the paper's equation (gradients and
float64 gradcheck included), what it declares, and training by name from Python and the CLI, resuming exactly, and
on 2 CPU processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from common.commands import train_from_a_config
from common.naive_losses import check_matches_the_naive_loss, independent_views, naive_simcse
from common.training_checks import check_resumes_to_the_same_weights
from conftest import launch_two_process_runs, make_tiny_trainer

from hf_cse import CSETrainer, PoolingConfig
from hf_cse.objectives import OBJECTIVES, StepInputs, build_objective


@pytest.mark.parametrize("temperature", [0.05, 0.5])
def test_promptbert_loss_and_gradients_match_the_naive_loop(temperature: float) -> None:
    """PromptBERT's l_i = -log e^{cos(h_i, h_i')/t} / sum_j e^{cos(h_i, h_j')/t} (h, h' the two templates' views):
    SimCSE's InfoNCE over the two templates' views."""
    z1, z2 = independent_views(count=2)
    objective = build_objective("promptbert", temperature=temperature)
    check_matches_the_naive_loss(
        lambda a, b: objective(StepInputs(a, b)).loss, lambda a, b: naive_simcse(a, b, temperature), z1, z2
    )


def test_promptbert_declares_the_mask_pooler_the_second_template_and_no_extra_terms() -> None:
    objective = OBJECTIVES.build("promptbert", second_prompt_template='The sentence : "{sentence}" means [MASK] .')
    assert objective.required_pooler == "mask"
    assert objective.required_inputs == ("prompt_template_views",)
    assert objective.default_auxiliary_losses == {}
    assert objective.get_config_dict() == {
        "temperature": 0.05,
        "second_prompt_template": 'The sentence : "{sentence}" means [MASK] .',
    }
    assert "jiang2022promptbert" in objective.citations[0]
    # OssCSE is PromptBERT's objective plus its two terms.
    osscse = build_objective("osscse")
    assert isinstance(osscse, type(objective)) and set(osscse.default_auxiliary_losses) == {"margin", "recall"}


# --- training -------------------------------------------------------------------------------------------------------

SETTINGS: dict[str, Any] = {"pooler": "mask", "template_denoising": True}
"""PromptBERT's paper setting: the [MASK] pooler, each template's bias subtracted."""


def make_trainer(model_dir: Path, output_dir: Path, **overrides: Any) -> CSETrainer:
    """conftest's tiny trainer with PromptBERT's pooling, 4 steps of sentences up to 24 tokens."""
    pooling = PoolingConfig(**SETTINGS)
    values = {"objective": "promptbert", "max_seq_length": 24, "max_steps": 4, **overrides}
    return make_tiny_trainer(model_dir, output_dir, pooling=pooling, **values)


def test_trains_from_python_and_resumes_to_the_straight_runs_weights(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    straight = make_trainer(tiny_encoder_dir, tmp_path / "run")
    initial = {name: p.detach().clone() for name, p in straight.model.named_parameters()}
    straight.train()
    unchanged = [name for name, p in straight.model.named_parameters() if torch.equal(p, initial[name])]
    # BERT's own pooler layer is never used (hf_cse pools the hidden states). Under template denoising the last
    # LayerNorm's bias adds the same vector to the sentence's and the template's [MASK] states: it cancels in h - h^.
    assert unchanged == [
        "bert.encoder.layer.1.output.LayerNorm.bias",
        "bert.pooler.dense.weight",
        "bert.pooler.dense.bias",
    ]
    logged = [entry for entry in straight.state.log_history if "loss" in entry]
    assert all("loss_promptbert" in entry for entry in logged)

    resumed = make_trainer(tiny_encoder_dir, tmp_path / "run")
    check_resumes_to_the_same_weights(straight, resumed, tmp_path / "run" / "checkpoint-2")


def test_trains_by_name_from_the_cli_and_cites_the_paper(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    card = train_from_a_config(tiny_encoder_dir, tmp_path, objective="promptbert", max_seq_length=24, **SETTINGS)
    assert "@inproceedings{jiang2022promptbert" in card


def test_promptbert_needs_the_mask_pooler(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="needs pooler='mask'; the model uses pooler='cls'"):
        make_tiny_trainer(
            tiny_encoder_dir, tmp_path / "run", pooling=PoolingConfig(pooler="cls"), objective="promptbert"
        )


@pytest.mark.slow
def test_two_cpu_processes_equal_one_process(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """Gathered negatives: two processes of 4 equal one process over the global batch of 8."""
    import distributed_equivalence
    from common.two_processes import assert_two_processes_equal_one

    runs = {"promptbert": ["promptbert", "8"]}  # the arguments of tests/distributed_equivalence.py
    results, _ = launch_two_process_runs("distributed_equivalence.py", tiny_encoder_dir, tmp_path, runs)
    two = results["promptbert"]
    distributed_equivalence.run([str(tiny_encoder_dir), str(tmp_path / "promptbert-single.json"), *runs["promptbert"]])
    single = json.loads((tmp_path / "promptbert-single.json").read_text())
    assert single["world_size"] == 1
    assert_two_processes_equal_one(single, two)
    assert single["parameters"] != single["initial_parameters"]
