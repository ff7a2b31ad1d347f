"""SNCSE (Wang et al., 2022): prompt-based SimCSE whose sentences' negations are soft negatives, kept at a bounded
distance by the bidirectional margin loss (BML)."""

from __future__ import annotations

from ..registry import register_auxiliary_loss, register_objective
from .auxiliary import AuxiliaryInputs, TwoWayMarginLoss
from .contract import ObjectiveOutput
from .promptbert import PROMPTBERT_SECOND_TEMPLATE, PromptBERTLoss

SNCSE_SECOND_TEMPLATE = PROMPTBERT_SECOND_TEMPLATE
"""The template of the positive view and of the negation: train_SNCSE.py's ``This sentence of "[X]" means [MASK] .``
(its first view is ``This sentence : ...``, hf_cse's default ``prompt_template``)."""

SNCSE_CITATION = """@article{wang2022sncse,
    title = {{SNCSE}: Contrastive Learning for Unsupervised Sentence Embedding with Soft Negative Samples},
    author = {Wang, Hao and Li, Yangguang and Huang, Zhen and Dou, Yong and Kong, Lingpeng and Shao, Jing},
    journal = {arXiv preprint arXiv:2201.05979},
    year = {2022},
}"""


@register_auxiliary_loss("bml")
class BidirectionalMarginLoss(TwoWayMarginLoss):
    """SNCSE's bidirectional margin loss over each anchor ``h``, its positive ``h+`` and its soft negative (its
    negation) ``h_sn``, as in the released code (``cl_forward``)::

        delta = cos(h, h_sn) - cos(h, h+)
        l_BML = max(delta + alpha, 0) + max(-delta - beta, 0)

    i.e. the soft negative sits below the positive by at least ``alpha`` and at most ``beta``: OssCSE's two-way margin
    (:class:`~hf_cse.objectives.auxiliary.TwoWayMarginLoss`) with the positive view in the paraphrase's place, which
    is how it is computed here. Averaged over the rows that have a negation (the code has one for every sentence;
    hf_cse's negator skips sentences it cannot negate confidently, counted in ``logs["bml_rows_skipped"]``), over this
    process's rows, as the code (not gathered).

    Args:
        alpha: defaults to 0.1 (the code's).
        beta: defaults to 0.3 (the code's).
    """

    required_inputs = ("negations",)
    citation = SNCSE_CITATION

    def __init__(self, alpha: float = 0.1, beta: float = 0.3) -> None:
        super().__init__(alpha, beta)

    def forward(self, inputs: AuxiliaryInputs) -> ObjectiveOutput:
        output = super().forward(inputs.replace(paraphrases=inputs.positives, has_pair=inputs.tensor("has_negation")))
        return ObjectiveOutput(output.loss, {"bml_rows_skipped": output.logs["margin_rows_skipped"]})


@register_objective("sncse")
class SNCSELoss(PromptBERTLoss):
    """SNCSE: InfoNCE between the ``[MASK]`` states (the ``mask`` pooler) of each sentence under two prompt templates,
    with in-batch negatives, plus ``lambda * l_BML`` (:class:`BidirectionalMarginLoss`, the default auxiliary term
    ``bml``) over each sentence's negation, its soft negative::

        L = l_InfoNCE + lambda * l_BML

    As the released code (``train_SNCSE.py``, ``Different_Prompt_Negation``): view 1 is the sentence under the
    model's ``prompt_template`` (``This sentence : "{sentence}" means [MASK] .``), view 2 and the negation under
    ``second_prompt_template`` (``This sentence of ...``), dropout on in all three; PromptBERT's two-template views
    (:class:`~hf_cse.objectives.promptbert.PromptBERTLoss`) without template denoising, which the code does not use.
    The soft negatives enter only the BML, never InfoNCE's denominator (as in the paper and code). Defaults are the
    code's for BERT-base: ``lambda = 1e-3``, ``alpha = 0.1``, ``beta = 0.3``, temperature 0.05 (its RoBERTa models use
    ``lambda = 5e-4``; set ``auxiliary_losses: {"bml": {"weight": 5e-4}}``). The negations come from hf_cse's negator
    (the ``negations`` input provider's ``negation_backend``), encoded by the live model with dropout and gradients,
    as the code's third sentence; SNCSE generated its own once with a parser (``generate_soft_negative_samples.py``).
    The code's training-only MLP on the ``[MASK]`` state (``--pooler_type cls --mlp_only_train``) has no counterpart
    for the ``mask`` pooler here.

    Not done here either: the code appends ``" ."`` to a sentence whose last character is not punctuation
    (``string.punctuation``) before it builds the two views and looks up the negation, which gets ``" ."`` too (a
    sentence its parser left without a negation gets ``"Not " + sentence``; hf_cse's skips the BML for it), and its
    evaluation scripts (``bert_evaluation.py``, ``roberta_evaluation.py``) append it before encoding as well. hf_cse
    encodes every sentence as given, in training and at inference: the views, the negation and the evaluated
    sentences end where the corpus's sentence ends.

    Args:
        temperature: defaults to 0.05.
        second_prompt_template: the template of view 2 and of the negations; defaults to
            ``This sentence of "{sentence}" means [MASK] .``.
    """

    citation = SNCSE_CITATION
    default_auxiliary_losses = {"bml": {"weight": 1e-3, "alpha": 0.1, "beta": 0.3}}

    def __init__(self, temperature: float = 0.05, second_prompt_template: str = SNCSE_SECOND_TEMPLATE) -> None:
        super().__init__(temperature, second_prompt_template)
