"""SimCSE++ (issue #29): its loss and the dimension-wise contrastive term against row-by-row loops written from the
paper's equations (gradients and float64 gradcheck included), the off-dropout input provider, and training by name
from Python and the CLI, resuming exactly, and on 2 CPU processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from common.commands import train_from_a_config
from common.naive_losses import check_matches_the_naive_loss, cos, independent_views, naive_simcse
from common.training_checks import check_resumes_to_the_same_weights
from conftest import SENTENCES, launch_two_process_runs, make_tiny_trainer
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, PoolingConfig
from hf_cse.inputs.off_dropout import encoder_in_eval_mode
from hf_cse.objectives import StepInputs, build_auxiliary_loss, build_objective
from hf_cse.objectives.simcsepp import OFF_DROPOUT, DimensionContrastLoss, SimCSEPPLoss, standardized

# --- naive references, one row at a time ----------------------------------------------------------------------------


def naive_simcsepp_rows(
    z1: torch.Tensor, z2: torch.Tensor, h0: torch.Tensor, t: float, r: float = 1.0
) -> torch.Tensor:
    """l_i = -log e^{r cos(z1_i,z2_i)/t} / (e^{r cos(z1_i,z2_i)/t} + sum_{j != i} e^{cos(h0_i,h0_j)/t}), ``[B]``."""
    losses = []
    for i in range(len(z1)):
        positive = r * cos(z1[i], z2[i]) / t
        negatives = [cos(h0[i], h0[j]) / t for j in range(len(h0)) if j != i]
        losses.append(torch.logsumexp(torch.stack([positive, *negatives]), dim=0) - positive)
    return torch.stack(losses)


def naive_simcsepp(z1: torch.Tensor, z2: torch.Tensor, h0: torch.Tensor, t: float, r: float = 1.0) -> torch.Tensor:
    return naive_simcsepp_rows(z1, z2, h0, t, r).mean()


def naive_dcl(z1: torch.Tensor, z2: torch.Tensor, tau: float) -> torch.Tensor:
    """1/D sum_k -log e^{C_kk} / sum_l e^{C_kl}, C_kl = 1/(B tau) sum_b a_bk c_bl, a and c each column standardized
    over the batch (biased variance, eps 1e-5), every sum written out."""
    batch, dims = z1.shape

    def column(z: torch.Tensor, k: int) -> torch.Tensor:
        values = z[:, k]
        mean = sum(values[b] for b in range(batch)) / batch
        variance = sum((values[b] - mean) ** 2 for b in range(batch)) / batch
        return (values - mean) / torch.sqrt(variance + 1e-5)

    a = [column(z1, k) for k in range(dims)]
    c = [column(z2, k) for k in range(dims)]
    losses = []
    for k in range(dims):
        row = torch.stack([sum(a[k][b] * c[m][b] for b in range(batch)) / (batch * tau) for m in range(dims)])
        losses.append(torch.logsumexp(row, dim=0) - row[k])
    return torch.stack(losses).mean()


# --- the loss and the dimension-wise term ----------------------------------------------------------------------------


@pytest.mark.parametrize(("temperature", "pos_ratio"), [(0.05, 1.0), (0.1, 0.9)])
def test_simcsepp_loss_and_gradients_match_the_naive_loop(temperature: float, pos_ratio: float) -> None:
    z1, z2, h0 = independent_views()
    objective = SimCSEPPLoss(temperature, pos_ratio=pos_ratio)
    grads = check_matches_the_naive_loss(
        lambda a, b, c: objective(StepInputs(a, b, off_dropout=c)).loss,
        lambda a, b, c: naive_simcsepp(a, b, c, temperature, pos_ratio),
        z1,
        z2,
        h0,
    )
    assert grads[2].abs().sum() > 0  # the off-dropout negatives are trained, not detached


def test_simcsepp_differs_from_simcse_only_through_its_negatives() -> None:
    z1, z2, h0 = independent_views()
    simcsepp = build_objective("simcsepp")
    # With h0 = z1 = z2 the denominators are SimCSE's (the diagonal excluded from the negatives holds the positive).
    same = z1.detach()
    assert torch.allclose(
        simcsepp(StepInputs(same, same, off_dropout=same)).loss, naive_simcse(same, same, 0.05), atol=1e-10
    )
    assert not torch.allclose(simcsepp(StepInputs(z1, z2, off_dropout=h0)).loss, naive_simcse(z1, z2, 0.05))


def test_simcsepp_over_gathered_rows_averages_this_process_rows() -> None:
    z1, z2, h0 = independent_views(batch=8)
    rows = torch.arange(4, 8)
    got = build_objective("simcsepp")(StepInputs(z1, z2, anchor_rows=rows, off_dropout=h0)).loss
    assert torch.allclose(got, naive_simcsepp_rows(z1, z2, h0, 0.05)[rows].mean(), atol=1e-10)


def test_simcsepp_turns_dcl_on_and_rejects_bad_settings() -> None:
    objective = build_objective("simcsepp")
    assert objective.required_inputs == ("off_dropout_embeddings",)
    assert objective.default_auxiliary_losses == {"dimension_contrast": {"weight": 0.1, "temperature": 5.0}}
    assert objective.get_config_dict() == {"temperature": 0.05, "pos_ratio": 1.0}
    with pytest.raises(ValueError, match=r"pos_ratio must be a number in \(0, 10\], got 0"):
        build_objective("simcsepp", pos_ratio=0)
    z1, z2, _ = independent_views()
    with pytest.raises(KeyError, match="No step input 'off_dropout'"):
        objective(StepInputs(z1, z2))
    with pytest.raises(ValueError, match=r"off_dropout has shape \(5, 5\); expected \(6, 5\)"):
        objective(StepInputs(z1, z2, off_dropout=z1[:5]))


@pytest.mark.parametrize("temperature", [5.0, 0.5])
def test_dimension_contrast_matches_the_naive_loop_and_batchnorm(temperature: float) -> None:
    z1, z2 = independent_views(batch=7, dim=4, count=2)
    term = build_auxiliary_loss("dimension_contrast", temperature=temperature)
    check_matches_the_naive_loss(
        lambda a, b: term(StepInputs(a, b)).loss, lambda a, b: naive_dcl(a, b, temperature), z1, z2
    )
    # The code's BatchNorm1d(hidden, affine=False) in training mode standardizes the same way.
    batch_norm = torch.nn.BatchNorm1d(4, affine=False, dtype=torch.float64).train()
    assert torch.allclose(standardized(z1), batch_norm(z1), atol=1e-10)


def test_dimension_contrast_is_float32_under_half_precision_and_checks_tau() -> None:
    z1, z2 = independent_views(dtype=torch.bfloat16, count=2)
    assert DimensionContrastLoss()(StepInputs(z1, z2)).loss.dtype == torch.float32
    with pytest.raises(ValueError, match=r"temperature must be a number in \[0.001, 1000\], got 0"):
        DimensionContrastLoss(temperature=0)


# --- the off-dropout provider ---------------------------------------------------------------------------------------


def test_off_dropout_forward_has_no_dropout_and_restores_every_mode(tiny_encoder_dir: Path) -> None:
    model = CSEModel.from_pretrained(
        tiny_encoder_dir,
        pooling=PoolingConfig(pooler="cls"),
        hidden_dropout_prob=0.3,
        attention_probs_dropout_prob=0.3,
    )
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    inputs = dict(tokenizer(SENTENCES[:4], padding=True, return_tensors="pt"))
    model.train()
    modes = {name: module.training for name, module in model.named_modules()}
    with encoder_in_eval_mode(model):
        first, second = model(**inputs).embeddings, model(**inputs).embeddings
    assert torch.equal(first, second)  # no dropout, attention-probability dropout included
    assert {name: module.training for name, module in model.named_modules()} == modes
    assert not torch.equal(model(**inputs).embeddings, model(**inputs).embeddings)  # dropout back on
    # The training-only MLP head still applies (the model stays in training mode): not what eval mode encodes.
    model.eval()
    assert not torch.allclose(model(**inputs).embeddings, first)


# --- training -------------------------------------------------------------------------------------------------------


def make_trainer(model_dir: Path, output_dir: Path, **overrides: Any) -> CSETrainer:
    """conftest's tiny trainer of SimCSE++ (the cls pooler), 4 steps of sentences up to 24 tokens."""
    values = {"objective": "simcsepp", "max_seq_length": 24, "max_steps": 4, **overrides}
    return make_tiny_trainer(model_dir, output_dir, pooling=PoolingConfig(pooler="cls"), **values)


