"""The public API of the negation augmentation: :class:`Negator` and the :func:`negate` / :func:`negate_all`
shortcuts. What is inserted where: the package docstring."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from .rewrite import apply_target, plausible
from .rules import find_target
from .spacy_backend import SPACY_INSTALL_HINT, load_spacy, spacy_target

logger = logging.getLogger(__name__)

BACKENDS = ("auto", "spacy", "rules")


class Negator:
    """Negates English sentences at their main verb (OssCSE's negation augmentation).

    Args:
        backend: ``"spacy"`` (dependency parse, as in the paper), ``"rules"`` (no dependency) or ``"auto"``
            (spaCy when installed with an English pipeline, the rules otherwise).
        spacy_model: a pipeline name or path for ``spacy.load``, or an already loaded ``spacy.Language``; ``None``
            tries :data:`~hf_cse.augment.negation.SPACY_MODELS` in order. Ignored by the rules backend.

    Raises:
        ValueError: on an unknown ``backend``.
        ImportError: for ``backend="spacy"`` without spaCy or an English pipeline; the message has the pip command.
    """

    def __init__(self, backend: str = "auto", spacy_model: str | Any | None = None) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
        self._nlp: Any = None
        if backend != "rules" and spacy_model is not None and not isinstance(spacy_model, str):
            self._nlp = spacy_model  # an already loaded pipeline
        elif backend != "rules":
            try:
                self._nlp = load_spacy(spacy_model)
            except ImportError:
                if backend == "spacy":
                    raise
                logger.warning("Negation uses the rule-based backend; for the paper's parser: %s", SPACY_INSTALL_HINT)
        self.backend = "spacy" if self._nlp is not None else "rules"
        logger.info("Negation backend: %s", self.backend)

    def __call__(self, sentence: str) -> str | None:
        """The negated sentence, or ``None`` when it has no finite main verb or cannot be negated confidently."""
        return self.negate_batch([sentence])[0]

    def negate_batch(self, sentences: Iterable[str], batch_size: int = 256) -> list[str | None]:
        """:meth:`__call__` over many sentences; with spaCy, the sentences go through ``nlp.pipe`` in batches."""
        texts = [self._check(s) for s in sentences]
        present = [t for t in texts if t is not None]
        docs = self._nlp.pipe(present, batch_size=batch_size) if self._nlp is not None else None
        found = iter(map(spacy_target, docs) if docs is not None else map(find_target, present))
        pairs = [(text, None if text is None else next(found)) for text in texts]
        return [apply_target(text, target) if target and plausible(text, target) else None for text, target in pairs]

    @staticmethod
    def _check(sentence: str) -> str | None:
        """``sentence`` when there is something to negate, None for a blank one; ValueError for a non-string."""
        if not isinstance(sentence, str):
            raise ValueError(f"negate expects a string, got {type(sentence).__name__}: {sentence!r}.")
        # Empty and blank lines occur in corpora; they are "not negatable", like a title, not an error.
        return sentence if sentence.strip() else None


@functools.cache
def _cached_negator(backend: str) -> Negator:
    """One :class:`Negator` per backend, so that spaCy is loaded once for all :func:`negate` calls."""
    return Negator(backend=backend)


def negate(sentence: str, backend: str = "auto") -> str | None:
    """Insert a negation at the main (root) verb of ``sentence``; ``None`` when that cannot be done confidently.

    A thin wrapper around a cached :class:`Negator` per backend; see the package docstring for what is inserted where.

    Args:
        sentence: one English sentence. An empty or blank string returns ``None``.
        backend: ``"auto"``, ``"spacy"`` or ``"rules"``, as in :class:`Negator`.

    Returns:
        The sentence with ``not`` (and do-support) inserted, or ``None``.

    Raises:
        ValueError: when ``sentence`` is not a string or ``backend`` is unknown.
    """
    return _cached_negator(backend)(sentence)  # Negator refuses an unknown backend


def negate_all(sentences: Sequence[str], backend: str = "auto", batch_size: int = 256) -> list[str | None]:
    """:func:`negate` for a list of sentences (batched through spaCy with that backend)."""
    return _cached_negator(backend).negate_batch(sentences, batch_size=batch_size)
