"""Objectives against naive per-row implementations of the papers' formulas, gradients included."""

from __future__ import annotations

import math

import pytest
import torch

from hf_cse.objectives import OBJECTIVES, SimCSELoss, build_objective


def naive_simcse(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """-1/B sum_i log( e^{cos(z1_i,z2_i)/t} / sum_j e^{cos(z1_i,z2_j)/t} ), one row at a time."""
    losses = []
    for i in range(z1.shape[0]):
        sims = [torch.dot(z1[i], z2[j]) / (z1[i].norm() * z2[j].norm()) / temperature for j in range(z2.shape[0])]
        sims = torch.stack(sims)
        losses.append(-(sims[i] - torch.logsumexp(sims, dim=0)))
    return torch.stack(losses).mean()


@pytest.mark.parametrize("temperature", [0.05, 0.1, 1.0])
def test_simcse_matches_naive_loop(temperature: float) -> None:
    torch.manual_seed(0)
    z1, z2 = torch.randn(6, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64)
    got = SimCSELoss(temperature)(z1, z2)
    assert torch.allclose(got, naive_simcse(z1, z2, temperature), atol=1e-5)


def test_simcse_gradients_match_naive_loop() -> None:
    torch.manual_seed(1)
    z1 = torch.randn(5, 7, requires_grad=True)
    z2 = torch.randn(5, 7, requires_grad=True)
    grads = torch.autograd.grad(SimCSELoss(0.05)(z1, z2), (z1, z2))
    naive_grads = torch.autograd.grad(naive_simcse(z1, z2, 0.05), (z1, z2))
    for got, expected in zip(grads, naive_grads, strict=True):
        assert torch.allclose(got, expected, atol=1e-5)


def test_simcse_gradcheck_float64() -> None:
    torch.manual_seed(2)
    z1 = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    z2 = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(SimCSELoss(0.05), (z1, z2))


def test_simcse_perfect_positives_approach_zero_loss() -> None:
    z = torch.eye(4) * 3
    assert SimCSELoss(0.05)(z, z).item() < 1e-6


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_simcse_finite_under_low_precision_inputs_and_autocast(dtype: torch.dtype) -> None:
    torch.manual_seed(3)
    # Near-identical views give logits close to 1/0.05 = 20 on the diagonal: e^20 overflows float16.
    z1 = torch.randn(16, 32)
    z2 = z1 + 1e-3 * torch.randn(16, 32)
    with torch.autocast(device_type="cpu", dtype=dtype):
        loss = SimCSELoss(0.05)(z1.to(dtype), z2.to(dtype))
    assert loss.dtype == torch.float32
    assert math.isfinite(loss.item())
    assert torch.allclose(loss, naive_simcse(z1.to(dtype).float(), z2.to(dtype).float(), 0.05), atol=1e-4)


def test_single_sentence_batch_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="at least 2 sentences"):
        SimCSELoss()(torch.randn(1, 4), torch.randn(1, 4))


def test_mismatched_views_are_an_error() -> None:
    with pytest.raises(ValueError, match="two views of shape"):
        SimCSELoss()(torch.randn(3, 4), torch.randn(2, 4))


def test_registry_builds_by_name_and_rejects_unknowns() -> None:
    assert "simcse" in OBJECTIVES
    objective = build_objective("simcse", temperature=0.1)
    assert isinstance(objective, SimCSELoss) and objective.get_config_dict() == {"temperature": 0.1}
    with pytest.raises(ValueError, match="valid objectives are: .*simcse"):
        build_objective("simcsee")
    with pytest.raises(ValueError, match="accepts: \\['temperature'\\]"):
        build_objective("simcse", tau=0.1)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        build_objective("simcse", temperature=0.0)
