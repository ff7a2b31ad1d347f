"""DCLR (Zhou et al., 2022): noise-based negatives tuned by gradient ascent, and instance weighting of false
negatives with a frozen complementary model."""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from ..distributed import broadcast_from_main
from ..number_ranges import NumberRange, check_setting
from ..registry import LOSS_FORMS, register_objective
from .base import NORMALIZE_EPS, ContrastiveObjective, NegativesOutput, check_temperature

PHI_MODES = ("absolute", "quantile")
MAX_NOISE_PER_SENTENCE = 100
"""Upper bound of k: the paper uses 1 to 5; far more noise vectors than sentences only costs memory."""
WEIGHTINGS = ("complementary", "self", "none")


class NoiseNegatives(nn.Module):
    """``round(k * B)`` Gaussian vectors ``N(0, sigma^2 I)`` shared by the batch, refined by gradient ascent.

    Each of ``ascent_steps`` steps moves every noise vector along its normalized gradient of the non-uniformity
    loss (Eq. 2-4)::

        L_U = mean_i -log( e^{sim(h_i, h_i+)/tau_u} / sum_j e^{sim(h_i, n_j)/tau_u} )
        n_j <- n_j + beta * g_j / ||g_j||_2,   g_j = dL_U/dn_j

    The sentence embeddings are detached, and so is the result: the ascent changes only the noise. ``g_j`` is
    computed in closed form (:meth:`uniformity_gradient`), not by ``torch.autograd.grad``: no graph is recorded, a
    ``torch.compile(fullgraph=True)`` step does not break at it, and it runs fewer operators. Note the scale
    the paper's defaults imply: a unit step of ``beta = 1e-3`` against vectors of norm ``sigma * sqrt(D)``
    (about 20 for D = 384) turns each vector by well under a thousandth of a radian.

    Args:
        k: noise vectors per sentence in the batch (``k >= 0``; 0 disables). Defaults to 1.
        sigma: standard deviation. Defaults to 1.
        ascent_steps: ``t``; 0 gives the paper's "random noise" ablation. Defaults to 4.
        ascent_lr: ``beta``. Defaults to 1e-3.
        tau_u: temperature of ``L_U``. Defaults to 0.05 (the main temperature; the paper gives no separate value).
    """

    def __init__(
        self, k: float = 1.0, sigma: float = 1.0, ascent_steps: int = 4, ascent_lr: float = 1e-3, tau_u: float = 0.05
    ) -> None:
        super().__init__()
        self.k = check_setting("k (noise negatives per sentence)", k, NumberRange(low=0, high=MAX_NOISE_PER_SENTENCE))
        self.sigma = check_setting("sigma", sigma, NumberRange(low=0, high=100, low_open=True))
        self.ascent_steps = check_setting("ascent_steps", ascent_steps, NumberRange(low=0, high=100, integer=True))
        # A negative step would descend L_U: the noise would become easy negatives.
        self.ascent_lr = check_setting("ascent_lr (beta)", ascent_lr, NumberRange(low=0, high=10, low_open=True))
        self.tau_u = check_temperature(tau_u, "tau_u")

    def uniformity_loss(self, anchors: torch.Tensor, positives: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """``L_U`` (Eq. 2) for normalized ``anchors``/``positives`` ``[B, D]`` and raw ``noise`` ``[K, D]``."""
        positive = (anchors * positives).sum(dim=1) / self.tau_u
        to_noise = anchors @ nn.functional.normalize(noise, dim=-1).T / self.tau_u
        return (torch.logsumexp(to_noise, dim=1) - positive).mean()

    def uniformity_gradient(
        self, anchors: torch.Tensor, positives: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L_U, dL_U/dnoise)``, a scalar and ``[K, D]``, for normalized ``anchors``/``positives`` ``[B, D]`` and
        raw ``noise`` ``[K, D]``, in closed form (no autograd). With ``u_j = n_j / ||n_j||``,
        ``S = A U^T / tau_u`` (``[B, K]``) and ``P = softmax(S)`` over each row::

            dL_U/du_j = sum_i P_ij h_i / (B tau_u)
            dL_U/dn_j = (dL_U/du_j - (dL_U/du_j . u_j) u_j) / ||n_j||    (the normalization's Jacobian)
        """
        scaled = anchors / self.tau_u
        to_noise, unit, norm = self._to_noise(scaled, noise)
        log_partition = torch.logsumexp(to_noise, dim=1)
        loss = (log_partition - (scaled * positives).sum(dim=1)).mean()
        return loss, self._tangent(torch.softmax(to_noise, dim=1), scaled, unit) / (anchors.shape[0] * norm)

    @staticmethod
    def _to_noise(scaled: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """For ``scaled = anchors / tau_u`` ``[B, D]`` and ``noise`` ``[K, D]``: the logits ``S = scaled U^T``
        ``[B, K]``, the unit noise ``U`` ``[K, D]`` and the clamped norms ``||n_j||`` ``[K, 1]``."""
        norm = torch.linalg.vector_norm(noise, dim=1, keepdim=True).clamp_min(NORMALIZE_EPS)
        unit = noise / norm
        return scaled @ unit.T, unit, norm

    @staticmethod
    def _tangent(probabilities: torch.Tensor, scaled: torch.Tensor, unit: torch.Tensor) -> torch.Tensor:
        """``B ||n_j|| dL_U/dn_j`` ``[K, D]`` from ``P = softmax(S)`` ``[B, K]``: the gradient up to a positive factor
        per row, which the ascent's normalization removes."""
        pulled = probabilities.T @ scaled  # B * dL_U/du: each row's softmax pulls the noise toward its anchor
        return pulled - (pulled * unit).sum(dim=1, keepdim=True) * unit

    def forward(self, anchors: torch.Tensor, positives: torch.Tensor, shared: bool = False) -> NegativesOutput:
        """Noise negatives ``[K, D]`` (detached) for normalized, detached ``anchors``/``positives`` ``[B, D]``, and
        ``L_U`` before and after the ascent (``uniformity_loss_before``/``_after``; none when ``K = 0``).

        ``shared=True`` (the batch is gathered from every process): the main process's draw is used everywhere,
        so every process refines, and contrasts against, the same noise.
        """
        count = round(self.k * anchors.shape[0])
        noise = torch.randn(count, anchors.shape[1], device=anchors.device, dtype=anchors.dtype)
        if self.sigma != 1:
            noise = noise * self.sigma
        if shared:
            noise = broadcast_from_main(noise)
        if count == 0:
            return NegativesOutput(noise)
        scaled, noise = anchors.detach() / self.tau_u, noise.detach()
        positive = (scaled * positives.detach()).sum(dim=1, keepdim=True)  # [B, 1]: sim(h_i, h_i+) / tau_u
        logs = {}
        for step in range(self.ascent_steps):
            to_noise, unit, _ = self._to_noise(scaled, noise)
            if step == 0:
                log_partition = torch.logsumexp(to_noise, dim=1, keepdim=True)
                logs["uniformity_loss_before"] = (log_partition - positive).mean()
            tangent = self._tangent(torch.softmax(to_noise, dim=1), scaled, unit)
            # n + beta * g / ||g|| in one addcdiv: the tangent is g up to a positive factor per row.
            length = torch.linalg.vector_norm(tangent, dim=1, keepdim=True).clamp_min(NORMALIZE_EPS)
            noise = torch.addcdiv(noise, tangent, length, value=self.ascent_lr)
        to_noise, _, _ = self._to_noise(scaled, noise)
        logs["uniformity_loss_after"] = (torch.logsumexp(to_noise, dim=1, keepdim=True) - positive).mean()
        logs.setdefault("uniformity_loss_before", logs["uniformity_loss_after"])
        return NegativesOutput(noise, logs)


class InstanceWeighting(nn.Module):
    """Eq. 5: weight 0 for a negative the complementary model finds too similar, 1 otherwise.

    ``forward(similarities [B, B]) -> keep [B, B]`` (bool). A weight-0 negative is removed from the
    denominator (its logit is masked out), unlike the official code, which multiplies the logit by the weight and
    so leaves ``e^0 = 1`` in the sum. Noise negatives are always kept (weight 1): they are not sentences, a
    complementary model cannot score them, and the paper treats them as highly confident negatives.

    Args:
        phi: the threshold. ``phi_mode="absolute"``: mask ``sim_C >= phi`` (the paper; ``phi`` in ``(0, 1]``).
            ``phi_mode="quantile"``: mask the negatives above the ``phi``-quantile of the batch's off-diagonal
            ``sim_C``, i.e. the top ``1 - phi`` share, whatever the complementary model's similarity scale.
        phi_mode: ``"absolute"`` (default) or ``"quantile"``.
    """

    def __init__(self, phi: float = 0.9, phi_mode: str = "absolute") -> None:
        super().__init__()
        if phi_mode not in PHI_MODES:
            raise ValueError(f"Unknown phi_mode {phi_mode!r}; valid modes are: {', '.join(PHI_MODES)}.")
        self.phi, self.phi_mode = check_setting("phi", phi, NumberRange(low=0, high=1, low_open=True)), phi_mode

    def forward(self, similarities: torch.Tensor) -> torch.Tensor:
        if self.phi_mode == "absolute":
            return similarities < self.phi
        batch_size = similarities.shape[0]
        # The B(B-1) off-diagonal entries by a view (row i of the flat matrix after its diagonal entry, B+1 long,
        # minus the next diagonal entry), not a boolean mask, whose result would be sized on the host (a sync).
        off_diagonal = similarities.flatten()[1:].view(batch_size - 1, batch_size + 1)[:, :-1].reshape(-1)
        return similarities <= linear_quantile(off_diagonal.float(), self.phi).to(similarities.dtype)


def linear_quantile(values: torch.Tensor, q: float) -> torch.Tensor:
    """The ``q``-quantile of 1-D ``values`` with linear interpolation, as ``torch.quantile`` computes it.

    ``torch.quantile`` refuses inputs above 2^24 elements, which a global batch above 4096 reaches (its B(B-1)
    off-diagonal similarities); two ``kthvalue`` selections have no such limit and skip the full sort.
    """
    position = q * (values.numel() - 1)
    lower = int(position)  # floor: position >= 0
    low = torch.kthvalue(values, lower + 1).values
    if lower + 1 == values.numel():
        return low
    high = torch.kthvalue(values, lower + 2).values
    return low + (position - lower) * (high - low)


@register_objective("dclr")
class DCLRLoss(ContrastiveObjective):
    """DCLR's debiased contrastive loss (Eq. 6) and its Table 2 ablations.

    Negatives: the in-batch ones, instance-weighted, plus ``k * B`` noise negatives. Variants:
    ``k=0`` (w/o noise), ``weighting="none"`` (w/o instance weighting), ``ascent_steps=0`` (random noise),
    ``weighting="self"`` (the live model, detached, as its own complementary model). The knowledge-distillation
    baseline is the separate ``"distill"`` term. ``loss_form="focal"`` gives "DCLR + Focal-InfoNCE"
    (Focal-InfoNCE, Table 3).

    The positive stays in the denominator. Eq. 6 as printed sums only the weighted negatives there::

        L = -log( e^{sim(h_i, h_i+)/tau} / sum_{h- in noise and in-batch} alpha_{h-} e^{sim(h_i, h-)/tau} )

    hf_cse adds ``e^{sim(h_i, h_i+)/tau}`` to that denominator, as DCLR's official code (a cross-entropy over the
    row, built on SimCSE's) and SimCSE do: with ``k=0`` and ``weighting="none"`` the loss is exactly SimCSE's. Without
    it, the gradient on the positive similarity would stay ``-1/tau`` however far it already is above every negative;
    with it, that gradient fades as the positive takes the row's probability.

    Args:
        temperature: defaults to 0.05.
        k, sigma, ascent_steps, ascent_lr, tau_u: see :class:`NoiseNegatives`.
        phi, phi_mode: see :class:`InstanceWeighting`.
        weighting: ``"complementary"`` (default), ``"self"`` or ``"none"``.
        loss_form: ``"infonce"`` (default), ``"focal"`` or ``"debiased"``.
        hardness: Focal-InfoNCE's ``m``, for ``loss_form="focal"`` (``None``: that form's default, 0.3).
        tau_plus: DCL's ``tau+``, for ``loss_form="debiased"`` (``None``: that form's default, 0.1).

    Raises:
        ValueError: ``hardness`` or ``tau_plus`` given with a loss form that does not use it (it would be ignored).
    """

    citation = """@inproceedings{zhou2022debiased,
    title = "Debiased Contrastive Learning of Unsupervised Sentence Representations",
    author = "Zhou, Kun and Zhang, Beichen and Zhao, Xin and Wen, Ji-Rong",
    booktitle = "Proceedings of the 60th Annual Meeting of the Association for Computational Linguistics",
    year = "2022",
    pages = "6120--6130",
}"""

    def __init__(
        self,
        temperature: float = 0.05,
        k: float = 1.0,
        sigma: float = 1.0,
        ascent_steps: int = 4,
        ascent_lr: float = 1e-3,
        tau_u: float = 0.05,
        phi: float = 0.9,
        phi_mode: str = "absolute",
        weighting: str = "complementary",
        loss_form: str = "infonce",
        hardness: float | None = None,
        tau_plus: float | None = None,
    ) -> None:
        if weighting not in WEIGHTINGS:
            raise ValueError(f"Unknown weighting {weighting!r}; valid values are: {', '.join(WEIGHTINGS)}.")
        # Each form takes the hyper-parameters it defines (focal: hardness, debiased: tau_plus) besides temperature;
        # one given to a form that does not define it would be silently ignored.
        form_parameters = inspect.signature(LOSS_FORMS[LOSS_FORMS.check(loss_form)]).parameters
        form_hparams = {k: v for k, v in {"hardness": hardness, "tau_plus": tau_plus}.items() if v is not None}
        for name in sorted(form_hparams.keys() - form_parameters.keys()):
            users = [form for form in LOSS_FORMS if name in inspect.signature(LOSS_FORMS[form]).parameters]
            raise ValueError(
                f"{name} is a setting of loss_form {' or '.join(map(repr, users))}, and loss_form is {loss_form!r}, "
                f"which would ignore it: drop {name}, or set loss_form."
            )
        super().__init__(
            form=LOSS_FORMS.build(loss_form, temperature=temperature, **form_hparams),
            extra_negatives=NoiseNegatives(k, sigma, ascent_steps, ascent_lr, tau_u) if k > 0 else None,
            weighting=InstanceWeighting(phi, phi_mode) if weighting != "none" else None,
            self_weighting=weighting == "self",
        )
        check_setting("k (noise negatives per sentence)", k, NumberRange(low=0, high=MAX_NOISE_PER_SENTENCE))
        self.hparams = {
            "k": k,
            "sigma": sigma,
            "ascent_steps": ascent_steps,
            "ascent_lr": ascent_lr,
            "tau_u": tau_u,
            "phi": phi,
            "phi_mode": phi_mode,
            "weighting": weighting,
            "loss_form": loss_form,
        }

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), **self.hparams}
