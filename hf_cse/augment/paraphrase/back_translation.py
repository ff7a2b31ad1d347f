"""Paraphrases by round-trip translation through pivot languages (OssCSE: English -> German / Russian -> English)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...sources import resolve_model_path
from .source import DEFAULT_MER_FILTER, MERFilter, ParaphraseSource

OPUS_MT_ORGANIZATION = "Helsinki-NLP"


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
                tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
                model = AutoModelForSeq2SeqLM.from_pretrained(
                    path, trust_remote_code=False, **({"dtype": self.dtype} if self.dtype else {})
                )
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
    """``{name: (forward, backward)}`` from either form of ``pivots``; ValueError for anything else."""
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
