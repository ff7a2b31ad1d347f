"""The objectives on labelled pairs with hard negatives (issue 52): values and gradients against naive references in
float64, one anchor at a time. SimCSE's is its released ``cl_forward`` (hard negatives appended as columns, the log
weight on each anchor's own); DCL and Focal-InfoNCE extend their formulas the natural way: every hard negative of the
batch is one more negative term."""

from __future__ import annotations

import math

import pytest
import torch
from common.naive_losses import check_matches_the_naive_loss, cos, independent_views, loss_of

from hf_cse.objectives import StepInputs, build_objective
from hf_cse.objectives.base import HARD_NEGATIVE_TEXT_HASH, TEXT_HASH


def cl_forward(z1: torch.Tensor, z2: torch.Tensor, z3: torch.Tensor, temp: float, hard_negative_weight: float):
    """SimCSE's ``cl_forward`` (princeton-nlp/SimCSE, simcse/models.py) for ``num_sent == 3`` on one process, as
    released: ``Similarity`` is ``nn.CosineSimilarity(dim=-1)(x, y) / temp``; the weights add ``z3_weight`` to each
    anchor's own hard negative column; ``CrossEntropyLoss`` against ``arange``."""
    cos_sim = torch.nn.CosineSimilarity(dim=-1)(z1.unsqueeze(1), z2.unsqueeze(0)) / temp
    z1_z3_cos = torch.nn.CosineSimilarity(dim=-1)(z1.unsqueeze(1), z3.unsqueeze(0)) / temp
    cos_sim = torch.cat([cos_sim, z1_z3_cos], 1)
    labels = torch.arange(cos_sim.size(0)).long()
    z3_weight = hard_negative_weight
    weights = torch.tensor(
        [
            [0.0] * (cos_sim.size(-1) - z1_z3_cos.size(-1))
            + [0.0] * i
            + [z3_weight]
            + [0.0] * (z1_z3_cos.size(-1) - i - 1)
            for i in range(z1_z3_cos.size(-1))
        ],
        dtype=cos_sim.dtype,
    )
    cos_sim = cos_sim + weights
    return torch.nn.CrossEntropyLoss()(cos_sim, labels)


def candidates(z2: torch.Tensor, hard: list[torch.Tensor], i: int) -> list[tuple[torch.Tensor, bool]]:
    """Anchor ``i``'s negatives, each with whether it is its own hard negative: the other rows' positives, then every
    row's hard negatives, block by block."""
    rows = range(z2.shape[0])
    return [(z2[j], False) for j in rows if j != i] + [(block[j], j == i) for block in hard for j in rows]


def naive_supervised_simcse(z1, z2, *hard, t, w=0.0):
    """Supervised SimCSE with ``K`` hard negatives a row, one anchor at a time."""
    losses = []
    for i in range(z1.shape[0]):
        positive = cos(z1[i], z2[i]) / t
        logits = [positive] + [cos(z1[i], z) / t + (w if own else 0.0) for z, own in candidates(z2, list(hard), i)]
        losses.append(torch.logsumexp(torch.stack(logits), dim=0) - positive)
    return torch.stack(losses).mean()


def naive_dcl(z1, z2, *hard, t, tau_plus):
    """Chuang et al. 2020 (Figure 3's debiased loss) with the hard negatives among the ``N`` negatives."""
    losses = []
    for i in range(z1.shape[0]):
        negatives = candidates(z2, list(hard), i)
        n = len(negatives)
        pos = torch.exp(cos(z1[i], z2[i]) / t)
        neg = sum(torch.exp(cos(z1[i], z) / t) for z, _ in negatives)
        ng = torch.maximum((-n * tau_plus * pos + neg) / (1 - tau_plus), torch.tensor(n * math.exp(-1 / t)).to(pos))
        losses.append(-torch.log(pos / (pos + ng)))
    return torch.stack(losses).mean()


