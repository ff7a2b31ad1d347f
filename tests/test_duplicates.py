"""--mask_duplicates: a negative whose text is its anchor's leaves the denominator, for every built-in objective,
checked against naive per-row losses that skip those negatives; the hash that finds them; and a short training on
a heavily duplicated corpus."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from common.naive_losses import complementary, naive_dclr, naive_dclr_form, views
from conftest import SENTENCES, training_args
from datasets import Dataset
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, PoolingConfig
from hf_cse.errors import UsageError
from hf_cse.inputs.duplicates import check_duplicates_masked, text_hashes
from hf_cse.objectives import StepInputs, build_objective, with_matryoshka
from hf_cse.objectives.base import MOMENTUM_NEGATIVES, MOMENTUM_TEXT_HASH, TEXT_HASH

# Rows 0, 2 and 5 are one text, rows 1 and 4 another, row 3 is alone.
TEXTS = torch.tensor([7, 8, 7, 9, 8, 7])
DIFFERENT_TEXTS = TEXTS.unsqueeze(1) != TEXTS.unsqueeze(0)  # keep[i, j]: j is no copy of i's text


def test_hash_is_equal_for_equal_token_ids_whatever_the_padding_and_differs_otherwise() -> None:
    ids = torch.tensor(
        [[101, 5, 6, 102, 0, 0], [101, 5, 6, 102, 0, 0], [101, 6, 5, 102, 0, 0], [101, 5, 102, 0, 0, 0]]
    )
    mask = (ids != 0).long()
    hashes = text_hashes(ids, mask)
    assert hashes.dtype == torch.int64 and hashes.shape == (4,)
    assert hashes[0] == hashes[1]  # the same text
    assert len(set(hashes[1:].tolist())) == 3  # the same tokens in another order; a prefix
    # Another process pads the same text to another length: the same hash (gathered hashes compare across processes).
    assert text_hashes(ids[:1, :4], mask[:1, :4]) == hashes[0]
    # Token id 0 in a real position is not padding.
    with_zero = torch.tensor([[101, 0, 102]])
    assert text_hashes(with_zero, torch.ones_like(with_zero)) != text_hashes(with_zero[:, ::2], torch.ones(1, 2))


def test_hash_has_no_collisions_over_many_random_texts() -> None:
    ids = torch.randint(1, 30_000, (20_000, 32), generator=torch.Generator().manual_seed(0))
    assert text_hashes(ids, torch.ones_like(ids)).unique().numel() == 20_000


# Built-in objective -> (hyper-parameters, naive reference over a keep-mask and noise vectors).
CASES = {
    "simcse": ({"temperature": 0.1}, lambda z1, z2, keep, noise: naive_dclr(z1, z2, 0.1, keep, noise)),
    "osscse": ({"temperature": 0.1}, lambda z1, z2, keep, noise: naive_dclr(z1, z2, 0.1, keep, noise)),
    "focal_infonce": (
        {"temperature": 0.2, "hardness": 0.3},
        lambda z1, z2, keep, noise: naive_dclr_form(z1, z2, 0.2, keep, noise, "focal", m=0.3),
    ),
    "dcl": (
        {"temperature": 0.2, "tau_plus": 0.1},
        lambda z1, z2, keep, noise: naive_dclr_form(z1, z2, 0.2, keep, noise, "debiased", tau_plus=0.1),
    ),
    # Complementary weighting and noise negatives: the duplicates leave with the weighted-out negatives; noise stays.
    "dclr": ({"temperature": 0.1, "k": 1.0, "phi": 0.9}, None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_duplicate_negatives_leave_the_denominator_of_every_objective(name: str) -> None:
    """The loss and its gradients equal a row-by-row loss whose negatives skip every copy of the anchor's text; the
    logged share is the copies' share of the B(B-1) negatives; without text_hash the duplicates stay (another loss)."""
    hparams, naive = CASES[name]
    objective = build_objective(name, **hparams)
    z1, z2 = (view.requires_grad_() for view in views(3))
    sims = complementary(5)
    values = {"complementary_sim": sims} if name == "dclr" else {}
    torch.manual_seed(11)  # DCLR's noise: the same draw in the reference
    output = objective(StepInputs(z1, z2, **values, **{TEXT_HASH: TEXTS}))
    keep = DIFFERENT_TEXTS
    noise: list[torch.Tensor] = []
    if name == "dclr":
        keep = keep & (sims < 0.9)
        torch.manual_seed(11)
        normalized = [torch.nn.functional.normalize(view.detach(), dim=-1) for view in (z1, z2)]
        noise = list(objective.extra_negatives(*normalized).negatives)
        naive = naive_dclr
        expected = naive(z1, z2, 0.1, keep, noise)
    else:
        expected = naive(z1, z2, keep, noise)
    assert torch.allclose(output.loss, expected, atol=1e-10), (output.loss, expected)
    got = torch.autograd.grad(output.loss, (z1, z2))
    reference = torch.autograd.grad(expected, (z1, z2))
    for a, b in zip(got, reference, strict=True):
        assert torch.allclose(a, b, atol=1e-9)
    assert output.logs["duplicate_negative_share"].item() == pytest.approx(8 / 30)  # 3*2 + 2*1 ordered pairs
    if name == "dclr":  # the weighting's own share is unchanged by the duplicates
        assert output.logs["masked_negative_share"].item() == pytest.approx(((sims >= 0.9).sum() - 6).item() / 30)
    torch.manual_seed(11)
    plain = objective(StepInputs(z1, z2, **values))
    assert "duplicate_negative_share" not in plain.logs
    assert not torch.allclose(plain.loss, output.loss)


