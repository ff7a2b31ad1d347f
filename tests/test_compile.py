"""``--torch_compile`` with ``CSEModel``: padding to a multiple of 8 bounds the shapes a compiled graph sees, so
training does not recompile per batch, and the compiled step gives the eager step's loss.

Measured on CPU (tiny BERT, 16 steps of 4 sentences of 3 to 26 tokens, torch 2.13, ``backend="eager"`` to count
dynamo's graphs): with static shapes (``automatic_dynamic_shapes=False``, as CUDA graphs need) and no padding, every
new length compiled a graph until dynamo's recompile limit (8) sent the rest to eager; padded to multiples of 8, 3
graphs (lengths 16, 24, 32). With dynamo's default automatic dynamic shapes, 2 graphs either way (the first static,
then one with a symbolic length). Padding changes which dropout masks a step draws (they are drawn over ``[2B, L,
H]``), so a compiled run is compared with an eager run padded alike.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import WORDS, training_args
from datasets import Dataset
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, PoolingConfig
from hf_cse.modeling.tokenization import SentenceTokenizer
from hf_cse.training.data.corpus import ContrastiveCollator


def varied_sentences(count: int = 48, seed: int = 0) -> list[str]:
    """Sentences of 1 to 24 words (3 to 26 tokens with [CLS] and [SEP]): batches of many different lengths."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 24))) for _ in range(count)]


def test_pad_to_multiple_of_defaults_to_8_only_under_torch_compile(tmp_path: Path) -> None:
    assert training_args(tmp_path).pad_to_multiple_of is None
    assert training_args(tmp_path, torch_compile=True).pad_to_multiple_of == 8
    assert training_args(tmp_path, torch_compile_backend="eager").pad_to_multiple_of == 8  # implies torch_compile
    assert training_args(tmp_path, torch_compile=True, pad_to_multiple_of=1).pad_to_multiple_of == 1
    with pytest.raises(ValueError, match="pad_to_multiple_of"):
        training_args(tmp_path, pad_to_multiple_of=0)


