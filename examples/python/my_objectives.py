# my_objectives.py   python run_unsup.py --import_module examples/python/my_objectives.py --objective hinge ...
import torch

from hf_cse import ContrastiveObjective, FormOutput, LossForm, register_loss_form, register_objective


@register_loss_form("hinge")
class HingeForm(LossForm):
    citation = "@misc{me2026hinge, title = {A hinge of my own}}"

    def forward(self, positive, negative, keep):  # [B, M], [B, N], [B, N] -> loss per anchor [B]
        hinge = torch.relu(negative - positive[:, :1] + 0.2) / self.temperature
        return FormOutput((hinge * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1))


@register_objective("hinge")
class HingeObjective(ContrastiveObjective):
    def __init__(self, temperature: float = 0.05) -> None:
        super().__init__(HingeForm(temperature))
