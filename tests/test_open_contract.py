"""The objective and input contract (issue #28, item 2): objectives and auxiliary terms read one ``StepInputs`` and
return an ``ObjectiveOutput``; input providers register by name and declare which values are embeddings; a user's
provider, objective and term written outside hf_cse (tests/user_step_inputs.py) train by name, on 2 processes too."""

from __future__ import annotations

import importlib
import json
import math
import os
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import HANG_GUARD_S, REPO_ROOT, SENTENCES, free_port, training_args, write_config, write_train_file
from datasets import Dataset
from safetensors.torch import load_file
from transformers import AutoTokenizer

import hf_cse.inputs
from hf_cse import (
    CSEModel,
    CSETrainer,
    InputProvider,
    ObjectiveOutput,
    PoolingConfig,
    ProvidedInputs,
    StepContext,
    StepInputs,
)
from hf_cse.errors import UsageError
from hf_cse.inputs import build_step_inputs
from hf_cse.objectives import AuxiliaryInputs, MatryoshkaObjective, SimCSELoss
from hf_cse.registry import AUXILIARY_LOSSES, INPUT_PROVIDERS, LOSS_FORMS, OBJECTIVES

B, D = 4, 6


@pytest.fixture
def registries_restored() -> Iterator[None]:
    """The registries as they were before the test: what a test registers (a user's parts) must not show in the
    valid names other tests' error messages list."""
    registries = (OBJECTIVES, LOSS_FORMS, AUXILIARY_LOSSES, INPUT_PROVIDERS)
    saved = [dict(registry._classes) for registry in registries]  # no public unregister: registrations are final
    yield
    for registry, classes in zip(registries, saved, strict=True):
        registry._classes.clear()
        registry._classes.update(classes)


@pytest.fixture
def user_module(registries_restored: None) -> Any:
    """tests/user_step_inputs.py, imported (its parts registered) when a test runs, not at collection (the
    registries' parametrized tests must not see the user's objective), and unregistered after it."""
    sys.modules.pop("user_step_inputs", None)  # imported again: registers again
    return importlib.import_module("user_step_inputs")


def trainer_for(encoder_dir: Path, output_dir: Path, sentences: list[str], **overrides: Any) -> CSETrainer:
    torch.manual_seed(0)  # the MLP head is initialized before the Trainer seeds
    return CSETrainer(
        model=CSEModel.from_pretrained(encoder_dir, pooling=PoolingConfig(pooler="cls")),
        args=training_args(output_dir, **overrides),
        train_dataset=Dataset.from_dict({"text": sentences}),
        processing_class=AutoTokenizer.from_pretrained(encoder_dir),
    )


# --- the container --------------------------------------------------------------------------------------------------


def test_step_inputs_hold_the_views_and_named_values_with_one_line_errors() -> None:
    z1, z2, flags = torch.randn(B, D), torch.randn(B, D), torch.tensor([True, False, True, True])
    inputs = StepInputs(z1, z2, torch.nn.Linear(1, 1), has_pair=flags, note="text")
    assert AuxiliaryInputs is StepInputs  # the auxiliary terms' inputs are the same container
    assert inputs.anchors is z1 and inputs.positives is z2 and inputs.anchor_rows is None
    assert dict(inputs) == {"has_pair": flags, "note": "text"} and inputs.has_pair is flags
    assert inputs.tensor("has_pair") is flags and inputs.get("complementary_sim") is None
    with pytest.raises(KeyError, match="No step input 'negations'; this step has: has_pair, note"):
        inputs["negations"]
    with pytest.raises(AttributeError, match="No step input 'negations'; this step has: has_pair, note"):
        inputs.negations  # noqa: B018
    with pytest.raises(UsageError, match="Step input 'note' is a str, not a tensor"):
        inputs.tensor("note")
    with pytest.raises(UsageError, match=r"embeddings \['paraphrases'\] are not among the values"):
        StepInputs(z1, z2, embeddings=["paraphrases"], has_pair=flags)


