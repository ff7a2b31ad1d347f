"""The paraphrase sources' common part: the MER filter, the choice of one kept candidate, and the pass's counts."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from ...number_ranges import NumberRange, check_setting
from ...text import match_error_rate

# Slack on the inclusive bounds: MERs are ratios of small integers (3/20 = 0.15), and the bounds should hold for them
# whatever rounding the division picked up.
_MER_TOLERANCE = 1e-9

_MER_RANGE = NumberRange(low=0, high=1)

SELECTIONS = ("first", "highest_mer", "middle")


@dataclass(frozen=True)
class MERFilter:
    """Keeps a paraphrase candidate when its MER against the original lies in ``[low, high]``, both ends included.

    The defaults are OssCSE's criterion ("within 0.15 to 0.6", Appendix A). Both bounds are inclusive, with a slack
    of 1e-9 so that an MER that is exactly a bound as a fraction (3/20 = 0.15) is kept whatever the float rounding.

    Args:
        low: smallest kept MER, in [0, 1]. Default 0.15.
        high: largest kept MER, in [``low``, 1]. Default 0.6.
    """

    low: float = 0.15
    high: float = 0.6

    def __post_init__(self) -> None:
        check_setting("MERFilter low", self.low, _MER_RANGE)
        check_setting("MERFilter high", self.high, _MER_RANGE)
        if self.low > self.high:
            raise ValueError(
                f"MERFilter bounds must satisfy 0 <= low <= high <= 1; got low={self.low!r}, high={self.high!r}."
            )

    def accepts(self, mer: float) -> bool:
        """Whether an MER value is within ``[low, high]``."""
        return self.low - _MER_TOLERANCE <= mer <= self.high + _MER_TOLERANCE

    def keep(self, original: str, candidate: str) -> bool:
        """Whether ``candidate`` is kept as a paraphrase of ``original``: its :func:`match_error_rate` is in range."""
        return self.accepts(match_error_rate(original, candidate))


DEFAULT_MER_FILTER = MERFilter()


@dataclass
class ParaphraseStats:
    """Counts of one paraphrasing pass over a list of sentences.

    ``num_sentences = num_paraphrased + num_without_candidate + num_all_rejected``.

    Attributes:
        num_sentences: sentences paraphrased.
        num_paraphrased: sentences that got a kept paraphrase.
        num_without_candidate: sentences without any non-empty candidate (not in the TSV; empty translations).
        num_all_rejected: sentences whose candidates were all rejected by the MER filter.
        num_candidates: distinct non-empty candidates, over all sentences.
        num_rejected: candidates rejected by the MER filter, over all sentences.
    """

    num_sentences: int = 0
    num_paraphrased: int = 0
    num_without_candidate: int = 0
    num_all_rejected: int = 0
    num_candidates: int = 0
    num_rejected: int = 0

    @property
    def num_without_paraphrase(self) -> int:
        """Sentences that get ``None``, and so skip the margin term."""
        return self.num_without_candidate + self.num_all_rejected

    def __str__(self) -> str:
        share = self.num_paraphrased / self.num_sentences if self.num_sentences else 0.0
        return (
            f"{self.num_paraphrased}/{self.num_sentences} sentences paraphrased ({share:.1%}); "
            f"{self.num_without_paraphrase} without a paraphrase ({self.num_without_candidate} had no candidate, "
            f"{self.num_all_rejected} had all candidates rejected); "
            f"{self.num_rejected}/{self.num_candidates} candidates rejected by the MER filter."
        )


class ParaphraseSource(ABC):
    """Base class of paraphrase sources: candidates from a subclass, then the MER filter and the choice of one.

    A subclass implements :meth:`candidates`; :meth:`paraphrases` then
    1. drops empty candidates and duplicates (after whitespace normalization) of each sentence,
    2. drops candidates whose :func:`match_error_rate` against the sentence is outside the ``mer_filter`` bounds,
    3. picks one of the remaining candidates by ``selection``, or ``None`` when none remains.

    Args:
        mer_filter: the MER bounds a candidate must meet; default :data:`DEFAULT_MER_FILTER` (OssCSE's [0.15, 0.6]).
            ``None`` keeps every non-empty candidate (e.g. paraphrases curated by hand).
        selection: which kept candidate becomes the paraphrase, in the order the source produced them (pivot order
            for back-translation, row order for a TSV):

            - ``"first"`` (default): the first kept candidate, so the order is the user's priority;
            - ``"highest_mer"``: the kept candidate most different in surface from the sentence, the property the
              augmentation is for (ties: the first);
            - ``"middle"``: the kept candidate whose MER is closest to the middle of the bounds, away from both a
              near-copy and a corrupted translation (ties: the first).

    Attributes:
        content_sha256: the SHA-256 of what the source reads, where that is a file (a TSV's bytes), for the resume
            contract; ``None`` (default): the run identifies the source by the paraphrases it gives
            (:meth:`~hf_cse.inputs.InputProvider.content_identity`).
    """

    content_sha256: str | None = None

    def __init__(self, mer_filter: MERFilter | None = DEFAULT_MER_FILTER, selection: str = "first") -> None:
        if mer_filter is not None and not isinstance(mer_filter, MERFilter):
            raise ValueError(f"mer_filter must be a MERFilter or None; got {type(mer_filter).__name__}.")
        if selection not in SELECTIONS:
            raise ValueError(f"Unknown selection {selection!r}; valid options are: {', '.join(SELECTIONS)}.")
        self.mer_filter = mer_filter
        self.selection = selection

    @abstractmethod
    def candidates(self, sentences: list[str]) -> list[list[str]]:
        """Unfiltered paraphrase candidates: one list (possibly empty) per sentence, in the source's order."""

    def paraphrases(self, sentences: Sequence[str]) -> list[str | None]:
        """One paraphrase per sentence, ``None`` where no candidate passed the MER filter."""
        return self.paraphrases_with_stats(sentences)[0]

    def paraphrases_with_stats(self, sentences: Sequence[str]) -> tuple[list[str | None], ParaphraseStats]:
        """:meth:`paraphrases` and the counts of the pass (:class:`ParaphraseStats`)."""
        sentences = _check_sentences(sentences)
        all_candidates = self.candidates(sentences)
        if len(all_candidates) != len(sentences):
            raise RuntimeError(
                f"{type(self).__name__}.candidates returned {len(all_candidates)} lists for {len(sentences)} "
                "sentences; it must return one list per sentence."
            )
        stats = ParaphraseStats(num_sentences=len(sentences))
        result: list[str | None] = []
        for sentence, raw in zip(sentences, all_candidates, strict=True):
            # Whitespace-normalized and deduplicated: two pivots giving the same text are one candidate.
            candidates = list(dict.fromkeys(" ".join(c.split()) for c in raw if c and not c.isspace()))
            scored = [(candidate, match_error_rate(sentence, candidate)) for candidate in candidates]
            kept = [(c, mer) for c, mer in scored if self.mer_filter is None or self.mer_filter.accepts(mer)]
            stats.num_candidates += len(candidates)
            stats.num_rejected += len(scored) - len(kept)
            stats.num_without_candidate += not candidates
            stats.num_all_rejected += bool(candidates) and not kept
            stats.num_paraphrased += bool(kept)
            result.append(self._select(kept) if kept else None)
        return result, stats

    def _select(self, kept: list[tuple[str, float]]) -> str:
        """The paraphrase ``selection`` picks among the kept ``(candidate, MER)`` pairs, in source order."""
        if self.selection == "first":
            return kept[0][0]
        if self.selection == "highest_mer":
            return max(kept, key=lambda pair: pair[1])[0]  # max returns the first of equal maxima
        bounds = self.mer_filter or MERFilter(0.0, 1.0)
        middle = (bounds.low + bounds.high) / 2
        return min(kept, key=lambda pair: abs(pair[1] - middle))[0]


def _check_sentences(sentences: Sequence[str]) -> list[str]:
    """``sentences`` as a list; ValueError for one string or a non-string item."""
    if isinstance(sentences, str):
        raise ValueError("sentences must be a list of strings, not one string.")
    sentences = list(sentences)
    for index, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise ValueError(f"sentences[{index}] must be a string; got {type(sentence).__name__}: {sentence!r}.")
    return sentences
