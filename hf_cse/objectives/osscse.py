"""OssCSE (Shi et al., 2023): prompt-based [MASK] pooling with two templates as the positive pair, a two-way margin
between each sentence's negation and paraphrase, and a recall loss towards the initial weights."""

from __future__ import annotations

from ..registry import register_objective
from .auxiliary import OSSCSE_CITATION
from .promptbert import PromptBERTLoss


@register_objective("osscse")
class OssCSELoss(PromptBERTLoss):
    """The contrastive term ``l_c`` of OssCSE: InfoNCE between the ``[MASK]`` states of the same sentence under two
    prompt templates (the model's own template for the first view, ``second_prompt_template`` for the second),
    with in-batch negatives: PromptBERT's objective (:class:`~hf_cse.objectives.promptbert.PromptBERTLoss`).

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
    default_auxiliary_losses = {
        "margin": {"weight": 1e-3, "alpha": 0.05, "beta": 0.2},
        "recall": {"weight": 1.0, "gamma": 2e-3},
    }
