"""PromptBERT (Jiang et al., 2022): the [MASK] states of one sentence under two prompt templates are the positive
pair, template denoising removes each template's own bias, InfoNCE over in-batch negatives."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..modeling.poolers.prompt import PROMPTBERT_CITATION
from ..registry import register_objective
from .base import ContrastiveObjective
from .simcse import InfoNCEForm

if TYPE_CHECKING:
    from ..modeling.configuration_cse import PoolingConfig

PROMPTBERT_SECOND_TEMPLATE = 'This sentence of "{sentence}" means [MASK] .'
"""The default second view's template: the one of the two BERT templates of the official code that is not hf_cse's
default ``prompt_template`` (``This sentence : "{sentence}" means [MASK] .``)."""

PROMPTEOL_SECOND_TEMPLATE = 'This sentence of "{sentence}" means in one word:"'
"""A second view's template for a prompt pooler without ``[MASK]`` (``prompt_last_token``, PromptEOL, on a decoder
whose tokenizer has no mask token): PromptEOL's template in the default second template's wording. Not a default:
``--objective_kwargs '{"second_prompt_template": "This sentence of \\"{sentence}\\" means in one word:\\""}'``."""


@register_objective("promptbert")
class PromptBERTLoss(ContrastiveObjective):
    """Unsupervised PromptBERT: InfoNCE between the denoised ``[MASK]`` states of the same sentence under two
    templates, with the rest of the batch as negatives (the paper's Sec. 5, "template denoising" objective)::

        h_i  = h_i^{T1} - \\hat h^{T1}_i        h_i' = h_i'^{T2} - \\hat h^{T2}_i
        l_i  = -log( e^{cos(h_i, h_i')/t} / sum_j e^{cos(h_i, h_j')/t} )

    averaged over ``i``; ``\\hat h^{T}_i`` is the [MASK] state of the template alone, at the positions it holds
    around sentence ``i`` (``template_denoising: true`` in the model's pooling settings). View 1 uses the model's
    ``prompt_template`` (also the one used at inference), view 2 ``second_prompt_template``
    (:class:`~hf_cse.inputs.prompt_views.PromptTemplateViews`); dropout stays on in both. Needs the ``mask`` pooler.

    The official code (kongds/Prompt-BERT, ``run.sh unsup-bert``) trains BERT-base with view 1
    ``This sentence of "[X]" means [MASK] .`` (also its evaluation template) and view 2
    ``This sentence : "[X]" means [MASK] .``, RoBERTa-base with ``This sentence : '[X]' means [MASK] .`` and
    ``The sentence : '[X]' means [MASK] .``; both at t = 0.05, batch 256, lr 1e-5, one epoch, template denoising
    on. The paper's text says batch 64 for BERT; the paper configs follow the code. With hf_cse's default
    ``prompt_template`` (``This sentence : ...``) the default second template is ``This sentence of ...``: the
    code's BERT pair, roles swapped (set ``prompt_template`` to the ``of`` one, as the paper config does, to
    evaluate with the code's template).

    Inference: the code tests its unsupervised models on template 1's plain ``[MASK]`` state, without denoising
    (``evaluation.py`` without ``--mask_embedding_sentence_delta``, in ``eval_only.sh`` and ``run.sh``). The
    ``mask`` pooler does so with ``pooler_kwargs={"denoise_at_inference": False}``
    (:class:`~hf_cse.modeling.poolers.prompt.MaskPooler`), as the paper configs set; by default it denoises at
    inference too. Where hf_cse departs from the code:

    - the code applies an MLP (dense + tanh, SimCSE's head) to the denoised state ``h_i - \\hat h_i`` in training
      only (``--mlp_only_train``); the ``mask`` pooler has no MLP head, so the loss here reads ``h_i - \\hat h_i``;
    - the code cuts each sentence to 32 tokens and then adds the template; hf_cse's ``max_seq_length`` counts the
      template's tokens too and shortens only the sentence, so the paper configs set 42 (32 + the template's 10);
    - the code selects its checkpoint on STS-B dev with denoising (its trainer's evaluation subtracts template 1's
      state) and tests without it; hf_cse evaluates dev and test with the same inference setting;
    - the code's ``evaluation.py`` appends ``"."`` to a test sentence that does not end in ``. ? " '``; hf_cse encodes
      the sentences as given.

    Args:
        temperature: ``t``; defaults to 0.05 (the code's ``--temp``).
        second_prompt_template: the second view's template; defaults to
            ``This sentence of "{sentence}" means [MASK] .``.
    """

    citation = PROMPTBERT_CITATION  # the mask pooler's: a card lists the paper once

    required_pooler = "mask"
    required_inputs = ("prompt_template_views",)  # the second view: the sentence under second_prompt_template

    def __init__(self, temperature: float = 0.05, second_prompt_template: str = PROMPTBERT_SECOND_TEMPLATE) -> None:
        super().__init__(InfoNCEForm(temperature))
        self.second_prompt_template = second_prompt_template

    def accepts_pooler(self, pooling: PoolingConfig) -> bool:
        """The ``mask`` pooler, or another that reads a prompt template's slot (PromptEOL's ``prompt_last_token`` on a
        decoder whose tokenizer has no mask token; its second template then has no ``[MASK]`` either): a template
        holding the sentence once (Echo's holds it twice, and is no prompt of this kind)."""
        pooler = pooling.get_pooler()
        return pooler.uses_prompt_template and pooler.prompt_template(pooling).count("{sentence}") == 1

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "second_prompt_template": self.second_prompt_template}
