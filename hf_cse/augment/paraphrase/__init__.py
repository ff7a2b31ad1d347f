"""Paraphrase augmentation of OssCSE (Shi et al., 2023): a paraphrase s_p of each training sentence s.

OssCSE builds s_p by back-translation (English -> German -> English and English -> Russian -> English) and keeps a
back-translation only when its match error rate (MER, Morris et al. 2004) against s lies in [0.15, 0.6]: a lower MER
means the "paraphrase" barely changes the surface structure (no signal against the surface-structure bias), a higher
one that translation errors probably corrupted it (paper, Appendix A). Sentences without a kept paraphrase skip the
paraphrase/negation margin term, so every API here says "no paraphrase" explicitly with ``None``.

Two interchangeable sources implement :class:`ParaphraseSource`:

- :class:`BackTranslationParaphrases`: any pair of local (or Hub) seq2seq translation checkpoints per pivot language,
  e.g. MarianMT ``Helsinki-NLP/opus-mt-en-de`` + ``Helsinki-NLP/opus-mt-de-en``.
- :class:`TSVParaphrases`: a user-supplied ``sentence<TAB>paraphrase`` file (format in its docstring).

Paraphrasing is slow (two translations per pivot and sentence), so it runs once over the whole corpus before
training, with :func:`precompute_paraphrases`, never inside the training step. :func:`write_paraphrase_tsv` saves
the result in the format :class:`TSVParaphrases` reads, so a back-translation pass can be reused across runs.

Example::

    source = BackTranslationParaphrases({"de": ("models/opus-mt-en-de", "models/opus-mt-de-en")})
    paraphrases, stats = precompute_paraphrases(sentences, source, output_file="paraphrases.tsv")
    # paraphrases[i] is a string or None; stats.num_paraphrased, stats.num_rejected, ...
"""

from .back_translation import OPUS_MT_ORGANIZATION, BackTranslationParaphrases, opus_mt_pivots
from .precompute import build_paraphrase_source, precompute_paraphrases
from .source import DEFAULT_MER_FILTER, SELECTIONS, MERFilter, ParaphraseSource, ParaphraseStats
from .tsv import TSV_HEADER, TSVParaphrases, write_paraphrase_tsv

__all__ = [
    "DEFAULT_MER_FILTER",
    "OPUS_MT_ORGANIZATION",
    "SELECTIONS",
    "TSV_HEADER",
    "BackTranslationParaphrases",
    "MERFilter",
    "ParaphraseSource",
    "ParaphraseStats",
    "TSVParaphrases",
    "build_paraphrase_source",
    "opus_mt_pivots",
    "precompute_paraphrases",
    "write_paraphrase_tsv",
]
