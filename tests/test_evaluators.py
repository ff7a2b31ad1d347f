"""The evaluator protocol: IR metrics against trec_eval (pytrec_eval) and sentence-transformers, chunked ranking,
scored pairs from each file format, one-line file errors, sequences, specs, and the trainer selecting checkpoints on
a user evaluator's primary metric."""

from __future__ import annotations

import json
import logging
import math
import random
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml
from conftest import SENTENCES, make_tiny_trainer, run_unsup, write_config, write_train_file
from safetensors.torch import load_file

from hf_cse import register_evaluator
from hf_cse.errors import UsageError
from hf_cse.evaluation import sts_correlation
from hf_cse.evaluation.evaluators import (
    Evaluator,
    InformationRetrievalEvaluator,
    ScoredPairsEvaluator,
    SequentialEvaluator,
    STSEvaluator,
    build_evaluator,
    parse_evaluator_spec,
    primary_metric_of_specs,
)

# --- a retrieval fixture: 60 documents on 6 topics, 12 queries, embeddings made by hand (topic vector + noise) ---


def retrieval_fixture(num_docs: int = 60, max_relevant: int = 8) -> tuple[dict, dict, dict, dict]:
    """``(queries, corpus, relevant_docs, embedding of each text)``: each text is its topic's direction plus noise,
    so rankings are neither perfect nor random and the metrics take values well inside (0, 1)."""
    generator = torch.Generator().manual_seed(0)
    topics = torch.randn(6, 16, generator=generator)
    rng = random.Random(0)
    corpus, embeddings = {}, {}
    for i in range(num_docs):
        text = f"document {i}"
        corpus[f"d{i}"] = text
        embeddings[text] = topics[i % 6] + 0.9 * torch.randn(16, generator=generator)
    queries, relevant = {}, {}
    for q in range(12):
        text = f"query {q}"
        queries[f"q{q}"] = text
        embeddings[text] = topics[q % 6] + 0.9 * torch.randn(16, generator=generator)
        same_topic = [f"d{i}" for i in range(num_docs) if i % 6 == q % 6]
        if q != 11:  # q11 has no relevant document: not scored
            relevant[f"q{q}"] = set(rng.sample(same_topic, rng.randint(1, min(max_relevant, len(same_topic)))))
    return queries, corpus, relevant, embeddings


def lookup(embeddings: dict[str, torch.Tensor]):
    return lambda sentences: torch.stack([embeddings[s] for s in sentences])


