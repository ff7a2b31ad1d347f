"""Sentence augmentations: OssCSE's paraphrases (back-translation or a TSV, filtered by match error rate) and
negations (a "not" at the root verb), and positive views for one stacked forward pass (dropout, token shuffling,
token/span/feature cutoff).

The names of :mod:`.paraphrase` and :mod:`.views` are their own ``__all__``, listed once there."""

from . import paraphrase, views
from .negation import Negator, negate, negate_all
from .paraphrase import *  # noqa: F403
from .views import *  # noqa: F403

__all__ = ["Negator", "negate", "negate_all"]
__all__ += paraphrase.__all__
__all__ += views.__all__
