"""Every registered part keeps the contract the trainer relies on: each objective declares what a step needs and
gives a finite float32 loss (under bfloat16 and float16 autocast too), each other part builds by name with its
defaults, and ``run_unsup.py --help`` names every objective."""

from __future__ import annotations

import math
import re

import pytest
import torch
from common.naive_losses import complementary, loss_of
from common.parts import SENTENCE_OBJECTIVES
from conftest import run_unsup

from hf_cse import ContrastiveObjective
from hf_cse.modeling.configuration_cse import POOLERS
from hf_cse.objectives import ObjectiveOutput, StepInputs, build_objective
from hf_cse.objectives.base import MOMENTUM_NEGATIVES
from hf_cse.objectives.simcsepp import OFF_DROPOUT
from hf_cse.registry import AUXILIARY_LOSSES, INPUT_PROVIDERS, LOSS_FORMS, OBJECTIVES, VIEW_AUGMENTATIONS, Registry


@pytest.mark.parametrize("name", SENTENCE_OBJECTIVES)
def test_every_objective_declares_what_a_step_needs(name: str) -> None:
    objective = OBJECTIVES.build(name)
    assert isinstance(objective, ContrastiveObjective) and objective.name == name
    assert objective.required_pooler is None or objective.required_pooler in POOLERS
    assert set(objective.required_inputs) <= set(INPUT_PROVIDERS)
    assert set(objective.default_auxiliary_losses) <= set(AUXILIARY_LOSSES)
    assert isinstance(objective.num_positive_views, int) and objective.num_positive_views >= 1
    # Its own paper first, then its loss form's when that is another paper; each once.
    assert objective.citations[0] == objective.citation
    assert len(set(objective.citations)) == len(objective.citations)
    # The objective's loss on two views is a finite float32 scalar (complementary similarities where it needs them).
    z1 = torch.randn(6, 8)
    extra = {"complementary_sim": torch.eye(6)} if "complementary_similarities" in objective.required_inputs else {}
    if objective.momentum_queue is not None:  # ESimCSE: its queue of past embeddings
        extra[MOMENTUM_NEGATIVES] = torch.randn(objective.momentum_queue.size, 8)
    if "off_dropout_embeddings" in objective.required_inputs:  # SimCSE++: the batch encoded with dropout off
        extra[OFF_DROPOUT] = z1 + 0.1 * torch.randn(6, 8)
    output = objective(StepInputs(z1, z1 + 0.1 * torch.randn(6, 8), **extra))
    assert isinstance(output, ObjectiveOutput)
    loss = output.loss
    assert loss.dtype == torch.float32 and loss.dim() == 0 and math.isfinite(loss.item())
    assert all(value.dim() == 0 and not value.requires_grad for value in output.logs.values())


@pytest.mark.parametrize(
    ("registry", "name"),
    [(r, n) for r in (LOSS_FORMS, AUXILIARY_LOSSES, VIEW_AUGMENTATIONS) for n in sorted(r)],
    ids=lambda value: value if isinstance(value, str) else value.kind,
)
def test_every_other_part_builds_by_name_with_its_defaults(registry: Registry, name: str) -> None:
    hparams = {"temperature": 0.05} if registry is LOSS_FORMS else {}
    part = registry.build(name, **hparams)
    assert type(part) is registry[name] and part.name == name


# Every registered objective over sentence embeddings with its defaults, plus DCLR's other loss forms and weightings.
# MNTP (no positive view: logits of masked tokens) has its low-precision test in tests/test_mntp.py.
LOW_PRECISION_CASES = [(name, {}) for name in SENTENCE_OBJECTIVES] + [
    ("dclr", {"weighting": "self"}),
    ("dclr", {"loss_form": "focal", "weighting": "self"}),
    ("dclr", {"loss_form": "debiased", "phi_mode": "quantile"}),
]


@pytest.mark.parametrize(("name", "hparams"), LOW_PRECISION_CASES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_every_objective_is_finite_under_low_precision(name: str, hparams: dict, dtype: torch.dtype) -> None:
    torch.manual_seed(3)
    z1 = torch.randn(16, 32)
    z2 = z1 + 1e-3 * torch.randn(16, 32)
    a, b = z1.to(dtype).requires_grad_(True), z2.to(dtype).requires_grad_(True)
    objective = build_objective(name, temperature=0.05, **hparams)
    extra = (
        {"complementary_sim": complementary(4, batch=16).to(dtype)}
        if objective.needs_complementary_similarities
        else {}
    )
    if objective.momentum_queue is not None:  # ESimCSE: a queue of past embeddings, in the autocast dtype too
        extra[MOMENTUM_NEGATIVES] = torch.randn(objective.momentum_queue.size, 32).to(dtype)
    if "off_dropout_embeddings" in objective.required_inputs:  # SimCSE++: the batch encoded with dropout off
        extra[OFF_DROPOUT] = (z1 + 1e-3 * torch.randn(16, 32)).to(dtype)
    with torch.autocast(device_type="cpu", dtype=dtype):
        loss = loss_of(objective, a, b, **extra)
    assert loss.dtype == torch.float32 and math.isfinite(loss.item())
    assert all(torch.isfinite(g).all() for g in torch.autograd.grad(loss, (a, b)))


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_run_unsup_help_names_every_objective(name: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        run_unsup.main(["--help"])
    objective_help = capsys.readouterr().out.split("--objective", 1)[1].split("\n  --", 1)[0]
    assert re.search(rf"\b{name}\b", objective_help), objective_help
