"""Naive references for the objectives: the papers' formulas one row at a time, in float64, and the inputs they
are checked on (random views, a complementary similarity matrix)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from hf_cse.objectives import ObjectiveOutput, StepInputs


def run(objective: torch.nn.Module, z1: torch.Tensor, z2: torch.Tensor, **values) -> ObjectiveOutput:
    """``objective`` on the views ``z1``, ``z2`` and ``values`` (``extra_positives``, ``complementary_sim``, ...)."""
    output = objective(StepInputs(z1, z2, **values))
    assert isinstance(output, ObjectiveOutput)
    return output


def loss_of(objective: torch.nn.Module, z1: torch.Tensor, z2: torch.Tensor, **values) -> torch.Tensor:
    return run(objective, z1, z2, **values).loss


def check_matches_the_naive_loss(
    loss: Callable[..., torch.Tensor], naive: Callable[..., torch.Tensor], *inputs: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """``loss(*inputs)`` equals ``naive(*inputs)`` on float64 embeddings ``[batch, dim]`` with gradients (the two
    views, and any further input the loss reads), so do their gradients in every input, and ``loss`` passes
    ``torch.autograd.gradcheck``. Returns ``loss``'s gradients, one per input."""
    got, expected = loss(*inputs), naive(*inputs)
    assert torch.allclose(got, expected, atol=1e-10)
    grads = torch.autograd.grad(got, inputs)
    for g, e in zip(grads, torch.autograd.grad(expected, inputs), strict=True):
        assert torch.allclose(g, e, atol=1e-10)
    assert torch.autograd.gradcheck(loss, inputs)
    return grads


def naive_simcse(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """-1/B sum_i log( e^{cos(z1_i,z2_i)/t} / sum_j e^{cos(z1_i,z2_j)/t} ), one row at a time."""
    losses = []
    for i in range(z1.shape[0]):
        sims = [torch.dot(z1[i], z2[j]) / (z1[i].norm() * z2[j].norm()) / temperature for j in range(z2.shape[0])]
        sims = torch.stack(sims)
        losses.append(-(sims[i] - torch.logsumexp(sims, dim=0)))
    return torch.stack(losses).mean()


def cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.dot(a, b) / (a.norm() * b.norm())


def naive_dcl(z1, z2, t, tau_plus, extra_positives=()):
    """Chuang et al. 2020, Figure 3, per anchor; for M > 1 the pos of the Ng line is averaged over the M views."""
    losses = []
    n = z1.shape[0] - 1
    for i in range(z1.shape[0]):
        views = [z2, *extra_positives]
        pos = torch.exp(cos(z1[i], z2[i]) / t)
        pos_m = torch.stack([torch.exp(cos(z1[i], v[i]) / t) for v in views]).mean()
        neg = sum(torch.exp(cos(z1[i], z2[j]) / t) for j in range(z1.shape[0]) if j != i)
        ng = torch.maximum((-n * tau_plus * pos_m + neg) / (1 - tau_plus), torch.tensor(n * math.exp(-1 / t)).to(pos))
        losses.append(-torch.log(pos / (pos + ng)))
    return torch.stack(losses).mean()


def naive_focal(z1, z2, t, m):
    """Hou & Li 2023, Eq. 2, per anchor."""
    losses = []
    for i in range(z1.shape[0]):
        s_p = cos(z1[i], z2[i])
        negs = [cos(z1[i], z2[j]) for j in range(z1.shape[0]) if j != i]
        denominator = sum(torch.exp(s * (s + m) / t) for s in negs) + torch.exp(s_p**2 / t)
        losses.append(-torch.log(torch.exp(s_p**2 / t) / denominator))
    return torch.stack(losses).mean()


def naive_dclr(z1, z2, t, keep, noise):
    """Zhou et al. 2022, Eq. 6 with 0/1 weights: weight-0 negatives leave the denominator; noise weight 1."""
    losses = []
    for i in range(z1.shape[0]):
        pos = torch.exp(cos(z1[i], z2[i]) / t)
        negs = [torch.exp(cos(z1[i], z2[j]) / t) for j in range(z1.shape[0]) if j != i and keep[i, j]]
        negs += [torch.exp(cos(z1[i], n) / t) for n in noise]
        losses.append(-torch.log(pos / (pos + sum(negs))))
    return torch.stack(losses).mean()


def views(seed: int, batch: int = 6, dim: int = 5, close: bool = False, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    z1 = torch.randn(batch, dim, generator=generator, dtype=dtype)
    z2 = (
        z1 + 0.05 * torch.randn(batch, dim, generator=generator, dtype=dtype)
        if close
        else torch.randn(batch, dim, generator=generator, dtype=dtype)
    )
    return z1.requires_grad_(True), z2.requires_grad_(True)


def complementary(seed: int, batch: int = 6) -> torch.Tensor:
    """A symmetric similarity matrix with a few entries above 0.9."""
    generator = torch.Generator().manual_seed(seed)
    sims = torch.rand(batch, batch, generator=generator, dtype=torch.float64) * 0.8
    sims = (sims + sims.T) / 2
    sims[0, 1] = sims[1, 0] = 0.95
    sims[2, 4] = 0.91
    sims.fill_diagonal_(1.0)
    return sims


def naive_dclr_form(z1, z2, t, keep, noise, loss_form, m=0.3, tau_plus=0.1):
    """DCLR's negatives (kept in-batch + noise) under the Focal-InfoNCE or DCL loss, per anchor."""
    losses = []
    for i in range(z1.shape[0]):
        s_p = cos(z1[i], z2[i])
        negs = [cos(z1[i], z2[j]) for j in range(z1.shape[0]) if j != i and keep[i, j]]
        negs += [cos(z1[i], n) for n in noise]
        if loss_form == "focal":
            pos = torch.exp(s_p**2 / t)
            losses.append(-torch.log(pos / (pos + sum(torch.exp(s * (s + m) / t) for s in negs))))
        else:
            pos, n = torch.exp(s_p / t), len(negs)
            neg = sum(torch.exp(s / t) for s in negs)
            ng = torch.maximum(
                (-n * tau_plus * pos + neg) / (1 - tau_plus), torch.tensor(n * math.exp(-1 / t)).to(pos)
            )
            losses.append(-torch.log(pos / (pos + ng)))
    return torch.stack(losses).mean()


def independent_views(
    batch: int = 6, dim: int = 5, count: int = 3, dtype: torch.dtype = torch.float64, seed: int = 0
) -> list[torch.Tensor]:
    """``count`` independent random embeddings ``[batch, dim]`` with gradients (the two views, and a third input
    where an objective reads one: SimCSE++'s off-dropout embeddings)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, dim, dtype=dtype, generator=generator, requires_grad=True) for _ in range(count)]
