"""The one place where the parts of a contrastive objective combine.

Every objective here is the same pipeline, with parts chosen by its preset:

1. cosine similarities of anchors ``z1`` to positives ``z2`` (``[B, B]``, float32), the diagonal is the
   positive and the off-diagonal entries the in-batch negatives;
2. optional extra negatives (DCLR's noise vectors, ``[K, D]``), appended as columns;
3. optional instance weighting that removes false negatives (a boolean keep-mask, never the positive);
4. a loss form (InfoNCE, Focal-InfoNCE, debiased) turning positive and kept negative similarities into a loss
   per anchor, averaged over the batch.

So "DCLR + Focal-InfoNCE" is DCLR's negatives and weighting with the focal form, not a new class.

All of it runs in float32 (float64 for float64 inputs) with autocast disabled, and every sum of exponentials is
a logsumexp: at temperature 0.05 the logits reach 20 and their exponentials e^20.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from ..modeling.configuration_cse import PoolingConfig
from ..number_ranges import NumberRange, check_setting
from ..registry import POOLERS
from .contract import Logs, ObjectiveOutput, StepInputs

if TYPE_CHECKING:
    from .matryoshka import MatryoshkaObjective

# Masked logits are filled with this instead of -inf: exp(-1e4) is exactly 0 in float32, so a masked negative
# leaves the denominator and gets zero gradient, while a row whose negatives are all masked stays finite
# (logsumexp over only -inf entries has a NaN gradient).
MASKED_LOGIT = -1.0e4


MOMENTUM_NEGATIVES = "momentum_negatives"
"""The step input of the momentum queue (:mod:`hf_cse.inputs.momentum_queue`): ``[Q, D]`` past embeddings."""
MOMENTUM_TEXT_HASH = "momentum_text_hash"
"""The queue's text hashes under ``--mask_duplicates``: ``[Q]`` int64, row ``q`` the hash of the sentence whose
embedding is ``momentum_negatives[q]``, so a queued copy of an anchor's text is dropped like an in-batch one."""
MAX_MOMENTUM_QUEUE_SIZE = 1_000_000


@dataclass(frozen=True)
class MomentumQueueSettings:
    """A momentum-encoder queue of extra negatives (ESimCSE, after MoCo), taken by any :class:`ContrastiveObjective`
    (:meth:`ContrastiveObjective.use_momentum_queue`).

    Args:
        size: the queue's length ``Q`` in sentences (the newest ``Q`` embeddings of past batches, global batches under
            data parallelism), an integer in ``[1, 1e6]``.
        momentum: ``m`` of the EMA update ``theta_m <- m * theta_m + (1 - m) * theta``, in ``[0, 1)``. Defaults to
            0.995 (ESimCSE's).
    """

    size: int
    momentum: float = 0.995

    def __post_init__(self) -> None:
        sizes = NumberRange(low=1, high=MAX_MOMENTUM_QUEUE_SIZE, integer=True)
        # Frozen: the checked values (an int and a float) are set through object.__setattr__.
        object.__setattr__(self, "size", check_setting("momentum_queue_size", self.size, sizes))
        momentum = check_setting("momentum", self.momentum, NumberRange(low=0, high=1, high_open=True))
        object.__setattr__(self, "momentum", momentum)


TEXT_HASH = "text_hash"
"""The step input ``--mask_duplicates`` adds (:mod:`hf_cse.inputs.duplicates`): a hash of each sentence's token ids,
``[B]`` int64 over the objective's (gathered) batch. With it, the pipeline drops every in-batch negative whose text
is its anchor's (:func:`duplicate_negatives`), and every queued one (``momentum_text_hash``), and logs their share of
the negatives compared as ``duplicate_negative_share``."""


HARD_NEGATIVE_TEXT_HASH = "hard_negative_text_hash"
"""With labelled pairs under ``--mask_duplicates``, ``[B, K]`` int64: the hash of each row's ``k``-th hard negative,
compared with every anchor's positive (``text_hash``, which then hashes the positives): a hard negative whose text is
the anchor's positive is no negative."""