def test_trains_from_python_and_resumes_to_the_straight_runs_weights(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    straight = make_trainer(tiny_encoder_dir, tmp_path / "run")
    initial = {name: p.detach().clone() for name, p in straight.model.named_parameters()}
    straight.train()
    unchanged = [name for name, p in straight.model.named_parameters() if torch.equal(p, initial[name])]
    # BERT's own pooler layer is never used (hf_cse pools the hidden states).
    assert unchanged == ["bert.pooler.dense.weight", "bert.pooler.dense.bias"]
    logged = [entry for entry in straight.state.log_history if "loss" in entry]
    assert all({"loss_simcsepp", "loss_dimension_contrast"} <= set(entry) for entry in logged)
    # The logged total is the objective plus 0.1 x DCL.
    total = logged[-1]["loss_simcsepp"] + 0.1 * logged[-1]["loss_dimension_contrast"]
    assert logged[-1]["loss"] == pytest.approx(total, rel=1e-4)

    resumed = make_trainer(tiny_encoder_dir, tmp_path / "run")
    check_resumes_to_the_same_weights(straight, resumed, tmp_path / "run" / "checkpoint-2")


def test_trains_by_name_from_the_cli_and_cites_the_paper(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    card = train_from_a_config(tiny_encoder_dir, tmp_path, objective="simcsepp", max_seq_length=24, pooler="cls")
    assert "@inproceedings{xu2023simcsepp" in card


# The arguments of tests/distributed_equivalence.py for this module's 2-process runs: one launch for both.
TWO_PROCESS_RUNS = {
    "simcsepp-instance": ["simcsepp-instance", "8"],  # gathered off-dropout negatives (DCL off: it is per process)
    "simcsepp-local": ["simcsepp", "8", "4"],  # local negatives: the objective and DCL per process of 4 rows
}


@pytest.mark.slow
def test_two_cpu_processes_equal_one_process(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """Gathered negatives: two processes of 4 equal one process over the global batch of 8 (off-dropout negatives
    gathered with their gradients). Local negatives: one process accumulating two batches of 4 equals two processes
    taking one each, DCL included."""
    import distributed_equivalence
    from common.two_processes import assert_two_processes_equal_one

    results, _ = launch_two_process_runs("distributed_equivalence.py", tiny_encoder_dir, tmp_path, TWO_PROCESS_RUNS)
    for run, args in TWO_PROCESS_RUNS.items():
        two = results[run]
        distributed_equivalence.run([str(tiny_encoder_dir), str(tmp_path / f"{run}-single.json"), *args])
        single = json.loads((tmp_path / f"{run}-single.json").read_text())
        assert single["world_size"] == 1
        assert_two_processes_equal_one(single, two)
        assert single["parameters"] != single["initial_parameters"]


def test_off_dropout_embeddings_follow_matryoshka_truncation() -> None:
    z1, z2, h0 = independent_views(dim=8)
    inputs = StepInputs(z1, z2, embeddings=[OFF_DROPOUT], off_dropout=h0).truncated(4)
    assert inputs[OFF_DROPOUT].shape == (6, 4)
    got = build_objective("simcsepp")(inputs).loss
    assert torch.allclose(got, naive_simcsepp(z1[:, :4], z2[:, :4], h0[:, :4], 0.05), atol=1e-10)