def trec_eval_metrics(queries, corpus, relevant, embeddings) -> dict[str, float]:
    """The same metrics from trec_eval (pytrec_eval) on the full cosine matrix, averaged over judged queries."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    run = {}
    for query_id in relevant:
        query = F.normalize(embeddings[queries[query_id]], dim=0)
        run[query_id] = {
            doc_id: float(query @ F.normalize(embeddings[text], dim=0)) for doc_id, text in corpus.items()
        }
    qrels = {query_id: dict.fromkeys(docs, 1) for query_id, docs in relevant.items()}
    measures = {"ndcg_cut.10", "recall.1,10,100", "map_cut.100"}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    # trec_eval's recip_rank has no cutoff: MRR@10 is the reciprocal rank within the first 10 documents.
    first_ten = {q: dict(sorted(scores.items(), key=lambda item: -item[1])[:10]) for q, scores in run.items()}
    reciprocal = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(first_ten)
    names = {"ndcg_cut_10": "ndcg@10", "recall_1": "recall@1", "recall_10": "recall@10"}
    names.update(recall_100="recall@100", map_cut_100="map@100")
    metrics = {
        ours: float(np.mean([values[theirs] for values in per_query.values()])) for theirs, ours in names.items()
    }
    metrics["mrr@10"] = float(np.mean([values["recip_rank"] for values in reciprocal.values()]))
    return metrics


def test_ir_metrics_equal_trec_eval_and_chunking_changes_nothing() -> None:
    queries, corpus, relevant, embeddings = retrieval_fixture(num_docs=150)
    expected = trec_eval_metrics(queries, corpus, relevant, embeddings)
    assert 0.05 < expected["ndcg@10"] < 0.95 and 0 < expected["map@100"] < 1  # a fixture that can tell them apart
    encode = lookup(embeddings)
    whole = InformationRetrievalEvaluator(queries, corpus, relevant)(encode)
    assert set(whole) == set(expected)
    for key, value in expected.items():
        assert whole[key] == pytest.approx(value, abs=1e-9), key
    for chunk in (1, 7, 149):  # a running top-100 over chunks ranks exactly as the whole matrix
        assert InformationRetrievalEvaluator(queries, corpus, relevant, corpus_chunk_size=chunk)(encode) == whole


def test_ir_ranks_ties_in_corpus_order_whatever_the_chunks() -> None:
    corpus = {f"d{i}": f"doc {i % 3}" for i in range(9)}  # three copies of each text: equal cosines
    embeddings = {f"doc {i}": torch.eye(4)[i] + 0.1 for i in range(3)} | {"q": torch.eye(4)[0]}
    relevant = {"q0": {"d6"}}  # the third copy of "doc 0": rank 3 when ties keep corpus order
    expected = InformationRetrievalEvaluator({"q0": "q"}, corpus, relevant)(lookup(embeddings))
    assert expected["mrr@10"] == pytest.approx(1 / 3)
    for chunk in (1, 2, 4):
        got = InformationRetrievalEvaluator({"q0": "q"}, corpus, relevant, corpus_chunk_size=chunk)(lookup(embeddings))
        assert got == expected


def test_ir_matches_sentence_transformers_on_the_same_embeddings(tiny_encoder_dir: Path) -> None:
    st = pytest.importorskip("sentence_transformers")
    st_ir = pytest.importorskip("sentence_transformers.evaluation").InformationRetrievalEvaluator
    model = st.SentenceTransformer(str(tiny_encoder_dir), device="cpu")
    words = " ".join(SENTENCES).split()
    rng = random.Random(1)
    corpus = {f"d{i}": " ".join(rng.sample(words, 6)) for i in range(120)}
    queries = {f"q{i}": " ".join(rng.sample(words, 4)) for i in range(15)}
    relevant = {q: set(rng.sample(sorted(corpus), rng.randint(1, 12))) for q in list(queries)[:14]}

    def encode(sentences: list[str]) -> torch.Tensor:  # both evaluators see the model's very embeddings
        return torch.as_tensor(model.encode(sentences, batch_size=64))

    ours = InformationRetrievalEvaluator(queries, corpus, relevant, corpus_chunk_size=50)(encode)
    theirs = st_ir(
        queries, corpus, relevant, corpus_chunk_size=50, precision_recall_at_k=[1, 10, 100], write_csv=False
    )(model)
    for key, value in ours.items():
        assert value == pytest.approx(theirs[f"cosine_{key}"], abs=1e-6), key

    # The one definitional difference (module docstring): MAP@k over all relevant documents (trec_eval) or over
    # min(k, relevant) (sentence-transformers); they part only for a query with more than k relevant documents.
    many = {"q0": set(list(corpus)[:110])}
    ours = InformationRetrievalEvaluator(queries, corpus, many)(encode)
    theirs = st_ir(queries, corpus, many, write_csv=False)(model)
    assert ours["ndcg@10"] == pytest.approx(theirs["cosine_ndcg@10"], abs=1e-6)
    assert ours["map@100"] == pytest.approx(theirs["cosine_map@100"] * 100 / 110, abs=1e-6)


# --- BEIR folders -------------------------------------------------------------------------------------------------


def write_beir(folder: Path, queries: dict, corpus: dict, relevant: dict, split: str = "test") -> Path:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"_id": q, "text": text}) for q, text in queries.items()]
    (folder / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = [json.dumps({"_id": d, "title": "", "text": text}) for d, text in corpus.items()]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t1" for q, docs in relevant.items() for d in sorted(docs)]
    (folder / "qrels" / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


def test_from_beir_reads_the_layout_and_scores_as_the_dicts(tmp_path: Path) -> None:
    queries, corpus, relevant, embeddings = retrieval_fixture()
    folder = write_beir(tmp_path / "scifact", queries, corpus, relevant)
    with open(folder / "qrels" / "test.tsv", "a", encoding="utf-8") as qrels:  # a judged non-relevant document
        qrels.write("q0\td1\t0\n")
    evaluator = InformationRetrievalEvaluator.from_beir(folder)
    assert evaluator.name == "scifact" and evaluator.split == "test"
    direct = InformationRetrievalEvaluator(queries, corpus, relevant)(lookup(embeddings))
    assert evaluator(lookup(embeddings)) == direct

    (folder / "corpus.jsonl").write_text(json.dumps({"_id": 7, "title": "A title", "text": "body"}) + "\n")
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": "a query"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\t7\t2\n")
    evaluator = InformationRetrievalEvaluator.from_beir(folder)
    assert evaluator.documents == ["A title body"] and evaluator.relevant == [{0}]  # title + text, numeric id


@pytest.mark.parametrize(
    ("file", "content", "message"),
    [
        (
            "qrels/test.tsv",
            "query-id\tcorpus-id\tscore\nq0\td0\t1\nq0\tdX\t1\n",
            r"test.tsv, line 3, column 2 \(corpus-id\): 'dX' is not in corpus.jsonl",
        ),
        (
            "qrels/test.tsv",
            "query-id\tcorpus-id\tscore\nqX\td0\t1\n",
            r"test.tsv, line 2, column 1 \(query-id\): 'qX' is not in queries.jsonl",
        ),
        (
            "qrels/test.tsv",
            "query-id\tcorpus-id\tscore\nq0\td0\thigh\n",
            r"test.tsv, line 2, column 3 \(score\): 'high' is not a number",
        ),
        ("qrels/test.tsv", "query-id\tdoc\tscore\n", r"test.tsv, line 1: the header has no column corpus-id"),
        ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq0\td0\n", r"test.tsv, line 2, column 3 \(score\): missing"),
        (
            "corpus.jsonl",
            '{"_id": "d0", "text": "a"}\n{"_id": "d0", "text": "b"}\n',
            r"corpus.jsonl, line 2, key '_id': 'd0' is already the id of line 1",
        ),
        ("corpus.jsonl", '{"_id": "d0", "text": "a"}\n{"text": "b"}\n', r"corpus.jsonl, line 2, key '_id': missing"),
        (
            "queries.jsonl",
            '{"_id": "q0", "text": "a"}\n{"_id": "q1", "text": "b"\n',
            r"queries.jsonl, line 2, column \d+: not valid JSON",
        ),
    ],
)
def test_bad_beir_files_are_one_line_naming_file_line_and_column(
    tmp_path: Path, file: str, content: str, message: str
) -> None:
    folder = write_beir(tmp_path / "data", {"q0": "a", "q1": "b"}, {"d0": "a", "d1": "b"}, {"q0": {"d0"}})
    (folder / file).write_text(content, encoding="utf-8")
    with pytest.raises(UsageError, match=message) as error:
        InformationRetrievalEvaluator.from_beir(folder)
    assert "\n" not in str(error.value)


def test_a_missing_split_names_the_splits_there_are(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "data", {"q0": "a"}, {"d0": "a"}, {"q0": {"d0"}}, split="dev")
    with pytest.raises(FileNotFoundError, match=r"test.tsv does not exist; splits in .*qrels: dev"):
        InformationRetrievalEvaluator.from_beir(folder)


# --- scored pairs -------------------------------------------------------------------------------------------------


PAIRS = [(SENTENCES[i], SENTENCES[(i * 5 + 1) % 12], float(i % 5)) for i in range(10)]


def write_pairs(path: Path) -> Path:
    if path.suffix == ".jsonl":
        lines = [
            json.dumps({"sentence1": a, "sentence2": b, "score": s, "id": i}) for i, (a, b, s) in enumerate(PAIRS)
        ]
    else:
        sep = "\t" if path.suffix == ".tsv" else ","
        lines = [sep.join(["id", "score", "sentence1", "sentence2"])]
        lines += [sep.join([str(i), str(s), a, b]) for i, (a, b, s) in enumerate(PAIRS)]  # any column order
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_scored_pairs_from_each_format_equal_the_direct_correlation(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(0)
    embeddings = {s: torch.randn(8, generator=generator) for s in SENTENCES}
    cosines = [float(F.cosine_similarity(embeddings[a], embeddings[b], dim=0)) for a, b, _ in PAIRS]
    expected = sts_correlation(predictions=cosines, references=[s for *_, s in PAIRS])
    results = []
    for suffix in (".tsv", ".csv", ".jsonl"):
        evaluator = ScoredPairsEvaluator.from_file(write_pairs(tmp_path / f"my_pairs{suffix}"))
        assert evaluator.name == "my_pairs" and evaluator.primary_metric == "spearman"
        results.append(evaluator(lookup(embeddings)))
    assert results[0] == results[1] == results[2]
    assert results[0]["spearman"] == pytest.approx(expected["spearman"])
    assert results[0]["pearson"] == pytest.approx(expected["pearson"])


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "p.tsv",
            "sentence1\tsentence2\tscore\na\tb\t1\nc\td\tn/a\n",
            r"p.tsv, line 3, column 3 \(score\): 'n/a' is not a number",
        ),
        ("p.csv", "sentence1,score\na,1\n", r"p.csv, line 1: the header has no column sentence2"),
        (
            "p.csv",
            "sentence1,sentence2,score\na,b,1\n,d,2\n",
            r"p.csv, line 3, column 1 \(sentence1\): expected non-empty text",
        ),
        (
            "p.jsonl",
            '{"sentence1": "a", "sentence2": "b", "score": 1}\n{"sentence1": "a", "score": 2}\n',
            r"p.jsonl, line 2, key 'sentence2': missing",
        ),
        (
            "p.jsonl",
            '{"sentence1": "a", "sentence2": "b", "score": "x"}\n',
            r"p.jsonl, line 1, key 'score': 'x' is not a number",
        ),
        ("p.txt", "a\tb\t1\n", r"unknown file type '.txt'; valid types are: .tsv, .csv, .jsonl"),
    ],
)
def test_bad_pair_files_are_one_line(tmp_path: Path, name: str, content: str, message: str) -> None:
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(UsageError, match=message) as error:
        ScoredPairsEvaluator.from_file(tmp_path / name)
    assert "\n" not in str(error.value)


# --- sequences and specs ------------------------------------------------------------------------------------------


class Scripted(Evaluator):
    """A user's evaluator: returns the next of ``values`` as ``distance`` (lower is better) at each call."""

    primary_metric = "distance"
    greater_is_better = False

    def __init__(self, values: list[float], name: str = "scripted") -> None:
        self.values, self.name, self.calls = list(values), name, 0

    def __call__(self, encode) -> dict[str, float]:
        assert encode(["a man is playing a guitar"]).shape[0] == 1
        self.calls += 1
        return {"distance": self.values[self.calls - 1], "other": 1.0}


