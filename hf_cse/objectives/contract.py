"""What an objective or auxiliary term reads and returns: :class:`StepInputs` in, :class:`ObjectiveOutput` out.

A training step builds two :class:`StepInputs`, one per scope of rows:

- the **objective's** (global): the views gathered from every process (``[B, D]`` with ``B`` the global batch),
  ``anchor_rows`` naming this process's rows, and each input provider's values over the global batch;
- the **auxiliary terms'** (local): this process's views (``[B, D]``, ``B`` the per-device batch), the bare model
  (no DDP or ``torch.compile`` wrapper), and each provider's values over this process's rows.

Besides the views, a container holds values by the names the input providers (:mod:`hf_cse.inputs`) give them
(``complementary_sim``, ``negations``, a user's ``sentence_weight``), read as ``inputs["name"]``,
``inputs.tensor("name")`` or ``inputs.name``. Each provider declares which of its values are embeddings of the
trained model (``InputProvider.embeddings``): :meth:`StepInputs.truncated` cuts those, and the views, to a prefix of
the embedding (Matryoshka), and passes the others whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..errors import UsageError

Logs = dict[str, torch.Tensor]
"""Diagnostics of one call, by name: scalar tensors (detached), averaged over steps and processes when logged."""


@dataclass
class ObjectiveOutput:
    """What an objective or an auxiliary term returns, in the style of transformers' ``ModelOutput``.

    Args:
        loss: the scalar loss (a 0-dim float tensor, float32 under autocast) the trainer adds up and backpropagates.
        logs: scalar diagnostics of this call (``{"masked_negative_share": tensor(0.1)}``); the trainer logs each
            under its name. Defaults to none.
    """

    loss: torch.Tensor
    logs: Logs = field(default_factory=dict)


class StepInputs(Mapping[str, Any]):
    """The inputs of one training step over one scope of rows: the views, and the input providers' values by name.

    A read-only mapping of the provider-given values (``"complementary_sim" in inputs``, ``inputs["negations"]``),
    with typed accessors for the views and the model. ``hf_cse.objectives.AuxiliaryInputs`` is this class.

    Args:
        anchors: first-view embeddings ``[B, D]`` (``z1``).
        positives: second-view embeddings ``[B, D]`` (``z2``); ``None`` for an objective without positive views
            (``num_positive_views`` 0: MNTP, whose loss is over tokens).
        model: the model being trained; in the auxiliary terms' container the bare model (the parameter names
            ``RecallLoss.bind`` recorded). Defaults to ``None`` (the objective's container needs none).
        anchor_rows: this process's rows among the gathered ``B`` (objective's container under data parallelism:
            average the loss over these rows); ``None``: every row is this process's. Defaults to ``None``.
        extra_positives: further positive views of the anchors, each ``[B, D]`` (``num_positive_views > 1``).
            Defaults to none.
        hard_negatives: the labelled pairs' hard negatives (:mod:`hf_cse.inputs.labelled_pairs`), ``K`` tensors
            ``[B, D]``, the ``k``-th holding every row's ``k``-th hard negative; gathered like the views. Every anchor
            is contrasted with all of them, its own included. Defaults to none (a one-sentence corpus, or pairs
            without hard negatives).
        embeddings: the names among ``values`` that are embeddings of the trained model (last dimension ``D``):
            :meth:`truncated` cuts them with the views. Defaults to none.
        **values: the input providers' values, by name (``complementary_sim=[B, B]``, ``has_pair=[B]``, ...).
    """

    def __init__(
        self,
        anchors: torch.Tensor,
        positives: torch.Tensor | None,
        model: nn.Module | None = None,
        *,
        anchor_rows: torch.Tensor | None = None,
        extra_positives: Sequence[torch.Tensor] = (),
        hard_negatives: Sequence[torch.Tensor] = (),
        embeddings: Iterable[str] = (),
        **values: Any,
    ) -> None:
        self.anchors, self.positives, self.model = anchors, positives, model
        self.anchor_rows = anchor_rows
        self.extra_positives = list(extra_positives)
        self.hard_negatives = list(hard_negatives)
        self.values = values
        self.embeddings = frozenset(embeddings)
        undeclared = sorted(self.embeddings - set(values))
        if undeclared:
            raise UsageError(f"StepInputs: embeddings {undeclared} are not among the values {sorted(values)}.")

    # --- the provider-given values, by name ---------------------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        if name not in self.values:
            raise KeyError(self._missing(name))
        return self.values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not attributes: the provider-given values read as fields
        # (inputs.negations), as the auxiliary terms always have.
        values = self.__dict__.get("values", {})
        if name.startswith("__") or name not in values:
            raise AttributeError(self._missing(name) if "values" in self.__dict__ else name)
        return values[name]

    def tensor(self, name: str) -> torch.Tensor:
        """The value ``name`` as a tensor; a missing or non-tensor value is a one-line error naming what there is."""
        value = self[name]
        if not isinstance(value, torch.Tensor):
            raise UsageError(f"Step input {name!r} is a {type(value).__name__}, not a tensor.")
        return value

    def _missing(self, name: str) -> str:
        given = ", ".join(sorted(self.values)) or "none"
        return (
            f"No step input {name!r}; this step has: {given}. Declare the input provider that gives it in "
            "required_inputs."
        )

    # --- derived containers ---------------------------------------------------------------------------------------

    def replace(self, **changes: Any) -> StepInputs:
        """A copy with ``changes`` to the fields (``anchors``, ``positives``, ``model``, ``anchor_rows``,
        ``extra_positives``, ``hard_negatives``, ``embeddings``) or to the values; the rest shared, not copied."""
        fields = ("anchors", "positives", "model", "anchor_rows", "extra_positives", "hard_negatives", "embeddings")
        current = {name: getattr(self, name) for name in fields}
        values = {**self.values, **{k: v for k, v in changes.items() if k not in fields}}
        return StepInputs(**{**current, **{k: v for k, v in changes.items() if k in fields}}, **values)

    def truncated(self, dim: int) -> StepInputs:
        """The inputs with the views, extra positives, hard negatives and every declared embedding cut to their first
        ``dim`` dimensions (``[..., :dim]``); the other values (similarities ``[B, B]``, flags, weights) and
        ``anchor_rows`` unchanged: they do not come from the trained embedding's dimensions.

        Raises:
            UsageError: a declared embedding whose last dimension is not the views' ``D``.
        """
        size = self.anchors.shape[-1]
        for name in sorted(self.embeddings):
            value = self.values[name]
            if not isinstance(value, torch.Tensor) or value.shape[-1] != size:
                shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise UsageError(
                    f"Step input {name!r} is declared an embedding but has shape {shape}; an embedding's last "
                    f"dimension is the views' {size}."
                )
        return self.replace(
            anchors=self.anchors[..., :dim],
            positives=None if self.positives is None else self.positives[..., :dim],
            extra_positives=[view[..., :dim] for view in self.extra_positives],
            hard_negatives=[view[..., :dim] for view in self.hard_negatives],
            **{name: self.values[name][..., :dim] for name in self.embeddings},
        )

    def __repr__(self) -> str:
        return f"StepInputs(anchors={tuple(self.anchors.shape)}, values={sorted(self.values)})"


def check_output(output: Any, part: str) -> ObjectiveOutput:
    """``output`` if it is an :class:`ObjectiveOutput`; else a one-line error naming the ``part`` that returned it
    (``"objective 'simcse'"``), so a forgotten wrapper is caught at the first step, not as an odd traceback."""
    if not isinstance(output, ObjectiveOutput):
        raise UsageError(
            f"The {part} returned a {type(output).__name__}; forward must return "
            "ObjectiveOutput(loss=<scalar tensor>, logs={...}) (hf_cse.objectives.ObjectiveOutput)."
        )
    return output
