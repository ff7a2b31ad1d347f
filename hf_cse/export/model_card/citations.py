"""BibTeX of the papers whose methods a run used, for the card's Citation section.

Each part carries its own papers: the objective and its loss form (:attr:`ContrastiveObjective.citations`), the
auxiliary terms (``citation``), the pooler (``citations`` of its registered class) and the
view augmentation (``citations`` of its registered class), so a registered part of a user's shows its paper too.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...objectives import AuxiliaryLoss, ContrastiveObjective
from ...registry import POOLERS, VIEW_AUGMENTATIONS


def collect_citations(
    objective: ContrastiveObjective,
    auxiliary_losses: Mapping[str, tuple[AuxiliaryLoss, float]] | None = None,
    pooler: str | None = None,
    view_augmentation: str | None = None,
) -> list[str]:
    """BibTeX of every paper whose method a run used, deduplicated, the objective's first."""
    citations = [
        *objective.citations,
        *(term.citation for term, _ in (auxiliary_losses or {}).values()),
        *(POOLERS[pooler].citations if pooler in POOLERS else ()),
        *(VIEW_AUGMENTATIONS[view_augmentation].citations if view_augmentation in VIEW_AUGMENTATIONS else ()),
    ]
    return list(dict.fromkeys(citation.strip() for citation in citations if citation and citation.strip()))
