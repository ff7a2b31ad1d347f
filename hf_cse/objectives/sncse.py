"""SNCSE (Wang et al., 2022): prompt-based SimCSE whose sentences' negations are soft negatives, kept at a bounded
distance by the bidirectional margin loss (BML)."""

from __future__ import annotations

from ..registry import register_auxiliary_loss, register_objective
from .auxiliary import AuxiliaryInputs, TwoWayMarginLoss
from .base import ContrastiveObjective
from .contract import ObjectiveOutput
from .simcse import InfoNCEForm

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
class SNCSELoss(ContrastiveObjective):
    """SNCSE: InfoNCE between two dropout views of each sentence under the model's prompt template, read at the
    ``[MASK]`` token (the ``mask`` pooler), with in-batch negatives, plus ``lambda * l_BML``
    (:class:`BidirectionalMarginLoss`, the default auxiliary term ``bml``)::

        L = l_InfoNCE + lambda * l_BML

    The soft negatives enter only the BML, never InfoNCE's denominator (as in the paper and code). Defaults are the
    released code's for BERT-base: ``lambda = 1e-3``, ``alpha = 0.1``, ``beta = 0.3``, temperature 0.05 (its
    RoBERTa models use ``lambda = 5e-4``; set ``auxiliary_losses: {"bml": {"weight": 5e-4}}``). The negations come
    from hf_cse's negator (``negation_backend``; the ``negations`` input provider), encoded by the live model with
    dropout and gradients, as the code's third sentence; SNCSE generated its own once with a parser
    (``generate_soft_negative_samples.py``). The code's training-only MLP on the ``[MASK]`` state (``--pooler_type
    cls --mlp_only_train``) has no counterpart for the ``mask`` pooler here.

    Args:
        temperature: defaults to 0.05.
    """

    citation = SNCSE_CITATION
    required_pooler = "mask"
    default_auxiliary_losses = {"bml": {"weight": 1e-3, "alpha": 0.1, "beta": 0.3}}

    def __init__(self, temperature: float = 0.05) -> None:
        super().__init__(InfoNCEForm(temperature))
