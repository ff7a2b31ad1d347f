"""A run whose pooler sentence-transformers cannot express says so once, not at every save: each checkpoint and the
final model get the same ``modules.json`` that stops sentence-transformers, for the same reason."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from conftest import make_tiny_trainer

from hf_cse import PoolingConfig

SAID = "sentence-transformers cannot express pooler"


def said_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if SAID in record.getMessage()]


@pytest.mark.parametrize(("pooler", "times"), [("avg_first_last", 1), ("cls", 0)])
def test_an_inexpressible_pooler_is_said_once_per_run_over_its_checkpoints_and_final_save(
    tiny_encoder_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, pooler: str, times: int
) -> None:
    trainer = make_tiny_trainer(tiny_encoder_dir, tmp_path / "run", pooling=PoolingConfig(pooler=pooler))
    with caplog.at_level(logging.WARNING):
        trainer.train()  # 6 steps, a checkpoint every 2
        trainer.save_model()
    assert sorted(path.name for path in (tmp_path / "run").glob("checkpoint-*")) == [
        "checkpoint-2",
        "checkpoint-4",
        "checkpoint-6",
    ]
    assert (tmp_path / "run" / "modules.json").is_file()  # an expressed pooler's, or one that stops loading
    refused = "hf_cse:avg_first_last" in (tmp_path / "run" / "1_Pooling" / "config.json").read_text(encoding="utf-8")
    assert refused == (times == 1)
    assert (
        said_lines(caplog)
        == [
            f"{SAID} {pooler!r} under these settings (it expresses cls, cls_before_pooler, avg, weighted_mean, "
            "last_token, where they average every token the tokenizer gives); the saved modules.json stops "
            "sentence-transformers in one line. Load this checkpoint with hf_cse.SentenceEncoder."
        ]
        * times
    )