def duplicate_negatives(text_hash: torch.Tensor) -> torch.Tensor:
    """``[B] -> [B, B]`` bool: ``True`` at ``(i, j)``, ``j != i``, where sentence ``j``'s text is sentence ``i``'s
    (equal hashes): a false negative as similar as the positive. One comparison of the hashes, on the device."""
    return (text_hash.unsqueeze(1) == text_hash.unsqueeze(0)).fill_diagonal_(False)


MIN_TEMPERATURE, MAX_TEMPERATURE = 1e-3, 10.0
"""Temperatures outside this range make the logits explode (1e-30 gave a loss of 1e29) or the loss flat."""


def check_temperature(temperature: float, name: str = "temperature") -> float:
    return check_setting(name, temperature, NumberRange(low=MIN_TEMPERATURE, high=MAX_TEMPERATURE))


def check_views(z1: torch.Tensor, z2: torch.Tensor) -> None:
    """Both views ``[B, D]`` with the same shape and ``B >= 2`` (a single sentence has no in-batch negative)."""
    if z1.dim() != 2 or z1.shape != z2.shape:
        raise ValueError(f"Expected two views of shape [B, D]; got {tuple(z1.shape)} and {tuple(z2.shape)}.")
    if z1.shape[0] < 2:
        raise ValueError(
            f"A contrastive batch needs at least 2 sentences for in-batch negatives; got {z1.shape[0]}. "
            "Use a larger batch or dataloader_drop_last=True."
        )


def loss_dtype(z: torch.Tensor) -> torch.dtype:
    """float32 for half-precision inputs, float64 kept for float64 (gradcheck). Compared in Python:
    ``torch.promote_types`` is an operator the dispatcher runs on every call."""
    return torch.float64 if z.dtype == torch.float64 else torch.float32


NORMALIZE_EPS = 1e-12
"""``nn.functional.normalize``'s default ``eps``: no row is divided by a smaller norm."""


class _Normalize(torch.autograd.Function):
    """``z / max(||z||, eps)`` over the last dimension with its backward in closed form,
    ``dz = (g - y (g . y)) / max(||z||, eps)``: 5 operators instead of autograd's 12 through ``linalg_vector_norm``,
    ``clamp_min`` and ``div`` (each a kernel launch on a GPU; ``benchmarks/loss_ops.py``). The gradient is
    ``nn.functional.normalize``'s for every row whose norm is at least ``eps`` and for a zero row (``g / eps``); it
    departs only for a nonzero row of norm below 1e-12, where ``normalize`` gives ``g / eps``."""

    @staticmethod
    def forward(ctx: Any, z: torch.Tensor) -> torch.Tensor:
        norm = torch.linalg.vector_norm(z, dim=-1, keepdim=True).clamp_min(NORMALIZE_EPS)
        unit = z / norm
        ctx.save_for_backward(unit, norm)
        return unit

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        unit, norm = ctx.saved_tensors
        return (grad - unit * (grad * unit).sum(dim=-1, keepdim=True)) / norm


def normalized(z: torch.Tensor) -> torch.Tensor:
    """L2-normalized rows ``[..., D]`` in :func:`loss_dtype`, as ``nn.functional.normalize(z, dim=-1)`` (see
    :class:`_Normalize`); call with autocast disabled."""
    return _Normalize.apply(z.to(loss_dtype(z)))


