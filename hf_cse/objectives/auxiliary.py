"""Loss terms added on top of a contrastive objective, each with a weight: ``L = l_c + sum_k w_k * l_k``.

They all read one :class:`~hf_cse.objectives.contract.StepInputs` over this process's rows (``AuxiliaryInputs``
is that class) and return an :class:`~hf_cse.objectives.contract.ObjectiveOutput`, so the trainer combines any of
them with any objective in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import nn

from ..errors import UsageError
from ..number_ranges import NumberRange, check_setting
from ..registry import AUXILIARY_LOSSES, INPUT_PROVIDERS, register_auxiliary_loss
from .base import ContrastiveObjective, check_temperature, normalized
from .contract import ObjectiveOutput, StepInputs

AuxiliaryInputs = StepInputs
"""What an auxiliary term reads: the step's :class:`~hf_cse.objectives.contract.StepInputs` over this process's
rows. ``anchors``/``positives`` are this process's views ``[B, D]``, ``model`` the bare model (no DDP or
``torch.compile`` wrapper); the values are the input providers' for these rows, e.g. ``complementary_sim``
``[B, B]`` (``complementary_similarities``), ``negations``/``paraphrases`` ``[B, D]`` and ``has_pair`` ``[B]``
(``negations_and_paraphrases``)."""


class AuxiliaryLoss(nn.Module):
    """Base class: ``forward(inputs: AuxiliaryInputs) -> ObjectiveOutput`` (a scalar loss and its diagnostics).

    Registered with :func:`~hf_cse.registry.register_auxiliary_loss` (which sets ``name``); ``required_inputs``
    names the input providers (:mod:`hf_cse.inputs`) whose values the term reads from its inputs.
    """

    name: ClassVar[str]
    required_inputs: ClassVar[tuple[str, ...]] = ()
    citation: ClassVar[str] = ""

    def bind(self, model: nn.Module) -> None:
        """Called once with the model before training (e.g. to remember its initial weights)."""

    def get_config_dict(self) -> dict[str, Any]:
        return {}


OSSCSE_CITATION = """@inproceedings{shi2023osscse,
    title = "{O}ss{CSE}: Overcoming Surface Structure Bias in Contrastive Learning for Unsupervised Sentence
             Embedding",
    booktitle = "Proceedings of the 2023 Conference on Empirical Methods in Natural Language Processing",
    year = "2023",
}"""


@register_auxiliary_loss("margin")
class TwoWayMarginLoss(AuxiliaryLoss):
    """OssCSE's two-way max-margin term over each anchor's negation ``h_n`` and paraphrase ``h_p``::

        l_m = max(sim(h, h_n) - sim(h, h_p) + alpha, 0) + max(sim(h, h_p) - sim(h, h_n) - beta, 0)

    The paraphrase must be closer than the negation by at least ``alpha`` but by no more than ``beta``. Averaged
    over the rows that have both (others are skipped and counted in the output's ``logs["margin_rows_skipped"]``);
    0 when none has.

    Args:
        alpha: defaults to 0.05.
        beta: defaults to 0.2.
    """

    required_inputs = ("negations_and_paraphrases",)
    citation = OSSCSE_CITATION

    def __init__(self, alpha: float = 0.05, beta: float = 0.2) -> None:
        super().__init__()
        # Differences of two cosine similarities lie in [-2, 2]: a larger margin can never be met.
        margin = NumberRange(low=0, high=2)
        self.alpha, self.beta = check_setting("alpha", alpha, margin), check_setting("beta", beta, margin)

    def forward(self, inputs: AuxiliaryInputs) -> ObjectiveOutput:
        has_pair = inputs.tensor("has_pair")
        # A weighted mean over every row instead of `rows[has_pair]` and an `if has_pair.any()`: both would read
        # the mask on the host (a device synchronization per step). Rows without a pair hold zero vectors, which
        # normalize to 0 (no NaN), and weigh 0; with no pair at all the sum is 0 over a clamped count of 1.
        with torch.autocast(device_type=inputs.anchors.device.type, enabled=False):
            # Anchors, negations and paraphrases normalized at once, both pairs scored together ([3, B, D] -> [2, B]).
            units = normalized(torch.stack([inputs.anchors, inputs.tensor("negations"), inputs.tensor("paraphrases")]))
            anchor, pairs = units.split([1, 2])  # a split, whose backward is one cat (indexing's is one per index)
            to_negation, to_paraphrase = (anchor * pairs).sum(dim=2)
            gap = to_negation - to_paraphrase
            lower = torch.relu(gap + self.alpha)
            upper = torch.relu(-self.beta - gap)
            weight = has_pair.to(lower.dtype)
            count = weight.sum()
            logs = {"margin_rows_skipped": has_pair.shape[0] - count.detach()}
            return ObjectiveOutput(torch.dot(lower + upper, weight) / count.clamp(min=1), logs)

    def get_config_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "beta": self.beta}


class _SquaredDistance(torch.autograd.Function):
    """``sum_k ||theta_k - theta*_k||^2`` over a list of weights, with multi-tensor (``_foreach``) operators forward
    and backward: a handful of operators a step for all ~100 weights of a BERT instead of a subtraction, square and
    sum each, and their backwards (~750 operators, each a kernel launch on a GPU; ``benchmarks/loss_ops.py``)."""

    @staticmethod
    def forward(ctx: Any, initials: list[torch.Tensor], *parameters: torch.Tensor) -> torch.Tensor:
        differences = torch._foreach_sub(list(parameters), initials)
        ctx.save_for_backward(*differences)
        return torch.stack(torch._foreach_norm(differences)).square().sum()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        # d/d theta ||theta - theta*||^2 = 2 (theta - theta*); no gradient for the recorded initial weights.
        return (None, *torch._foreach_mul(list(ctx.saved_tensors), 2 * grad))


@register_auxiliary_loss("recall")
class RecallLoss(AuxiliaryLoss):
    """OssCSE's recall term ``l_r = gamma / 2 * sum (theta - theta*)^2`` over trainable parameters, ``theta*``
    being their values when training starts (kept as a float32 copy, moved to each parameter's device on first use:
    the Trainer places the model after :meth:`bind`).

    Args:
        gamma: defaults to 2e-3.
    """

    citation = OSSCSE_CITATION

    def __init__(self, gamma: float = 2e-3) -> None:
        super().__init__()
        self.gamma = check_setting("gamma", gamma, NumberRange(low=0, high=1))
        self.initial: dict[str, torch.Tensor] = {}

    def bind(self, model: nn.Module) -> None:
        self.initial = {name: p.detach().float().clone() for name, p in model.named_parameters() if p.requires_grad}

    def forward(self, inputs: AuxiliaryInputs) -> ObjectiveOutput:
        if not self.initial:
            raise ValueError("RecallLoss.bind(model) must be called before training to record the initial weights.")
        parameters, initials = [], []
        for name, parameter in inputs.model.named_parameters():
            if name in self.initial:
                initial = self.initial[name]
                if initial.device != parameter.device:
                    initial = self.initial[name] = initial.to(parameter.device)
                parameters.append(parameter.float())
                initials.append(initial)
        if not parameters:
            recorded = ", ".join(list(self.initial)[:3])
            raise ValueError(
                f"RecallLoss: none of the model's parameters has a name recorded by bind() (recorded: {recorded}, "
                "...); pass the same, unwrapped model to bind() and to the loss."
            )
        return ObjectiveOutput(0.5 * self.gamma * _SquaredDistance.apply(initials, *parameters))

    def get_config_dict(self) -> dict[str, Any]:
        return {"gamma": self.gamma}


@register_auxiliary_loss("distill")
class DistillationLoss(AuxiliaryLoss):
    """DCLR's knowledge-distillation baseline (Table 2): KL between the frozen complementary (teacher) model's and
    the student's in-batch similarity distributions, per anchor::

        KL( softmax_j(sim_T(x_i, x_j) / t) || softmax_j(sim_S(z1_i, z2_j) / t) )

    averaged over anchors. Use it beside ``simcse`` with a complementary model.

    Args:
        temperature: ``t`` for both distributions; defaults to 0.05.
    """

    required_inputs = ("complementary_similarities",)
    citation = """@article{hinton2015distilling,
    title = {Distilling the Knowledge in a Neural Network},
    author = {Hinton, Geoffrey and Vinyals, Oriol and Dean, Jeff},
    journal = {arXiv preprint arXiv:1503.02531},
    year = {2015},
}"""

    def __init__(self, temperature: float = 0.05) -> None:
        super().__init__()
        self.temperature = check_temperature(temperature)

    def forward(self, inputs: AuxiliaryInputs) -> ObjectiveOutput:
        with torch.autocast(device_type=inputs.anchors.device.type, enabled=False):
            student = normalized(inputs.anchors) @ normalized(inputs.positives).T / self.temperature
            teacher = inputs.tensor("complementary_sim").to(student.dtype) / self.temperature
            log_teacher = torch.log_softmax(teacher, dim=1)
            kl = nn.functional.kl_div(
                torch.log_softmax(student, dim=1), log_teacher, log_target=True, reduction="batchmean"
            )
            return ObjectiveOutput(kl)

    def get_config_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature}


def build_weighted_auxiliary_losses(
    default_terms: Mapping[str, Mapping[str, float]], overrides: Mapping[str, Mapping[str, Any]]
) -> dict[str, tuple[AuxiliaryLoss, float]]:
    """``{name: (term, weight)}``: an objective's ``default_terms`` updated by the run's ``overrides``
    (``{name: {"weight": w, **hparams}}``, weight defaulting to 1); weight 0 drops a term
    (:func:`switched_off_auxiliary_losses` names those)."""
    terms = {}
    for name, (weight, spec) in _weighted_specs(default_terms, overrides).items():
        if weight > 0:
            terms[name] = (AUXILIARY_LOSSES.build(name, **spec), weight)
    return terms


def switched_off_auxiliary_losses(
    default_terms: Mapping[str, Mapping[str, float]], overrides: Mapping[str, Mapping[str, Any]]
) -> tuple[str, ...]:
    """The names of the terms that ``default_terms`` and ``overrides`` (as :func:`build_weighted_auxiliary_losses`
    takes them) name at weight 0: named, but not built (an ablation, e.g. SNCSE's ``bml`` at weight 0)."""
    return tuple(name for name, (weight, _) in _weighted_specs(default_terms, overrides).items() if weight == 0)


def _weighted_specs(
    default_terms: Mapping[str, Mapping[str, float]], overrides: Mapping[str, Mapping[str, Any]]
) -> dict[str, tuple[float, dict[str, Any]]]:
    """``{name: (weight, hparams)}``: ``default_terms`` updated by ``overrides``, each weight checked (in [0, 1000],
    defaulting to 1)."""
    specs = {name: dict(spec) for name, spec in default_terms.items()}
    for name, spec in overrides.items():
        if not isinstance(spec, Mapping):
            raise UsageError(f"auxiliary_losses[{name!r}] must be a mapping like {{'weight': 1.0}}, got {spec!r}.")
        specs[name] = {**specs.get(name, {}), **spec}
    weights = NumberRange(low=0, high=1000)
    return {
        name: (check_setting(f"auxiliary_losses[{name!r}] weight", spec.pop("weight", 1.0), weights), spec)
        for name, spec in specs.items()
    }


def required_inputs(
    objective: ContrastiveObjective, auxiliary_losses: Mapping[str, tuple[AuxiliaryLoss, float]]
) -> tuple[str, ...]:
    """The input providers a run needs: the objective's, then each auxiliary term's, each named once.

    Raises:
        UsageError: a required name that no registered input provider gives; one line naming who requires it and
            the providers there are (a user's provider registers once its module is imported: ``--import_module``).
    """
    requirements = [(f"Objective {objective.name!r}", name) for name in objective.required_inputs]
    if getattr(objective, "momentum_queue", None) is not None:  # any objective may take it (use_momentum_queue)
        requirements.append((f"Objective {objective.name!r}", "momentum_queue"))
    terms = {f"Auxiliary loss {term_name!r}": term_name for term_name in auxiliary_losses}
    requirements += [
        (f"Auxiliary loss {term_name!r}", name)
        for term_name, (term, _) in auxiliary_losses.items()
        for name in term.required_inputs
    ]
    for part, name in requirements:
        if name not in INPUT_PROVIDERS:
            raise UsageError(
                f"{part} requires input {name!r}, which no input provider gives; the input providers are: "
                f"{', '.join(sorted(INPUT_PROVIDERS))} (register yours with register_input_provider, in a module "
                "imported with --import_module)."
            )
    _check_no_clash(requirements, terms)
    return tuple(dict.fromkeys(name for _, name in requirements))


def _check_no_clash(requirements: list[tuple[str, str]], terms: Mapping[str, str]) -> None:
    """Refuse, before any data is prepared, two required providers that declare the same embedding (the
    ``negations`` of SNCSE's ``bml`` and of OssCSE's ``margin``): the first step would fail on it, after the corpus
    was negated. ``terms`` maps a part (``"Auxiliary loss 'bml'"``) to its term's name, for the way out the error
    names. Values a provider does not declare are still checked every step (``build_step_inputs``)."""
    declared: dict[str, tuple[str, str]] = {}  # value -> (its provider, the part requiring it)
    for part, provider in requirements:
        for value in INPUT_PROVIDERS[provider].embeddings:
            other_provider, other_part = declared.setdefault(value, (provider, part))
            if other_provider == provider:
                continue
            drop = [f'auxiliary_losses {{"{terms[p]}": {{"weight": 0}}}}' for p in (other_part, part) if p in terms]
            raise UsageError(
                f"{other_part} needs input provider {other_provider!r} and {part[:1].lower() + part[1:]} needs "
                f"{provider!r}; both give {value!r}, so one run cannot take both: drop one "
                f"({' or '.join(drop) or 'another objective'})."
            )
