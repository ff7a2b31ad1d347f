"""OssCSE (Shi et al., 2023): prompt-based [MASK] pooling with two templates as the positive pair, a two-way margin
between each sentence's negation and paraphrase, and a recall loss towards the initial weights."""

from __future__ import annotations

from typing import Any

from ..registry import register_objective
from .auxiliary import OSSCSE_CITATION
from .base import ContrastiveObjective
from .simcse import InfoNCEForm

OSSCSE_SECOND_TEMPLATE = 'This sentence of "{sentence}" means [MASK] .'


@register_objective("osscse")
class OssCSELoss(ContrastiveObjective):
    """The contrastive term ``l_c`` of OssCSE: InfoNCE between the ``[MASK]`` states of the same sentence under two
    prompt templates (the model's own template for the first view, ``second_prompt_template`` for the second),
    with in-batch negatives.

    The full objective ``L = l_c + l_r + lambda * l_m`` comes from the auxiliary terms this preset turns on by
    default (:attr:`default_auxiliary_losses`): ``margin`` (``lambda = 1e-3``, ``alpha = 0.05``, ``beta = 0.2``)
    and ``recall`` (``gamma = 2e-3``); ``auxiliary_losses`` in the training arguments overrides them. It needs the
    ``mask`` pooler.

    Args:
        temperature: defaults to 0.05.
        second_prompt_template: the second view's template; defaults to
            ``This sentence of "{sentence}" means [MASK] .``.
    """

    citation = OSSCSE_CITATION
    required_pooler = "mask"
    default_auxiliary_losses = {
        "margin": {"weight": 1e-3, "alpha": 0.05, "beta": 0.2},
        "recall": {"weight": 1.0, "gamma": 2e-3},
    }

    def __init__(self, temperature: float = 0.05, second_prompt_template: str = OSSCSE_SECOND_TEMPLATE) -> None:
        super().__init__(InfoNCEForm(temperature))
        self.second_prompt_template = second_prompt_template

    @property
    def required_inputs(self) -> tuple[str, ...]:
        """The second view is the sentence under :attr:`second_prompt_template`
        (:class:`~hf_cse.inputs.prompt_views.PromptTemplateViews`)."""
        return ("prompt_template_views",)

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "second_prompt_template": self.second_prompt_template}
