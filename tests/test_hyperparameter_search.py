"""``CSETrainer.hyperparameter_search``: Trainer's search would save its trials' checkpoints under
``output_dir/run-N``, which the run's writer neither stages nor publishes, so it is refused in one line that points to
``python -m hf_cse.sweep``, before anything is trained or written, with a search backend named or not, installed or
not."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_tiny_trainer

from hf_cse.errors import UsageError


@pytest.mark.parametrize("backend", [None, "optuna"])
def test_hyperparameter_search_is_refused_in_one_line_naming_the_sweep(
    tiny_encoder_dir: Path, tmp_path: Path, backend: str | None
) -> None:
    out = tmp_path / "out"
    trainer = make_tiny_trainer(tiny_encoder_dir, out, max_steps=2)
    with pytest.raises(UsageError) as refused:
        trainer.hyperparameter_search(
            hp_space=lambda trial: {"learning_rate": 1e-4}, n_trials=2, direction="maximize", backend=backend
        )
    message = str(refused.value)
    assert "Trainer.hyperparameter_search" in message and "`python -m hf_cse.sweep`" in message
    assert "\n" not in message
    assert trainer.state.global_step == 0
    assert not out.exists() or list(out.rglob("checkpoint-*")) == []