def test_truncation_cuts_the_views_and_declared_embeddings_only() -> None:
    """A value of the embeddings' shape that is not declared one (scores per sentence and dimension) is passed whole:
    Matryoshka is told, it does not guess from shapes."""
    z1, z2, z3 = (torch.randn(B, D) for _ in range(3))
    group, scores, sims = torch.randn(B, D), torch.randn(B, D), torch.randn(B, B)
    rows = torch.arange(B)
    inputs = StepInputs(
        z1, z2, anchor_rows=rows, extra_positives=[z3], embeddings=["group"], group=group, scores=scores, sims=sims
    )
    cut = inputs.truncated(2)
    assert torch.equal(cut.anchors, z1[:, :2]) and torch.equal(cut.positives, z2[:, :2])
    assert torch.equal(cut.extra_positives[0], z3[:, :2]) and torch.equal(cut["group"], group[:, :2])
    assert cut["scores"] is scores and cut["sims"] is sims and cut.anchor_rows is rows
    assert cut.embeddings == {"group"} and inputs["group"] is group  # the original is unchanged
    wrong = StepInputs(z1, z2, embeddings=["group"], group=torch.randn(B, D + 1))
    with pytest.raises(UsageError, match=r"'group' is declared an embedding but has shape \(4, 7\); .* views' 6"):
        wrong.truncated(2)