def naive_focal(z1, z2, *hard, t, m):
    """Hou & Li 2023, Eq. 2, with the hard negatives among the negatives."""
    losses = []
    for i in range(z1.shape[0]):
        s_p = cos(z1[i], z2[i])
        negatives = [cos(z1[i], z) for z, _ in candidates(z2, list(hard), i)]
        denominator = sum(torch.exp(s * (s + m) / t) for s in negatives) + torch.exp(s_p**2 / t)
        losses.append(-torch.log(torch.exp(s_p**2 / t) / denominator))
    return torch.stack(losses).mean()


def pairs_loss(objective: torch.nn.Module):
    return lambda z1, z2, *hard: loss_of(objective, z1, z2, hard_negatives=list(hard))


@pytest.mark.parametrize("weight", [0.0, 1.5, -2.0])
def test_supervised_simcse_is_simcses_cl_forward(weight: float) -> None:
    z1, z2, z3 = independent_views(count=3)
    objective = build_objective("simcse", temperature=0.05, hard_negative_weight=weight)
    got = loss_of(objective, z1, z2, hard_negatives=[z3])
    expected = cl_forward(z1, z2, z3, 0.05, weight)
    # float64: cl_forward divides the cosine by t then adds w, the pipeline adds w*t then divides; a few ulps apart.
    assert torch.allclose(got, expected, rtol=0, atol=1e-12)
    expected_grads = torch.autograd.grad(expected, (z1, z2, z3))
    for mine, theirs in zip(torch.autograd.grad(got, (z1, z2, z3)), expected_grads, strict=True):
        assert torch.allclose(mine, theirs, rtol=0, atol=1e-12)


def test_supervised_simcse_without_hard_negatives_is_cl_forward_on_pairs() -> None:
    z1, z2 = independent_views(count=2)
    objective = build_objective("simcse", temperature=0.05)
    expected = torch.nn.CrossEntropyLoss()(
        torch.nn.CosineSimilarity(dim=-1)(z1.unsqueeze(1), z2.unsqueeze(0)) / 0.05, torch.arange(z1.shape[0])
    )
    assert torch.allclose(loss_of(objective, z1, z2), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("name", "kwargs", "naive"),
    [
        ("simcse", {"temperature": 0.05, "hard_negative_weight": 0.7},
         lambda *z: naive_supervised_simcse(*z, t=0.05, w=0.7)),
        ("dcl", {"temperature": 0.1, "tau_plus": 0.1}, lambda *z: naive_dcl(*z, t=0.1, tau_plus=0.1)),
        ("focal_infonce", {"temperature": 0.1, "hardness": 0.3}, lambda *z: naive_focal(*z, t=0.1, m=0.3)),
    ],
    ids=["simcse", "dcl", "focal_infonce"],
)  # fmt: skip
def test_each_pairs_objective_matches_its_naive_reference_with_two_hard_negatives(name, kwargs, naive) -> None:
    """Two hard negative columns (sentence-transformers' negative_1, negative_2): values, every input's gradient and
    gradcheck."""
    views = independent_views(batch=5, dim=4, count=4, seed=3)
    check_matches_the_naive_loss(pairs_loss(build_objective(name, **kwargs)), naive, *views)


def test_processes_averaging_their_rows_give_the_global_batch_loss() -> None:
    """Gathered pairs and hard negatives: each process averages its own anchors' losses over the global candidates;
    the mean over processes is the loss of the global batch on one process (as gather_negatives promises)."""
    z1, z2, z3 = independent_views(batch=6, count=3)
    objective = build_objective("simcse", hard_negative_weight=0.5)
    whole = loss_of(objective, z1, z2, hard_negatives=[z3])
    halves = [
        objective(StepInputs(z1, z2, anchor_rows=torch.arange(3) + 3 * rank, hard_negatives=[z3])).loss
        for rank in range(2)
    ]
    assert torch.allclose(torch.stack(halves).mean(), whole, rtol=0, atol=1e-12)