def test_sequential_prefixes_each_metric_and_takes_the_primary_metric_it_is_told(tmp_path: Path) -> None:
    queries, corpus, relevant, embeddings = retrieval_fixture()
    for sentence in SENTENCES:
        embeddings[sentence] = torch.ones(16)
    ir = InformationRetrievalEvaluator(queries, corpus, relevant, name="docs")
    sequence = SequentialEvaluator([Scripted([2.0]), ir])
    assert sequence.primary_metric == "scripted_distance" and sequence.greater_is_better is False
    metrics = sequence(lookup(embeddings))
    assert metrics["scripted_distance"] == 2.0 and metrics["scripted_other"] == 1.0
    assert metrics["docs_ndcg@10"] == ir(lookup(embeddings))["ndcg@10"] and len(metrics) == 2 + 6
    chosen = SequentialEvaluator([Scripted([2.0]), ir], primary_metric="docs_ndcg@10")
    assert chosen.greater_is_better is True
    entries = chosen.model_index_entries(metrics)
    assert {e["task_type"] for e in entries} == {"sentence-similarity", "retrieval"}
    assert {e["metric_type"] for e in entries if e["task_type"] == "retrieval"} >= {"ndcg_at_10", "map_at_100"}
    with pytest.raises(UsageError, match="share the name 'scripted'"):
        SequentialEvaluator([Scripted([1.0]), Scripted([1.0])])
    with pytest.raises(UsageError, match="primary_metric 'nope' belongs to none of the evaluators scripted, docs"):
        SequentialEvaluator([Scripted([1.0]), ir], primary_metric="nope")
    with pytest.raises(KeyError, match="returned no 'distance'"):
        SequentialEvaluator([type("Broken", (Scripted,), {"__call__": lambda self, encode: {"x": 1.0}})([1.0])])(
            lookup(embeddings)
        )