def masked_logsumexp(logits: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """``log sum_j exp(logits[:, j])`` over the kept entries: ``[B, N], [B, N] -> [B]``."""
    return torch.logsumexp(logits.masked_fill(~keep, MASKED_LOGIT), dim=1)


def positive_cross_entropy(
    positive: torch.Tensor, negative: torch.Tensor, keep: torch.Tensor, temperature: float
) -> torch.Tensor:
    """``-log softmax`` of the positive among ``[positive | kept negatives] / temperature``: ``[B, 1], [B, N], [B, N]
    -> [B]``. One division and one logsumexp over the row: the masked negatives are filled before the division, with
    ``MASKED_LOGIT * temperature``, so the row needs no mask of its own (fewer operators, same values)."""
    masked = negative.masked_fill(~keep, MASKED_LOGIT * temperature)
    logits = torch.cat([positive, masked], dim=1) / temperature
    return torch.logsumexp(logits, dim=1) - logits[:, 0]


@dataclass
class FormOutput:
    """What a :class:`LossForm` returns.

    Args:
        losses: the loss of each anchor, ``[B]``.
        logs: scalar diagnostics (e.g. DCL's ``dcl_floor_share``); defaults to none.
    """

    losses: torch.Tensor
    logs: Logs = field(default_factory=dict)


@dataclass
class NegativesOutput:
    """What an extra-negatives module (``ContrastiveObjective(extra_negatives=...)``) returns.

    Args:
        negatives: ``[K, D]`` vectors contrasted with every anchor (detached; ``K`` may be 0).
        logs: scalar diagnostics (e.g. DCLR's ``uniformity_loss_before``/``_after``); defaults to none.
    """

    negatives: torch.Tensor
    logs: Logs = field(default_factory=dict)


class LossForm(nn.Module):
    """Turns similarities into a loss per anchor.

    ``forward(positive, negative, keep) -> FormOutput`` (losses ``[B]``) with ``positive`` ``[B, M]`` (cosine
    similarity to each of ``M`` positive views, ``M = 1`` unless extra views are given), ``negative`` ``[B, N]`` and
    ``keep`` ``[B, N]`` (``False`` removes a negative from the denominator). Registered by name with
    :func:`~hf_cse.registry.register_loss_form`; ``citation`` is the BibTeX of the paper that introduced the form
    (empty for plain InfoNCE), which a model card lists whenever an objective uses the form.
    """

    name: ClassVar[str]
    citation: ClassVar[str] = ""
    supports_multiple_positives: ClassVar[bool] = False

    def __init__(self, temperature: float) -> None:
        super().__init__()
        self.temperature = check_temperature(temperature)

    def get_config_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature}


