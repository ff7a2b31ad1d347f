"""OssCSE's paraphrase augmentation: match error rate, the MER filter, TSV paraphrases and back-translation.

Back-translation runs through tiny *random* MarianMT checkpoints built and saved here (no network, no real weights):
their "translations" are random words, so these tests check the plumbing (models loaded from local folders,
``generate`` called per pivot and direction in batches, the MER filter applied, ``None`` when nothing passes, the
counts), never translation quality.
"""

from __future__ import annotations

import functools
import logging
import math
from pathlib import Path

import pytest

from hf_cse.augment import (
    DEFAULT_MER_FILTER,
    BackTranslationParaphrases,
    MERFilter,
    ParaphraseSource,
    ParaphraseStats,
    TSVParaphrases,
    build_paraphrase_source,
    opus_mt_pivots,
    precompute_paraphrases,
    write_paraphrase_tsv,
)
from hf_cse.text import match_error_rate, mer_words

# --------------------------------------------------------------------------------------------------------------------
# Match error rate, checked against hand counts of S (substituted), D (deleted), I (inserted) and C (correct) words:
# MER = (S + D + I) / (S + D + I + C).
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reference, hypothesis, expected",
    [
        ("the cat sat down", "the cat sat down", 0.0),  # C=4
        ("the cat sat down", "the dog sat down", 1 / 4),  # S=1, C=3
        ("the cat sat down", "the cat sat", 1 / 4),  # D=1, C=3
        ("the cat sat", "the cat sat down", 1 / 4),  # I=1, C=3
        ("a b", "a x y z", 3 / 4),  # S=1, I=2, C=1: bounded by 1, where WER would be 3/2
        ("the cat sat down", "dogs run far away", 1.0),  # S=4, C=0
        ("a b c d e", "a b x y z", 3 / 5),  # S=3, C=2
    ],
)
def test_match_error_rate_hand_counts(reference: str, hypothesis: str, expected: float) -> None:
    assert match_error_rate(reference, hypothesis) == pytest.approx(expected)


def test_mer_normalization_ignores_case_and_edge_punctuation() -> None:
    assert mer_words("Breaking Bad spin-off, report claims.") == ["breaking", "bad", "spin-off", "report", "claims"]
    assert mer_words("„Bad“ — «good» don't") == ["bad", "good", "don't"]  # a lone dash is punctuation only
    assert match_error_rate("The Cat, sat down.", "the cat sat down") == 0.0
    assert match_error_rate("report claims .", "Report claims.") == 0.0  # Moses-tokenized punctuation
    # Punctuation inside a word is kept: "spin-off" -> "spin" is S=1, "off" is I=1, with C=2.
    assert match_error_rate("a spin-off show", "a spin off show") == pytest.approx(2 / 4)


@pytest.mark.parametrize(
    "reference, hypothesis, expected", [("", "", 0.0), (" ... ", "!", 0.0), ("", "a cat", 1.0), ("a cat", "?", 1.0)]
)
def test_match_error_rate_without_words(reference: str, hypothesis: str, expected: float) -> None:
    assert match_error_rate(reference, hypothesis) == expected


def test_match_error_rate_reproduces_the_paper_example() -> None:
    # OssCSE Example 1 reports MERs to two decimals, truncated (0.0667 is given as 0.06). The paraphrase (i) is
    # reported as 0.73 and comes out 0.71 here with any normalization tried: its exact text may have differed.
    original = "Bryan Cranston will return as Walter White for breaking bad spin off, report claims."
    reported = {
        "Bryan Cranston will not return as Walter White for Breaking Bad spin off, report claims.": 0.06,
        "Bryan will return as Walter White for Breaking Bad spin off, report claims.": 0.07,
        "Bryan Cranston will return as Walter White for breaking bad spin off, a latest report claims.": 0.12,
        "Bryan Cranston will come back as Walter White for Breaking Bad spin off, report claims.": 0.13,
    }
    for transformed, mer in reported.items():
        assert math.floor(match_error_rate(original, transformed) * 100) / 100 == mer, transformed


# --------------------------------------------------------------------------------------------------------------------
# MER filter
# --------------------------------------------------------------------------------------------------------------------

TWENTY_WORDS = " ".join(f"w{i}" for i in range(20))


def _substitute(sentence: str, count: int) -> str:
    words = sentence.split()
    return " ".join(f"new{i}" if i < count else word for i, word in enumerate(words))


