"""Hard-negative mining (issue 52, item 5): ``python -m hf_cse.mine`` and :mod:`hf_cse.mining`.

The mined negatives equal a brute-force reference (the whole similarity matrix in float64, then the rule) whatever
the chunking; the margin rule (NV-Retriever's TopK-PercPos) skips exactly the candidates scored above it; ties go by
corpus order; the output reads back as triplets, byte-identical on a second run; bad input is one line, before the
model loads where it can be.

The tiny encoder pools with ``avg`` here: its ``cls`` embeddings of different sentences agree to 1e-5 (a random
model), too close to tell apart from float32 rounding.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from common.examples import run_example

from hf_cse import SentenceEncoder
from hf_cse.commands.cli import run_command
from hf_cse.commands.mine import main
from hf_cse.mining import (
    TooFewCandidatesError,
    candidate_corpus,
    mine_hard_negatives,
    mine_pairs,
    top_k_in_corpus_order,
)
from hf_cse.training.data.pairs import read_pairs

PROG = "python -m hf_cse.mine"

# Hand-made pairs with each case of the text rule: a positive shared by two anchors ("kids eat food on the street"), an
# anchor in two rows with two positives ("the dog runs in the park"), anchors that are each other's positive ("the red
# car is big" / "the big red car"). The positives share most words with their anchors, so that the random model
# scores them close enough to leave candidates under the margin.
PAIRS = [
    ("a man is playing a guitar", "a man plays a guitar"),
    ("a woman plays the piano", "the woman is playing a piano"),
    ("the dog runs in the park", "a dog is running in a park"),
    ("a cat is in the house", "the cat is inside the house"),
    ("children eat food on the street", "kids eat food on the street"),
    ("the red car is big", "the big red car"),
    ("a small blue car", "a small blue car is here"),
    ("the child likes the dog", "the kid likes a dog"),
    ("children eat food in the street", "kids eat food on the street"),
    ("the woman is running", "the woman is running fast"),
    ("the dog runs in the park", "the dog is playing in the park"),
    ("a dog is not a cat", "the cat is inside the house"),
    ("the big red car", "the red car is big"),
]
ANCHORS = [anchor for anchor, _ in PAIRS]
POSITIVES = [positive for _, positive in PAIRS]

UNIT_ROUNDOFF = 2.0**-24
"""float32's unit roundoff."""


def score_tolerance(dim: int) -> float:
    """A bound on how far a float32 cosine similarity of two ``dim``-dimensional embeddings (normalized in float32,
    then one dot product) is from the float64 one: the dot product errs by at most ``dim`` roundoffs (the sum of
    ``|x_i y_i|`` is at most 1 for unit vectors) and each normalization by about ``dim / 2 + 2``, twice that over
    for safety."""
    return 2 * (dim + 2 * (dim / 2 + 2)) * UNIT_ROUNDOFF