def test_specs_name_their_evaluators_and_refuse_unknown_kinds(tmp_path: Path) -> None:
    assert parse_evaluator_spec("sts").kind == "sts"
    spec = parse_evaluator_spec(f"ir:{tmp_path}/scifact/qrels/dev.tsv")
    assert (spec.kind, spec.name, spec.split, spec.path) == ("ir", "scifact", "dev", tmp_path / "scifact")
    assert parse_evaluator_spec("ir:beir/nfcorpus").split == "test"
    assert parse_evaluator_spec("pairs:data/legal.tsv").name == "legal"
    with pytest.raises(
        UsageError, match=r"^Unknown evaluator 'bleu:x'; valid evaluators are: sts, pairs:PATH, ir:PATH\.$"
    ):
        parse_evaluator_spec("bleu:x")
    with pytest.raises(UsageError, match="needs a path: pairs:PATH"):
        parse_evaluator_spec("pairs")
    with pytest.raises(UsageError, match="share the name 'a'"):
        primary_metric_of_specs(["pairs:x/a.tsv", "pairs:y/a.csv"], ["stsb"])
    assert primary_metric_of_specs(["sts"], ["sickr", "stsb"]) == "sickr_spearman"
    assert primary_metric_of_specs(["ir:beir/scifact", "sts"], ["stsb"]) == "scifact_ndcg@10"
    pairs = write_pairs(tmp_path / "mine.tsv")
    evaluator = build_evaluator(["sts", f"pairs:{pairs}"], sts_dir=tmp_path)
    assert isinstance(evaluator, SequentialEvaluator) and evaluator.primary_metric == "sts_stsb_spearman"
    assert isinstance(build_evaluator([f"pairs:{pairs}"]), ScoredPairsEvaluator)


