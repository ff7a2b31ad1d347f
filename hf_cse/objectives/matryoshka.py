"""Matryoshka embeddings (Kusupati et al., 2022) for any objective: the loss of the first ``d`` dimensions, summed
with weights over several ``d``, so that a prefix of the embedding is itself a good embedding.

:class:`MatryoshkaObjective` wraps a :class:`~hf_cse.objectives.base.ContrastiveObjective` (and so every preset and
composition: DCLR's noise negatives and instance weighting, other loss forms, extra positive views) without
changing it::

    L = sum_d w_d * objective(inputs.truncated(d))

Truncation comes first, on the raw pooled embedding; the objective then normalizes the prefix itself, as
sentence-transformers' ``MatryoshkaLoss`` does. For the cosine-similarity objectives here, truncating an already
normalized embedding would give the same loss (a row's scale cancels in a cosine), but the objective's own view of
the prefix is what keeps the wrapper exact for any objective.

Per truncation, everything the objective builds from the embeddings is rebuilt from the prefix: DCLR's noise
negatives are drawn with ``d`` dimensions and refined against the truncated views, and self-weighting reads the
truncated similarities. Which step inputs are embeddings is declared, never guessed from a shape: the views, the
extra positive views, and the values an input provider names in its ``embeddings`` are truncated
(:meth:`~hf_cse.objectives.contract.StepInputs.truncated`); every other value stays the same for every ``d``: a
frozen complementary model's similarities (``complementary_sim``), per-sentence flags or weights, ``anchor_rows``.
Auxiliary terms (:mod:`hf_cse.objectives.auxiliary`, e.g. OssCSE's margin and recall) are not wrapped: the trainer
applies them once, to the full embedding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from torch import nn

from ..errors import UsageError
from ..number_ranges import NumberRange
from .base import ContrastiveObjective
from .contract import Logs, ObjectiveOutput, StepInputs, check_output

if TYPE_CHECKING:
    from ..modeling.configuration_cse import PoolingConfig

MAX_MATRYOSHKA_WEIGHT = 1000.0
"""Upper bound of a dimension's weight, like the auxiliary terms' weights."""

MATRYOSHKA_CITATION = """@inproceedings{kusupati2022matryoshka,
    title = {Matryoshka Representation Learning},
    author = {Kusupati, Aditya and Bhatt, Gantavya and Rege, Aniket and Wallingford, Matthew and Sinha, Aditya and
              Ramanujan, Vivek and Howard-Snyder, William and Chen, Kaifeng and Kakade, Sham and Jain, Prateek and
              Farhadi, Ali},
    booktitle = {Advances in Neural Information Processing Systems},
    year = {2022},
}"""


def check_matryoshka_dims(
    dims: Sequence[int],
    weights: Sequence[float] | None = None,
    embedding_size: int | None = None,
    name: str = "matryoshka_dims",
) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """``(dims, weights)`` as tuples after checking them; ``weights`` defaults to 1.0 for every dimension.

    Every dimension must be an integer in ``[1, embedding_size]`` (``[1, inf)`` when the size is not known yet, as
    when the training arguments are parsed before the model is loaded), listed once; weights must be one per
    dimension, each a number in ``(0, 1000]``. Anything else is a one-line :class:`~hf_cse.errors.UsageError`
    naming the value and the valid range; ``name`` is how the message calls the dimensions (``--truncate_dim``).
    """
    dims, valid = list(dims), f"[1, {embedding_size}] (the embedding size)" if embedding_size else "[1, inf)"
    if not dims:
        raise UsageError(f"{name} is empty; list at least one dimension, e.g. 768 512 256.")
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1 or (embedding_size and dim > embedding_size):
            raise UsageError(f"{name}: {dim!r} is not a valid dimension; each must be an integer in {valid}.")
    repeated = next((dim for i, dim in enumerate(dims) if dim in dims[:i]), None)
    if repeated is not None:
        raise UsageError(f"{name} lists {repeated} twice; each dimension must be listed once.")
    if weights is None:
        return tuple(dims), (1.0,) * len(dims)
    weights = list(weights)
    if len(weights) != len(dims):
        raise UsageError(
            f"matryoshka_weights has {len(weights)} values for {len(dims)} {name}; give one weight per "
            "dimension, or none for equal weights."
        )
    valid = NumberRange(low=0, low_open=True, high=MAX_MATRYOSHKA_WEIGHT)
    for weight in weights:
        if not valid.accepts(weight):
            raise UsageError(
                f"matryoshka_weights: {weight!r} is not a valid weight; each must be "
                f"{valid.describe(number='a number')}."
            )
    return tuple(dims), tuple(float(weight) for weight in weights)


def _delegated(attribute: str, *default: Any) -> property:
    """A read-only property giving the wrapped objective's ``attribute`` (``default``, if given, where it has none)."""
    return property(lambda self: getattr(self.objective, attribute, *default))