def test_duplicate_masking_drops_candidates_with_the_text_of_the_anchors_positive() -> None:
    """--mask_duplicates on pairs: ``text_hash`` hashes the positives. Rows 0 and 2 share a positive's text, and row
    1's hard negative is row 3's positive text: those candidates leave the denominator, nothing else."""
    z1, z2, z3 = independent_views(batch=4, count=3)
    positive_hash = torch.tensor([7, 8, 7, 9])
    hard_hash = torch.tensor([[11], [9], [12], [13]])
    objective = build_objective("simcse")
    output = objective(
        StepInputs(z1, z2, hard_negatives=[z3], **{TEXT_HASH: positive_hash, HARD_NEGATIVE_TEXT_HASH: hard_hash})
    )
    dropped = {(0, ("positive", 2)), (2, ("positive", 0)), (3, ("hard", 1))}
    losses = []
    for i in range(4):
        positive = cos(z1[i], z2[i]) / 0.05
        logits = [positive]
        logits += [cos(z1[i], z2[j]) / 0.05 for j in range(4) if j != i and (i, ("positive", j)) not in dropped]
        logits += [cos(z1[i], z3[j]) / 0.05 for j in range(4) if (i, ("hard", j)) not in dropped]
        losses.append(torch.logsumexp(torch.stack(logits), dim=0) - positive)
    assert torch.allclose(output.loss, torch.stack(losses).mean(), rtol=0, atol=1e-12)
    compared = 4 * 3 + 4 * 4
    assert output.logs["duplicate_negative_share"].item() == pytest.approx(len(dropped) / compared, abs=1e-7)


def test_matryoshka_truncates_the_hard_negatives_with_the_views() -> None:
    z1, z2, z3 = independent_views(batch=4, dim=6, count=3)
    truncated = StepInputs(z1, z2, hard_negatives=[z3]).truncated(2)
    assert truncated.hard_negatives[0].shape == (4, 2) and torch.equal(truncated.hard_negatives[0], z3[:, :2])
    objective = build_objective("simcse")
    assert torch.allclose(
        loss_of(objective, z1[:, :2], z2[:, :2], hard_negatives=[z3[:, :2]]),
        objective(truncated).loss,
        rtol=0,
        atol=0,
    )


def test_hard_negative_weight_is_a_number_in_range_and_recorded_only_when_set() -> None:
    assert "hard_negative_weight" not in build_objective("simcse").get_config_dict()
    assert build_objective("simcse", hard_negative_weight=1.0).get_config_dict()["hard_negative_weight"] == 1.0
    with pytest.raises(ValueError, match=r"^hard_negative_weight must be a number in \[-20, 20\], got 'big'\.$"):
        build_objective("simcse", hard_negative_weight="big")


def naive_symmetric(z1, z2, *hard, t):
    """sentence-transformers' MultipleNegativesSymmetricRankingLoss at scale 1/t: the forward loss over every candidate
    and, for each positive, the backward loss over the batch's anchors, averaged."""
    backward = []
    for j in range(z2.shape[0]):
        logits = torch.stack([cos(z2[j], z1[i]) / t for i in range(z1.shape[0])])
        backward.append(torch.logsumexp(logits, dim=0) - logits[j])
    return (naive_supervised_simcse(z1, z2, *hard, t=t) + torch.stack(backward).mean()) / 2


def test_the_symmetric_option_adds_the_positives_against_the_anchors() -> None:
    views = independent_views(batch=5, dim=4, count=3, seed=5)
    objective = build_objective("simcse", temperature=0.1, symmetric=True)
    check_matches_the_naive_loss(pairs_loss(objective), lambda *z: naive_symmetric(*z, t=0.1), *views)
    assert objective.get_config_dict()["symmetric"] is True
    with pytest.raises(ValueError, match=r"^symmetric must be true or false, got 'yes'\.$"):
        build_objective("simcse", symmetric="yes")
