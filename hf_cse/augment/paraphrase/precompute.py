"""Building a paraphrase source from a short specification, and paraphrasing a whole corpus once before training."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .back_translation import BackTranslationParaphrases, opus_mt_pivots
from .source import ParaphraseSource, ParaphraseStats
from .tsv import TSVParaphrases, write_paraphrase_tsv

logger = logging.getLogger(__name__)

TSV_SCHEME = "tsv:"
BACK_TRANSLATION_SCHEME = "back-translation:"


def build_paraphrase_source(
    spec: str | Path | ParaphraseSource, model_root: str | Path | None = None, **kwargs: Any
) -> ParaphraseSource:
    """A :class:`ParaphraseSource` from a short specification, e.g. a command-line value.

    Args:
        spec: one of

            - a :class:`ParaphraseSource`, returned as is;
            - ``"tsv:PATH"`` or the path of an existing file: :class:`TSVParaphrases`;
            - ``"back-translation:de,ru"``: :class:`BackTranslationParaphrases` through the opus-mt models of these
              pivot languages (see :func:`opus_mt_pivots`).
        model_root: local folder of the opus-mt models for ``back-translation:``; default the Hub ids.
        kwargs: further arguments of the source class (``mer_filter``, ``selection``, ``batch_size``, ...).
    """
    if isinstance(spec, ParaphraseSource):
        if kwargs or model_root is not None:
            raise ValueError("build_paraphrase_source got a ParaphraseSource and arguments to build one; give either.")
        return spec
    text = str(spec)
    if text.startswith(BACK_TRANSLATION_SCHEME):
        languages = [language.strip() for language in text.removeprefix(BACK_TRANSLATION_SCHEME).split(",")]
        if not all(languages):
            raise ValueError(
                f"Paraphrase source {text!r} names an empty pivot language; e.g. 'back-translation:de,ru'."
            )
        return BackTranslationParaphrases(opus_mt_pivots(languages, model_root), **kwargs)
    if text.startswith(TSV_SCHEME) or Path(text).is_file():
        return TSVParaphrases(text.removeprefix(TSV_SCHEME), **kwargs)
    raise ValueError(
        f"Unknown paraphrase source {text!r}; valid forms are 'tsv:PATH', the path of an existing TSV file, and "
        "'back-translation:LANG[,LANG...]' (e.g. 'back-translation:de,ru')."
    )


def precompute_paraphrases(
    sentences: Sequence[str], source: ParaphraseSource, output_file: str | Path | None = None
) -> tuple[list[str | None], ParaphraseStats]:
    """Paraphrases of a whole corpus, computed once before training, with the counts logged.

    Paraphrasing (translation especially) is far too slow for the training step: run this once, keep the list next
    to the sentences (e.g. a ``"paraphrase"`` column, ``None`` for no paraphrase) and, with ``output_file``, save it
    as a TSV that :class:`TSVParaphrases` reads back in later runs.

    Returns:
        ``(paraphrases, stats)``: one string or ``None`` per sentence, and the :class:`ParaphraseStats` of the pass.
    """
    paraphrases, stats = source.paraphrases_with_stats(sentences)
    logger.info("%s: %s", type(source).__name__, stats)
    if stats.num_sentences and not stats.num_paraphrased:
        logger.warning("No sentence got a paraphrase: the paraphrase margin term will never apply.")
    if output_file is not None:
        write_paraphrase_tsv(output_file, sentences, paraphrases)
    return paraphrases, stats
