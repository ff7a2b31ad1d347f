"""The papers' analyses: alignment/uniformity, Cont./Oppn. splits, the transformation probe, in-batch similarities.

Everything runs on hand-made embeddings through fake ``encode`` functions (no model), except the
``python -m hf_cse.eval --alignment_uniformity`` check, which uses the tiny random BERT of ``conftest.py``.
"""

from __future__ import annotations

import itertools
import math
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import write_senteval_dir

from hf_cse.commands import eval as eval_cli
from hf_cse.evaluation import (
    DEFAULT_PROBE_TSV,
    TRANSFORMATIONS,
    EmbeddingCache,
    STSSubset,
    alignment,
    alignment_uniformity,
    evaluate_surface_structure,
    in_batch_negative_similarities,
    load_probe_tsv,
    load_surface_structure_datasets,
    probe_transformations,
    similarity_histogram,
    split_surface_structure,
    sts_correlation,
    uniformity,
)
from hf_cse.text import match_error_rate


def table_encode(table: dict[str, list[float]], calls: list[list[str]] | None = None):
    """A fake ``encode`` returning fixed vectors, recording the sentences of each call."""

    def encode(sentences: list[str]) -> torch.Tensor:
        if calls is not None:
            calls.append(list(sentences))
        return torch.tensor([table[s] for s in sentences], dtype=torch.float32)

    return encode


def hashed_encode(dim: int = 8):
    """A fake ``encode`` giving each sentence a fixed pseudo-random vector."""

    def encode(sentences: list[str]) -> torch.Tensor:
        rows = [np.random.default_rng(zlib.crc32(s.encode())).standard_normal(dim) for s in sentences]
        return torch.tensor(np.stack(rows), dtype=torch.float32)

    return encode


# --------------------------------------------------------------------------------------------------------------------
# Alignment and uniformity
# --------------------------------------------------------------------------------------------------------------------


def test_alignment_of_identical_embeddings_is_zero_and_orthogonal_is_two() -> None:
    x = torch.randn(5, 4)
    assert alignment(x, x) == pytest.approx(0.0, abs=1e-12)
    assert alignment(x, 3 * x) == pytest.approx(0.0, abs=1e-12)  # normalized first
    e = torch.eye(2)
    assert alignment(e[:1], e[1:]) == pytest.approx(2.0)  # ||e1 - e2||^2
    assert alignment(e[:1], e[1:], alpha=1) == pytest.approx(math.sqrt(2))
    with pytest.raises(ValueError, match="same shape"):
        alignment(torch.randn(2, 3), torch.randn(3, 3))


def test_uniformity_matches_brute_force_double_loop() -> None:
    torch.manual_seed(0)
    x = torch.randn(7, 5)
    unit = torch.nn.functional.normalize(x.double(), dim=-1)
    terms = [math.exp(-2 * float((unit[i] - unit[j]).pow(2).sum())) for i, j in itertools.combinations(range(7), 2)]
    expected = math.log(sum(terms) / len(terms))
    assert uniformity(x) == pytest.approx(expected, rel=1e-9)
    assert uniformity(x, chunk_size=3) == pytest.approx(expected, rel=1e-9)  # blocks give the same value
    assert uniformity(torch.ones(4, 3)) == pytest.approx(0.0, abs=1e-12)  # all points coincide
    with pytest.raises(ValueError, match="N >= 2"):
        uniformity(torch.randn(1, 3))


