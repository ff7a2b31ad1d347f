# my_weights.py   python run_unsup.py --import_module examples/python/my_weights.py --objective weighted_infonce \
#                     --auxiliary_losses '{"weight_pull": {"weight": 0.5}}' ...
import torch

from hf_cse import (
    AuxiliaryLoss,
    ContrastiveObjective,
    InputProvider,
    ObjectiveOutput,
    ProvidedInputs,
    register_auxiliary_loss,
    register_input_provider,
    register_objective,
)
from hf_cse.objectives.base import normalized
from hf_cse.objectives.simcse import InfoNCEForm


@register_input_provider("sentence_weights")
class SentenceWeights(InputProvider):
    row_columns = ("sentence_weight",)  # not in `embeddings`: Matryoshka leaves it whole

    def prepare(self, dataset):  # once, on the raw corpus
        return dataset.map(lambda row: {"sentence_weight": 0.5 + (len(row["text"]) % 4) / 2})

    def provide(self, step):  # every step: [B] for the terms, gathered [B_global] for the objective
        weights = step.batch["sentence_weight"].to(step.anchors.device, torch.float32)
        return ProvidedInputs.per_sentence(step, sentence_weight=weights)


@register_objective("weighted_infonce")
class WeightedInfoNCE(ContrastiveObjective):
    required_inputs = ("sentence_weights",)

    def __init__(self, temperature: float = 0.05) -> None:
        super().__init__(InfoNCEForm(temperature))

    def forward(self, inputs):
        weights = inputs.tensor("sentence_weight")  # [B] over the global batch
        similarities = normalized(inputs.anchors) @ normalized(inputs.positives).T
        keep = ~torch.eye(len(weights), dtype=torch.bool, device=weights.device)
        losses = self.form(similarities.diagonal().unsqueeze(1), similarities, keep).losses
        rows = inputs.anchor_rows if inputs.anchor_rows is not None else slice(None)  # this process's anchors
        loss = (weights[rows] * losses[rows]).sum() / weights[rows].sum()
        return ObjectiveOutput(loss, {"mean_sentence_weight": weights.mean().detach()})


@register_auxiliary_loss("weight_pull")
class WeightPull(AuxiliaryLoss):
    required_inputs = ("sentence_weights",)

    def forward(self, inputs):  # this process's rows
        cosine = (normalized(inputs.anchors) * normalized(inputs.positives)).sum(dim=1)
        return ObjectiveOutput((inputs.tensor("sentence_weight") * (1 - cosine)).mean())
