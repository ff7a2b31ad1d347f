"""One shape per forward for the whole run under ``pad_to_max_seq_length``: every objective with its default inputs,
and each setting that takes a step down another path (``tests/common/step_runs.py``).

CUDA graphs (``--torch_compile_mode reduce-overhead``) record one graph per input shape and replay it; a forward whose
rows or length change from step to step records a new graph for each new shape (and dynamo recompiles for it), so a
run that asks for one shape must give every forward of every step the same shapes. The forwards are recorded at the
model (``CSEModel.forward``: the training forward, and the extra ones of input providers such as the negations' and
paraphrases') step by step, on a corpus whose sentences are negatable or not, so flagged row counts vary by batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from common.step_runs import STEP_RUNS, step_run_config
from common.training_checks import add_to_every_trainer
from conftest import run_unsup
from transformers import TrainerCallback

from hf_cse import CSEModel

MAX_SEQ_LENGTH = 24


class StepMarks(TrainerCallback):
    """Opens a new list of forward shapes at the start of each step, closes it at its end."""

    def __init__(self, steps: list[list[tuple[int, ...]]], state: dict[str, bool]) -> None:
        self.steps, self.state = steps, state

    def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
        self.steps.append([])
        self.state["active"] = True

    def on_step_end(self, *args: Any, **kwargs: Any) -> None:
        self.state["active"] = False


@contextmanager
def forward_shapes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[tuple[int, ...]]]]:
    """Per training step, the ``input_ids`` shape of each ``CSEModel`` forward, in call order."""
    steps: list[list[tuple[int, ...]]] = []
    state = {"active": False}
    forward = CSEModel.forward

    def recorded(self: CSEModel, *args: Any, **kwargs: Any) -> Any:
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        if state["active"] and input_ids is not None:
            steps[-1].append(tuple(input_ids.shape))
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(CSEModel, "forward", recorded)
    add_to_every_trainer(monkeypatch, StepMarks(steps, state))
    yield steps


@pytest.mark.parametrize("run", list(STEP_RUNS))
def test_a_run_padded_to_max_seq_length_gives_every_step_the_same_forward_shapes(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: str
) -> None:
    config = step_run_config(
        tmp_path, tiny_encoder_dir, run, max_seq_length=MAX_SEQ_LENGTH, pad_to_max_seq_length=True
    )
    with forward_shapes(monkeypatch) as steps:
        run_unsup.main(["--config", str(config)])
    assert len(steps) == 4 and steps[0], steps
    assert all(shapes == steps[0] for shapes in steps), steps


def test_the_recorder_sees_a_forward_whose_rows_change(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check is live: without ``pad_to_max_seq_length`` the negations' forward encodes only the flagged rows,
    whose count changes from batch to batch on this corpus."""
    config = step_run_config(tmp_path, tiny_encoder_dir, "sncse", max_seq_length=MAX_SEQ_LENGTH,
                             pad_to_multiple_of=MAX_SEQ_LENGTH)  # fmt: skip
    with forward_shapes(monkeypatch) as steps:
        run_unsup.main(["--config", str(config)])
    assert len({tuple(shapes) for shapes in steps}) > 1, steps


def test_encoding_every_row_gives_the_flagged_rows_embeddings_and_zeros_elsewhere() -> None:
    """``encode_flagged_rows(every_row=True)`` (the padded run's path) equals the flagged-rows path: the same
    embedding for a flagged row, zeros for the others, gradients to the flagged rows only. The stand-in model embeds
    each row by exact integer arithmetic on its own tokens, so the two paths' different row counts change no bit."""
    import torch

    from hf_cse.inputs.base import StepContext
    from hf_cse.inputs.negation_pairs import encode_flagged_rows

    class RowSums(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
            self.shapes: list[tuple[int, ...]] = []

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
            self.shapes.append(tuple(input_ids.shape))
            sums = (input_ids * attention_mask).sum(dim=1, keepdim=True).double()
            return type("Output", (), {"embeddings": sums * self.scale})()

    groups = {name: {"input_ids": torch.randint(1, 50, (5, 6)), "attention_mask": torch.ones(5, 6, dtype=torch.long)}
              for name in ("negation", "paraphrase")}  # fmt: skip
    flags = [True, False, True, True, False]
    model = RowSums()
    step = StepContext(model, groups, anchors=torch.zeros(5, 3, dtype=torch.float64), anchor_rows=None)
    picked = encode_flagged_rows(step, flags, ("negation", "paraphrase"), pad_token_id=0)
    every = encode_flagged_rows(step, flags, ("negation", "paraphrase"), pad_token_id=0, every_row=True)
    assert model.shapes == [(2 * 3, 6), (2 * 5, 6)]  # the flagged rows of both groups, then every row
    for few, full in zip(picked, every, strict=True):
        assert torch.equal(few, full) and not full[[1, 4]].any() and full[[0, 2, 3]].all()
    (grad,) = torch.autograd.grad(sum(e.sum() for e in every), model.scale)
    flagged = sum(groups[g]["input_ids"][[0, 2, 3]].sum() for g in groups).double()
    assert torch.equal(grad, flagged.expand(3))  # the unflagged rows' sums do not reach the gradient
