"""``InformationRetrievalEvaluator``: rank a corpus for each query by cosine similarity and score the ranking.

Metrics (each in ``[0, 1]``, averaged over the queries that have at least one relevant document, as
sentence-transformers, BEIR and MTEB report them): ``mrr@10``, ``ndcg@10`` (the primary metric), ``recall@1``,
``recall@10``, ``recall@100`` and ``map@100``.

Definitions: trec_eval's (``pytrec_eval``, which BEIR and MTEB use), with binary relevance (a document is relevant or
not; BEIR qrels scores above 0 count as relevant, graded gains are not used):

* ``mrr@10``: 1 / the rank of the first relevant document among the first 10, else 0.
* ``ndcg@10``: DCG of the first 10 (gain 1 / log2(rank + 1) per relevant document) over the DCG of an ideal ranking.
* ``recall@k``: relevant documents among the first ``k`` / all relevant documents.
* ``map@100``: the sum of the precision at the rank of each relevant document among the first 100, divided by the
  number of relevant documents (trec_eval's ``map_cut_100``). sentence-transformers' ``InformationRetrievalEvaluator``
  divides by ``min(100, number of relevant documents)`` instead; the two differ only for a query with more than 100
  relevant documents. Its ``ndcg@10`` also uses binary relevance, so every other number is the same.

Ties (equal cosine) rank the document that comes first in the corpus first.

Memory: the corpus is encoded ``corpus_chunk_size`` documents at a time and only the best 100 documents of each
query are kept between chunks, so a corpus of any size never holds more than a ``[queries, corpus_chunk_size]``
similarity matrix, plus the ``[queries, D]`` query embeddings.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ...errors import UsageError, echo
from ...registry import register_evaluator
from ..analysis import EmbeddingCache
from ..sts_evaluator import EncodeFn
from .base import Evaluator, EvaluatorSpec, SpecContext
from .files import Row, read_rows

#: ``k`` of each rank cutoff reported, and the deepest one: how many documents per query are kept.
MRR_AT, NDCG_AT, RECALL_AT, MAP_AT = (10,), (10,), (1, 10, 100), (100,)
TOP_K = max(*MRR_AT, *NDCG_AT, *RECALL_AT, *MAP_AT)

_METRIC_NAMES = {"mrr": "MRR", "ndcg": "nDCG", "recall": "Recall", "map": "MAP"}


@register_evaluator("ir")
class InformationRetrievalEvaluator(Evaluator):
    """Retrieval of relevant documents for queries, with sentence-transformers' argument shapes.

    Args:
        queries: ``{query_id: text}``.
        corpus: ``{doc_id: text}``.
        relevant_docs: ``{query_id: set of doc_ids}`` (any iterable of ids); queries without any are not scored.
        name: the prefix in a :class:`~hf_cse.evaluation.evaluators.SequentialEvaluator` and the card's data set
            name; default ``"ir"``.
        split: the split the judgments come from, for the card (``from_beir`` sets it); default ``None``.
        corpus_chunk_size: documents encoded and scored at a time (default 50,000, as sentence-transformers).
        batch_size: texts per ``encode`` call within a chunk; ``None`` (default): the whole chunk in one call.

    Raises:
        ValueError: no query with a relevant document, or a relevant id that is not among the queries or corpus.

    The ``--evaluators`` spec is ``ir:FOLDER`` (a BEIR folder's ``test`` judgments, :meth:`from_beir`) or
    ``ir:FOLDER/qrels/SPLIT.tsv`` (another split), named after the folder.
    """

    primary_metric = "ndcg@10"
    task_type = "retrieval"
    task_name = "Retrieval"
    takes_path = True

    def __init__(
        self,
        queries: Mapping[str, str],
        corpus: Mapping[str, str],
        relevant_docs: Mapping[str, Iterable[str]],
        *,
        name: str = "ir",
        split: str | None = None,
        corpus_chunk_size: int = 50_000,
        batch_size: int | None = None,
    ) -> None:
        if corpus_chunk_size < 1:
            raise ValueError(f"corpus_chunk_size must be >= 1, got {corpus_chunk_size}.")
        if not corpus:
            raise ValueError("InformationRetrievalEvaluator got an empty corpus.")
        self.doc_ids, self.documents = list(corpus), list(corpus.values())
        position = {doc_id: index for index, doc_id in enumerate(self.doc_ids)}
        for query_id, doc_ids in relevant_docs.items():
            if query_id not in queries:
                raise ValueError(f"relevant_docs names query {echo(query_id)}, which is not among the queries.")
            for doc_id in doc_ids:
                if doc_id not in position:
                    raise ValueError(
                        f"relevant_docs[{echo(query_id)}] names document {echo(doc_id)}, which is not in the corpus."
                    )
        # Queries in the given order, those with a relevant document only (as sentence-transformers and trec_eval).
        self.query_ids = [query_id for query_id in queries if relevant_docs.get(query_id)]
        if not self.query_ids:
            raise ValueError("No query has a relevant document: nothing to score.")
        self.queries = [queries[query_id] for query_id in self.query_ids]
        self.relevant = [{position[doc_id] for doc_id in relevant_docs[q]} for q in self.query_ids]
        self.name, self.split = name, split
        self.corpus_chunk_size, self.batch_size = corpus_chunk_size, batch_size

    @classmethod
    def from_beir(
        cls, folder: str | os.PathLike, split: str = "test", *, name: str | None = None, **kwargs: Any
    ) -> InformationRetrievalEvaluator:
        """Read a data set in the BEIR/MTEB layout: ``queries.jsonl`` (``_id``, ``text``), ``corpus.jsonl``
        (``_id``, ``text``, optional ``title``; a document's text is ``title + " " + text``, as BEIR and MTEB
        encode it) and ``qrels/<split>.tsv`` (header ``query-id  corpus-id  score``; a score above 0 is relevant).

        Args:
            name: default: the folder's name.
            **kwargs: ``corpus_chunk_size``, ``batch_size``.

        Raises:
            FileNotFoundError: a file is missing.
            UsageError: a bad line (naming the file, line and column): a missing field, a duplicated id, a score
                that is not a number, or a qrels id absent from the queries or the corpus.
        """
        folder = Path(folder)
        qrels_path = folder / "qrels" / f"{split}.tsv"
        if not qrels_path.is_file():
            found = sorted(path.stem for path in (folder / "qrels").glob("*.tsv"))
            raise FileNotFoundError(
                f"{qrels_path} does not exist; splits in {folder / 'qrels'}: {', '.join(found) or 'none'}."
            )
        queries = {row.values["_id"]: row.text("text") for row in _rows_with_ids(folder / "queries.jsonl")}
        corpus = {}
        for row in _rows_with_ids(folder / "corpus.jsonl"):
            title = row.values.get("title") or ""
            if not isinstance(title, str) or not isinstance(row.values.get("text"), str):
                column = "title" if not isinstance(title, str) else "text"
                raise UsageError(f"{row.where(column)}: expected text, got {echo(row.values.get(column))}.")
            corpus[row.values["_id"]] = f"{title} {row.values['text']}".strip()
        relevant: dict[str, set[str]] = {}
        for row in read_rows(qrels_path, ("query-id", "corpus-id", "score")):
            query_id, doc_id = _identifier(row, "query-id"), _identifier(row, "corpus-id")
            if query_id not in queries:
                raise UsageError(f"{row.where('query-id')}: {echo(query_id)} is not in queries.jsonl.")
            if doc_id not in corpus:
                raise UsageError(f"{row.where('corpus-id')}: {echo(doc_id)} is not in corpus.jsonl.")
            if row.number("score") > 0:
                relevant.setdefault(query_id, set()).add(doc_id)
        if not relevant:
            raise UsageError(f"{qrels_path} judges no document relevant (score > 0): nothing to score.")
        return cls(queries, corpus, relevant, name=name or folder.name, split=split, **kwargs)

    @classmethod
    def parse_spec(cls, kind: str, path: str | None, spec: str) -> EvaluatorSpec:
        """``ir:FOLDER`` (split ``test``) or ``ir:FOLDER/qrels/SPLIT.tsv``, named after the folder."""
        location = super().parse_spec(kind, path, spec).path
        if location.suffix == ".tsv":  # ir:FOLDER/qrels/SPLIT.tsv
            if location.parent.name != "qrels":
                raise UsageError(
                    f"Evaluator {echo(spec)}: an ir file must be a BEIR folder's qrels/SPLIT.tsv; or give the folder."
                )
            folder = location.parent.parent
            return EvaluatorSpec(kind, folder, folder.resolve().name, location.stem)
        return EvaluatorSpec(kind, location, location.resolve().name, "test")

    @classmethod
    def from_spec(cls, spec: EvaluatorSpec, context: SpecContext) -> InformationRetrievalEvaluator:
        return cls.from_beir(spec.path, spec.split or "test", name=spec.name)

    def __call__(self, encode: EncodeFn) -> dict[str, float]:
        query_embeddings = F.normalize(EmbeddingCache(encode, self.batch_size)(self.queries), dim=-1)
        top_k = min(TOP_K, len(self.documents))
        best_scores = query_embeddings.new_empty(len(self.queries), 0)
        best_indices = torch.empty(len(self.queries), 0, dtype=torch.long)
        for start in range(0, len(self.documents), self.corpus_chunk_size):
            chunk = self.documents[start : start + self.corpus_chunk_size]
            documents = F.normalize(EmbeddingCache(encode, self.batch_size)(chunk), dim=-1)  # each chunk's own cache
            scores = query_embeddings @ documents.T  # [Q, chunk]
            best_scores, best_indices = merge_top_k(best_scores, best_indices, scores, start, top_k)
        return ranking_metrics(best_indices.tolist(), self.relevant)

    def model_index_entries(self, metrics: Mapping[str, float]) -> list[dict[str, Any]]:
        """Task ``retrieval`` on the data set (by name and split), one result per metric (``ndcg_at_10``, ...)."""
        ranking = {key: value for key, value in metrics.items() if key.partition("@")[0] in _METRIC_NAMES}
        entries = super().model_index_entries(ranking)
        split = {"dataset_split": self.split} if self.split else {}
        for entry in entries:
            kind, _, k = entry["metric_type"].partition("@")
            entry.update(split, metric_type=f"{kind}_at_{k}", metric_name=f"{_METRIC_NAMES[kind]}@{k} (cosine)")
        return entries


def merge_top_k(
    best_scores: torch.Tensor, best_indices: torch.Tensor, scores: torch.Tensor, offset: int, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The best ``k`` documents of each query among those kept so far and a new chunk.

    Args:
        best_scores, best_indices: ``[Q, k']`` kept so far (corpus positions), best first.
        scores: ``[Q, C]`` similarities of the chunk whose first document is at corpus position ``offset``.
        k: how many to keep.

    Returns:
        ``([Q, min(k, k' + C)] scores, [Q, min(k, k' + C)] corpus positions)``, best first; equal scores in corpus
        order (a stable sort over the earlier documents, then the chunk's), so chunking never changes a ranking.
    """
    chunk_indices = torch.arange(offset, offset + scores.shape[1]).expand(scores.shape[0], -1)
    all_scores = torch.cat([best_scores, scores.float()], dim=1)
    all_indices = torch.cat([best_indices, chunk_indices], dim=1)
    order = torch.sort(all_scores, dim=1, descending=True, stable=True).indices[:, :k]
    return all_scores.gather(1, order), all_indices.gather(1, order)


def ranking_metrics(rankings: list[list[int]], relevant: list[set[int]]) -> dict[str, float]:
    """MRR@10, nDCG@10, Recall@{1,10,100} and MAP@100 (see the module docstring), averaged over queries.

    Args:
        rankings: each query's retrieved document ids, best first (at least the deepest cutoff's worth, or all).
        relevant: each query's relevant document ids (non-empty).
    """
    totals: defaultdict[str, float] = defaultdict(float)
    for ranking, gold in zip(rankings, relevant, strict=True):
        ranks = [rank for rank, doc in enumerate(ranking, start=1) if doc in gold]  # of the relevant ones, ascending
        for k in MRR_AT:
            totals[f"mrr@{k}"] += 1.0 / ranks[0] if ranks and ranks[0] <= k else 0.0
        for k in NDCG_AT:
            dcg = sum(1.0 / math.log2(rank + 1) for rank in ranks if rank <= k)
            totals[f"ndcg@{k}"] += dcg / sum(1.0 / math.log2(rank + 1) for rank in range(1, min(k, len(gold)) + 1))
        for k in RECALL_AT:
            totals[f"recall@{k}"] += sum(rank <= k for rank in ranks) / len(gold)
        for k in MAP_AT:  # the precision at each relevant document's rank: found so far / rank
            precisions = sum(found / rank for found, rank in enumerate(ranks, start=1) if rank <= k)
            totals[f"map@{k}"] += precisions / len(gold)
    return {key: total / len(rankings) for key, total in totals.items()}


def _identifier(row: Row, column: str) -> str:
    """An id: text, or an integer (some JSONL files write numeric ids), as a string."""
    value = row.values.get(column)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return row.text(column).strip()


def _rows_with_ids(path: Path) -> Iterable[Row]:
    """The rows of a BEIR JSONL file, each ``_id`` a string and seen once (a duplicate names both lines)."""
    seen: dict[str, int] = {}
    for row in read_rows(path, ("_id",)):
        identifier = _identifier(row, "_id")
        if identifier in seen:
            raise UsageError(f"{row.where('_id')}: {echo(identifier)} is already the id of line {seen[identifier]}.")
        seen[identifier] = row.line
        row.values["_id"] = identifier
        yield row