def test_alignment_uniformity_uses_pairs_with_gold_at_least_4_and_distinct_sentences() -> None:
    vectors = {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0], "d": [-1.0, 0.0]}
    subset = STSSubset("stsb", "dev", ["a", "a", "c", "a"], ["b", "c", "d", "a"], [4.0, 5.0, 3.9, 4.5])
    calls: list[list[str]] = []
    result = alignment_uniformity(table_encode(vectors, calls), [subset])

    emb = {k: torch.tensor([v]) for k, v in vectors.items()}
    positives = [("a", "b"), ("a", "c"), ("a", "a")]  # 4.0 counts (inclusive), 3.9 does not
    expected_alignment = np.mean([alignment(emb[x], emb[y]) for x, y in positives])
    assert result["alignment"] == pytest.approx(expected_alignment)
    assert result["uniformity"] == pytest.approx(uniformity(torch.cat([emb[k] for k in "abcd"])))
    assert sorted(calls[0]) == ["a", "b", "c", "d"]  # each distinct sentence once
    with pytest.raises(ValueError, match="No pair with a gold score >= 4"):
        alignment_uniformity(table_encode(vectors), [STSSubset("stsb", "dev", ["a"], ["b"], [3.0])])


def test_embedding_cache_encodes_each_sentence_once_across_calls() -> None:
    calls: list[list[str]] = []
    cache = EmbeddingCache(table_encode({"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0]}, calls))
    assert cache(["a", "b", "a"]).tolist() == [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]
    assert cache(["c", "b"]).tolist() == [[1.0, 1.0], [0.0, 1.0]]
    assert calls == [["a", "b"], ["c"]] and len(cache) == 3


# --------------------------------------------------------------------------------------------------------------------
# Cont./Oppn. splits
# --------------------------------------------------------------------------------------------------------------------

BASE = "the dog runs home"
# (sentence2, gold, expected split): MERs against BASE are 0, 1/4, 2/4, 3/4 or 1; median score 3, median MER 0.5.
HAND_PAIRS = [
    ("the dog runs home", 5.0, "cont"),  # high score, low MER
    ("a cat sat down", 0.0, "cont"),  # low score, high MER
    ("the dog runs away", 1.0, "oppn"),  # low score, low MER: a negation-like pair
    ("my pet goes back", 4.5, "oppn"),  # high score, high MER: a paraphrase-like pair
    ("the dog sat down", 3.0, "oppn"),  # at both medians
    ("the dog flew off", 4.0, "oppn"),  # above the median score, MER exactly at the median
    ("the bird sat down", 2.0, "cont"),  # low score, MER 0.75
]


def hand_subset() -> STSSubset:
    return STSSubset("sts12", "hand", [BASE] * len(HAND_PAIRS), [p[0] for p in HAND_PAIRS], [p[1] for p in HAND_PAIRS])


def test_surface_structure_split_lands_pairs_where_expected() -> None:
    split = split_surface_structure(hand_subset())
    assert [match_error_rate(BASE, p[0]) for p in HAND_PAIRS] == [0.0, 1.0, 0.25, 1.0, 0.5, 0.5, 0.75]
    assert split.median_score == 3.0 and split.median_mer == 0.5
    assert ["cont" if c else "oppn" for c in split.is_cont] == [p[2] for p in HAND_PAIRS]
    assert (split.num_cont, split.num_oppn, split.kept, split.dataset) == (3, 4, True, "sts12-hand")
    # The median score (3) outside the range drops the dataset from scoring.
    assert not split_surface_structure(hand_subset(), median_score_range=(3.5, 5.0)).kept
    with pytest.raises(ValueError, match="low <= high"):
        split_surface_structure(hand_subset(), median_score_range=(3.0, 2.0))


def test_plain_mer_counts_punctuation_tokens_and_changes_the_split() -> None:
    from hf_cse.evaluation import MER_FUNCTIONS

    plain = MER_FUNCTIONS["plain"]
    assert plain("the dog runs home .", "the dog runs home") == pytest.approx(1 / 5)  # "." is a deleted word
    assert match_error_rate("the dog runs home .", "the dog runs home") == 0.0
    assert (plain("", ""), plain("a", " ")) == (0.0, 1.0)
    pairs = STSSubset("sts12", "punct", ["a b .", "a b", "c d", "e f"], ["a b", "a b", "x y", "e g"], [1, 5, 0, 4])
    assert split_surface_structure(pairs, mer="plain").mers.tolist() == pytest.approx([1 / 3, 0.0, 1.0, 0.5])
    assert split_surface_structure(pairs).mers.tolist() == [0.0, 0.0, 1.0, 0.5]
    with pytest.raises(ValueError, match="Unknown mer 'wer'; valid values are: normalized, plain"):
        split_surface_structure(pairs, mer="wer")


def test_evaluate_surface_structure_correlates_within_splits_and_weights_by_size() -> None:
    encode = hashed_encode()
    second = STSSubset(
        "stsb",
        "test",
        [BASE] * 6,
        ["the dog runs home", "a cat sat down", "the dog runs away", "my pet goes back", "so it goes", "the dog ran"],
        [5.0, 0.5, 1.0, 4.0, 2.5, 3.0],
    )
    skewed = STSSubset("sts12", "skewed", ["a b", "c d", "e f"], ["a b", "c e", "x y"], [5.0, 4.8, 4.9])
    results = evaluate_surface_structure(encode, [hand_subset(), second, skewed])
    assert [s.dataset for s in results.splits] == ["sts12-hand", "stsb-test", "sts12-skewed"]
    assert [s.split.dataset for s in results.scores] == ["sts12-hand", "stsb-test"]  # median 4.9 is out of range

    for score in results.scores:
        subset = score.split.subset
        sims = torch.nn.functional.cosine_similarity(encode(subset.sentences1), encode(subset.sentences2)).numpy()
        gold = np.asarray(subset.scores)
        mask = score.split.is_cont
        assert score.cont_spearman == pytest.approx(sts_correlation(sims[mask], gold[mask])["spearman"])
        assert score.oppn_spearman == pytest.approx(sts_correlation(sims[~mask], gold[~mask])["spearman"])
    cont = [(s.cont_spearman, s.split.num_cont) for s in results.scores]
    assert results.cont_weighted == pytest.approx(sum(v * n for v, n in cont) / sum(n for _, n in cont))
    oppn = [(s.oppn_spearman, s.split.num_oppn) for s in results.scores]
    assert results.oppn_weighted == pytest.approx(sum(v * n for v, n in oppn) / sum(n for _, n in oppn))
    as_dict = results.to_dict()
    assert (
        as_dict["datasets"]["sts12-hand"]["num_cont"] == 3
        and "cont_spearman" not in as_dict["datasets"]["sts12-skewed"]
    )


# --------------------------------------------------------------------------------------------------------------------
# Transformation probe
# --------------------------------------------------------------------------------------------------------------------


def write_tsv(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_probe_reports_mean_cosine_mer_and_paraphrase_over_negation(tmp_path: Path) -> None:
    tsv = write_tsv(
        tmp_path / "probe.tsv",
        [
            "sentence\tnegation\tparaphrase",  # any order, any subset of the transformations
            "s one\tn one\tp one",
            "s two\tn two\tp two",
            "s three\t\tp three",  # no negation for this row
        ],
    )
    r = 1 / math.sqrt(2)
    vectors = {
        "s one": [1.0, 0.0], "p one": [1.0, 0.0], "n one": [0.0, 1.0],  # paraphrase 1.0 > negation 0.0
        "s two": [1.0, 0.0], "p two": [0.0, 1.0], "n two": [r, r],  # paraphrase 0.0 < negation 0.707
        "s three": [1.0, 0.0], "p three": [0.6, 0.8],  # paraphrase 0.6
    }  # fmt: skip
    probe = load_probe_tsv(tsv)
    assert list(probe.transformations) == ["negation", "paraphrase"]
    assert probe.transformations["negation"] == ["n one", "n two", None]

    results = probe_transformations(table_encode(vectors), probe)
    assert results.stats["paraphrase"].num_rows == 3 and results.stats["negation"].num_rows == 2
    assert results.stats["paraphrase"].mean_cosine == pytest.approx((1.0 + 0.0 + 0.6) / 3, abs=1e-6)
    assert results.stats["negation"].mean_cosine == pytest.approx((0.0 + r) / 2, abs=1e-6)
    expected_mer = np.mean([match_error_rate(f"s {n}", f"p {n}") for n in ("one", "two", "three")])
    assert results.stats["paraphrase"].mean_mer == pytest.approx(expected_mer)
    assert results.paraphrase_over_negation == 0.5 and results.num_compared == 2
    assert math.isnan(results.similarities["negation"][2])
    assert set(results.to_dict()) == {"transformations", "paraphrase_over_negation", "num_compared"}


def test_shipped_probe_has_every_transformation_for_every_row() -> None:
    probe = load_probe_tsv(DEFAULT_PROBE_TSV)
    assert 20 <= len(probe) <= 40
    assert list(probe.transformations) == list(TRANSFORMATIONS)
    assert all(text for column in probe.transformations.values() for text in column)


@pytest.mark.parametrize(
    "lines, message",
    [
        (["text\tparaphrase", "a\tb"], "has no 'sentence' column; its header is \\['text', 'paraphrase'\\]"),
        (["sentence\tparaphrase\tsynonym", "a\tb\tc"], "unknown columns \\['synonym'\\]. Valid columns: sentence"),
        (["sentence", "a"], "no transformation column"),
        (["sentence\tnegation", "a\tb\tc"], "line 2: 3 TAB-separated fields, the header has 2"),
        (["sentence\tnegation"], "has a header but no rows"),
        (["sentence\tnegation\tnegation", "a\tb\tc"], "repeats a column"),
    ],
)
def test_probe_file_errors_name_the_problem(tmp_path: Path, lines: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_probe_tsv(write_tsv(tmp_path / "bad.tsv", lines))


def test_probe_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.tsv"):
        load_probe_tsv(tmp_path / "nope.tsv")


# --------------------------------------------------------------------------------------------------------------------
# In-batch negative similarities
# --------------------------------------------------------------------------------------------------------------------


def test_similarity_histogram_counts_hand_made_values() -> None:
    values = [-1.0, -0.95, 0.0, 0.05, 0.69, 0.7, 0.75, 1.0, 1.0000001, -1.0000001]
    histogram = similarity_histogram(values)
    assert len(histogram.edges) == 21 and histogram.edges[17] == pytest.approx(0.7)
    expected = np.zeros(20, dtype=int)
    for index in (0, 0, 10, 10, 16, 17, 17, 19, 19, 0):  # 0.7 starts its bin; values past +-1 are clipped
        expected[index] += 1
    assert histogram.counts.tolist() == expected.tolist()
    assert histogram.total == 10 and histogram.shares.sum() == pytest.approx(1.0)
    assert similarity_histogram([0.1, 0.6, -0.5], bin_width=0.5).counts.tolist() == [0, 1, 1, 1]
    with pytest.raises(ValueError, match="whole bins"):
        similarity_histogram([0.1], bin_width=0.3)
    with pytest.raises(ValueError, match="no similarities"):
        similarity_histogram([])


def test_in_batch_negative_similarities_shapes_and_values() -> None:
    corpus = [f"sentence {i}" for i in range(10)]
    one_hot = {s: np.eye(10)[i].tolist() for i, s in enumerate(corpus)}
    sims = in_batch_negative_similarities(table_encode(one_hot), corpus, batch_size=4, num_batches=5)
    assert sims.shape == (2, 6)  # only 2 full batches of 4 in 10 sentences; 4 * 3 / 2 pairs each
    assert np.allclose(sims, 0.0)
    same = {s: [1.0, 2.0] for s in corpus}
    assert np.allclose(in_batch_negative_similarities(table_encode(same), corpus, batch_size=5, num_batches=1), 1.0)
    first = in_batch_negative_similarities(hashed_encode(), corpus, batch_size=3, num_batches=2, seed=1)
    assert np.array_equal(first, in_batch_negative_similarities(hashed_encode(), corpus, 3, 2, seed=1))
    with pytest.raises(ValueError, match="fewer than one batch of 11"):
        in_batch_negative_similarities(hashed_encode(), corpus, batch_size=11)
    with pytest.raises(ValueError, match="batch_size must be >= 2"):
        in_batch_negative_similarities(hashed_encode(), corpus, batch_size=1)


# --------------------------------------------------------------------------------------------------------------------
# python -m hf_cse.eval --alignment_uniformity
# --------------------------------------------------------------------------------------------------------------------


def test_eval_cli_writes_alignment_uniformity(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    sts_dir = write_senteval_dir(tmp_path / "sts")
    output = tmp_path / "sts.json"
    argv = ["--model_name_or_path", str(tiny_encoder_dir), "--pooler", "avg", "--sts_dir", str(sts_dir)]
    argv += ["--tasks", "stsb", "--device", "cpu", "--alignment_uniformity", "--output_json", str(output)]
    result = eval_cli.main(argv)
    geometry = result["alignment_uniformity"]
    assert geometry["stsb_split"] == "test" and geometry["min_score"] == 4.0
    assert 0.0 <= geometry["alignment"] <= 4.0 and -4.0 * 2 <= geometry["uniformity"] <= 0.0
    assert '"alignment_uniformity"' in output.read_text()


# --------------------------------------------------------------------------------------------------------------------
# Real data: OssCSE's Table 2 (Cont., Oppn.) per dataset
# --------------------------------------------------------------------------------------------------------------------

PAPER_TABLE2 = {
    "sts12-MSRvid": (406, 344),
    "sts13-headlines": (495, 255),
    "sts13-OnWN": (286, 275),
    "sts14-deft-forum": (251, 199),
    "sts14-headlines": (483, 267),
    "sts14-images": (461, 289),
    "sts15-answers-students": (494, 256),
    "sts15-headlines": (517, 233),
    "sts15-images": (548, 202),
    "sts16-answer-answer": (134, 120),
    "sts16-headlines": (160, 89),
    "sts16-plagiarism": (153, 77),
    "sts16-postediting": (180, 64),
    "sts16-question-question": (75, 134),
    "stsb-train": (3532, 2217),
    "stsb-test": (855, 524),
}


@pytest.mark.slow  # about 5 s of MER computations over 20,000 pairs
def test_splits_are_close_to_paper_table2(shared_data_dir: Path) -> None:
    subsets = load_surface_structure_datasets(shared_data_dir / "sts_senteval_tok")
    # (2, 3.2) is the range that selects Table 2's datasets; the paper's text says (2, 3.5), see surface_structure.py.
    kept = {s.dataset: s for s in (split_surface_structure(x, (2.0, 3.2)) for x in subsets) if s.kept}
    assert set(kept) == set(PAPER_TABLE2)
    for name, (cont, oppn) in PAPER_TABLE2.items():
        assert kept[name].num_cont + kept[name].num_oppn == cont + oppn, name
        # Within 5% of the dataset: the paper's MER keeps punctuation tokens, match_error_rate drops them.
        assert abs(kept[name].num_cont - cont) <= 0.05 * (cont + oppn), (name, kept[name].num_cont, cont)
    # Plain jiwer (the paper's apparent MER) is closer: 95 Cont. pairs off in total against 202 when measured.
    plain = {s.dataset: s for s in (split_surface_structure(x, (2.0, 3.2), "plain") for x in subsets) if s.kept}
    off = {mer: sum(abs(splits[n].num_cont - PAPER_TABLE2[n][0]) for n in PAPER_TABLE2) for mer, splits in
           (("plain", plain), ("normalized", kept))}  # fmt: skip
    assert off["plain"] < off["normalized"], off
    assert plain["sts12-MSRvid"].num_cont == PAPER_TABLE2["sts12-MSRvid"][0]