class MatryoshkaObjective(nn.Module):
    """``objective`` applied to the first ``d`` dimensions of the embeddings for every ``d`` in ``dims``, the losses
    summed with ``weights``.

    It keeps the objective's contract (:class:`~hf_cse.objectives.base.ContrastiveObjective`): ``name``, the
    pooler, auxiliary terms, positive views and input providers are the wrapped objective's, so the trainer and the
    model card treat it like the objective itself; :meth:`get_config_dict` adds ``matryoshka_dims`` and
    ``matryoshka_weights``.

    The output's ``logs``: ``loss_<name>_dim<d>`` (the unweighted loss of each ``d``), and the objective's own
    diagnostics for each ``d``, suffixed ``_dim<d>``, except those of the largest ``d``, which keep their plain names
    (e.g. ``masked_negative_share``), so a run with the full size listed reads like a plain run.

    Args:
        objective: the objective to apply at every truncation.
        dims: the prefix sizes, e.g. ``(768, 512, 256, 128, 64)``; distinct, each in ``[1, embedding size]``.
        weights: one weight per dimension; defaults to 1.0 each.
        embedding_size: the model's embedding size, to check ``dims`` against now; ``None`` checks at the first call.
    """

    def __init__(
        self,
        objective: ContrastiveObjective,
        dims: Sequence[int],
        weights: Sequence[float] | None = None,
        embedding_size: int | None = None,
    ) -> None:
        super().__init__()
        if isinstance(objective, MatryoshkaObjective):
            raise UsageError("The objective is already a MatryoshkaObjective; wrap the plain objective once.")
        self.objective = objective
        self.dims, self.weights = check_matryoshka_dims(dims, weights, embedding_size)

    # The objective's contract, delegated: the trainer reads these to set up the step.
    name = _delegated("name")
    required_pooler = _delegated("required_pooler")
    default_auxiliary_losses = _delegated("default_auxiliary_losses")
    num_positive_views = _delegated("num_positive_views")
    hard_negative_weight = _delegated("hard_negative_weight")
    required_inputs = _delegated("required_inputs")
    needs_complementary_similarities = _delegated("needs_complementary_similarities")
    momentum_queue = _delegated("momentum_queue", None)

    @property
    def citations(self) -> tuple[str, ...]:
        return (*self.objective.citations, MATRYOSHKA_CITATION)

    def accepts_pooler(self, pooling: PoolingConfig) -> bool:
        return self.objective.accepts_pooler(pooling)

    def forward(self, inputs: StepInputs) -> ObjectiveOutput:
        """``sum_d w_d * objective(inputs.truncated(d))``, a float32 scalar (float64 for float64 inputs).

        Args:
            inputs: the step's inputs; the views are ``[B, D]`` with ``D >= max(dims)``. The views, extra positive
                views and declared embeddings are truncated to each ``d``; every other value (``complementary_sim``
                ``[B, B]``, ``anchor_rows``) is passed unchanged: it does not come from the trained embeddings.
        """
        largest = max(self.dims)
        if largest > inputs.anchors.shape[-1]:
            check_matryoshka_dims(self.dims, self.weights, inputs.anchors.shape[-1])  # raises, naming the dimension
        logs: Logs = {}
        total = None
        for dim, weight in zip(self.dims, self.weights, strict=True):
            output = check_output(self.objective(inputs.truncated(dim)), f"objective {self.name!r}")
            logs[f"loss_{self.name}_dim{dim}"] = output.loss.detach()
            suffix = "" if dim == largest else f"_dim{dim}"
            logs.update({f"{key}{suffix}": value for key, value in output.logs.items()})
            total = weight * output.loss if total is None else total + weight * output.loss
        return ObjectiveOutput(total, logs)

    def get_config_dict(self) -> dict[str, Any]:
        return {
            **self.objective.get_config_dict(),
            "matryoshka_dims": list(self.dims),
            "matryoshka_weights": list(self.weights),
        }


def with_matryoshka(
    objective: ContrastiveObjective | MatryoshkaObjective,
    dims: Sequence[int] | None,
    weights: Sequence[float] | None = None,
    embedding_size: int | None = None,
) -> ContrastiveObjective | MatryoshkaObjective:
    """``objective`` as the run's Matryoshka settings make it: the one place the trainer and a summary rebuilt from
    ``training_args.json`` (``python -m hf_cse.push``) wrap an objective.

    Args:
        objective: the plain objective, or a :class:`MatryoshkaObjective` a caller built itself.
        dims: ``matryoshka_dims``; ``None`` or empty (records written before Matryoshka existed lack the key): no
            Matryoshka training, ``objective`` is returned unchanged.
        weights: ``matryoshka_weights``; ``None``: 1.0 each.
        embedding_size: the model's embedding size, to check ``dims`` against now; ``None``: at the first call.

    Returns:
        ``objective`` unchanged without ``dims``, or when it is a :class:`MatryoshkaObjective` already with these
        dims and weights; else ``MatryoshkaObjective(objective, dims, weights)``.

    Raises:
        UsageError: bad dims or weights, or an objective wrapped already for other dims or weights (which of the
            two the run meant cannot be told).
    """
    if not dims:
        return objective
    dims, weights = check_matryoshka_dims(dims, weights, embedding_size)
    if isinstance(objective, MatryoshkaObjective):
        if (objective.dims, objective.weights) != (dims, weights):
            raise UsageError(
                f"The objective is a MatryoshkaObjective for dims {list(objective.dims)} and weights "
                f"{list(objective.weights)}, but matryoshka_dims {list(dims)} and matryoshka_weights {list(weights)} "
                "are set too; give the dimensions once."
            )
        return objective
    return MatryoshkaObjective(objective, dims, weights, embedding_size=embedding_size)