def test_mer_filter_bounds_are_inclusive() -> None:
    mer_filter = MERFilter()
    assert (mer_filter.low, mer_filter.high) == (0.15, 0.6) == (DEFAULT_MER_FILTER.low, DEFAULT_MER_FILTER.high)
    # Exactly on the bounds, as fractions of words: kept.
    assert match_error_rate(TWENTY_WORDS, _substitute(TWENTY_WORDS, 3)) == pytest.approx(0.15)
    assert mer_filter.keep(TWENTY_WORDS, _substitute(TWENTY_WORDS, 3))
    assert mer_filter.keep("a b c d e", "x y z d e")  # 3/5 = 0.6
    # One word further on either side: rejected.
    assert not mer_filter.keep(TWENTY_WORDS, _substitute(TWENTY_WORDS, 2))  # 2/20 = 0.1
    assert not mer_filter.keep("a b c d e f", "w x y z e f")  # 4/6 = 0.67
    assert not mer_filter.keep("a b c d", "a b c d")  # a copy: 0
    assert not mer_filter.keep("a b c d", "w x y z")  # unrelated: 1
    assert mer_filter.accepts(0.15) and mer_filter.accepts(0.6)
    assert not mer_filter.accepts(0.1499) and not mer_filter.accepts(0.6001)


def test_mer_filter_with_equal_bounds_keeps_one_value() -> None:
    assert MERFilter(0.0, 0.0).keep("a b", "A b.")
    assert not MERFilter(0.0, 0.0).keep("a b", "a c")
    assert MERFilter(1.0, 1.0).keep("a b", "c d")


@pytest.mark.parametrize(
    "low, high", [(-0.1, 0.5), (0.7, 0.6), (0.2, 1.1), (float("nan"), 0.5), ("0.1", 0.5), (True, 0.5)]
)
def test_mer_filter_rejects_bad_bounds(low: object, high: object) -> None:
    with pytest.raises(ValueError, match="MERFilter"):
        MERFilter(low, high)


# --------------------------------------------------------------------------------------------------------------------
# Candidate filtering, choice and counts (a fake source with fixed candidates)
# --------------------------------------------------------------------------------------------------------------------


class FixedParaphrases(ParaphraseSource):
    def __init__(self, table: dict[str, list[str]], **kwargs) -> None:
        super().__init__(**kwargs)
        self.table = table

    def candidates(self, sentences: list[str]) -> list[list[str]]:
        return [list(self.table.get(sentence, [])) for sentence in sentences]


SENTENCE = "the old man walks his small dog in the park"  # 10 words
CANDIDATES = [
    "the old man walks his small dog in the park",  # copy: 0, rejected
    "the old man walks his little dog in the park",  # S=1: 0.1, rejected
    "the old man walks his little dog in a garden",  # S=3: 0.3, kept
    "an elderly person walks his little dog in a garden",  # S=6 (the old man -> an elderly person): 0.6, kept
    "an elderly person takes her little puppy to a garden",  # no word in common: 1.0, rejected
    "the old man walks his little hound in a garden",  # S=4: 0.4, kept
]


@pytest.mark.parametrize("selection, expected", [("first", 2), ("highest_mer", 3), ("middle", 5)])
def test_selection_among_kept_candidates(selection: str, expected: int) -> None:
    source = FixedParaphrases({SENTENCE: CANDIDATES}, selection=selection)
    # middle of [0.15, 0.6] is 0.375: the 0.4 candidate is closest.
    assert source.paraphrases([SENTENCE]) == [CANDIDATES[expected]]


def test_counts_and_none_for_sentences_without_paraphrase() -> None:
    table = {
        SENTENCE: CANDIDATES + ["  the old man walks his little dog in a   garden "],  # a duplicate of candidate 2
        "no candidate passes": ["no candidate passes", "something entirely different here"],
        "only empty candidates": ["", "   "],
    }
    source = FixedParaphrases(table)
    sentences = [SENTENCE, "no candidate passes", "unknown sentence", "only empty candidates"]
    paraphrases, stats = source.paraphrases_with_stats(sentences)
    assert paraphrases == [CANDIDATES[2], None, None, None]
    assert stats == ParaphraseStats(
        num_sentences=4,
        num_paraphrased=1,
        num_without_candidate=2,
        num_all_rejected=1,
        num_candidates=6 + 2,
        num_rejected=3 + 2,
    )
    assert stats.num_without_paraphrase == 3
    assert "1/4 sentences paraphrased" in str(stats) and "5/8 candidates rejected" in str(stats)