def test_matryoshka_masks_the_duplicates_at_every_dimension() -> None:
    wrapped = with_matryoshka(build_objective("simcse", temperature=0.1), [5, 2], [1.0, 0.5])
    z1, z2 = views(4)
    output = wrapped(StepInputs(z1, z2, **{TEXT_HASH: TEXTS}))
    expected = naive_dclr(z1, z2, 0.1, DIFFERENT_TEXTS, []) + 0.5 * naive_dclr(
        z1[:, :2], z2[:, :2], 0.1, DIFFERENT_TEXTS, []
    )
    assert torch.allclose(output.loss, expected, atol=1e-10)
    assert output.logs["duplicate_negative_share"].item() == pytest.approx(8 / 30)


def naive_infonce_with_masked_queue(z1, z2, t, keep, queue, queue_keep):
    """Row-by-row InfoNCE whose negatives are the kept in-batch positives and the kept queued embeddings."""
    losses = []
    for i in range(z1.shape[0]):
        pos = torch.exp(cos(z1[i], z2[i]) / t)
        negs = [torch.exp(cos(z1[i], z2[j]) / t) for j in range(z1.shape[0]) if j != i and keep[i, j]]
        negs += [torch.exp(cos(z1[i], q) / t) for q, kept in zip(queue, queue_keep[i], strict=True) if kept]
        losses.append(-torch.log(pos / (pos + sum(negs))))
    return torch.stack(losses).mean()


def cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.cosine_similarity(a, b, dim=0)


