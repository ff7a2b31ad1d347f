"""PromptBERT (issue #29): its loss against a row-by-row loop written from the paper's equation (gradients and
float64 gradcheck included), what it declares, and training by name from Python and the CLI, resuming exactly, and
on 2 CPU processes."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from common.commands import train_from_a_config
from common.naive_losses import check_matches_the_naive_loss, independent_views, naive_simcse
from common.training_checks import check_resumes_to_the_same_weights
from conftest import launch_two_process_runs, make_tiny_trainer, save_tiny_decoder

from hf_cse import POOLERS, CSETrainer, PoolingConfig
from hf_cse.errors import UsageError
from hf_cse.objectives import OBJECTIVES, StepInputs, build_objective, with_matryoshka
from hf_cse.objectives.base import accepted_poolers
from hf_cse.objectives.promptbert import PROMPTBERT_SECOND_TEMPLATE, PROMPTEOL_SECOND_TEMPLATE
from hf_cse.objectives.simcse import SimCSELoss


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


def test_promptbert_refuses_a_pooler_without_a_template_naming_every_pooler_it_takes(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(
        UsageError, match="needs pooler='mask' or pooler='prompt_last_token'; the model uses pooler='cls'"
    ):
        make_tiny_trainer(
            tiny_encoder_dir, tmp_path / "run", pooling=PoolingConfig(pooler="cls"), objective="promptbert"
        )


def test_accepted_poolers_are_read_from_the_objectives_own_check() -> None:
    """The refusal's list is the objective's acceptance over the registered poolers, so an objective that narrows
    it (here to one pooler, by name) is named with exactly that pooler."""

    class AvgOnly(SimCSELoss):
        required_pooler = "avg"

    assert accepted_poolers(AvgOnly()) == ["avg"]
    assert accepted_poolers(build_objective("simcse")) == list(POOLERS)
    # The poolers whose template holds one sentence's slot (Echo's writes the sentence twice: no second view of it).
    prompt_poolers = [name for name in POOLERS if POOLERS[name].uses_prompt_template and name != "echo"]
    assert prompt_poolers == ["mask", "prompt_last_token"]
    assert accepted_poolers(with_matryoshka(build_objective("osscse"), [8, 16])) == prompt_poolers


# --- on a decoder whose tokenizer has no mask token -------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_qwen3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_decoder(tmp_path_factory.mktemp("tiny_qwen3"), "qwen3")


@pytest.mark.parametrize(
    ("objective", "objective_kwargs"),
    [
        ("promptbert", {}),  # the default second template holds [MASK]
        ("sncse", {}),
        ("osscse", {}),
        ("promptbert", {"second_prompt_template": "This sentence means in one word:"}),  # no {sentence}
    ],
)
def test_a_second_template_the_pooler_refuses_names_the_objectives_setting_and_one_that_trains(
    tiny_qwen3_dir: Path, tmp_path: Path, objective: str, objective_kwargs: dict[str, str]
) -> None:
    """PromptEOL's pooler takes no [MASK]: the refusal names the objective's second_prompt_template in
    --objective_kwargs (not the pooler's template), and the --objective_kwargs it gives trains as written."""
    pooling = PoolingConfig(pooler="prompt_last_token")
    kwargs = json.dumps(objective_kwargs) if objective_kwargs else None
    with pytest.raises(UsageError) as refused:
        make_tiny_trainer(
            tiny_qwen3_dir, tmp_path / "refused", pooling=pooling, objective=objective, objective_kwargs=kwargs
        )
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"Objective {objective!r}'s second_prompt_template (--objective_kwargs) does not fit ")
    suggested = re.fullmatch(r".* One that does: --objective_kwargs '(.*)'\.", message)
    assert suggested is not None, message
    assert json.loads(suggested[1]) == {"second_prompt_template": PROMPTEOL_SECOND_TEMPLATE}
    trainer = make_tiny_trainer(
        tiny_qwen3_dir,
        tmp_path / "suggested",
        pooling=pooling,
        objective=objective,
        objective_kwargs=suggested[1],
        max_steps=1,
        save_strategy="no",
        input_kwargs={"negations": {"negation_backend": "rules"}} if objective == "sncse" else None,
    )
    assert math.isfinite(trainer.train().training_loss)


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


def test_a_second_template_without_mask_under_the_mask_pooler_is_refused_with_promptberts(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """The suggestion follows the pooler's kind: the mask pooler gets PromptBERT's second template back."""
    kwargs = json.dumps({"second_prompt_template": PROMPTEOL_SECOND_TEMPLATE})
    with pytest.raises(UsageError) as refused:
        make_tiny_trainer(
            tiny_encoder_dir,
            tmp_path,
            pooling=PoolingConfig(pooler="mask"),
            objective="promptbert",
            objective_kwargs=kwargs,
        )
    assert str(refused.value) == (
        "Objective 'promptbert''s second_prompt_template (--objective_kwargs) does not fit pooler='mask': "
        f"prompt_template {PROMPTEOL_SECOND_TEMPLATE!r} must contain [MASK] exactly once (found 0). One that does: "
        f"--objective_kwargs '{json.dumps({'second_prompt_template': PROMPTBERT_SECOND_TEMPLATE})}'."
    )


@pytest.mark.parametrize(
    ("pooler", "second_template"),
    [("mask", PROMPTBERT_SECOND_TEMPLATE), ("prompt_last_token", PROMPTEOL_SECOND_TEMPLATE)],
)
def test_sncse_encodes_negations_under_the_second_template_wherever_the_pooler_keeps_it(
    pooler: str, second_template: str, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """SNCSE encodes each sentence's negation under its second_prompt_template. The negation provider set the
    pooling's prompt_template, which prompt_last_token ignores (its template is in its own settings): its negations
    were encoded under the first template, PromptEOL's default."""
    from transformers import AutoTokenizer

    from hf_cse.modeling.tokenization import SentenceTokenizer

    pooling = PoolingConfig(pooler=pooler)
    trainer = make_tiny_trainer(
        tiny_encoder_dir,
        tmp_path,
        pooling=pooling,
        objective="sncse",
        objective_kwargs=json.dumps({"second_prompt_template": second_template}),
    )
    model_pooling = trainer.model.pooling
    second = model_pooling.get_pooler().with_prompt_template(model_pooling, second_template)
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    expected, first = (SentenceTokenizer(tokenizer, p, 32)(["a cat"])["input_ids"] for p in (second, model_pooling))
    assert expected != first
    assert trainer.input_providers["negations"].tokenizer(["a cat"])["input_ids"] == expected
