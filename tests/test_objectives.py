"""Objectives against naive per-row implementations of the papers' formulas, gradients included."""

from __future__ import annotations

import math

import pytest
import torch
from common.naive_losses import (
    complementary,
    cos,
    loss_of,
    naive_dcl,
    naive_dclr,
    naive_dclr_form,
    naive_focal,
    naive_simcse,
    run,
    views,
)

from hf_cse.objectives import (
    OBJECTIVES,
    AuxiliaryInputs,
    DistillationLoss,
    InstanceWeighting,
    NoiseNegatives,
    RecallLoss,
    SimCSELoss,
    TwoWayMarginLoss,
    build_auxiliary_loss,
    build_objective,
)
from hf_cse.objectives.auxiliary import _SquaredDistance
from hf_cse.objectives.dclr import linear_quantile


@pytest.mark.parametrize("temperature", [0.05, 0.1, 1.0])
def test_simcse_matches_naive_loop(temperature: float) -> None:
    torch.manual_seed(0)
    z1, z2 = torch.randn(6, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64)
    got = loss_of(SimCSELoss(temperature), z1, z2)
    assert torch.allclose(got, naive_simcse(z1, z2, temperature), atol=1e-5)


def test_simcse_gradients_match_naive_loop() -> None:
    torch.manual_seed(1)
    z1 = torch.randn(5, 7, requires_grad=True)
    z2 = torch.randn(5, 7, requires_grad=True)
    grads = torch.autograd.grad(loss_of(SimCSELoss(0.05), z1, z2), (z1, z2))
    naive_grads = torch.autograd.grad(naive_simcse(z1, z2, 0.05), (z1, z2))
    for got, expected in zip(grads, naive_grads, strict=True):
        assert torch.allclose(got, expected, atol=1e-5)


def test_simcse_gradcheck_float64() -> None:
    torch.manual_seed(2)
    z1 = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    z2 = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: loss_of(SimCSELoss(0.05), a, b), (z1, z2))


def test_simcse_perfect_positives_approach_zero_loss() -> None:
    z = torch.eye(4) * 3
    assert loss_of(SimCSELoss(0.05), z, z).item() < 1e-6


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_simcse_finite_under_low_precision_inputs_and_autocast(dtype: torch.dtype) -> None:
    torch.manual_seed(3)
    # Near-identical views give logits close to 1/0.05 = 20 on the diagonal: e^20 overflows float16.
    z1 = torch.randn(16, 32)
    z2 = z1 + 1e-3 * torch.randn(16, 32)
    with torch.autocast(device_type="cpu", dtype=dtype):
        loss = loss_of(SimCSELoss(0.05), z1.to(dtype), z2.to(dtype))
    assert loss.dtype == torch.float32
    assert math.isfinite(loss.item())
    assert torch.allclose(loss, naive_simcse(z1.to(dtype).float(), z2.to(dtype).float(), 0.05), atol=1e-4)


def test_single_sentence_batch_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="at least 2 sentences"):
        loss_of(SimCSELoss(), torch.randn(1, 4), torch.randn(1, 4))


def test_mismatched_views_are_an_error() -> None:
    with pytest.raises(ValueError, match="two views of shape"):
        loss_of(SimCSELoss(), torch.randn(3, 4), torch.randn(2, 4))


def test_registry_builds_by_name_and_rejects_unknowns() -> None:
    assert "simcse" in OBJECTIVES
    objective = build_objective("simcse", temperature=0.1)
    assert isinstance(objective, SimCSELoss) and objective.get_config_dict() == {"temperature": 0.1}
    with pytest.raises(ValueError, match="valid objectives are: .*simcse"):
        build_objective("simcsee")
    with pytest.raises(ValueError, match="accepts: \\['temperature', 'hard_negative_weight', 'symmetric'\\]"):
        build_objective("simcse", tau=0.1)
    with pytest.raises(ValueError, match="temperature must be a number in \\[0.001, 10\\], got 0.0"):
        build_objective("simcse", temperature=0.0)


# --- DCL, Focal-InfoNCE, DCLR against per-row implementations of the papers' formulas -------------------------