def test_cli_and_config_take_evaluators(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    train = write_train_file(tmp_path, SENTENCES)
    pairs = write_pairs(tmp_path / "mine.tsv")
    config = write_config(tmp_path, tiny_encoder_dir, train, evaluators=["sts", f"pairs:{pairs}"])
    _, _, args = run_unsup.parse_args(["--config", str(config), "--eval_strategy", "steps"])
    assert args.evaluators == ["sts", f"pairs:{pairs}"] and args.metric_for_best_model == "sts_stsb_spearman"
    _, _, args = run_unsup.parse_args(["--config", str(config), "--evaluators", f"pairs:{pairs}"])
    assert args.evaluators == [f"pairs:{pairs}"]
    config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "evaluators": f"pairs:{pairs}"}))
    # A scalar in the config is a list of one.
    _, _, args = run_unsup.parse_args(["--config", str(config), "--eval_strategy", "steps"])
    assert args.evaluators == [f"pairs:{pairs}"] and args.metric_for_best_model == "spearman"
    with pytest.raises(UsageError, match="Unknown evaluator 'rouge'; valid evaluators are: sts, pairs:PATH, ir:PATH"):
        run_unsup.parse_args(["--config", str(config), "--evaluators", "rouge"])


USER_EVALUATOR_MODULE = '''
"""An evaluator of a user's own, outside hf_cse: one decorator makes it a kind of --evaluators."""

import torch.nn.functional as F

from hf_cse import Evaluator, register_evaluator


@register_evaluator("{name}")
class PairDistance(Evaluator):
    """Mean cosine distance of the tab-separated sentence pairs of a file; lower is better."""

    primary_metric = "distance"
    greater_is_better = False
    takes_path = True

    def __init__(self, path):
        self.pairs = [line.split("\\t") for line in path.read_text(encoding="utf-8").splitlines()]

    def __call__(self, encode):
        first, second = encode([a for a, _ in self.pairs]), encode([b for _, b in self.pairs])
        return {{"distance": float(1 - F.cosine_similarity(first, second).mean())}}
'''