@pytest.mark.parametrize("multiple", [None, 1, 8])
def test_collator_pads_every_group_to_the_multiple(tiny_encoder_dir: Path, multiple: int | None) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    sentence_tokenizer = SentenceTokenizer(tokenizer, PoolingConfig(pooler="cls"), max_seq_length=32)
    sentences = ["a man is playing a guitar", "a dog"]  # 8 and 4 tokens
    tokens = sentence_tokenizer(sentences)
    features = [
        {**{key: values[i] for key, values in tokens.items()}, **{f"other.{k}": v[i] for k, v in tokens.items()}}
        for i in range(len(sentences))
    ]
    features[0] = {**features[0], "other.input_ids": features[0]["input_ids"][:5], "other.attention_mask": [1] * 5}
    features[0]["other.token_type_ids"] = [0] * 5
    batch = ContrastiveCollator(sentence_tokenizer, ["other"], pad_to_multiple_of=multiple)(features)
    longest = {"sentences": 8, "other": 5}
    for group, length in longest.items():
        expected = length if multiple in (None, 1) else -(-length // multiple) * multiple
        assert batch[group]["input_ids"].shape == (2, expected)
        assert batch[group]["attention_mask"].sum(dim=1).tolist() == [length, len(tokens["input_ids"][1])]


def loss_graphs() -> int:
    """The graphs dynamo holds for the objective's forward: ``--torch_compile`` compiles the loss beside the model
    (:mod:`hf_cse.training.step.compiled_loss`), one graph for SimCSE's fixed ``[4, D]`` views."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    from hf_cse.objectives.base import ContrastiveObjective

    graphs = len(_debug_get_cache_entry_list(ContrastiveObjective.forward.__code__))
    assert graphs == 1
    return graphs


def train_losses(
    encoder_dir: Path, output_dir: Path, sentences: list[str], **overrides: Any
) -> tuple[list[float], list[tuple[int, ...]]]:
    """Train 8 steps of batch 4 (SimCSE, seed 0); each step's loss and the shapes of the batches it encoded."""
    shapes: list[tuple[int, ...]] = []

    class Recording(CSETrainer):
        def compute_loss(self, model: torch.nn.Module, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            shapes.append(tuple(inputs["sentences"]["input_ids"].shape))
            return super().compute_loss(model, inputs, *args, **kwargs)

    torch.manual_seed(0)
    trainer = Recording(
        model=CSEModel.from_pretrained(encoder_dir, pooling=PoolingConfig(pooler="cls")),
        args=training_args(output_dir, max_steps=8, **overrides),
        train_dataset=Dataset.from_dict({"text": sentences}),
        processing_class=AutoTokenizer.from_pretrained(encoder_dir),
    )
    trainer.train()
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry], shapes


@pytest.mark.slow  # each dynamo compilation takes seconds to a minute on a loaded 2-core machine
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_torch_compile_trains_without_a_recompilation_per_batch(
    tiny_encoder_dir: Path, tmp_path: Path, backend: str
) -> None:
    """``eager`` counts dynamo's graphs with static shapes (the strictest case: every new shape is a new graph);
    ``aot_eager`` also traces the backward, with dynamo's default dynamic shapes."""
    from torch._dynamo.utils import counters

    sentences = varied_sentences()
    eager_losses, eager_shapes = train_losses(tiny_encoder_dir, tmp_path / "eager", sentences, pad_to_multiple_of=8)
    torch._dynamo.reset()
    counters.clear()
    # config.patch, not monkeypatch: dynamo's config module does not survive monkeypatch's undo (delattr).
    with torch._dynamo.config.patch(automatic_dynamic_shapes=backend != "eager"):
        losses, shapes = train_losses(tiny_encoder_dir, tmp_path / backend, sentences, torch_compile_backend=backend)
    graphs = counters["stats"]["unique_graphs"] - loss_graphs()  # the model's
    torch._dynamo.reset()

    assert shapes == eager_shapes and all(length % 8 == 0 for _, length in shapes)  # padded by default
    lengths = {length for _, length in shapes}
    assert 1 <= graphs <= (len(lengths) if backend == "eager" else 2), (graphs, shapes)
    assert len(shapes) == 8 > graphs  # fewer compilations than batches
    assert losses == pytest.approx(eager_losses, rel=1e-4, abs=1e-5)


def test_pad_to_max_seq_length_is_one_length_for_the_whole_run(tmp_path: Path) -> None:
    assert training_args(tmp_path, pad_to_max_seq_length=True, max_seq_length=24).pad_to_multiple_of == 24
    # CUDA graphs: --torch_compile_mode reduce-overhead implies torch_compile, and one padded length replaces the 8.
    compiled = training_args(tmp_path, torch_compile_mode="reduce-overhead", pad_to_max_seq_length=True)
    assert compiled.torch_compile and compiled.pad_to_multiple_of == compiled.max_seq_length == 32
    assert training_args(tmp_path, pad_to_max_seq_length=True, pad_to_multiple_of=32).pad_to_multiple_of == 32
    with pytest.raises(ValueError, match=r"pad_to_max_seq_length pads every batch to max_seq_length=32; "):
        training_args(tmp_path, pad_to_max_seq_length=True, pad_to_multiple_of=8)


@pytest.mark.slow  # one dynamo compilation: seconds to a minute on a loaded 2-core machine
def test_a_run_padded_to_max_seq_length_compiles_one_graph_and_matches_eager(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """Issue 31 item 3: with every batch at max_seq_length, dynamo with static shapes (as CUDA graphs need) compiles
    once for the whole run, and the compiled run's losses are the eager run's, padded alike."""
    from torch._dynamo.utils import counters

    sentences = varied_sentences()
    eager_losses, eager_shapes = train_losses(
        tiny_encoder_dir, tmp_path / "eager", sentences, pad_to_max_seq_length=True
    )
    torch._dynamo.reset()
    counters.clear()
    with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
        losses, shapes = train_losses(
            tiny_encoder_dir,
            tmp_path / "compiled",
            sentences,
            pad_to_max_seq_length=True,
            torch_compile_backend="eager",
        )
    graphs = counters["stats"]["unique_graphs"] - loss_graphs()  # the model's
    torch._dynamo.reset()

    assert shapes == eager_shapes and set(shapes) == {(4, 32)}  # 3 to 26 tokens, all padded to max_seq_length
    assert graphs == 1
    assert losses == pytest.approx(eager_losses, rel=1e-4, abs=1e-5)
