"""BibTeX of the papers whose methods a run used, for the card's Citation section.

Moved verbatim from the former ``hf_cse/export/model_card.py`` (only the relative import of the objectives gained a
level): citations are being rewritten to live on the registered parts, which will replace this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PROMPTBERT_CITATION = """@inproceedings{jiang2022promptbert,
    title = "{P}rompt{BERT}: Improving {BERT} Sentence Embeddings with Prompts",
    author = "Jiang, Ting and Jiao, Jian and Huang, Shaohan and Zhang, Zihan and Wang, Deqing and Zhuang, Fuzhen and
              Wei, Furu and Huang, Haizhen and Deng, Denvy and Zhang, Qi",
    booktitle = "Proceedings of the 2022 Conference on Empirical Methods in Natural Language Processing",
    year = "2022",
    pages = "8826--8837",
}"""

CONSERT_CITATION = """@inproceedings{yan2021consert,
    title = "{C}on{SERT}: A Contrastive Framework for Self-Supervised Sentence Representation Transfer",
    author = "Yan, Yuanmeng and Li, Rumei and Wang, Sirui and Zhang, Fuzheng and Wu, Wei and Xu, Weiran",
    booktitle = "Proceedings of the 59th Annual Meeting of the Association for Computational Linguistics and the 11th
                 International Joint Conference on Natural Language Processing (Volume 1: Long Papers)",
    year = "2021",
    pages = "5065--5075",
}"""

CUTOFF_CITATION = """@article{shen2020cutoff,
    title = {A Simple but Tough-to-Beat Data Augmentation Approach for Natural Language Understanding and Generation},
    author = {Shen, Dinghan and Zheng, Mingzhi and Shen, Yelong and Qu, Yanru and Chen, Weizhu},
    journal = {arXiv preprint arXiv:2009.13818},
    year = {2020},
}"""

#: Papers of the view augmentations (besides the objective's own paper).
VIEW_AUGMENTATION_CITATIONS: dict[str, tuple[str, ...]] = {
    "shuffle": (CONSERT_CITATION,),
    "token_cutoff": (CONSERT_CITATION, CUTOFF_CITATION),
    "span_cutoff": (CONSERT_CITATION, CUTOFF_CITATION),
    "feature_cutoff": (CONSERT_CITATION, CUTOFF_CITATION),
}

#: Papers of the poolers (besides the objective's own paper).
POOLER_CITATIONS: dict[str, tuple[str, ...]] = {"mask": (PROMPTBERT_CITATION,)}


def collect_citations(
    objective: Any,
    auxiliary_losses: Mapping[str, tuple[Any, float]] | None = None,
    pooler: str | None = None,
    view_augmentation: str | None = None,
) -> list[str]:
    """BibTeX of every paper whose method a run used, deduplicated: the objective's, the paper of its loss form when
    it borrows one (e.g. DCLR + Focal-InfoNCE), the auxiliary terms', the pooler's (``mask``: PromptBERT) and the
    view augmentation's."""
    from ...objectives import DCLLoss, DebiasedForm, FocalForm, FocalInfoNCELoss  # the objectives import nothing here

    citations = [getattr(objective, "citation", "")]
    form = getattr(objective, "form", None)
    if isinstance(form, FocalForm):
        citations.append(FocalInfoNCELoss.citation)
    elif isinstance(form, DebiasedForm):
        citations.append(DCLLoss.citation)
    citations += [getattr(term, "citation", "") for term, _ in (auxiliary_losses or {}).values()]
    citations += POOLER_CITATIONS.get(pooler or "", ())
    citations += VIEW_AUGMENTATION_CITATIONS.get(view_augmentation or "", ())
    return list(dict.fromkeys(citation.strip() for citation in citations if citation and citation.strip()))