def write_pairs(path: Path, pairs: list[tuple[str, str]] = PAIRS) -> Path:
    path.write_text("anchor,positive\n" + "".join(f"{a},{p}\n" for a, p in pairs), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def encoder(tiny_encoder_dir: Path) -> SentenceEncoder:
    return SentenceEncoder.from_pretrained(tiny_encoder_dir, pooler="avg", device="cpu")


@pytest.fixture(scope="module")
def embeddings(encoder: SentenceEncoder) -> tuple[torch.Tensor, torch.Tensor]:
    """The anchors' ``[A, D]`` and the corpus's ``[N, D]`` embeddings (float32), each text encoded once."""
    corpus = candidate_corpus(ANCHORS, POSITIVES)
    texts = list(dict.fromkeys([*ANCHORS, *corpus.texts]))
    encoded = encoder.encode(texts)
    return encoded[[texts.index(a) for a in ANCHORS]], encoded[[texts.index(t) for t in corpus.texts]]


def reference(
    anchor_embeddings: torch.Tensor, corpus_embeddings: torch.Tensor, k: int, margin: float, tolerance: float
) -> tuple[list[list[int]], list[int]]:
    """The rule written out on the whole float64 similarity matrix: each anchor's ``k`` negatives and its candidates
    skipped by the margin. Asserts that no decision is within ``tolerance`` of a tie, so that float32 rounding
    cannot change it."""
    texts = candidate_corpus(ANCHORS, POSITIVES).texts
    a = torch.nn.functional.normalize(anchor_embeddings.double(), dim=1)
    c = torch.nn.functional.normalize(corpus_embeddings.double(), dim=1)
    scores = (a @ c.T).tolist()
    negatives, skipped = [], []
    for i, (anchor, positive) in enumerate(PAIRS):
        known = {p for other, p in PAIRS if other == anchor} | {anchor}
        threshold = margin * scores[i][texts.index(positive)]
        candidates = [j for j, text in enumerate(texts) if text not in known]
        for j in candidates:  # the margin's decisions, and the threshold's own error (margin x tolerance)
            assert abs(scores[i][j] - threshold) > 3 * tolerance, f"anchor {i}: candidate {j} is at the margin"
        eligible = sorted((j for j in candidates if scores[i][j] <= threshold), key=lambda j: (-scores[i][j], j))
        assert len(eligible) >= k, f"anchor {i}: {len(eligible)} eligible candidates"
        ranked = [scores[i][j] for j in eligible[: k + 1]]
        assert all(x - y > 2 * tolerance for x, y in zip(ranked, ranked[1:], strict=False)), f"anchor {i}: a tie"
        negatives.append(eligible[:k])
        skipped.append(len(candidates) - len(eligible))
    return negatives, skipped


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("margin", [1.0, 0.99])
def test_mining_equals_the_brute_force_reference_for_every_chunk_size(
    embeddings: tuple[torch.Tensor, torch.Tensor], k: int, margin: float
) -> None:
    anchor_embeddings, corpus_embeddings = embeddings
    corpus = candidate_corpus(ANCHORS, POSITIVES)
    tolerance = score_tolerance(anchor_embeddings.shape[1])
    expected, expected_skipped = reference(anchor_embeddings, corpus_embeddings, k, margin, tolerance)
    assert sum(expected_skipped) > 0 or margin == 1.0  # the margin is exercised
    for chunk_size in (1, 2, 5, len(ANCHORS), None):
        mined = mine_hard_negatives(
            anchor_embeddings,
            corpus_embeddings,
            corpus.positive_index,
            corpus.excluded,
            num_negatives=k,
            margin=margin,
            chunk_size=chunk_size,
        )
        assert mined.indices.tolist() == expected, chunk_size
        assert mined.skipped_by_margin.tolist() == expected_skipped, chunk_size
        assert mined.indices.shape == mined.scores.shape == (len(ANCHORS), k)


def test_the_corpus_is_the_distinct_positives_and_known_positives_are_skipped_by_text() -> None:
    corpus = candidate_corpus(ANCHORS, POSITIVES)
    assert corpus.texts == list(dict.fromkeys(POSITIVES))
    assert [corpus.texts[j] for j in corpus.positive_index.tolist()] == POSITIVES
    excluded = {(row, corpus.texts[j]) for row, j in corpus.excluded.tolist()}
    assert excluded == {
        (2, "the dog is playing in the park"),  # the other positive of "the dog runs in the park"
        (10, "a dog is running in a park"),
        (5, "the red car is big"),  # the anchor itself, another row's positive
        (12, "the big red car"),
    }
    assert corpus.candidates_per_anchor().tolist() == [
        len(corpus.texts) - 1 - sum(r == row for r, _ in excluded) for row in range(len(PAIRS))
    ]


def unit(cosine: float) -> list[float]:
    """A 2-d unit vector whose cosine similarity with ``[1, 0]`` is ``cosine``."""
    return [cosine, math.sqrt(1 - cosine**2)]


# One anchor [1, 0]; its positive (corpus 0) scores 0.8, so the margin 0.95 skips what scores above 0.76.
HAND_CORPUS = torch.tensor([unit(0.8), unit(0.9), unit(0.77), unit(0.75), unit(0.5), unit(0.75), unit(1.0)])
HAND_ANCHOR = torch.tensor([[1.0, 0.0]])
HAND_EXCLUDED = torch.tensor([[0, 6]])  # corpus 6 is the anchor's own text


@pytest.mark.parametrize(
    ("margin", "k", "negatives", "skipped"),
    [
        (0.95, 1, [3], 2),  # 0.9 and 0.77 skipped; 3 and 5 tie at 0.75: the first in the corpus
        (0.95, 2, [3, 5], 2),
        (0.95, 3, [3, 5, 4], 2),
        (1.0, 1, [2], 1),  # only 0.9 is above the positive's 0.8
        (1.0, 3, [2, 3, 5], 1),
        (0.9, 1, [4], 4),  # above 0.72: all but 0.5
    ],
)
def test_the_margin_skips_exactly_the_candidates_above_it(
    margin: float, k: int, negatives: list[int], skipped: int
) -> None:
    for chunk_size in (1, None):
        mined = mine_hard_negatives(
            HAND_ANCHOR,
            HAND_CORPUS,
            torch.tensor([0]),
            HAND_EXCLUDED,
            num_negatives=k,
            margin=margin,
            chunk_size=chunk_size,
        )
        assert mined.indices.tolist() == [negatives]
        assert mined.skipped_by_margin.tolist() == [skipped]
        assert mined.positive_scores.tolist() == pytest.approx([0.8])


def test_an_anchor_with_too_few_candidates_is_an_error_naming_the_count() -> None:
    with pytest.raises(TooFewCandidatesError, match=r"^anchor 1 has 3 eligible candidates of the corpus's 7") as err:
        mine_hard_negatives(HAND_ANCHOR, HAND_CORPUS, torch.tensor([0]), HAND_EXCLUDED, num_negatives=4)
    assert (err.value.row, err.value.eligible, err.value.skipped_by_margin) == (0, 3, 2)


def test_embeddings_that_are_not_finite_are_refused() -> None:
    """``torch.topk`` would rank a NaN score above every other."""
    corpus = HAND_CORPUS.clone()
    corpus[3, 0] = math.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        mine_hard_negatives(HAND_ANCHOR, corpus, torch.tensor([0]), HAND_EXCLUDED)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_top_k_breaks_ties_by_column_as_a_full_stable_sort_does(k: int) -> None:
    generator = torch.Generator().manual_seed(k)
    scores = torch.randint(0, 4, (50, 12), generator=generator).float()  # many ties, at the k-th place too
    scores[torch.rand(50, 12, generator=generator) < 0.2] = -math.inf
    scores[:, :k] = torch.randint(0, 4, (50, k), generator=generator).float()  # at least k finite scores a row
    indices, values = top_k_in_corpus_order(scores, k)
    expected = scores.argsort(dim=1, descending=True, stable=True)[:, :k]
    assert indices.tolist() == expected.tolist()
    assert values.tolist() == scores.gather(1, expected).tolist()


def test_mine_pairs_gives_the_texts_of_the_mined_indices(
    encoder: SentenceEncoder, embeddings: tuple[torch.Tensor, torch.Tensor]
) -> None:
    corpus = candidate_corpus(ANCHORS, POSITIVES)
    mined = mine_pairs(encoder, ANCHORS, POSITIVES, num_negatives=2, margin=1.0, chunk_size=4)
    indices = mine_hard_negatives(*embeddings, corpus.positive_index, corpus.excluded, num_negatives=2, margin=1.0)
    assert mined.negatives == [[corpus.texts[j] for j in row] for row in indices.indices.tolist()]
    assert (mined.anchors, mined.positives, mined.corpus_size) == (ANCHORS, POSITIVES, len(corpus.texts))
    assert mined.skipped_by_margin == int(indices.skipped_by_margin.sum())


# --------------------------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------------------------


def mine_argv(model: Path | str, train_file: Path, output: Path, *extra: str) -> list[str]:
    return [
        "--model_name_or_path",
        str(model),
        "--pooler",
        "avg",
        "--train_file",
        str(train_file),
        "--output",
        str(output),
        "--device",
        "cpu",
        "--disable_tqdm",
        *extra,
    ]


@pytest.mark.parametrize(
    ("k", "header"),
    [(1, "sent0,sent1,hard_neg"), (2, "anchor,positive,negative_1,negative_2")],
)
def test_the_output_reads_back_as_triplets(
    tiny_encoder_dir: Path,
    encoder: SentenceEncoder,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    k: int,
    header: str,
) -> None:
    output = tmp_path / "mined" / "triplets.csv"  # its folder is created
    argv = mine_argv(tiny_encoder_dir, write_pairs(tmp_path / "pairs.csv"), output, "--num_negatives", str(k))
    summary = main([*argv, "--margin", "1.0"])
    assert output.read_text(encoding="utf-8").split("\n", 1)[0] == header
    triplets = read_pairs(str(output))
    assert triplets.column_names == ["text", "positive", *(f"negative_{i}" for i in range(1, k + 1))]
    assert (triplets["text"], triplets["positive"]) == (ANCHORS, POSITIVES)
    mined = mine_pairs(encoder, ANCHORS, POSITIVES, num_negatives=k, margin=1.0)
    assert [[row[f"negative_{i}"] for i in range(1, k + 1)] for row in triplets] == mined.negatives
    assert summary["rows"] == len(PAIRS) and summary["skipped_by_margin"] == mined.skipped_by_margin
    distinct = len(set(POSITIVES))
    assert capsys.readouterr().out.endswith(
        f"Wrote {len(PAIRS)} rows ({k} hard negative{'s' if k > 1 else ''} each, mined from {distinct} distinct "
        f"positives) to {output}; the margin (1 x the positive's score) skipped {mined.skipped_by_margin} "
        f"candidate(s) of {mined.anchors_with_skips} anchor(s).\n"
    )


def test_a_file_with_hard_negatives_gets_them_replaced(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """SimCSE's own layout in, with its hard negatives: the mined ones take their place."""
    train_file = tmp_path / "nli.csv"
    train_file.write_text(
        "sent0,sent1,hard_neg\n" + "".join(f"{a},{p},given negative\n" for a, p in PAIRS), encoding="utf-8"
    )
    main(mine_argv(tiny_encoder_dir, train_file, tmp_path / "out.csv", "--margin", "1.0"))
    assert "given negative" not in (tmp_path / "out.csv").read_text(encoding="utf-8")


def test_two_runs_write_the_same_bytes(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    train_file = write_pairs(tmp_path / "pairs.csv")
    for name in ("first.csv", "second.csv"):
        main(mine_argv(tiny_encoder_dir, train_file, tmp_path / name, "--num_negatives", "2", "--margin", "0.99"))
    assert (tmp_path / "first.csv").read_bytes() == (tmp_path / "second.csv").read_bytes()


def run_mine(argv: list[str], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """``python -m hf_cse.mine ARGV`` in this process: its exit status and stderr."""
    monkeypatch.delenv("HF_CSE_TRACEBACK", raising=False)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        run_command(main, PROG, argv)
    return exit_info.value.code, capsys.readouterr().err


def assert_one_line(code: int, err: str, message: str) -> None:
    """Exit status 2 and one error line, last (transformers' "Loading weights" bar may come before it)."""
    assert code == 2, err
    lines = err.rstrip("\n").split("\n")
    assert lines[-1].startswith(f"{PROG}: error: ") and err.count(PROG) == 1 and err.endswith("\n"), err
    assert message in lines[-1], err


def test_an_existing_output_is_kept_unless_overwrite(
    tiny_encoder_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "triplets.csv"
    output.write_text("keep me\n", encoding="utf-8")
    argv = mine_argv(tiny_encoder_dir, write_pairs(tmp_path / "pairs.csv"), output, "--margin", "1.0")
    code, err = run_mine(argv, capsys, monkeypatch)
    assert_one_line(code, err, f"--output {str(output)!r} exists; pass --overwrite to replace it.")
    assert output.read_text(encoding="utf-8") == "keep me\n"
    main([*argv, "--overwrite"])
    assert output.read_text(encoding="utf-8").startswith("sent0,sent1,hard_neg\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pairs.csv", "triplets.csv"]  # no temporary file


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"--num_negatives": "0"}, "--num_negatives: 0 is not valid: it takes an integer in [1, 16777216] (hard "),
        ({"--margin": "0"}, "--margin: 0 is not valid: it takes a finite number in (0, 1] (a candidate is skipped"),
        ({"--margin": "1.5"}, "--margin: 1.5 is not valid: "),
        ({"--margin": "nan"}, "--margin: nan is not valid: "),
        ({"--chunk_size": "0"}, "--chunk_size: 0 is not valid: it takes an integer in [1, 16777216]."),
        ({"--output": "triplets.txt"}, "--output 'triplets.txt': write a .csv file"),
        ({"--train_file": "missing.csv"}, "missing.csv' does not exist"),
        ({"--train_file": "sentences.txt"}, "holds one sentence a row (a 'text' column): mining needs"),
        ({"--num_negatives": "20"}, "pair 1 (anchor 'a man is playing a guitar') has 10 candidate(s) left"),
    ],
    ids=["k0", "margin0", "margin1.5", "margin-nan", "chunk0", "suffix", "missing-file", "sentences", "too-few"],
)
def test_bad_input_is_one_line_before_the_model_loads(
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    change: dict[str, str],
    message: str,
) -> None:
    """The model named does not exist: each error comes before it would load."""
    monkeypatch.chdir(tmp_path)
    write_pairs(tmp_path / "pairs.csv")
    (tmp_path / "sentences.txt").write_text("one sentence\nanother one\n", encoding="utf-8")
    argv = mine_argv(tmp_path / "no_model", Path("pairs.csv"), Path("out.csv"))
    for flag, value in change.items():
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    code, err = run_mine(argv, capsys, monkeypatch)
    assert_one_line(code, err, message)
    assert not (tmp_path / "out.csv").exists()


def test_a_missing_model_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch):
    missing = tmp_path / "no_model"
    argv = mine_argv(missing, write_pairs(tmp_path / "pairs.csv"), tmp_path / "out.csv")
    code, err = run_mine(argv, capsys, monkeypatch)
    assert_one_line(code, err, f"Model folder {str(missing)!r} does not exist.")


def test_too_few_candidates_after_the_margin_is_one_line_naming_the_counts(
    tiny_encoder_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default margin (0.95) skips nearly every candidate of a random model's embeddings."""
    argv = mine_argv(tiny_encoder_dir, write_pairs(tmp_path / "pairs.csv"), tmp_path / "out.csv")
    code, err = run_mine([*argv, "--num_negatives", "3"], capsys, monkeypatch)
    assert_one_line(code, err, "scored above --margin 0.95 x its positive's score), fewer than --num_negatives 3")
    assert not (tmp_path / "out.csv").exists()


def test_the_docs_python_example_mines(tiny_encoder_dir: Path) -> None:
    """examples/python/mine_negatives.py, on the tiny model pooled as ``avg`` (see the module docstring)."""
    namespace = run_example(
        "mine_negatives.py",
        {'"outputs/simcse-minilm-wiki1m"': f'{str(tiny_encoder_dir)!r}, pooler="avg"'},
    )
    mined = namespace["mined"]
    assert len(mined.negatives) == len(namespace["anchors"]) == 5
    for positive, negatives in zip(mined.positives, mined.negatives, strict=True):
        assert len(negatives) == 1 and negatives[0] != positive and negatives[0] in mined.positives