class ContrastiveObjective(nn.Module):
    """Base class: ``forward(inputs: StepInputs) -> ObjectiveOutput`` (the scalar loss and its diagnostics).

    ``inputs`` (:class:`~hf_cse.objectives.contract.StepInputs`) holds the two views' embeddings
    ``inputs.anchors``/``inputs.positives`` (``z1``, ``z2``: ``[B, D]``, gathered from every process), any
    ``extra_positives``, ``anchor_rows``, and the values of the input providers the objective requires, by name.

    Subclasses are registered with :func:`~hf_cse.registry.register_objective` (which sets ``name``), set
    ``citation`` (BibTeX, collected for model cards), pass their parts to ``__init__`` and return their
    hyper-parameters from :meth:`get_config_dict`. An objective that is not this pipeline overrides ``forward``.

    What a training step must give the objective is declared here, never probed: :attr:`required_pooler`,
    :attr:`default_auxiliary_losses`, :attr:`num_positive_views` and :attr:`required_inputs` (names of
    :data:`~hf_cse.registry.INPUT_PROVIDERS` whose per-step values ``inputs`` then holds).

    Args:
        form: the loss form.
        extra_negatives: a module ``(anchors [B, D], positives [B, D], shared: bool) -> NegativesOutput``
            (normalized, detached inputs) adding ``K`` negatives ``[K, D]`` shared by every anchor.
        weighting: a module ``(similarities [B, B]) -> keep [B, B]`` removing false in-batch negatives.
        self_weighting: score negatives for ``weighting`` with the live model's own (detached) similarities
            instead of a complementary model's.
    """

    name: ClassVar[str]
    citation: ClassVar[str] = ""
    required_pooler: ClassVar[str | None] = None
    """The pooler the objective is defined for (``"mask"`` for prompt objectives); ``None``: any."""
    default_auxiliary_losses: ClassVar[Mapping[str, Mapping[str, float]]] = {}
    """Terms the objective turns on by default, ``{name: {"weight": w, **hparams}}``; the run's
    ``auxiliary_losses`` are merged over them."""
    num_positive_views: int = 1
    """Positive views per anchor ``M``: the trainer encodes ``1 + M`` views and passes views ``3..`` as
    ``extra_positives``."""
    hard_negative_weight: float = 0.0
    """SimCSE's ``hard_negative_weight``: a log weight ``w`` added to the logit of each anchor's own hard negatives
    (labelled pairs, :attr:`~hf_cse.objectives.contract.StepInputs.hard_negatives`), as the similarity ``s + w t``
    before the form divides by the temperature ``t``; 0 (default): none."""
    symmetric: bool = False
    """Add the loss the other way (sentence-transformers' symmetric ranking loss): each positive against every anchor
    of the batch, its own the positive; the two averaged. The reverse direction scores the in-batch block only (the
    positives' keep-mask transposed): a hard negative is no anchor. Default ``False``: SimCSE's one direction."""
    momentum_queue: MomentumQueueSettings | None = None
    """Set by :meth:`use_momentum_queue`: the run then builds the ``momentum_queue`` input provider and every anchor
    is also contrasted with its ``momentum_negatives``."""

    def __init__(
        self,
        form: LossForm,
        extra_negatives: nn.Module | None = None,
        weighting: nn.Module | None = None,
        self_weighting: bool = False,
    ) -> None:
        super().__init__()
        self.form = form
        self.extra_negatives = extra_negatives
        self.weighting = weighting
        self.self_weighting = self_weighting

    def accepts_pooler(self, pooling: PoolingConfig) -> bool:
        """Whether the objective can train a model pooling with ``pooling``; default: any pooler unless
        :attr:`required_pooler` names one, then that one."""
        return self.required_pooler is None or pooling.pooler == self.required_pooler

    def use_momentum_queue(self, size: int, momentum: float = 0.995) -> ContrastiveObjective:
        """Contrast every anchor also with a FIFO queue of ``size`` past embeddings from a momentum (EMA) copy of the
        encoder (:class:`MomentumQueueSettings`; :mod:`hf_cse.inputs.momentum_queue`); returns ``self``.
        ``build_objective(name, momentum_queue_size=Q, momentum=m)`` (``--objective_kwargs``) calls it for an
        objective whose constructor does not take those arguments itself."""
        self.momentum_queue = MomentumQueueSettings(size, momentum)
        return self

    @property
    def needs_complementary_similarities(self) -> bool:
        """Whether ``forward`` needs ``complementary_sim`` (a frozen model's ``[B, B]`` cosine similarities)."""
        return self.weighting is not None and not self.self_weighting

    @property
    def required_inputs(self) -> tuple[str, ...]:
        """Input providers whose per-step values ``forward`` reads from its ``inputs`` (see :mod:`hf_cse.inputs`)."""
        return ("complementary_similarities",) if self.needs_complementary_similarities else ()

    @property
    def citations(self) -> tuple[str, ...]:
        """BibTeX of the objective's paper and, when it borrows one, of its loss form's paper; no duplicates."""
        return tuple(dict.fromkeys(c for c in (self.citation, self.form.citation) if c))

    def forward(self, inputs: StepInputs) -> ObjectiveOutput:
        """Mean loss over the ``B`` anchors ``inputs.anchors`` with positives ``inputs.positives`` (both ``[B, D]``).

        Reads from ``inputs``:
            complementary_sim: ``[B, B]`` similarities ``sim_C(x_i, x_j)`` from a frozen complementary model,
                required when :attr:`needs_complementary_similarities`.
            extra_positives: further positive views of the anchors, each ``[B, D]`` (forms that support them).
            momentum_negatives: ``[Q, D]`` embeddings of past batches from the momentum encoder, appended as
                negatives of every anchor, when :attr:`momentum_queue` is set (empty at the first step).
            text_hash: ``[B]`` int64 hashes of the sentences' token ids (``--mask_duplicates``): a negative with its
                anchor's hash is dropped, in the batch and, by ``momentum_text_hash`` ``[Q]``, in the queue. With
                labelled pairs the hashes are the positives' (the in-batch candidates' texts), and a hard negative
                whose ``hard_negative_text_hash`` is the anchor's positive's is dropped too.
            hard_negatives: ``K`` tensors ``[B, D]`` (labelled pairs): ``K * B`` more candidates for every anchor,
                appended after the in-batch ones, each anchor's own shifted by :attr:`hard_negative_weight`; a
                weighting never drops one (it scores the in-batch block).
            anchor_rows: average the loss over these rows only. Under data parallelism the trainer passes the
                views gathered from every process (``B`` = the global batch, so every negative, noise vector and
                weighting threshold is the global one) and this process's rows; averaging over processes then
                gives the single-process loss of the global batch.

        Returns:
            the loss and its diagnostics: ``masked_negative_share`` with a weighting, and those of the extra
            negatives and the loss form.
        """
        z1, z2, anchor_rows = inputs.anchors, inputs.positives, inputs.anchor_rows
        check_views(z1, z2)
        logs: Logs = {}
        batch_size = z1.shape[0]
        with torch.autocast(device_type=z1.device.type, enabled=False):
            if inputs.extra_positives and not self.form.supports_multiple_positives:
                raise ValueError(f"The {type(self.form).__name__} loss form takes one positive view per anchor.")
            # Every view normalized at once ([V, B, D]): one normalization's operators, forward and backward.
            num_extra = len(inputs.extra_positives)
            anchors, positives, *others = normalized(
                torch.stack([z1, z2, *inputs.extra_positives, *inputs.hard_negatives])
            )
            extra, hard_negatives = others[:num_extra], others[num_extra:]
            similarities = anchors @ positives.T
            positive = similarities.diagonal().unsqueeze(1)
            if extra:
                extra_similarities = (anchors * torch.stack(extra)).sum(dim=2)  # [M - 1, B]
                positive = torch.cat([positive, extra_similarities.T], dim=1)
            keep = ~torch.eye(batch_size, dtype=torch.bool, device=z1.device)
            pairs = batch_size * (batch_size - 1)  # the off-diagonal entries; keep is False on the diagonal
            if self.weighting is not None:
                complementary_sim = inputs.get("complementary_sim")
                keep &= self.weighting(self._weighting_similarities(similarities, complementary_sim))
                logs["masked_negative_share"] = (pairs - keep.sum(dtype=similarities.dtype)) / pairs
            text_hash = inputs.tensor(TEXT_HASH) if TEXT_HASH in inputs else None
            if text_hash is not None:  # --mask_duplicates: another copy of the anchor's text is no negative
                duplicates = duplicate_negatives(text_hash)
                keep &= ~duplicates
                duplicate_count, compared = duplicates.sum(dtype=torch.float32), pairs
            negative, in_batch_keep = similarities, keep
            if hard_negatives:  # [B, K * B]: block k holds every anchor against every row's k-th hard negative
                hard = anchors @ torch.stack(hard_negatives).transpose(1, 2)  # [K, B, B]
                if self.hard_negative_weight:
                    own = torch.eye(batch_size, dtype=hard.dtype, device=hard.device)
                    hard = hard + own * (self.hard_negative_weight * self.form.temperature)
                negative = torch.cat([negative, hard.transpose(0, 1).reshape(batch_size, -1)], dim=1)
                if text_hash is None:
                    keep = nn.functional.pad(keep, (0, len(hard_negatives) * batch_size), value=True)
                else:  # a hard negative with the text of the anchor's positive is no negative
                    copies = text_hash[None, :, None] == inputs.tensor(HARD_NEGATIVE_TEXT_HASH).T[:, None, :]
                    keep = torch.cat([keep, (~copies).transpose(0, 1).reshape(batch_size, -1)], dim=1)
                    duplicate_count = duplicate_count + copies.sum(dtype=torch.float32)
                    compared += copies.numel()
            # [K, D] each, contrasted with every anchor, with the [B, K] negatives kept (None: all of them)
            shared_negatives: list[tuple[torch.Tensor, torch.Tensor | None]] = []
            if self.extra_negatives is not None:
                shared = anchor_rows is not None
                extra_negatives = self.extra_negatives(anchors.detach(), positives.detach(), shared=shared)
                logs.update(extra_negatives.logs)
                shared_negatives.append((extra_negatives.negatives, None))
            if self.momentum_queue is not None:
                queue = inputs.tensor(MOMENTUM_NEGATIVES)
                queue_keep = None
                if text_hash is not None and queue.shape[0]:  # a queued copy of the anchor's text is dropped too
                    queued_copies = text_hash.unsqueeze(1) == inputs.tensor(MOMENTUM_TEXT_HASH).unsqueeze(0)
                    queue_keep = ~queued_copies
                    duplicate_count = duplicate_count + queued_copies.sum(dtype=torch.float32)
                    compared += batch_size * queue.shape[0]
                shared_negatives.append((queue, queue_keep))
            if text_hash is not None:
                logs["duplicate_negative_share"] = duplicate_count / compared
            for vectors, columns_kept in shared_negatives:
                if vectors.shape[0]:
                    negative = torch.cat([negative, anchors @ normalized(vectors).T], dim=1)
                    if columns_kept is None:
                        keep = nn.functional.pad(keep, (0, vectors.shape[0]), value=True)  # new_ones + cat in one
                    else:
                        keep = torch.cat([keep, columns_kept], dim=1)
            form = self.form(positive, negative, keep)
            logs.update(form.logs)
            losses = form.losses
            if self.symmetric:  # each positive j against every anchor i: column j of the in-batch block
                losses = (losses + self.form(positive[:, :1], similarities.T, in_batch_keep.T).losses) / 2
            losses = losses if anchor_rows is None else losses[anchor_rows]
            return ObjectiveOutput(losses.mean(), logs)

    def _weighting_similarities(
        self, similarities: torch.Tensor, complementary_sim: torch.Tensor | None
    ) -> torch.Tensor:
        if self.self_weighting:
            return similarities.detach()
        if complementary_sim is None:
            raise ValueError(
                f"Objective {self.name!r} needs complementary_sim, the frozen model's [B, B] similarities."
            )
        if complementary_sim.shape != similarities.shape:
            raise ValueError(
                f"complementary_sim has shape {tuple(complementary_sim.shape)}; expected {tuple(similarities.shape)}."
            )
        return complementary_sim.to(similarities.dtype)

    def get_config_dict(self) -> dict[str, Any]:
        """The loss form's hyper-parameters, and ``momentum_queue_size``/``momentum`` when a queue is used
        (subclasses add theirs to this dict)."""
        config = self.form.get_config_dict()
        if self.momentum_queue is not None:
            config.update(momentum_queue_size=self.momentum_queue.size, momentum=self.momentum_queue.momentum)
        return config


def accepted_poolers(objective: ContrastiveObjective | MatryoshkaObjective) -> list[str]:
    """The registered poolers (:data:`~hf_cse.registry.POOLERS`) whose default settings ``objective.accepts_pooler``
    takes, in registration order: what a refusal names, read from the objective's own check (``mask`` and
    ``prompt_last_token`` for PromptBERT). A pooler that cannot be made without settings of its own is left out."""
    accepted = []
    for name in POOLERS:
        try:
            pooling = PoolingConfig(pooler=name)
        except ValueError:  # its __init__ needs pooler_kwargs: no default to ask the objective about
            continue
        if objective.accepts_pooler(pooling):
            accepted.append(name)
    return accepted


def log_mean_exp(logits: torch.Tensor) -> torch.Tensor:
    """``log mean_j exp(logits[:, j])``: ``[B, M] -> [B]``."""
    return torch.logsumexp(logits, dim=1) - math.log(logits.shape[1])