def test_no_filter_keeps_every_non_empty_candidate() -> None:
    source = FixedParaphrases({"a b": ["a b", "c d"], "e": [""]}, mer_filter=None, selection="highest_mer")
    paraphrases, stats = source.paraphrases_with_stats(["a b", "e"])
    assert paraphrases == ["c d", None]
    assert (stats.num_rejected, stats.num_without_candidate) == (0, 1)


def test_source_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match="selection 'best'.*first, highest_mer, middle"):
        FixedParaphrases({}, selection="best")
    with pytest.raises(ValueError, match="mer_filter must be a MERFilter"):
        FixedParaphrases({}, mer_filter=(0.1, 0.5))
    with pytest.raises(ValueError, match="not one string"):
        FixedParaphrases({}).paraphrases("a sentence")


# --------------------------------------------------------------------------------------------------------------------
# TSV paraphrases
# --------------------------------------------------------------------------------------------------------------------


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    return path


def test_tsv_format(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "paraphrases.tsv",
        "\ufeffSentence\tParaphrase\r\n"  # BOM, header in any case, CRLF
        "the cat sat down\tthe cat sat\r\n"  # 0.25
        "\n"  # blank lines are skipped
        "the cat sat down\tthe cat sat down\n"  # a second paraphrase of the same sentence: a copy, rejected
        "the cat sat down\tthe cat sat\n"  # the same row again: one candidate
        "  a dog   runs \t a dog sprints\n"  # surrounding whitespace ignored; S=1, C=2: 1/3
        "sentence\tparaphrase\n",  # a header after line 1 is an ordinary pair
    )
    source = TSVParaphrases(path)
    assert source.table == {
        "the cat sat down": ["the cat sat", "the cat sat down"],
        "a dog runs": ["a dog sprints"],
        "sentence": ["paraphrase"],
    }
    paraphrases, stats = source.paraphrases_with_stats(["the cat sat down", "a  dog runs ", "a bird flies"])
    assert paraphrases == ["the cat sat", "a dog sprints", None]
    assert (stats.num_paraphrased, stats.num_rejected, stats.num_without_candidate) == (2, 1, 1)


def test_tsv_without_header(tmp_path: Path) -> None:
    source = TSVParaphrases(_write(tmp_path / "p.tsv", "a b c d\ta b c e\n"), mer_filter=None)
    assert source.paraphrases(["a b c d"]) == ["a b c e"]


@pytest.mark.parametrize(
    "content, line, problem",
    [
        (b"sentence\tparaphrase\na b\ta c\njust one field\n", 3, "expected 2 tab-separated fields.*found 1"),
        (b"a b\ta c\na b\ta c\tand a third\n", 2, "expected 2 tab-separated fields.*found 3"),
        (b"a b\ta c\n\n \tno sentence\n", 3, "the sentence field is empty"),
        (b"a b\t  \n", 1, "the paraphrase field is empty"),
        (b"a b\ta c\nca\xe7a\tcasa\n", 2, "not valid UTF-8"),
    ],
)
def test_tsv_bad_rows_name_file_and_line(tmp_path: Path, content: bytes, line: int, problem: str) -> None:
    path = _write(tmp_path / "bad.tsv", content)
    with pytest.raises(ValueError, match=rf"bad\.tsv, line {line}: {problem}"):
        TSVParaphrases(path)


def test_tsv_without_pairs_or_missing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="contains no sentence<TAB>paraphrase pair"):
        TSVParaphrases(_write(tmp_path / "header_only.tsv", "sentence\tparaphrase\n\n"))
    with pytest.raises(FileNotFoundError, match="absent.tsv"):
        TSVParaphrases(tmp_path / "absent.tsv")