@pytest.mark.parametrize("close", [False, True], ids=["debiased-branch", "floor-branch"])
@pytest.mark.parametrize("tau_plus", [0.0, 0.1, 0.3])
def test_dcl_matches_naive_with_gradients(close: bool, tau_plus: float) -> None:
    z1, z2 = views(4, close=close)
    loss = build_objective("dcl", temperature=0.05, tau_plus=tau_plus)
    got, expected = loss_of(loss, z1, z2), naive_dcl(z1, z2, 0.05, tau_plus)
    assert torch.allclose(got, expected, atol=1e-5)
    for a, b in zip(torch.autograd.grad(got, (z1, z2)), torch.autograd.grad(expected, (z1, z2)), strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    assert torch.autograd.gradcheck(lambda a, b: loss_of(loss, a, b), (z1, z2))


def naive_dcl_floor_share(z1, z2, t, tau_plus):
    """Share of anchors whose debiased negative sum is at or below the floor N e^{-1/t} (Chuang et al. 2020)."""
    at_floor = []
    for i in range(z1.shape[0]):
        pos = torch.exp(cos(z1[i], z2[i]) / t)
        negs = [torch.exp(cos(z1[i], z2[j]) / t) for j in range(z1.shape[0]) if j != i]
        n = len(negs)
        at_floor.append(float((sum(negs) - n * tau_plus * pos) / (1 - tau_plus) <= n * math.exp(-1 / t)))
    return sum(at_floor) / len(at_floor)


@pytest.mark.parametrize(("close", "temperature"), [(True, 0.05), (False, 0.05), (False, 1.0), (True, 1.0)])
def test_dcl_logs_the_share_of_anchors_at_the_floor(close: bool, temperature: float) -> None:
    z1, z2 = views(6, batch=8, close=close)
    loss = build_objective("dcl", temperature=temperature, tau_plus=0.1)
    logs = run(loss, z1, z2).logs
    expected = naive_dcl_floor_share(z1.detach(), z2.detach(), temperature, 0.1)
    assert logs["dcl_floor_share"].item() == pytest.approx(expected)
    if close and temperature == 0.05:  # near-identical views at SimCSE's temperature: every anchor at the floor
        assert expected == 1.0


def test_dcl_with_several_positive_views_averages_pos_in_the_debiasing_term() -> None:
    z1, z2 = views(5)
    z3 = (z1 + 0.3 * torch.randn_like(z1)).detach().requires_grad_(True)
    loss = build_objective("dcl", temperature=0.1, tau_plus=0.1, num_positive_views=2)
    got = loss_of(loss, z1, z2, extra_positives=[z3])
    assert torch.allclose(got, naive_dcl(z1, z2, 0.1, 0.1, extra_positives=[z3]), atol=1e-5)
    assert torch.autograd.gradcheck(lambda a, b, c: loss_of(loss, a, b, extra_positives=[c]), (z1, z2, z3))
    with pytest.raises(ValueError, match="one positive view per anchor"):
        loss_of(build_objective("simcse"), z1, z2, extra_positives=[z3])


@pytest.mark.parametrize("hardness", [0.0, 0.3])
def test_focal_infonce_matches_naive_with_gradients(hardness: float) -> None:
    z1, z2 = views(6)
    loss = build_objective("focal_infonce", temperature=0.05, hardness=hardness)
    got, expected = loss_of(loss, z1, z2), naive_focal(z1, z2, 0.05, hardness)
    assert torch.allclose(got, expected, atol=1e-5)
    for a, b in zip(torch.autograd.grad(got, (z1, z2)), torch.autograd.grad(expected, (z1, z2)), strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    assert torch.autograd.gradcheck(lambda a, b: loss_of(loss, a, b), (z1, z2))


def test_dclr_weighting_without_noise_matches_naive_and_blocks_gradient() -> None:
    z1, z2 = views(7)
    sims = complementary(0)
    loss = build_objective("dclr", temperature=0.05, k=0, phi=0.9)
    output = run(loss, z1, z2, complementary_sim=sims)
    assert torch.allclose(output.loss, naive_dclr(z1, z2, 0.05, sims < 0.9, []), atol=1e-5)
    assert output.logs["masked_negative_share"].item() == pytest.approx(3 / 30)
    assert torch.autograd.gradcheck(lambda a, b: loss_of(loss, a, b, complementary_sim=sims), (z1, z2))
    # A negative removed by the weighting gets exactly zero gradient through its logit.
    positive = torch.rand(3, 1, dtype=torch.float64)
    negative = torch.rand(3, 3, dtype=torch.float64, requires_grad=True)
    keep = torch.tensor([[False, False, True], [True, False, True], [True, True, False]])
    for name in ("dclr", "focal_infonce", "dcl"):
        form = build_objective(name, **({"k": 0} if name == "dclr" else {})).form
        (gradient,) = torch.autograd.grad(form(positive, negative, keep).losses.sum(), negative)
        assert torch.all(gradient[~keep] == 0)
        if name != "dcl":  # DCL's floor branch N e^{-1/t} legitimately zeroes kept negatives' gradient too
            assert torch.all(gradient[keep] != 0)


def test_dclr_with_noise_matches_naive_on_the_same_noise() -> None:
    z1, z2 = views(8)
    sims = complementary(1)
    loss = build_objective("dclr", temperature=0.05, k=1.5, phi=0.9)
    torch.manual_seed(123)
    got = loss_of(loss, z1, z2, complementary_sim=sims)
    torch.manual_seed(123)
    anchors = torch.nn.functional.normalize(z1.detach(), dim=-1)
    positives = torch.nn.functional.normalize(z2.detach(), dim=-1)
    noise = loss.extra_negatives(anchors, positives).negatives
    assert noise.shape == (9, 5)
    assert torch.allclose(got, naive_dclr(z1, z2, 0.05, sims < 0.9, list(noise)), atol=1e-5)


@pytest.mark.parametrize("loss_form", ["focal", "debiased"])
def test_dclr_negatives_under_other_loss_forms_match_naive_with_gradients(loss_form: str) -> None:
    z1, z2 = views(10)
    sims = complementary(3)
    loss = build_objective("dclr", temperature=0.2, k=1.0, phi=0.9, loss_form=loss_form)

    def seeded(a, b):
        torch.manual_seed(7)  # the same noise at every call
        return loss_of(loss, a, b, complementary_sim=sims)

    got = seeded(z1, z2)
    torch.manual_seed(7)
    noise = loss.extra_negatives(
        torch.nn.functional.normalize(z1.detach(), dim=-1), torch.nn.functional.normalize(z2.detach(), dim=-1)
    ).negatives
    expected = naive_dclr_form(z1, z2, 0.2, sims < 0.9, list(noise), loss_form)
    assert torch.allclose(got, expected, atol=1e-5)
    for a, b in zip(torch.autograd.grad(got, (z1, z2)), torch.autograd.grad(expected, (z1, z2)), strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    # Numerically, only with random noise (ascent_steps=0): the ascent reads the anchors, so a finite difference
    # would also move the noise, which the loss treats as a constant (it is detached).
    random_noise = build_objective("dclr", temperature=0.2, k=1.0, phi=0.9, loss_form=loss_form, ascent_steps=0)
    assert torch.autograd.gradcheck(
        lambda a, b: (torch.manual_seed(7), loss_of(random_noise, a, b, complementary_sim=sims))[1], (z1, z2)
    )


def test_each_ascent_step_increases_the_non_uniformity_loss() -> None:
    z1, z2 = views(9, batch=8, dim=16)
    anchors = torch.nn.functional.normalize(z1.detach(), dim=-1)
    positives = torch.nn.functional.normalize(z2.detach(), dim=-1)
    values = []
    for steps in range(5):
        noise_module = NoiseNegatives(k=1, sigma=1.0, ascent_steps=steps, ascent_lr=0.05, tau_u=0.05)
        torch.manual_seed(0)
        output = noise_module(anchors, positives)
        values.append(noise_module.uniformity_loss(anchors, positives, output.negatives).item())
    assert all(later > earlier for earlier, later in zip(values, values[1:], strict=False))
    assert output.logs["uniformity_loss_after"] > output.logs["uniformity_loss_before"]
    assert output.logs["uniformity_loss_after"].item() == pytest.approx(values[-1])


def test_self_weighting_uses_the_live_similarities_without_gradient() -> None:
    z1, z2 = views(10, close=True)
    loss = build_objective("dclr", k=0, weighting="self", phi=0.5)
    assert not loss.needs_complementary_similarities
    live = (torch.nn.functional.normalize(z1, dim=-1) @ torch.nn.functional.normalize(z2, dim=-1).T).detach()
    assert torch.allclose(loss_of(loss, z1, z2), naive_dclr(z1, z2, 0.05, live < 0.5, []), atol=1e-5)


def test_quantile_phi_masks_the_top_share() -> None:
    sims = torch.rand(64, 64)
    keep = InstanceWeighting(phi=0.9, phi_mode="quantile")(sims)
    off_diagonal = ~torch.eye(64, dtype=torch.bool)
    assert (~keep[off_diagonal]).float().mean().item() == pytest.approx(0.1, abs=0.01)
    assert InstanceWeighting(phi=1.0, phi_mode="quantile")(sims)[off_diagonal].all()


@pytest.mark.parametrize("q", [0.0, 0.25, 0.9, 0.999, 1.0])
@pytest.mark.parametrize("size", [1, 2, 7, 1000])
def test_linear_quantile_matches_torch_quantile(q: float, size: int) -> None:
    values = torch.randn(size)
    assert torch.allclose(linear_quantile(values, q), torch.quantile(values, q), atol=1e-6)


def test_quantile_phi_handles_a_global_batch_above_torch_quantile_limit() -> None:
    sims = torch.rand(4100, 4100)  # 16.8M off-diagonal similarities: torch.quantile raises above 2^24
    keep = InstanceWeighting(phi=0.99, phi_mode="quantile")(sims)
    off_diagonal = ~torch.eye(4100, dtype=torch.bool)
    assert (~keep[off_diagonal]).float().mean().item() == pytest.approx(0.01, abs=1e-3)


def test_fp16_loss_scaling_leaves_dclr_noise_ascent_and_gradients_unchanged() -> None:
    """The ascent runs inside forward, on detached inputs, before any scaling: a GradScaler changes nothing of it."""
    encoder = torch.nn.Linear(8, 16)
    inputs = torch.randn(12, 8)
    dclr = build_objective("dclr", temperature=0.05, weighting="self", ascent_steps=4)
    results = []
    for scaler in (None, torch.amp.GradScaler("cpu", init_scale=2.0**16)):
        encoder.zero_grad()
        torch.manual_seed(11)
        with torch.autocast(device_type="cpu", dtype=torch.float16):
            z = encoder(torch.cat([inputs, inputs + 0.01]))
            output = run(dclr, *z.split(12))
            loss = output.loss
        (loss if scaler is None else scaler.scale(loss)).backward()
        if scaler is not None:
            optimizer = torch.optim.SGD(encoder.parameters(), lr=0.0)
            scaler.unscale_(optimizer)
            assert scaler.get_scale() == 2.0**16  # no inf/nan found
        results.append((loss.item(), output.logs, encoder.weight.grad.clone()))
    (loss_plain, logs_plain, grad_plain), (loss_scaled, logs_scaled, grad_scaled) = results
    assert loss_plain == loss_scaled
    assert logs_plain["uniformity_loss_after"] > logs_plain["uniformity_loss_before"]
    assert logs_plain["uniformity_loss_after"] == logs_scaled["uniformity_loss_after"]
    assert torch.isfinite(grad_scaled).all() and torch.allclose(grad_plain, grad_scaled, rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_auxiliary_terms_are_finite_under_low_precision(dtype: torch.dtype) -> None:
    torch.manual_seed(4)
    h, h_n, h_p = (torch.randn(16, 32).to(dtype).requires_grad_(True) for _ in range(3))
    model = torch.nn.Linear(4, 4).to(dtype)
    inputs = AuxiliaryInputs(
        h,
        h_p,
        model,
        complementary_sim=complementary(5, batch=16).to(dtype),
        negations=h_n,
        paraphrases=h_p,
        has_pair=torch.ones(16, dtype=torch.bool),
    )
    recall = RecallLoss()
    recall.bind(model)
    with torch.no_grad():
        model.weight.add_(0.5)
    for term in (TwoWayMarginLoss(), DistillationLoss(temperature=0.05), recall):
        with torch.autocast(device_type="cpu", dtype=dtype):
            value = term(inputs).loss
        assert value.dtype == torch.float32 and math.isfinite(value.item()), term.name
        parameters = (
            (h, h_n, h_p) if term.name == "margin" else (h, h_p) if term.name == "distill" else (model.weight,)
        )
        assert all(torch.isfinite(g).all() for g in torch.autograd.grad(value, parameters)), term.name


@pytest.mark.parametrize(
    ("hparams", "match"),
    [
        ({"k": -1}, "k \\(noise negatives per sentence\\) must be a number in \\[0, 100\\]"),
        ({"phi": 0.0}, "phi must be a number in \\(0, 1\\]"),
        ({"phi": 1.5}, "phi must be a number in \\(0, 1\\]"),
        ({"phi_mode": "relative"}, "valid modes are: absolute, quantile"),
        ({"loss_form": "hinge"}, "Unknown loss form .hinge.; valid loss forms are: debiased, focal, infonce"),
        ({"weighting": "teacher"}, "valid values are: complementary, self, none"),
        ({"ascent_lr": -1e-3}, "ascent_lr \\(beta\\) must be a number in \\(0, 10\\]"),
    ],
)
def test_bad_dclr_settings_are_clear_errors(hparams: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build_objective("dclr", **hparams)


def test_dclr_without_complementary_similarities_says_what_it_needs() -> None:
    z1, z2 = views(11)
    with pytest.raises(ValueError, match="needs complementary_sim"):
        loss_of(build_objective("dclr"), z1, z2)


# --- auxiliary terms: OssCSE's margin and recall, DCLR's distillation baseline ---------------------------------


def test_two_way_margin_matches_naive_and_skips_rows_without_a_pair() -> None:
    h, h_n, h_p = (torch.randn(5, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    has_pair = torch.tensor([True, False, True, True, False])
    term = TwoWayMarginLoss(alpha=0.05, beta=0.2)
    output = term(AuxiliaryInputs(h, h, torch.nn.Linear(1, 1), negations=h_n, paraphrases=h_p, has_pair=has_pair))
    got = output.loss
    rows = []
    for i in (0, 2, 3):
        s_n, s_p = cos(h[i], h_n[i]), cos(h[i], h_p[i])
        rows.append(torch.clamp(s_n - s_p + 0.05, min=0) + torch.clamp(s_p - s_n - 0.2, min=0))
    assert torch.allclose(got.double(), torch.stack(rows).mean(), atol=1e-6)
    assert output.logs["margin_rows_skipped"].item() == 2
    nobody = AuxiliaryInputs(h, h, torch.nn.Linear(1, 1), negations=h_n, paraphrases=h_p, has_pair=has_pair & False)
    assert term(nobody).loss.item() == 0.0


def test_recall_loss_is_half_gamma_squared_distance_to_the_initial_weights() -> None:
    model = torch.nn.Linear(3, 2)
    term = RecallLoss(gamma=2e-3)
    term.bind(model)
    inputs = AuxiliaryInputs(torch.zeros(2, 2), torch.zeros(2, 2), model)
    assert term(inputs).loss.item() == 0.0
    with torch.no_grad():
        model.weight.add_(0.5)
    value = term(inputs).loss
    assert value.item() == pytest.approx(0.5 * 2e-3 * 6 * 0.25)
    (gradient,) = torch.autograd.grad(value, model.weight)
    assert torch.allclose(gradient, torch.full_like(gradient, 2e-3 * 0.5))
    with pytest.raises(ValueError, match="bind\\(model\\)"):
        RecallLoss()(inputs)


def test_recall_loss_and_its_gradient_match_a_loop_over_the_weights() -> None:
    """The multi-tensor form (one ``_foreach`` operator per stage) against a loop over the weights; its autograd
    function passes gradcheck in float64."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    model[2].bias.requires_grad_(False)  # a frozen weight is no part of the term
    term = RecallLoss(gamma=0.3)
    term.bind(model)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter))
    inputs = AuxiliaryInputs(torch.zeros(2, 2), torch.zeros(2, 2), model)
    trainable = [p for p in model.parameters() if p.requires_grad]
    naive = 0.5 * 0.3 * sum(((p - term.initial[n]) ** 2).sum() for n, p in model.named_parameters()
                            if p.requires_grad)  # fmt: skip
    value = term(inputs).loss
    assert value.item() == pytest.approx(naive.item(), rel=1e-6)
    for got, expected in zip(
        torch.autograd.grad(value, trainable), torch.autograd.grad(naive, trainable), strict=True
    ):
        torch.testing.assert_close(got, expected)
    initials = [term.initial[n].double() for n, p in model.named_parameters() if p.requires_grad]
    assert torch.autograd.gradcheck(
        lambda *weights: _SquaredDistance.apply(initials, *weights),
        [p.detach().double().requires_grad_() for p in trainable],
    )


def test_recall_loss_follows_the_model_to_its_device_and_rejects_a_wrapped_model() -> None:
    model = torch.nn.Linear(3, 2)
    term = RecallLoss()
    term.bind(model)  # the trainer binds before the Trainer places the model
    model.to("meta")
    assert term(AuxiliaryInputs(torch.zeros(2, 2), torch.zeros(2, 2), model)).loss.device.type == "meta"
    wrapped = torch.nn.Module()
    wrapped.module = model  # DDP's naming: "module.weight"
    with pytest.raises(ValueError, match="none of the model's parameters has a name recorded by bind"):
        term(AuxiliaryInputs(torch.zeros(2, 2), torch.zeros(2, 2), wrapped))


def test_distillation_is_the_kl_between_teacher_and_student_similarity_distributions() -> None:
    z1, z2 = views(12)
    teacher = complementary(2)
    got = DistillationLoss(temperature=0.1)(
        AuxiliaryInputs(z1, z2, torch.nn.Linear(1, 1), complementary_sim=teacher)
    ).loss
    expected = []
    for i in range(6):
        p = torch.softmax(teacher[i] / 0.1, dim=0)
        q = torch.softmax(torch.stack([cos(z1[i], z2[j]) for j in range(6)]) / 0.1, dim=0)
        expected.append((p * (p.log() - q.log())).sum())
    assert torch.allclose(got, torch.stack(expected).mean(), atol=1e-6)


def test_unknown_auxiliary_loss_lists_the_valid_ones() -> None:
    with pytest.raises(
        ValueError, match="valid auxiliary losses are: bml, dimension_contrast, distill, margin, recall"
    ):
        build_auxiliary_loss("contrast")


@pytest.mark.parametrize(
    ("name", "hparams", "match"),
    [
        ("simcse", {"temperature": math.inf}, "temperature must be a number in \\[0.001, 10\\], got inf"),
        ("simcse", {"temperature": 1e-30}, "temperature must be a number in \\[0.001, 10\\], got 1e-30"),
        ("simcse", {"temperature": math.nan}, "temperature must be a number in \\[0.001, 10\\], got nan"),
        ("simcse", {"temperature": "0.05"}, "temperature must be a number in \\[0.001, 10\\], got '0.05'"),
        ("focal_infonce", {"hardness": -5}, "hardness must be a number in \\[0, 1\\], got -5"),
        ("dcl", {"tau_plus": math.nan}, "tau_plus must be a number in \\[0, 1\\), got nan"),
        ("dcl", {"num_positive_views": 2.5}, "num_positive_views must be an integer in \\[1, 16\\], got 2.5"),
        ("dclr", {"sigma": math.inf}, "sigma must be a number in \\(0, 100\\], got inf"),
        ("dclr", {"ascent_steps": 1000}, "ascent_steps must be an integer in \\[0, 100\\], got 1000"),
        ("dclr", {"tau_u": 0.0}, "tau_u must be a number in \\[0.001, 10\\], got 0.0"),
        ("dclr", {"loss_form": "focal", "hardness": 2}, "hardness must be a number in \\[0, 1\\], got 2"),
    ],
)
def test_hyperparameters_outside_their_range_are_clear_errors(name: str, hparams: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build_objective(name, **hparams)


@pytest.mark.parametrize(
    ("name", "hparams", "match"),
    [
        ("margin", {"alpha": 5}, "alpha must be a number in \\[0, 2\\], got 5"),
        ("margin", {"beta": -0.1}, "beta must be a number in \\[0, 2\\], got -0.1"),
        ("recall", {"gamma": math.inf}, "gamma must be a number in \\[0, 1\\], got inf"),
        ("distill", {"temperature": 100}, "temperature must be a number in \\[0.001, 10\\], got 100"),
    ],
)
def test_auxiliary_hyperparameters_outside_their_range_are_clear_errors(name: str, hparams: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build_auxiliary_loss(name, **hparams)
