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

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..sources import resolve_model_path
from ..text import match_error_rate

logger = logging.getLogger(__name__)

# Slack on the inclusive bounds: MERs are ratios of small integers (3/20 = 0.15), and the bounds should hold for them
# whatever rounding the division picked up.
_MER_TOLERANCE = 1e-9

SELECTIONS = ("first", "highest_mer", "middle")
TSV_HEADER = ("sentence", "paraphrase")
OPUS_MT_ORGANIZATION = "Helsinki-NLP"


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
        for name, value in (("low", self.low), ("high", self.high)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
                raise ValueError(f"MERFilter {name} must be a number in [0, 1]; got {value!r}.")
        if not 0.0 <= self.low <= self.high <= 1.0:
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


# --------------------------------------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------------------------------------


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
    """

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
            stats.num_candidates += len(candidates)
            if not candidates:
                stats.num_without_candidate += 1
                result.append(None)
                continue
            scored = [(candidate, match_error_rate(sentence, candidate)) for candidate in candidates]
            kept = [(c, mer) for c, mer in scored if self.mer_filter is None or self.mer_filter.accepts(mer)]
            stats.num_rejected += len(scored) - len(kept)
            if not kept:
                stats.num_all_rejected += 1
                result.append(None)
                continue
            stats.num_paraphrased += 1
            result.append(self._select(kept))
        return result, stats

    def _select(self, kept: list[tuple[str, float]]) -> str:
        if self.selection == "first":
            return kept[0][0]
        if self.selection == "highest_mer":
            return max(kept, key=lambda pair: pair[1])[0]  # max returns the first of equal maxima
        bounds = self.mer_filter or MERFilter(0.0, 1.0)
        middle = (bounds.low + bounds.high) / 2
        return min(kept, key=lambda pair: abs(pair[1] - middle))[0]


def _check_sentences(sentences: Sequence[str]) -> list[str]:
    if isinstance(sentences, str):
        raise ValueError("sentences must be a list of strings, not one string.")
    sentences = list(sentences)
    for index, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise ValueError(f"sentences[{index}] must be a string; got {type(sentence).__name__}: {sentence!r}.")
    return sentences


def _lookup_key(sentence: str) -> str:
    """TSV rows match corpus sentences up to surrounding and repeated whitespace."""
    return " ".join(sentence.split())


class TSVParaphrases(ParaphraseSource):
    """Paraphrases from a user-supplied tab-separated file.

    Format (UTF-8, an optional byte-order mark is ignored):

    - one ``sentence<TAB>paraphrase`` pair per line, exactly two fields; no quoting (a ``"`` is text); ``\\n`` or
      ``\\r\\n`` line ends; surrounding whitespace of each field is ignored;
    - an optional header on the first line, exactly ``sentence<TAB>paraphrase`` (any case), is skipped;
    - blank lines are skipped;
    - several rows with the same sentence give several candidates, tried in file order (see ``selection``);
      a row repeated exactly is one candidate.

    Sentences are matched up to surrounding and repeated whitespace; a sentence absent from the file gets ``None``.
    Rows are checked when the file is loaded (in the constructor): a row with another number of fields, an empty
    field, or bytes that are not UTF-8 raises a ``ValueError`` naming the file, the line number (from 1) and the
    problem. A file with no pair at all is an error too.

    Args:
        path: the TSV file.
        mer_filter: MER bounds applied to the file's paraphrases too (default OssCSE's [0.15, 0.6]); ``None`` trusts
            the file.
        selection: which kept paraphrase of a sentence to use; see :class:`ParaphraseSource`.
    """

    def __init__(
        self, path: str | Path, mer_filter: MERFilter | None = DEFAULT_MER_FILTER, selection: str = "first"
    ) -> None:
        super().__init__(mer_filter=mer_filter, selection=selection)
        self.path = Path(path)
        self.table = self._read(self.path)
        num_pairs = sum(len(paraphrases) for paraphrases in self.table.values())
        logger.info("%s: %d paraphrases of %d sentences.", self.path, num_pairs, len(self.table))

    @staticmethod
    def _read(path: Path) -> dict[str, list[str]]:
        if not path.is_file():
            raise FileNotFoundError(f"Paraphrase file {str(path)!r} does not exist.")
        table: dict[str, dict[str, None]] = {}  # sentence -> ordered set of paraphrases
        for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(
                    f"{path}, line {number}: not valid UTF-8 ({err.reason} at byte {err.start} of the line)."
                ) from err
            line = line.removesuffix("\r")
            if not line.strip():
                continue
            fields = [field.strip() for field in line.split("\t")]
            if len(fields) != 2:
                raise ValueError(
                    f"{path}, line {number}: expected 2 tab-separated fields (sentence, paraphrase), found "
                    f"{len(fields)}: {line[:80]!r}."
                )
            if number == 1 and tuple(field.lower() for field in fields) == TSV_HEADER:
                continue
            for field, name in zip(fields, TSV_HEADER, strict=True):
                if not field:
                    raise ValueError(f"{path}, line {number}: the {name} field is empty: {line[:80]!r}.")
            table.setdefault(_lookup_key(fields[0]), {})[fields[1]] = None
        if not table:
            raise ValueError(f"Paraphrase file {str(path)!r} contains no sentence<TAB>paraphrase pair.")
        return {sentence: list(paraphrases) for sentence, paraphrases in table.items()}

    def candidates(self, sentences: list[str]) -> list[list[str]]:
        return [list(self.table.get(_lookup_key(sentence), ())) for sentence in sentences]


class BackTranslationParaphrases(ParaphraseSource):
    """Paraphrases by round-trip translation through pivot languages, with local or Hub seq2seq checkpoints.

    For each pivot, in order, every sentence is translated forward (English -> pivot) and back (pivot -> English)
    with ``AutoModelForSeq2SeqLM.generate``; each pivot contributes one candidate per sentence, filtered and chosen
    as :class:`ParaphraseSource` describes (by default: the first pivot whose back-translation passes the MER
    filter). OssCSE's setting is ``{"de": (en-de, de-en), "ru": (en-ru, ru-en)}`` with MarianMT checkpoints.

    The models are loaded on first use and kept for later calls. MarianMT (opus-mt) checkpoints ship SentencePiece
    tokenizers, which need the ``sentencepiece`` package. Sentences are translated once even when repeated,
    in batches of sentences of similar length (less padding).

    Args:
        pivots: ``{name: (forward, backward)}`` or a list of ``(forward, backward)`` pairs (named by position), each a
            local folder, a ``pip:MODULE`` package model, or a Hub id (which needs the network), e.g.
            ``{"de": ("Helsinki-NLP/opus-mt-en-de", "Helsinki-NLP/opus-mt-de-en")}``.
        mer_filter: MER bounds of a kept back-translation; default OssCSE's [0.15, 0.6].
        selection: which kept back-translation to use when several pivots pass; see :class:`ParaphraseSource`.
        batch_size: sentences per ``generate`` call. Default 32.
        max_length: token limit of both the (truncated) input and the generated translation. Default 128.
        num_beams: beam size of ``generate``. Default 4.
        device: where the models run; default ``"cuda"`` when available, else ``"cpu"``.
        dtype: dtype the models are loaded in (e.g. ``torch.float16`` on a GPU); default the checkpoint's.
        generate_kwargs: further ``generate`` arguments, overriding the ones above (e.g. ``forced_bos_token_id`` for
            multilingual models that need a target-language token); ``num_return_sequences`` must stay 1.
        show_progress: show a progress bar per translation direction.
    """

    def __init__(
        self,
        pivots: Mapping[str, Sequence[str]] | Sequence[Sequence[str]],
        mer_filter: MERFilter | None = DEFAULT_MER_FILTER,
        selection: str = "first",
        batch_size: int = 32,
        max_length: int = 128,
        num_beams: int = 4,
        device: Any = None,
        dtype: Any = None,
        generate_kwargs: Mapping[str, Any] | None = None,
        show_progress: bool = False,
    ) -> None:
        super().__init__(mer_filter=mer_filter, selection=selection)
        self.pivots = _check_pivots(pivots)
        for name, value in (("batch_size", batch_size), ("max_length", max_length), ("num_beams", num_beams)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}.")
        self.batch_size = batch_size
        self.max_length = max_length
        self.num_beams = num_beams
        self.device = device
        self.dtype = dtype
        self.generate_kwargs = dict(generate_kwargs or {})
        if self.generate_kwargs.get("num_return_sequences", 1) != 1:
            # Each pivot yields one round trip per sentence; n forward outputs would each need their own way back.
            raise ValueError(
                f"generate_kwargs num_return_sequences={self.generate_kwargs['num_return_sequences']!r} is not "
                "supported: each pivot gives one translation per sentence; add pivots for more candidates."
            )
        self.show_progress = show_progress
        self._loaded: dict[str, tuple[Any, Any]] = {}

    def candidates(self, sentences: list[str]) -> list[list[str]]:
        unique = list(dict.fromkeys(sentence.strip() for sentence in sentences))
        per_pivot: list[dict[str, str]] = []
        for pivot, (forward, backward) in self.pivots.items():
            pivot_texts = self._translate(forward, unique, f"{pivot}: forward")
            round_trip = self._translate(backward, pivot_texts, f"{pivot}: backward")
            per_pivot.append(dict(zip(unique, round_trip, strict=True)))
        return [[translations[sentence.strip()] for translations in per_pivot] for sentence in sentences]

    def _model(self, name: str) -> tuple[Any, Any]:
        """``(tokenizer, model)`` of a checkpoint, loaded once, in eval mode on ``self.device``."""
        if name not in self._loaded:
            import torch
            from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

            path = resolve_model_path(name)
            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            try:
                tokenizer = AutoTokenizer.from_pretrained(path)
                model = AutoModelForSeq2SeqLM.from_pretrained(path, **({"dtype": self.dtype} if self.dtype else {}))
            except (OSError, ValueError) as err:
                # opus-mt checkpoints ship SentencePiece models only, which the tokenizer needs the package for.
                hint = (
                    " MarianMT tokenizers need it: pip install sentencepiece." if "sentencepiece" in str(err) else ""
                )
                raise ValueError(
                    f"Cannot load the translation model {name!r} as a seq2seq checkpoint (tokenizer + "
                    f"AutoModelForSeq2SeqLM): {err}{hint}"
                ) from err
            self._loaded[name] = (tokenizer, model.to(device).eval())
        return self._loaded[name]

    def _translate(self, name: str, texts: list[str], description: str) -> list[str]:
        """Translations of ``texts`` by the checkpoint ``name``, in order; an empty text translates to ``""``."""
        import torch

        tokenizer, model = self._model(name)
        results = [""] * len(texts)
        # Longest first: similar lengths share a batch (less padding), and an out-of-memory error comes early.
        order = sorted((i for i, text in enumerate(texts) if text.strip()), key=lambda i: -len(texts[i]))
        batches = [order[start : start + self.batch_size] for start in range(0, len(order), self.batch_size)]
        if self.show_progress:
            from tqdm.auto import tqdm

            batches = tqdm(batches, desc=description, unit="batch")
        generate_kwargs = {"max_new_tokens": self.max_length, "num_beams": self.num_beams, **self.generate_kwargs}
        for batch in batches:
            inputs = tokenizer(
                [texts[i] for i in batch],
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_token_type_ids=False,  # seq2seq models take none, and generate() rejects unused inputs
            ).to(model.device)
            with torch.inference_mode():
                output_ids = model.generate(**inputs, **generate_kwargs)
            for i, text in zip(batch, tokenizer.batch_decode(output_ids, skip_special_tokens=True), strict=True):
                results[i] = text.strip()
        return results


def _check_pivots(pivots: Mapping[str, Sequence[str]] | Sequence[Sequence[str]]) -> dict[str, tuple[str, str]]:
    if isinstance(pivots, Mapping):
        items = [(str(name), pair) for name, pair in pivots.items()]
    elif isinstance(pivots, Sequence) and not isinstance(pivots, str):
        items = [(str(index), pair) for index, pair in enumerate(pivots)]
    else:
        raise ValueError(
            "pivots must be a dict {name: (forward, backward)} or a list of (forward, backward) pairs; "
            f"got {pivots!r}."
        )
    if not items:
        raise ValueError("pivots is empty; give at least one (forward, backward) pair of translation models.")
    checked = {}
    for name, pair in items:
        valid = (
            isinstance(pair, Sequence)
            and not isinstance(pair, str)
            and len(pair) == 2
            and all(isinstance(model, str) and model for model in pair)
        )
        if not valid:
            raise ValueError(
                f"Pivot {name!r} must be a (forward, backward) pair of model paths or Hub ids; got {pair!r}."
            )
        checked[name] = (pair[0], pair[1])
    return checked


# --------------------------------------------------------------------------------------------------------------------
# Building and precomputing
# --------------------------------------------------------------------------------------------------------------------


def opus_mt_pivots(languages: Sequence[str], model_root: str | Path | None = None) -> dict[str, tuple[str, str]]:
    """MarianMT ``opus-mt`` pivots for ``languages``: ``{"de": (".../opus-mt-en-de", ".../opus-mt-de-en")}``.

    Args:
        languages: pivot language codes of the Helsinki-NLP opus-mt models, e.g. ``["de", "ru"]`` (OssCSE's).
        model_root: a local folder holding ``opus-mt-en-de``, ``opus-mt-de-en``, ...; default the Hub ids
            ``Helsinki-NLP/opus-mt-en-de``, ... (which need the network).
    """
    pivots = {}
    for language in languages:
        names = (f"opus-mt-en-{language}", f"opus-mt-{language}-en")
        if model_root is None:
            pivots[language] = tuple(f"{OPUS_MT_ORGANIZATION}/{name}" for name in names)
        else:
            folders = tuple(Path(model_root) / name for name in names)
            for folder in folders:
                if not folder.is_dir():
                    raise ValueError(
                        f"Pivot {language!r} needs the local model folder {str(folder)!r}, which is absent."
                    )
            pivots[language] = tuple(str(folder) for folder in folders)
    return pivots


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
    if text.startswith("back-translation:"):
        languages = [language.strip() for language in text.removeprefix("back-translation:").split(",")]
        if not all(languages):
            raise ValueError(
                f"Paraphrase source {text!r} names an empty pivot language; e.g. 'back-translation:de,ru'."
            )
        return BackTranslationParaphrases(opus_mt_pivots(languages, model_root), **kwargs)
    if text.startswith("tsv:") or Path(text).is_file():
        return TSVParaphrases(text.removeprefix("tsv:"), **kwargs)
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


def write_paraphrase_tsv(path: str | Path, sentences: Sequence[str], paraphrases: Sequence[str | None]) -> int:
    """Write the ``sentence<TAB>paraphrase`` file :class:`TSVParaphrases` reads, header included; ``None`` rows
    are left out. Returns the number of rows written."""
    sentences, paraphrases = list(sentences), list(paraphrases)
    if len(sentences) != len(paraphrases):
        raise ValueError(f"Got {len(sentences)} sentences but {len(paraphrases)} paraphrases; they must pair up.")
    lines = ["\t".join(TSV_HEADER)]
    for index, (sentence, paraphrase) in enumerate(zip(sentences, paraphrases, strict=True)):
        if paraphrase is None:
            continue
        for name, text in (("sentence", sentence), ("paraphrase", paraphrase)):
            if any(char in text for char in "\t\r\n") or not text.strip():
                raise ValueError(
                    f"Cannot write {name} {index} to a TSV: it is empty or has a tab or line break: {text!r}."
                )
        lines.append(f"{sentence.strip()}\t{paraphrase.strip()}")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines) - 1
