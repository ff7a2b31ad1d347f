"""Issue 56: ``python -m hf_cse.eval --mteb_tasks`` adds MTEB scores to the model-index of a local run's card, and
``python -m hf_cse.push`` renders that card anew; the MTEB entries it finds there score the same model, so they
survive the push (beside the STS entries it adds), once each however often it runs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from common.commands import run_unsup_argv
from conftest import run_unsup
from huggingface_hub import ModelCard

from hf_cse.commands import push
from hf_cse.evaluation import STS_TASKS

mteb_encoder = pytest.importorskip("hf_cse.evaluation.mteb_encoder", exc_type=ImportError)


class UploadingHub:
    """``HfApi``'s ``create_repo`` / ``upload_folder``: the Hub answers, nothing leaves the machine."""

    def create_repo(self, repo_id: str, **kwargs: Any) -> SimpleNamespace:
        return SimpleNamespace(repo_id=repo_id)

    def upload_folder(self, **kwargs: Any) -> SimpleNamespace:
        return SimpleNamespace(commit_url="https://huggingface.co/someone/x/commit/0")


def mteb_record(score: float, truncate_dim: int | None) -> dict[str, Any]:
    """One result as :func:`~hf_cse.evaluation.mteb_encoder.evaluate_mteb` records it."""
    return {
        "task": "STS22.v2", "type": "STS", "hub_task_type": "sentence-similarity",
        "dataset": "mteb/sts22-crosslingual-sts", "subset": "en", "split": "test", "revision": "d31f33a",
        "metric": "cosine_spearman", "score": score, "truncate_dim": truncate_dim,
    }  # fmt: skip


def entries(card: Path, source: str | None) -> list[tuple]:
    """``(dataset, split, metric, args, value)`` of the card's model-index entries from ``source``."""
    results = ModelCard.load(card).data.eval_results or []
    return [
        (r.dataset_type, r.dataset_split, r.metric_type, r.metric_args, r.metric_value)
        for r in results
        if r.source_name == source
    ]


def test_a_push_keeps_the_mteb_scores_eval_added_to_the_card(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    run_unsup.main(run_unsup_argv(tiny_encoder_dir, tmp_path, max_steps=2, save_strategy="no"))
    out = tmp_path / "out"
    records = [mteb_record(61.234, None), mteb_record(58.5, 16)]
    assert mteb_encoder.add_to_card(out, mteb_encoder.model_index_entries(records)) == out / "README.md"
    added = entries(out / "README.md", "MTEB")
    assert added == [
        ("mteb/sts22-crosslingual-sts", "test", "cosine_spearman", None, 61.23),
        ("mteb/sts22-crosslingual-sts", "test", "cosine_spearman", {"truncate_dim": 16}, 58.5),
    ]
    sts = tmp_path / "sts.json"
    sts.write_text(json.dumps({task: 70.0 for task in STS_TASKS}), encoding="utf-8")
    for _ in range(2):  # a second push finds the first one's card
        push.main([str(out), "--repo_id", "someone/x", "--sts_results", str(sts)], api=UploadingHub())
        assert entries(out / "README.md", "MTEB") == added
        assert len(entries(out / "README.md", None)) == len(STS_TASKS)  # the push's own STS entries beside them