def test_precompute_logs_counts_and_round_trips_through_tsv(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = FixedParaphrases({SENTENCE: CANDIDATES, "a b": ["a b"]})
    output = tmp_path / "out.tsv"
    with caplog.at_level(logging.INFO, logger="hf_cse.augment.paraphrase"):
        paraphrases, stats = precompute_paraphrases([SENTENCE, "a b", "c"], source, output_file=output)
    assert paraphrases == [CANDIDATES[2], None, None]
    assert "1/3 sentences paraphrased" in caplog.text
    assert output.read_text(encoding="utf-8") == f"sentence\tparaphrase\n{SENTENCE}\t{CANDIDATES[2]}\n"
    assert TSVParaphrases(output).paraphrases([SENTENCE, "a b", "c"]) == paraphrases
    with pytest.raises(ValueError, match="tab or line break"):
        write_paraphrase_tsv(tmp_path / "x.tsv", ["a\tb"], ["c"])


# --------------------------------------------------------------------------------------------------------------------
# Back-translation
# --------------------------------------------------------------------------------------------------------------------

BT_SENTENCES = ["a man is playing a guitar", "the dog runs in the park", "a cat is in the house"]


def test_back_translation_picks_the_first_pivot_that_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    # Translation replaced by fixed lookups, to check the choice and the counts on known MERs.
    translations = {
        "en-de": {s: f"DE {s}" for s in BT_SENTENCES},
        "de-en": {
            "DE a man is playing a guitar": "a man is playing a guitar",  # copy: 0, rejected
            "DE the dog runs in the park": "the dog runs in the garden",  # 1/6, kept
            "DE a cat is in the house": "",  # an empty translation is no candidate
        },
        "en-ru": {s: f"RU {s}" for s in BT_SENTENCES},
        "ru-en": {
            "RU a man is playing a guitar": "a man plays a guitar",  # S=1, D=1, C=4: 2/6, kept
            "RU the dog runs in the park": "the dog is running in the park",  # kept, but de came first
            "RU a cat is in the house": "unrelated words only",  # 1.0, rejected
        },
    }
    source = BackTranslationParaphrases({"de": ("en-de", "de-en"), "ru": ("en-ru", "ru-en")})
    monkeypatch.setattr(source, "_translate", lambda name, texts, description: [translations[name][t] for t in texts])
    paraphrases, stats = source.paraphrases_with_stats(BT_SENTENCES)
    assert paraphrases == ["a man plays a guitar", "the dog runs in the garden", None]
    assert stats == ParaphraseStats(
        num_sentences=3,
        num_paraphrased=2,
        num_without_candidate=0,
        num_all_rejected=1,
        num_candidates=5,
        num_rejected=2,
    )


def _tiny_marian(directory: Path, seed: int, vocab: list[str]) -> Path:
    """A random 1-layer MarianMT (d_model 16) with a word-level tokenizer, saved like a Hub checkpoint.

    Its output logits for the special tokens are pushed down so that it always generates ``max_new_tokens`` words:
    random words, but never an empty translation.
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import MarianConfig, MarianMTModel, PreTrainedTokenizerFast

    specials = ["<pad>", "</s>", "<unk>"]
    backend = Tokenizer(models.WordLevel({token: i for i, token in enumerate(specials + vocab)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=64,
        model_input_names=["input_ids", "attention_mask"],  # as Marian's tokenizer: no token_type_ids
    )
    torch.manual_seed(seed)
    config = MarianConfig(
        vocab_size=len(specials) + len(vocab),
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        forced_eos_token_id=None,
    )
    model = MarianMTModel(config)
    model.final_logits_bias[0, : len(specials)] = -1e4
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def tiny_pivots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    vocab = sorted({word for sentence in BT_SENTENCES for word in sentence.split()} | {"ein", "der", "und"})
    root = tmp_path_factory.mktemp("tiny_marian")
    return {
        pivot: tuple(str(_tiny_marian(root / f"{pivot}-{direction}", seed, vocab)) for direction, seed in directions)
        for pivot, directions in (("de", (("fwd", 1), ("bwd", 2))), ("ru", (("fwd", 3), ("bwd", 4))))
    }


@functools.cache
def _load_reference(name: str) -> tuple:
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    return AutoTokenizer.from_pretrained(name), AutoModelForSeq2SeqLM.from_pretrained(name)


def _reference_round_trip(forward: str, backward: str, sentence: str, max_length: int) -> str:
    """One sentence through both models, unbatched, without the class under test."""
    import torch

    text = sentence
    for name in (forward, backward):
        tokenizer, model = _load_reference(name)
        with torch.inference_mode():
            ids = model.generate(**tokenizer([text], return_tensors="pt"), max_new_tokens=max_length, num_beams=1)
        text = tokenizer.batch_decode(ids, skip_special_tokens=True)[0].strip()
    return text


def test_back_translation_end_to_end_with_tiny_models(
    tiny_pivots: dict[str, tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import MarianMTModel

    calls = []
    generate = MarianMTModel.generate

    def counting_generate(self, *args, **kwargs):
        calls.append((kwargs["input_ids"].shape[0], kwargs["num_beams"], kwargs["max_new_tokens"]))
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(MarianMTModel, "generate", counting_generate)
    sentences = BT_SENTENCES + [BT_SENTENCES[0], ""]  # a repeated sentence is translated once; "" not at all
    # Greedy search (num_beams=1, not the default 4) keeps the test fast; the spy checks the value reaches generate.
    source = BackTranslationParaphrases(
        tiny_pivots, mer_filter=MERFilter(0.0, 1.0), batch_size=2, max_length=5, num_beams=1, device="cpu"
    )
    recorded = []
    candidates = source.candidates

    def recording_candidates(texts: list[str]) -> list[list[str]]:
        recorded.append(candidates(texts))
        return recorded[-1]

    monkeypatch.setattr(source, "candidates", recording_candidates)

    # Bounds that keep everything: every non-empty sentence gets its de round trip (the first pivot).
    paraphrases, stats = source.paraphrases_with_stats(sentences)
    # 3 distinct non-empty sentences in batches of 2 -> 2 generate calls per direction, 2 directions, 2 pivots.
    assert calls == [(2, 1, 5), (1, 1, 5)] * 4
    expected = [
        [_reference_round_trip(*tiny_pivots[pivot], sentence, max_length=5) for pivot in ("de", "ru")]
        for sentence in BT_SENTENCES
    ]
    assert recorded == [[*expected, expected[0], ["", ""]]]
    assert all(len(candidate.split()) == 5 for row in expected for candidate in row)
    assert paraphrases == [row[0] for row in expected] + [expected[0][0], None]
    assert (stats.num_paraphrased, stats.num_without_candidate, stats.num_rejected) == (4, 1, 0)

    # Bounds nothing random passes (an exact copy only): all None, every candidate counted as rejected.
    source.mer_filter = MERFilter(0.0, 0.0)
    paraphrases, stats = source.paraphrases_with_stats(sentences)
    assert paraphrases == [None] * 5
    assert stats.num_rejected == stats.num_candidates == sum(len(set(row)) for row in [*expected, expected[0]])
    assert (stats.num_all_rejected, stats.num_without_candidate) == (4, 1)


def test_back_translation_arguments_are_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pivots is empty"):
        BackTranslationParaphrases({})
    with pytest.raises(ValueError, match="Pivot 'de' must be a \\(forward, backward\\) pair"):
        BackTranslationParaphrases({"de": "opus-mt-en-de"})
    with pytest.raises(ValueError, match="batch_size must be a positive integer; got 0"):
        BackTranslationParaphrases([("a", "b")], batch_size=0)
    with pytest.raises(ValueError, match="num_return_sequences=3 is not supported"):
        BackTranslationParaphrases([("a", "b")], generate_kwargs={"num_return_sequences": 3})
    empty = tmp_path / "not_a_model"
    empty.mkdir()
    with pytest.raises(ValueError, match="not_a_model' has no config.json: no saved model"):
        BackTranslationParaphrases([(str(empty), str(empty))]).paraphrases(["a sentence"])


def test_build_paraphrase_source(tmp_path: Path) -> None:
    tsv = _write(tmp_path / "p.tsv", "a b\ta c\n")
    assert isinstance(build_paraphrase_source(f"tsv:{tsv}"), TSVParaphrases)
    assert build_paraphrase_source(str(tsv), mer_filter=None).mer_filter is None
    # Hub ids are only named here; models load on first use, so nothing touches the network.
    source = build_paraphrase_source("back-translation:de, ru", num_beams=1)
    assert isinstance(source, BackTranslationParaphrases) and source.num_beams == 1
    assert source.pivots == {
        "de": ("Helsinki-NLP/opus-mt-en-de", "Helsinki-NLP/opus-mt-de-en"),
        "ru": ("Helsinki-NLP/opus-mt-en-ru", "Helsinki-NLP/opus-mt-ru-en"),
    }
    for name in ("opus-mt-en-de", "opus-mt-de-en"):
        (tmp_path / name).mkdir()
    assert opus_mt_pivots(["de"], tmp_path) == {
        "de": (str(tmp_path / "opus-mt-en-de"), str(tmp_path / "opus-mt-de-en"))
    }
    with pytest.raises(ValueError, match="opus-mt-en-ru"):
        build_paraphrase_source("back-translation:ru", model_root=tmp_path)
    with pytest.raises(ValueError, match="Unknown paraphrase source 'marian:de'.*back-translation:LANG"):
        build_paraphrase_source("marian:de")
    assert build_paraphrase_source(source) is source
