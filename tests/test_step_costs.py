"""What a step costs (issue 32, items 5 and 7): ``total_flos`` is ``6 x`` non-embedding parameters ``x`` the tokens
of the views encoded with gradients, not 0; DDP searches for unused parameters only when a model has some."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import HANG_GUARD_S, REPO_ROOT, SENTENCES, free_port, make_tiny_trainer, training_args
from datasets import Dataset
from transformers import AutoTokenizer
from transformers.training_args import ParallelMode

from hf_cse import CSEModel, CSETrainer, PoolingConfig
from hf_cse.modeling.tokenization import SentenceTokenizer
from hf_cse.training.step.step_costs import (
    activation_checkpointing,
    find_unused_parameters_decided,
    unused_trainable_parameters,
)

HIDDEN, LAYERS, INTERMEDIATE = 32, 2, 64  # the tiny encoder's (conftest.tiny_config)


def non_embedding_parameters_by_hand(with_mlp_head: bool) -> int:
    """The tiny BERT's weights outside its embedding tables, counted from its shapes: the embeddings' LayerNorm;
    per layer Q, K, V, O (each ``d x d`` + bias), the attention LayerNorm, the feed-forward (``d x f`` + ``f``,
    ``f x d`` + ``d``) and its LayerNorm; BERT's pooler (``d x d`` + ``d``); SimCSE's MLP head (the same)."""
    d, f = HIDDEN, INTERMEDIATE
    per_layer = 4 * (d * d + d) + 2 * d + (d * f + f) + (f * d + d) + 2 * d
    dense = d * d + d
    return 2 * d + LAYERS * per_layer + dense + (dense if with_mlp_head else 0)


def test_floating_point_ops_count_every_view_encoded_with_gradients(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    # DCL with 2 positive views: each step encodes 3 views of the batch.
    trainer = make_tiny_trainer(
        tiny_encoder_dir, tmp_path, objective="dcl", objective_kwargs={"num_positive_views": 2}, save_strategy="no"
    )
    n = non_embedding_parameters_by_hand(with_mlp_head=True)
    assert trainer.trained_tokens.non_embedding_parameters == n
    batch = next(iter(trainer.get_train_dataloader()))
    rows, length = batch["sentences"]["input_ids"].shape
    trainer.model.train()
    trainer.compute_loss(trainer.model, batch).backward()
    assert trainer.floating_point_ops(batch) == 6 * n * 3 * rows * length
    assert trainer.floating_point_ops(batch) == 0  # counted once
    with torch.no_grad():  # an encoding without gradients (gradient caching's first pass) is not trained
        trainer.compute_loss(trainer.model, batch)
    assert trainer.floating_point_ops(batch) == 0


def test_total_flos_of_a_run_is_the_hand_count(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    # Every batch padded to 32 tokens: 3 steps x 2 views x 4 rows x 32 tokens.
    trainer = CSETrainer(
        model=CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="avg")),
        args=training_args(tmp_path, pad_to_multiple_of=32, max_seq_length=32),
        train_dataset=Dataset.from_dict({"text": SENTENCES}),
        processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
    )
    metrics = trainer.train().metrics
    expected = 3 * 6 * non_embedding_parameters_by_hand(with_mlp_head=False) * 2 * 4 * 32
    assert trainer.state.total_flos == expected and metrics["total_flos"] == expected


def tiny_model(encoder_dir: Path, pooler: str) -> tuple[CSEModel, SentenceTokenizer]:
    model = CSEModel.from_pretrained(encoder_dir, pooling=PoolingConfig(pooler=pooler))
    return model, SentenceTokenizer(AutoTokenizer.from_pretrained(encoder_dir), model.pooling, 32)


@pytest.mark.parametrize("pooler", ["cls", "avg", "mask"])
@pytest.mark.parametrize("unfreeze", [False, True])
def test_the_probe_finds_what_a_training_step_leaves_without_gradient(
    tiny_encoder_dir: Path, tmp_path: Path, pooler: str, unfreeze: bool
) -> None:
    """The probe's answer against a real step's backward (the trainer's views and loss): the trainable parameters
    left without a gradient, the encoder's own pooler when unfrozen (no hf_cse pooler reads it)."""
    torch.manual_seed(0)
    model, tokenizer = tiny_model(tiny_encoder_dir, pooler)
    if unfreeze:
        model.encoder_model.pooler.requires_grad_(True)
    unused = unused_trainable_parameters(model, tokenizer)
    assert unused == (["bert.pooler.dense.weight", "bert.pooler.dense.bias"] if unfreeze else [])

    trainer = CSETrainer(
        model=model,
        args=training_args(tmp_path),
        train_dataset=Dataset.from_dict({"text": SENTENCES}),
        processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
    )
    model.train()
    trainer.compute_loss(model, next(iter(trainer.get_train_dataloader()))).backward()
    assert unused == [name for name, p in model.named_parameters() if p.requires_grad and p.grad is None]


def test_the_probe_keeps_the_random_state_and_the_mode(tiny_encoder_dir: Path) -> None:
    model, tokenizer = tiny_model(tiny_encoder_dir, "cls")
    model.eval()
    torch.manual_seed(3)
    unused_trainable_parameters(model, tokenizer)
    after_probe = torch.rand(4)
    torch.manual_seed(3)
    assert torch.equal(after_probe, torch.rand(4)) and not model.training
    assert all(p.grad is None for p in model.parameters())


def decided(args: SimpleNamespace, model: CSEModel, tokenizer: SentenceTokenizer) -> bool | None:
    """``args.ddp_find_unused_parameters`` while the Trainer is built (its accelerator's DDP setting), after checking
    that it is the user's again afterwards."""
    given = args.ddp_find_unused_parameters
    with find_unused_parameters_decided(args, model, tokenizer):
        during = args.ddp_find_unused_parameters
    assert args.ddp_find_unused_parameters is given
    return during


@pytest.mark.parametrize("unfreeze", [False, True])
def test_ddp_searches_for_unused_parameters_only_when_the_model_has_some(
    tiny_encoder_dir: Path, unfreeze: bool
) -> None:
    model, tokenizer = tiny_model(tiny_encoder_dir, "cls")
    if unfreeze:
        model.encoder_model.pooler.requires_grad_(True)
    distributed = SimpleNamespace(ddp_find_unused_parameters=None, parallel_mode=ParallelMode.DISTRIBUTED)
    assert decided(distributed, model, tokenizer) is unfreeze

    # Left as they are: the user's setting, activation checkpointing (the Trainer's False), one process (no DDP).
    for kept, args in [
        (True, SimpleNamespace(ddp_find_unused_parameters=True, parallel_mode=ParallelMode.DISTRIBUTED)),
        (None, SimpleNamespace(**vars(distributed), activation_checkpointing=True)),
        (None, SimpleNamespace(ddp_find_unused_parameters=None, parallel_mode=ParallelMode.NOT_DISTRIBUTED)),
    ]:
        assert decided(args, model, tokenizer) is kept
    model.activation_checkpointing_enable()  # the model's own activation checkpointing: left as well
    assert activation_checkpointing(model) and decided(distributed, model, tokenizer) is None


def test_two_processes_train_without_the_unused_parameters_warning_and_with_an_unused_pooler(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    command = [
        sys.executable, "-m", "accelerate.commands.launch",
        "--config_file", str(REPO_ROOT / "examples" / "accelerate_configs" / "cpu_multiprocess.yaml"),
        "--main_process_port", str(free_port()),
        str(REPO_ROOT / "tests" / "ddp_unused_parameters.py"), str(tiny_encoder_dir), str(tmp_path),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "true"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=HANG_GUARD_S, env=env, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "find_unused_parameters=True was specified" not in done.stderr  # issue 32's warning
    for rank in (0, 1):
        records = json.loads((tmp_path / f"rank{rank}.json").read_text())
        for case, searched in (("as_is", False), ("unfrozen_pooler", True)):
            assert records[case]["find_unused_parameters"] is searched, (rank, case)
            assert records[case]["world_size"] == 2 and records[case]["global_step"] == 2
