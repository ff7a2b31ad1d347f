"""SentEval transfer tasks: loaders, the logistic-regression protocol and the CLI, on synthetic data in ``tmp_path``.

Each synthetic task's label is decided by a word, so a bag-of-words encoder makes the classes linearly separable;
shuffled labels must fall back to chance, so the accuracy checks can fail.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path

import pytest
import torch
from conftest import HANG_GUARD_S

from hf_cse.evaluation import TRANSFER_TASKS, evaluate_transfer, load_transfer_tasks

REPO_ROOT = Path(__file__).resolve().parents[1]

FILLER = (
    "the a movie film story plot actor scene music time people day city house road car tree river book song night "
    "water light world place"
).split()
# One keyword per TREC coarse class.
TREC_KEYWORDS = {"ABBR": "abbr", "DESC": "describe", "ENTY": "thing", "HUM": "who", "LOC": "where", "NUM": "many"}
DIM = 201  # the smallest size where the words of VOCAB below get distinct buckets


def bucket(word: str) -> int:
    return zlib.crc32(word.encode("utf-8")) % DIM


VOCAB = (*FILLER, "good", "bad", "café", "shared", "line", "?", *TREC_KEYWORDS.values())
assert len({bucket(word) for word in VOCAB}) == len(VOCAB), "hash collision: change DIM"


def bag_of_words(sentences: list[str]) -> torch.Tensor:
    """Deterministic hashing encoder: word counts in ``DIM`` buckets, ``[N, DIM]``."""
    embeddings = torch.zeros(len(sentences), DIM)
    for row, sentence in enumerate(sentences):
        for word in sentence.split():
            embeddings[row, bucket(word)] += 1.0
    return embeddings


def sentence(rng: random.Random, keyword: str | None = None) -> str:
    words = rng.sample(FILLER, rng.randint(4, 7))
    if keyword is not None:
        words.insert(rng.randrange(len(words) + 1), keyword)
    return " ".join(words)


def write_lines(path: Path, lines: list[str], encoding: str = "utf-8") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding=encoding)


def write_senteval(root: Path, seed: int = 0, n: int = 50) -> Path:
    """Every task in SentEval's data/downstream layout; ``n`` examples per class and split (fewer for dev/test)."""
    rng = random.Random(seed)
    cv_files = {
        "MR": ("rt-polarity.pos", "rt-polarity.neg"),
        "CR": ("custrev.pos", "custrev.neg"),
        "SUBJ": ("subj.objective", "subj.subjective"),
        "MPQA": ("mpqa.pos", "mpqa.neg"),
    }
    for folder, (positive, negative) in cv_files.items():
        # latin-1 as SentEval reads it; the "café" line checks the decoding, "a shared good line" the de-duplication.
        positives = ["a shared good line", "café good", *(sentence(rng, "good") for _ in range(n))]
        write_lines(root / folder / positive, positives, "latin-1")
        write_lines(root / folder / negative, ["", *(sentence(rng, "bad") for _ in range(n))], "latin-1")
    for split, size in (("train", n), ("dev", n // 2), ("test", n // 2)):
        lines = [f"{sentence(rng, word)}\t{label}" for _ in range(size) for word, label in (("good", 1), ("bad", 0))]
        write_lines(root / "SST" / "binary" / f"sentiment-{split}", lines)
    for file, size in (("train_5500.label", n // 2), ("TREC_10.label", n // 5)):
        lines = [
            f"{label}:other {sentence(rng, word)} ?" for _ in range(size) for label, word in TREC_KEYWORDS.items()
        ]
        write_lines(root / "TREC" / file, lines, "latin-1")
    for file, size in (("msr_paraphrase_train.txt", n), ("msr_paraphrase_test.txt", n // 2)):
        lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for i in range(size):
            first = sentence(rng)
            words = first.split()
            words[rng.randrange(len(words))] = rng.choice(FILLER)  # a near-identical rewrite: one word swapped
            lines.append(f"1\t{2 * i}\t{2 * i + 1}\t{first}\t{' '.join(words)}")
            lines.append(f"0\t{2 * i}\t{2 * i + 1}\t{first}\t{sentence(rng)}")  # an unrelated sentence
        write_lines(root / "MRPC" / file, lines, "utf-8-sig")
    return root


@pytest.fixture(autouse=True)
def one_thread():
    """The classifiers here are tiny: thread synchronisation would dominate them (minutes, not seconds, on 2 cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def senteval_dir(tmp_path: Path) -> Path:
    return write_senteval(tmp_path / "downstream")


def test_loaders_read_senteval_layout(senteval_dir: Path):
    loaded = load_transfer_tasks(list(TRANSFER_TASKS), senteval_dir)
    assert list(loaded) == list(TRANSFER_TASKS)
    mr = loaded["mr"]["all"]
    assert len(mr) == 2 * 50 + 2 and mr.labels.count(1) == 52  # the blank line of rt-polarity.neg is skipped
    assert "café good" in mr.sentences1  # decoded as latin-1
    assert set(loaded["sst2"]) == {"train", "dev", "test"} and len(loaded["sst2"]["dev"]) == 50
    trec = loaded["trec"]["test"]
    assert sorted(set(trec.labels)) == list(range(6)) and not trec.sentences1[0].startswith(("ABBR", "other"))
    mrpc = loaded["mrpc"]["train"]
    assert len(mrpc) == 100 and mrpc.sentences2 is not None and mrpc.labels[:2] == [1, 0]


def test_separable_tasks_are_learned_and_each_sentence_encoded_once(senteval_dir: Path):
    calls: list[str] = []

    def encode(sentences: list[str]) -> torch.Tensor:
        calls.extend(sentences)
        return bag_of_words(sentences)

    results = evaluate_transfer(encode, TRANSFER_TASKS, senteval_dir, kfold=5, batch_size=64)
    assert list(results) == [*TRANSFER_TASKS, "avg"]
    for task in TRANSFER_TASKS:
        assert results[task]["acc"] >= 95.0, (task, results[task])
    assert results["mr"]["num_examples"] == 102 and results["trec"]["num_examples"] == 60
    assert results["sst2"]["dev_acc"] >= 95.0 and results["mrpc"]["f1"] >= 95.0
    assert results["avg"]["acc"] == pytest.approx(sum(results[t]["acc"] for t in TRANSFER_TASKS) / 7)

    # Every distinct sentence of every task went through encode exactly once ("a shared good line" is in 4 files).
    loaded = load_transfer_tasks(TRANSFER_TASKS, senteval_dir)
    expected = {s for splits in loaded.values() for split in splits.values() for s in split.sentences()}
    assert Counter(calls).most_common(1)[0][1] == 1 and set(calls) == expected

    again = evaluate_transfer(bag_of_words, TRANSFER_TASKS, senteval_dir, kfold=5)
    assert again == results  # deterministic given the seed, whatever the encoding batch size


def test_random_labels_give_chance_accuracy(tmp_path: Path):
    rng = random.Random(1)
    lines = {"rt-polarity.pos": [], "rt-polarity.neg": []}
    for _ in range(200):  # the keyword no longer decides the label
        lines[rng.choice(list(lines))].append(sentence(rng, rng.choice(("good", "bad"))))
    for file, sentences in lines.items():
        write_lines(tmp_path / "MR" / file, sentences, "latin-1")
    results = evaluate_transfer(bag_of_words, ["mr"], tmp_path, kfold=5)
    assert results["mr"]["acc"] < 70.0


def test_errors_name_the_file_line_and_valid_tasks(senteval_dir: Path):
    with pytest.raises(ValueError, match=r"Unknown transfer task 'sick'\. Valid tasks: mr, cr, subj, mpqa"):
        evaluate_transfer(bag_of_words, ["mr", "sick"], senteval_dir)
    with pytest.raises(ValueError, match=r"Duplicate transfer tasks in \['MR', 'mr'\]"):
        evaluate_transfer(bag_of_words, ["MR", "mr"], senteval_dir)
    with pytest.raises(ValueError, match="No transfer task given. Valid tasks: mr, cr"):
        evaluate_transfer(bag_of_words, [], senteval_dir)

    missing = senteval_dir / "CR" / "custrev.neg"
    missing.unlink()
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        load_transfer_tasks(["cr"], senteval_dir)

    trec = senteval_dir / "TREC" / "TREC_10.label"
    lines = trec.read_text(encoding="latin-1").split("\n")
    lines[2] = "How far is it without a label ?"
    trec.write_text("\n".join(lines), encoding="latin-1")
    with pytest.raises(ValueError, match=r"TREC_10\.label' line 3: expected 'COARSE:fine question'"):
        load_transfer_tasks(["trec"], senteval_dir)

    with pytest.raises(ValueError, match=r"kfold must be at most the number of examples \(102\), got 1000"):
        evaluate_transfer(bag_of_words, ["mpqa"], senteval_dir, kfold=1000)


def test_cli_rejects_bad_arguments_before_loading_the_model(senteval_dir: Path, capsys: pytest.CaptureFixture):
    from hf_cse.commands.cli import run_command
    from hf_cse.commands.transfer import main

    base = ["--model_name_or_path", str(senteval_dir / "no_model_here"), "--data_dir"]  # never loaded
    cases = [
        ([str(senteval_dir), "--tasks", "mr", "sts12"], "Valid tasks: mr, cr"),
        ([str(senteval_dir / "nope")], "nope"),
        ([str(senteval_dir), "--kfold", "1"], "--kfold: 1 is not valid: it takes an integer in [2, "),
        ([str(senteval_dir), "--batch_size", "0"], "--batch_size: 0 is not valid: it takes an integer in [1, "),
    ]
    (senteval_dir / "SUBJ" / "subj.subjective").unlink()
    cases.append(([str(senteval_dir), "--tasks", "mr", "subj"], str(senteval_dir / "SUBJ" / "subj.subjective")))
    for args, message in cases:
        with pytest.raises(SystemExit, match="^2$"):
            run_command(main, "python -m hf_cse.transfer", [*base, *args])
        assert message in capsys.readouterr().err


def test_cli_smoke(tiny_encoder_dir: Path, tmp_path: Path):
    data_dir = write_senteval(tmp_path / "downstream", n=8)
    output = tmp_path / "out" / "transfer.json"
    cmd = [
        sys.executable,
        "-m",
        "hf_cse.transfer",
        "--model_name_or_path",
        str(tiny_encoder_dir),
        "--pooler",
        "avg",
        "--data_dir",
        str(data_dir),
        "--kfold",
        "2",
        "--batch_size",
        "16",
        "--device",
        "cpu",
        "--output_json",
        str(output),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env["OMP_NUM_THREADS"] = "1"  # as the one_thread fixture
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "dev_acc" in proc.stdout and "mrpc" in proc.stdout

    result = json.loads(output.read_text())
    assert list(result) == [*TRANSFER_TASKS, "avg", "settings"]
    assert all(0.0 <= result[task]["acc"] <= 100.0 for task in TRANSFER_TASKS)
    assert result["settings"]["pooler"] == "avg" and result["settings"]["kfold"] == 2
