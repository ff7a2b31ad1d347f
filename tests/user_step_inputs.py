"""A user's own input provider, objective and auxiliary term, written OUTSIDE hf_cse against its public contract
only (tests/test_open_contract.py imports it, and trains it with ``run_unsup.py --import_module user_step_inputs``).

- ``sentence_weights`` (provider): a per-sentence weight ``[B]``, a column added once to the corpus and passed
  through by the collator; gathered over processes for the objective, this process's rows for the terms.
- ``weighted_infonce`` (objective): SimCSE's per-anchor InfoNCE, averaged with those weights over this process's
  anchors; logs the weights it saw over the global batch.
- ``weight_pull`` (auxiliary term): ``mean_i w_i * (1 - cos(z1_i, z2_i))`` over this process's rows.
"""

from __future__ import annotations

import torch
from datasets import Dataset

from hf_cse import (
    AuxiliaryLoss,
    ContrastiveObjective,
    InputProvider,
    ObjectiveOutput,
    ProvidedInputs,
    StepContext,
    StepInputs,
    register_auxiliary_loss,
    register_input_provider,
    register_objective,
)
from hf_cse.objectives.base import normalized
from hf_cse.objectives.simcse import InfoNCEForm

WEIGHT = "sentence_weight"
"""The corpus column, and the step input's name."""


def sentence_weight(text: str) -> float:
    """A weight known from the text alone (so a test recomputes it): 0.5, 1, 1.5 or 2 by the text's length."""
    return 0.5 + (len(text) % 4) / 2


@register_input_provider("sentence_weights")
class SentenceWeights(InputProvider):
    """Gives ``sentence_weight`` ``[B]`` (float32), not an embedding: Matryoshka passes it whole."""

    row_columns = (WEIGHT,)

    def prepare(self, dataset: Dataset) -> Dataset:
        return dataset.map(lambda row: {WEIGHT: sentence_weight(row["text"])})

    def provide(self, step: StepContext) -> ProvidedInputs:
        weights = step.batch[WEIGHT].to(step.anchors.device, torch.float32)
        return ProvidedInputs.per_sentence(step, **{WEIGHT: weights})


@register_objective("weighted_infonce")
class WeightedInfoNCE(ContrastiveObjective):
    """``sum_i w_i l_i / sum_i w_i`` over this process's anchors, ``l_i`` SimCSE's InfoNCE over the global batch."""

    required_inputs = ("sentence_weights",)

    def __init__(self, temperature: float = 0.05) -> None:
        super().__init__(InfoNCEForm(temperature))

    def forward(self, inputs: StepInputs) -> ObjectiveOutput:
        weights = inputs.tensor(WEIGHT)  # [B] over the global batch
        anchors, positives = normalized(inputs.anchors), normalized(inputs.positives)
        similarities = anchors @ positives.T
        keep = ~torch.eye(len(weights), dtype=torch.bool, device=weights.device)
        losses = self.form(similarities.diagonal().unsqueeze(1), similarities, keep).losses
        rows = inputs.anchor_rows if inputs.anchor_rows is not None else slice(None)
        loss = (weights[rows] * losses[rows]).sum() / weights[rows].sum()
        rows_seen = weights.new_tensor(float(len(weights)))
        return ObjectiveOutput(loss, {"seen_weight_sum": weights.sum().detach(), "seen_weight_rows": rows_seen})


@register_auxiliary_loss("weight_pull")
class WeightPull(AuxiliaryLoss):
    """``mean_i w_i * (1 - cos(z1_i, z2_i))`` over this process's rows."""

    required_inputs = ("sentence_weights",)

    def forward(self, inputs: StepInputs) -> ObjectiveOutput:
        weights = inputs.tensor(WEIGHT)  # [B], this process's rows
        cosine = (normalized(inputs.anchors) * normalized(inputs.positives)).sum(dim=1)
        logs = {
            "local_weight_sum": weights.sum().detach(),
            "local_weight_rows": weights.new_tensor(float(len(weights))),
        }
        return ObjectiveOutput((weights * (1 - cosine)).mean(), logs)