def test_a_users_evaluator_registered_in_a_module_is_named_by_run_unsup_evaluators(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``@register_evaluator("name")`` in a user's module, ``run_unsup.py --import_module module --evaluators
    name:FILE``: the run evaluates it (beside a built-in one, its metrics prefixed by the file's name) and selects
    on its primary metric; before the import, the name is a one-line error listing the registered evaluators."""
    name = f"user_distance_{tmp_path.name.replace('-', '_')}"  # a fresh name: registrations last for the process
    (tmp_path / f"{name}_module.py").write_text(USER_EVALUATOR_MODULE.format(name=name), encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # --import_module finds modules in the working directory, like python -m
    monkeypatch.setattr(sys, "path", list(sys.path))  # undo the working directory it adds
    questions = tmp_path / "questions.tsv"
    questions.write_text("\n".join(f"{a}\t{b}" for a, b, _ in PAIRS) + "\n", encoding="utf-8")
    pairs = write_pairs(tmp_path / "mine.tsv")
    evaluators = [f"{name}:{questions}", f"pairs:{pairs}"]
    config = write_config(
        tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), evaluators=evaluators, eval_steps=1
    )
    # The built-in kinds first, then those registered in this process (other tests register their own).
    others = r"(, \w+(:PATH)?)*"
    with pytest.raises(UsageError) as error:
        run_unsup.parse_args(["--config", str(config), "--eval_strategy", "steps"])
    valid = rf"valid evaluators are: sts, pairs:PATH, ir:PATH{others}\.$"
    assert re.match(rf"^Unknown evaluator '{re.escape(f'{name}:{questions}')}'; {valid}", str(error.value))
    assert name not in str(error.value).partition("valid")[2]

    argv = ["--config", str(config), "--eval_strategy", "steps", "--import_module", f"{name}_module"]
    _, _, args = run_unsup.parse_args(argv)
    assert args.metric_for_best_model == "questions_distance"
    with pytest.raises(UsageError) as error:
        run_unsup.parse_args([*argv, "--evaluators", "bleu"])
    assert re.match(rf"^Unknown evaluator 'bleu'; {valid}", str(error.value))
    assert f", {name}:PATH" in str(error.value)
    run_unsup.main(argv)
    state = json.loads((tmp_path / "out" / "trainer_state.json").read_text())
    scores = [entry for entry in state["log_history"] if "eval_questions_distance" in entry]
    assert [entry["step"] for entry in scores] == [1, 2]
    assert all(0 <= entry["eval_questions_distance"] <= 2 and "eval_mine_spearman" in entry for entry in scores)


def test_a_registered_evaluator_without_a_class_primary_metric_is_one_line() -> None:
    """The checkpoint metric is chosen when the arguments are parsed, before any evaluator is built: an evaluator
    that sets ``primary_metric`` in ``__init__`` only is refused then, naming its class."""

    @register_evaluator("late_primary_metric")
    class LatePrimaryMetric(Evaluator):
        def __init__(self) -> None:
            self.primary_metric = "accuracy"

        def __call__(self, encode) -> dict[str, float]:
            return {"accuracy": 1.0}

    assert parse_evaluator_spec("late_primary_metric").name == "late_primary_metric"
    assert isinstance(build_evaluator(["late_primary_metric"]), LatePrimaryMetric)
    message = r"^Evaluator 'late_primary_metric' \(.*LatePrimaryMetric\) has no class attribute primary_metric"
    with pytest.raises(UsageError, match=message) as error:
        primary_metric_of_specs(["late_primary_metric"], ["stsb"])
    assert "\n" not in str(error.value)
    with pytest.raises(UsageError, match="late_primary_metric takes no path"):
        parse_evaluator_spec("late_primary_metric:x.tsv")


def test_run_unsup_reads_the_evaluator_files_before_the_model(tmp_path: Path) -> None:
    """A bad line in an evaluator's file is reported before the model loads: here the model folder does not exist,
    and the error is still the file's (minutes earlier, for a large model)."""
    train = write_train_file(tmp_path, SENTENCES)
    bad = tmp_path / "p.tsv"
    bad.write_text("sentence1\tsentence2\tscore\na\tb\t1\nc\td\tn/a\n", encoding="utf-8")
    config = write_config(
        tmp_path, tmp_path / "no-such-model", train, evaluators=[f"pairs:{bad}"], eval_strategy="steps"
    )
    with pytest.raises(UsageError, match=r"p.tsv, line 3, column 3 \(score\): 'n/a' is not a number"):
        run_unsup.main(["--config", str(config), "--output_dir", str(tmp_path / "out")])


# --- the trainer --------------------------------------------------------------------------------------------------


def tiny_trainer(encoder_dir: Path, output_dir: Path, evaluator: Evaluator | None = None, **overrides: object):
    """``make_tiny_trainer``'s trainer (6 steps, a checkpoint every 2), evaluated by ``evaluator``."""
    from hf_cse import CSETrainer

    made = make_tiny_trainer(encoder_dir, output_dir)  # evaluation off: reads no dev set
    return CSETrainer(
        model=made.model,
        args=type(made.args)(**{**made.args.to_dict(), "eval_strategy": "steps", "eval_steps": 2, **overrides}),
        train_dataset=made.train_dataset,
        processing_class=made.processing_class,
        evaluator=evaluator,
    )


def test_trainer_selects_the_best_checkpoint_on_a_user_evaluators_primary_metric(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    evaluator = Scripted([3.0, 1.0, 2.0])  # lower is better: the 2nd evaluation, at step 4, is the best
    trainer = tiny_trainer(tiny_encoder_dir, tmp_path / "out", evaluator, load_best_model_at_end=True)
    assert (trainer.args.metric_for_best_model, trainer.args.greater_is_better) == ("distance", False)
    trainer.train()
    assert evaluator.calls == 3 and trainer.state.best_model_checkpoint.endswith("checkpoint-4")
    assert trainer.state.best_metric == 1.0
    best = load_file(Path(trainer.state.best_model_checkpoint) / "model.safetensors")
    assert all(torch.equal(value, trainer.model.state_dict()[key]) for key, value in best.items())
    trainer.save_model()
    trainer.create_model_card()
    card = (tmp_path / "out" / "README.md").read_text()
    assert "eval_distance" in card and "value: 1.0" in card  # the saved (best) model's score in the model-index


def test_with_one_checkpoint_kept_the_newest_outlives_training_beside_the_best(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """transformers deletes every checkpoint but the best as training ends when save_total_limit is 1: a SIGTERM's
    checkpoint, which the stop's message gives to resume from, went with it, and a second run of a finished one
    resumed from the best and trained the rest again. The rotation while training keeps one besides the best."""
    evaluator = Scripted([3.0, 1.0, 2.0])  # lower is better: checkpoint-4 is the best, checkpoint-6 the newest
    trainer = tiny_trainer(
        tiny_encoder_dir, tmp_path / "out", evaluator, load_best_model_at_end=True, save_total_limit=1
    )
    trainer.train()
    assert sorted(path.name for path in (tmp_path / "out").glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-6"]
    assert trainer.args.checkpoint_limit == 1  # the Trainer's own save_total_limit is None: hf_cse rotates
    again = tiny_trainer(
        tiny_encoder_dir, tmp_path / "out", Scripted([]), load_best_model_at_end=True, save_total_limit=1
    )
    assert again.train(resume_from_checkpoint=True).global_step == 6  # finished: nothing trained, nothing evaluated
    recorded = json.loads((tmp_path / "out" / "checkpoint-6" / "training_args.json").read_text())
    assert recorded["save_total_limit"] == 1


def test_a_metric_the_user_set_is_kept_and_sts_stays_the_default(
    tiny_encoder_dir: Path, tmp_path: Path, tiny_sts_dir: Path
) -> None:
    trainer = tiny_trainer(tiny_encoder_dir, tmp_path, sts_dir=str(tiny_sts_dir))
    assert isinstance(trainer.evaluator, STSEvaluator) and trainer.args.metric_for_best_model == "stsb_spearman"
    scores = {key for key in trainer.evaluate() if key.startswith("eval_")}  # the Trainer's log adds the epoch
    assert scores == {"eval_stsb_spearman", "eval_alignment", "eval_uniformity", "eval_runtime"}
    trainer = tiny_trainer(tiny_encoder_dir, tmp_path, Scripted([1.0]), metric_for_best_model="other")
    assert trainer.args.metric_for_best_model == "other"


def test_trainer_evaluates_retrieval_from_args_and_the_card_reports_it(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    corpus = {f"d{i}": sentence for i, sentence in enumerate(SENTENCES)}
    queries = {f"q{i}": SENTENCES[i].split(" ", 1)[1] for i in range(6)}
    folder = write_beir(tmp_path / "mydocs", queries, corpus, {f"q{i}": {f"d{i}"} for i in range(6)})
    trainer = tiny_trainer(tiny_encoder_dir, tmp_path / "out", eval_steps=3, evaluators=[f"ir:{folder}"])
    assert trainer.eval_dataset is trainer.evaluator and trainer.args.metric_for_best_model == "ndcg@10"
    trainer.train()
    scores = [entry for entry in trainer.state.log_history if "eval_ndcg@10" in entry]
    assert len(scores) == 2 and all(0 <= entry["eval_map@100"] <= 1 for entry in scores)
    trainer.save_model()
    trainer.create_model_card()
    card = (tmp_path / "out" / "README.md").read_text()
    front_matter = yaml.safe_load(card.split("---")[1])
    results = front_matter["model-index"][0]["results"]
    retrieval = [r for r in results if r["task"]["type"] == "retrieval"]
    assert {r["dataset"]["name"] for r in retrieval} == {"mydocs"} and len(retrieval[0]["metrics"]) == 6
    ndcg = next(m for m in retrieval[0]["metrics"] if m["type"] == "ndcg_at_10")
    assert ndcg["value"] == pytest.approx(scores[-1]["eval_ndcg@10"], abs=1e-4)


def test_a_sweep_run_selects_on_its_evaluators_primary_metric_sts_b_dev(tmp_path: Path) -> None:
    """The sweep selects on eval_stsb_spearman: its runs' evaluator is STS-B dev even when their config names
    others, so the run's primary metric (metric_for_best_model) is what the sweep reads; the flag is the sweep's."""
    from hf_cse.sweeps.arguments import SELECTION_METRIC, RunUnsupArguments
    from hf_cse.sweeps.grid import expand, parse_grid

    script = RunUnsupArguments(Path(run_unsup.__file__))
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"evaluators": [f"pairs:{write_pairs(tmp_path / 'mine.tsv')}"]}))
    (setting,) = expand([parse_grid("learning_rate=1e-5")])
    passthrough = ["--model_name_or_path", "m", "--train_file", "t.txt"]
    command = script.setting_command(
        setting, config=str(config), passthrough=passthrough, sts_dir=str(tmp_path), placeholder_dir=tmp_path
    )
    _, _, args = run_unsup.parse_args([*command.arguments, "--output_dir", str(tmp_path / "run")])
    assert args.evaluators == ["sts"] and args.metric_for_best_model == SELECTION_METRIC
    with pytest.raises(UsageError, match="the sweep selects checkpoints on STS-B dev"):
        script.check_passthrough(["--evaluators", "sts"], [])


def test_the_readme_user_evaluator_runs_as_printed(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """The docs' worked example of a user evaluator (examples/python/my_evaluator.py), run as printed with the tiny
    model for 2 steps: the trainer selects on its primary metric, and an evaluation reports it."""
    block = (Path(__file__).resolve().parents[1] / "examples" / "python" / "my_evaluator.py").read_text("utf-8")
    model_and_output = f"{str(tiny_encoder_dir)!r}, {str(tmp_path / 'out')!r}"
    swaps = {
        '"sentence-transformers/all-MiniLM-L6-v2", "outputs/faq"': model_and_output,
        'max_steps=100, eval_strategy="steps", eval_steps=25': 'max_steps=2, eval_strategy="steps", eval_steps=1',
        "save_steps=25": "save_steps=1",
    }
    for old, new in swaps.items():
        assert old in block
        block = block.replace(old, new)
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(compile(block, "my_evaluator.py", "exec"), namespace)
    trainer = namespace["trainer"]
    assert (trainer.args.metric_for_best_model, trainer.args.greater_is_better) == ("accuracy", True)
    accuracy = trainer.evaluate()["eval_accuracy"]
    assert accuracy in {i / 4 for i in range(5)}


def test_a_non_finite_primary_metric_stops_training_in_one_line(
    tiny_encoder_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A NaN score is neither better nor worse than any other: at the first evaluation it became the Trainer's best
    metric for good, and ``load_best_model_at_end`` loaded that checkpoint, without a word. Training stops at that
    evaluation instead, naming the metric and its value; the checkpoints saved so far stay."""
    from hf_cse.errors import TrainingDivergedError

    evaluator = Scripted([1.0, math.nan, 0.5])
    trainer = tiny_trainer(tiny_encoder_dir, tmp_path / "out", evaluator, load_best_model_at_end=True)
    with pytest.raises(TrainingDivergedError, match=r"^The evaluation at step 4 scored distance = nan") as error:
        trainer.train()
    assert "\n" not in str(error.value) and evaluator.calls == 2
    assert sorted(path.name for path in (tmp_path / "out").glob("checkpoint-*")) == ["checkpoint-2"]
    # Outside training, the score is returned as it is, with a warning.
    fresh = tiny_trainer(tiny_encoder_dir, tmp_path / "fresh", Scripted([math.nan]))
    with caplog.at_level(logging.WARNING, logger="hf_cse.training.evaluators"):
        assert math.isnan(fresh.evaluate()["eval_distance"])
    assert "The evaluation scored distance = nan (constant or non-finite embeddings score NaN)." in caplog.text
