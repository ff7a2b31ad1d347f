"""``Trainer.hyperparameter_search`` on a ``CSETrainer``: it would train every trial in one trainer and save the
trials' checkpoints under ``output_dir/run-N``, which the run's writer does not commit. It needs a ``model_init``,
which ``CSETrainer`` refuses in one line pointing to ``python -m hf_cse.sweep``; without one the Trainer's search
stops before anything is trained or written, with a search backend named or not, installed or not."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_tiny_trainer
from datasets import Dataset
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
from hf_cse.errors import UsageError


def test_a_model_init_is_refused_in_one_line_naming_the_sweep(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls"))
    args = CSETrainingArguments(output_dir=str(out), max_steps=2, report_to="none", use_cpu=True)
    with pytest.raises(UsageError) as refused:
        CSETrainer(
            model=model,
            args=args,
            processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
            train_dataset=Dataset.from_dict({"text": ["A sentence.", "Another one."]}),
            model_init=lambda: model,
        )
    message = str(refused.value)
    assert "model_init" in message and "`python -m hf_cse.sweep`" in message
    assert "\n" not in message
    assert not out.exists()


@pytest.mark.parametrize("backend", [None, "optuna"])
def test_hyperparameter_search_stops_before_training_or_writing(
    tiny_encoder_dir: Path, tmp_path: Path, backend: str | None
) -> None:
    out = tmp_path / "out"
    trainer = make_tiny_trainer(tiny_encoder_dir, out, max_steps=2)
    with pytest.raises(RuntimeError, match="model_init|backend"):
        trainer.hyperparameter_search(
            hp_space=lambda trial: {"learning_rate": 1e-4}, n_trials=2, direction="maximize", backend=backend
        )
    assert trainer.state.global_step == 0
    assert not out.exists() or list(out.rglob("checkpoint-*")) == []