@pytest.mark.parametrize("name", ["simcse", "esimcse"])
def test_queued_copies_of_an_anchor_leave_its_denominator_as_in_batch_ones_do(name: str) -> None:
    """With a momentum queue, a queued embedding whose text hash is the anchor's is no negative of that anchor
    (-1, a row queued without a hash, stays one); the share counts copies among the B(B-1) + BQ negatives."""
    objective = build_objective(name, temperature=0.1, momentum_queue_size=4)
    z1, z2 = views(3)
    queue = torch.randn(4, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    # Queue row 0 is a copy of rows 0, 2 and 5, row 1 of row 3; row 2 was queued without a hash; row 3 is new.
    queue_hash = torch.tensor([7, 9, -1, 5])
    values = {MOMENTUM_NEGATIVES: queue, TEXT_HASH: TEXTS}
    output = objective(StepInputs(z1, z2, **values, **{MOMENTUM_TEXT_HASH: queue_hash}))
    queue_keep = TEXTS.unsqueeze(1) != queue_hash.unsqueeze(0)
    expected = naive_infonce_with_masked_queue(z1, z2, 0.1, DIFFERENT_TEXTS, queue, queue_keep)
    assert torch.allclose(output.loss, expected, atol=1e-10), (output.loss, expected)
    for a, b in zip(torch.autograd.grad(output.loss, (z1, z2)), torch.autograd.grad(expected, (z1, z2)), strict=True):
        assert torch.allclose(a, b, atol=1e-9)
    assert output.logs["duplicate_negative_share"].item() == pytest.approx((8 + 4) / (30 + 6 * 4))
    # The queue alone unmasked is another loss; without the queue's hashes the step names the missing input.
    unmasked = naive_infonce_with_masked_queue(z1, z2, 0.1, DIFFERENT_TEXTS, queue, torch.ones_like(queue_keep))
    assert not torch.allclose(output.loss, unmasked)
    with pytest.raises(KeyError, match="No step input 'momentum_text_hash'"):
        objective(StepInputs(z1, z2, **values))


def test_the_local_rows_of_a_gathered_batch_mask_the_duplicates_of_every_process() -> None:
    """Under data parallelism the objective sees the gathered batch and its gathered hashes and averages over this
    process's rows: rows 0-2 ("process 0") have copies in rows 4 and 5 ("process 1"), which are masked too. The two
    processes' losses average to the naive loss of the whole batch, and each differs from its loss without masking."""
    objective = build_objective("simcse", temperature=0.1)
    z1, z2 = views(6)
    local = []
    for rows in (torch.arange(3), torch.arange(3, 6)):
        output = objective(StepInputs(z1, z2, anchor_rows=rows, **{TEXT_HASH: TEXTS}))
        assert not torch.allclose(output.loss, objective(StepInputs(z1, z2, anchor_rows=rows)).loss)
        local.append(output.loss)
    assert torch.allclose((local[0] + local[1]) / 2, naive_dclr(z1, z2, 0.1, DIFFERENT_TEXTS, []), atol=1e-10)


def test_an_objective_that_ignores_the_hashes_is_refused() -> None:
    check_duplicates_masked({"duplicate_negative_share": torch.tensor(0.0)}, "simcse")
    with pytest.raises(UsageError, match="'mine' does not mask duplicate texts"):
        check_duplicates_masked({}, "mine")


def train(encoder_dir: Path, output_dir: Path, mask_duplicates: bool) -> list[dict]:
    """3 steps of SimCSE on 4 texts repeated 6 times each (batches of 8), dropout on; the log history."""
    torch.manual_seed(0)
    trainer = CSETrainer(
        model=CSEModel.from_pretrained(encoder_dir, pooling=PoolingConfig(pooler="cls")),
        args=training_args(output_dir, per_device_train_batch_size=8, mask_duplicates=mask_duplicates),
        train_dataset=Dataset.from_dict({"text": SENTENCES[:4] * 6}),
        processing_class=AutoTokenizer.from_pretrained(encoder_dir),
    )
    trainer.train()
    return [entry for entry in trainer.state.log_history if "loss" in entry]


def test_training_on_a_duplicated_corpus_logs_the_share_and_a_lower_loss(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    masked = train(tiny_encoder_dir, tmp_path / "masked", mask_duplicates=True)
    plain = train(tiny_encoder_dir, tmp_path / "plain", mask_duplicates=False)
    # 8 sentences of 4 texts: each anchor has on average about 1.5 copies among its 7 negatives.
    shares = [entry["duplicate_negative_share"] for entry in masked]
    assert len(shares) == 3 and all(0.1 < share < 0.5 for share in shares), shares
    assert all("duplicate_negative_share" not in entry for entry in plain)
    assert all(math.isfinite(entry["loss"]) for entry in masked)
    # Copies score like positives: dropping them from the denominator lowers every step's loss.
    for with_mask, without in zip(masked, plain, strict=True):
        assert with_mask["loss"] < without["loss"] - 0.1, (with_mask["loss"], without["loss"])