class Recording(SimCSELoss):
    """SimCSE that records the inputs of every call."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[StepInputs] = []

    def forward(self, inputs: StepInputs) -> ObjectiveOutput:
        self.seen.append(inputs)
        return super().forward(inputs)


def test_matryoshka_truncates_what_providers_declare_embeddings_per_dimension() -> None:
    recording = Recording()
    group, weights = torch.randn(B, D), torch.rand(B)
    z1, z2 = torch.randn(B, D), torch.randn(B, D)
    output = MatryoshkaObjective(recording, [D, 3])(StepInputs(z1, z2, embeddings=["group"], group=group, w=weights))
    assert [tuple(seen["group"].shape) for seen in recording.seen] == [(B, D), (B, 3)]
    assert all(seen["w"] is weights for seen in recording.seen)
    expected = SimCSELoss()(StepInputs(z1, z2)).loss + SimCSELoss()(StepInputs(z1[:, :3], z2[:, :3])).loss
    assert torch.allclose(output.loss, expected) and set(output.logs) == {"loss_simcse_dim6", "loss_simcse_dim3"}


def test_the_negation_provider_declares_its_embeddings() -> None:
    assert INPUT_PROVIDERS["negations_and_paraphrases"].embeddings == ("negations", "paraphrases")
    assert INPUT_PROVIDERS["complementary_similarities"].embeddings == ()  # [B, B] similarities: never truncated


# --- providers: registered by name, assembled into the step's two containers ----------------------------------------


def test_every_provider_class_in_the_package_is_registered_without_a_list() -> None:
    """hf_cse.inputs imports every module of its folder: a provider class anywhere in it is known by name."""
    classes = set()
    for module in pkgutil.iter_modules(hf_cse.inputs.__path__):
        namespace = vars(sys.modules[f"hf_cse.inputs.{module.name}"])
        classes |= {c for c in namespace.values() if isinstance(c, type) and issubclass(c, InputProvider)}
    classes.discard(InputProvider)
    assert classes and all(INPUT_PROVIDERS[c.name] is c for c in classes)


class Gives(InputProvider):
    """A provider of fixed values (not registered: built directly)."""

    def __init__(self, name: str, provided: ProvidedInputs, embeddings: tuple[str, ...] = ()) -> None:
        self.name, self.provided, self.embeddings = name, provided, embeddings

    def provide(self, step: StepContext) -> ProvidedInputs:
        return self.provided


def test_the_step_has_a_global_container_for_the_objective_and_a_local_one_for_the_terms() -> None:
    local = [torch.randn(2, D) for _ in range(3)]
    gathered = [torch.cat([view, torch.randn(2, D)]) for view in local]
    rows, model = torch.tensor([0, 1]), torch.nn.Linear(1, 1)
    step = StepContext(model, {}, local[0], rows)
    embedding = Gives("a", ProvidedInputs({"e": torch.randn(4, D)}, {"e": torch.randn(2, D)}), embeddings=("e",))
    flags = Gives("b", ProvidedInputs(auxiliary={"f": torch.ones(2)}))
    objective_inputs, term_inputs = build_step_inputs([embedding, flags], step, gathered, local, model)
    assert objective_inputs.anchors is gathered[0] and objective_inputs.anchor_rows is rows
    assert objective_inputs.extra_positives == [gathered[2]] and objective_inputs.model is None
    assert set(objective_inputs) == {"e"} and objective_inputs.embeddings == {"e"}
    assert term_inputs.anchors is local[0] and term_inputs.anchor_rows is None and term_inputs.model is model
    assert set(term_inputs) == {"e", "f"} and term_inputs.embeddings == {"e"}
    with pytest.raises(UsageError, match="Input providers 'a' and 'c' both give 'e'; rename one"):
        build_step_inputs([embedding, Gives("c", ProvidedInputs({"e": 1}))], step, gathered, local, model)


def test_a_required_input_no_provider_gives_is_one_line_naming_the_providers(
    tiny_encoder_dir: Path, tmp_path: Path, user_module: Any
) -> None:
    class NeedsSomething(SimCSELoss):
        required_inputs = ("no_such_input",)

    with pytest.raises(UsageError) as err:
        CSETrainer(
            model=CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls")),
            args=training_args(tmp_path),
            train_dataset=Dataset.from_dict({"text": SENTENCES}),
            processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
            objective=NeedsSomething(),
        )
    message = str(err.value)
    assert message.startswith("Objective 'simcse' requires input 'no_such_input', which no input provider gives")
    assert f"the input providers are: {', '.join(sorted(INPUT_PROVIDERS))} (register yours" in message
    assert "sentence_weights" in message and "\n" not in message  # the user module's provider is listed too


def test_an_objective_returning_a_bare_tensor_is_a_one_line_error(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    class Bare(SimCSELoss):
        def forward(self, inputs: StepInputs) -> Any:
            return super().forward(inputs).loss

    trainer = trainer_for(tiny_encoder_dir, tmp_path, SENTENCES)
    trainer.objective = Bare()
    trainer.model.train()  # dropout on: the two views differ (identical views are refused first)
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(4)])
    with pytest.raises(UsageError, match=r"The objective 'simcse' returned a Tensor; forward must return Objective"):
        trainer.compute_loss(trainer.model, batch)


# --- a user's provider, objective and term, outside hf_cse ----------------------------------------------------------


def naive_weighted_step(z1: torch.Tensor, z2: torch.Tensor, weights: list[float], term_weight: float) -> torch.Tensor:
    """``sum_i w_i l_i / sum_i w_i + term_weight * mean_i w_i (1 - cos(z1_i, z2_i))``, one row at a time."""
    objective, term = 0.0, 0.0
    for i in range(len(weights)):
        cosines = torch.stack([torch.cosine_similarity(z1[i], z2[j], dim=0) for j in range(len(weights))])
        objective = objective + weights[i] * -torch.log_softmax(cosines / 0.05, dim=0)[i]
        term = term + weights[i] * (1 - cosines[i])
    return objective / sum(weights) + term_weight * term / len(weights)


def test_a_users_provider_objective_and_term_give_the_naive_loss(
    tiny_encoder_dir: Path, tmp_path: Path, user_module: Any
) -> None:
    weight_column, sentence_weight = user_module.WEIGHT, user_module.sentence_weight
    trainer = trainer_for(
        tiny_encoder_dir,
        tmp_path,
        SENTENCES[:8],
        objective="weighted_infonce",
        auxiliary_losses={"weight_pull": {"weight": 0.5}},
    )
    assert list(trainer.input_providers) == ["sentence_weights"]
    assert trainer.train_dataset[weight_column] == pytest.approx([sentence_weight(s) for s in SENTENCES[:8]])
    seen: dict[str, StepInputs] = {}
    trainer.objective.register_forward_pre_hook(lambda module, args: seen.update(objective=args[0]))
    trainer.model.train()  # dropout on: the two views differ
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(8)])
    loss = trainer.compute_loss(trainer.model, batch)

    z1, z2 = seen["objective"].anchors, seen["objective"].positives
    weights = [sentence_weight(s) for s in SENTENCES[:8]]
    assert len(set(weights)) > 2  # the weights differ: a loss that ignored them would not match
    expected = naive_weighted_step(z1.detach().double(), z2.detach().double(), weights, 0.5)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert trainer._step_logs["seen_weight_sum"][-1].item() == pytest.approx(sum(weights))
    assert trainer._step_logs["local_weight_rows"][-1].item() == 8
    unweighted = naive_weighted_step(z1.detach().double(), z2.detach().double(), [1.0] * 8, 0.5)
    assert abs(unweighted.item() - expected.item()) > 1e-3


def test_a_users_provider_objective_and_term_train_by_name_on_two_processes(
    tiny_encoder_dir: Path, tmp_path: Path, user_module: Any
) -> None:
    """run_unsup.py --import_module user_step_inputs on 2 CPU processes (gloo): the objective sees the 8 weights
    of the gathered batch (both processes' rows), the term its own process's 4, and training moves the weights."""
    sentences = SENTENCES[:8]  # one step's global batch: 2 processes x 4
    config = write_config(
        tmp_path,
        tiny_encoder_dir,
        write_train_file(tmp_path, sentences),
        objective="weighted_infonce",
        auxiliary_losses={"weight_pull": {"weight": 0.5}},
        max_steps=2,
        dataloader_drop_last=True,
    )
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
    launch += ["--main_process_port", str(free_port()), str(REPO_ROOT / "run_unsup.py")]
    command = [*launch, "--config", str(config), "--import_module", "user_step_inputs"]
    pythonpath = os.pathsep.join([str(REPO_ROOT), str(Path(user_module.__file__).parent)])
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1", "PYTHONPATH": pythonpath}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]

    out = tmp_path / "out"
    steps = [e for e in json.loads((out / "trainer_state.json").read_text())["log_history"] if "loss" in e]
    weights = [user_module.sentence_weight(s) for s in sentences]
    assert len(steps) == 2
    # Each value averaged over the 2 processes. Weights of 0.5 to 2 and their sums and halves are multiples of 0.25
    # below 16: float32 and the log's 6 decimals hold them exactly, so they are compared exactly.
    for entry in steps:
        assert entry["seen_weight_rows"] == 8 and entry["seen_weight_sum"] == sum(weights)
        assert entry["local_weight_rows"] == 4
        assert entry["local_weight_sum"] == sum(weights) / 2
        assert math.isfinite(entry["loss_weighted_infonce"]) and entry["loss_weight_pull"] >= 0
    before = load_file(str(tiny_encoder_dir / "model.safetensors"))
    after = {key.split(".", 1)[1]: value for key, value in load_file(str(out / "model.safetensors")).items()}
    layers = [key for key in before if ".layer." in key and key in after]
    assert layers and all(not torch.equal(before[key], after[key]) for key in layers)


def test_the_readme_provider_example_trains_a_step(
    tiny_encoder_dir: Path, tmp_path: Path, registries_restored: None
) -> None:
    """The docs' worked example of a user provider, objective and term (examples/python/my_weights.py), run as
    printed (under fresh names: tests/user_step_inputs.py holds the same ones)."""
    block = (REPO_ROOT / "examples" / "python" / "my_weights.py").read_text(encoding="utf-8")
    for name in ("sentence_weights", "weighted_infonce", "weight_pull"):
        block = block.replace(f'"{name}"', f'"readme_{name}"')
    exec(compile(block, "my_weights.py", "exec"), {"__name__": "readme_example"})  # registers the three parts
    trainer = trainer_for(
        tiny_encoder_dir,
        tmp_path,
        SENTENCES[:8],
        objective="readme_weighted_infonce",
        auxiliary_losses={"readme_weight_pull": {"weight": 0.5}},
    )
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(8)])
    trainer.model.train()  # dropout on: the two views differ (identical views are refused)
    loss = trainer.compute_loss(trainer.model, batch)
    weights = [0.5 + (len(s) % 4) / 2 for s in SENTENCES[:8]]
    assert math.isfinite(loss.item()) and loss.requires_grad
    assert trainer._step_logs["mean_sentence_weight"][-1].item() == pytest.approx(sum(weights) / 8)
    assert {"loss_readme_weighted_infonce", "loss_readme_weight_pull"} <= set(trainer._step_logs)
