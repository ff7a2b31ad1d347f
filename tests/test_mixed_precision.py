"""Mixed precision on a CPU (issue 56, item 1): a precision flag either takes effect or is one line naming what to do,
and the card records what ran. accelerate runs fp16 autocast only off the CPU, so ``--fp16 true`` on a CPU run
trained in float32 (its losses equal to a float32 run's) under a card saying ``mixed_precision: fp16``; ``--bf16 true``
without ``--use_cpu`` was transformers' own message, which names no flag; ``--bf16 true --use_cpu true`` does
autocast on the CPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from common.commands import run_unsup_argv, run_unsup_before_any_load
from common.training_checks import add_to_every_trainer
from conftest import run_unsup
from transformers import TrainerCallback

from hf_cse.run_files import TRAINING_SUMMARY_FILE

FP16_ON_A_CPU = (
    "fp16 mixed precision needs a GPU, and this run trains on the CPU, where accelerate would train in float32 "
    "instead: for mixed precision on the CPU pass --bf16 true --use_cpu true (bfloat16 autocast), or "
)


class LinearOutputDtypes(TrainerCallback):
    """Records the dtype of every output of the model's first ``Linear`` layer during training: ``bfloat16`` under
    bf16 autocast, ``float32`` without (a hook on the model itself would run outside accelerate's autocast, which
    wraps only its ``forward``)."""

    def __init__(self) -> None:
        self.dtypes: set[torch.dtype] = set()

    def on_train_begin(self, args: Any, state: Any, control: Any, model: torch.nn.Module, **kwargs: Any) -> None:
        linear = next(module for module in model.modules() if isinstance(module, torch.nn.Linear))
        linear.register_forward_hook(lambda module, inputs, output: self.dtypes.add(output.dtype))


@pytest.mark.parametrize("where", ["flag", "accelerate launch"])
def test_fp16_on_a_cpu_run_is_one_line_before_anything_loads(
    where: str,
    tiny_encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    """fp16 from ``--fp16 true``, or from ``accelerate launch --mixed_precision fp16`` (its environment variable)."""
    if where == "flag":
        argv, given, without = run_unsup_argv(tiny_encoder_dir, tmp_path, fp16="true"), "--fp16 true", "drop --fp16"
    else:
        monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp16")
        argv, without = run_unsup_argv(tiny_encoder_dir, tmp_path), "unset it"
        given = "ACCELERATE_MIXED_PRECISION=fp16 (accelerate launch --mixed_precision fp16 sets it)"
    code, line = run_unsup_before_any_load(monkeypatch, capsys, argv)
    assert (code, line) == (2, f"run_unsup.py: error: {given}: {FP16_ON_A_CPU}{without} to train in float32.")
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="bf16 without --use_cpu runs on a GPU")
def test_bf16_without_use_cpu_on_a_machine_without_a_gpu_names_use_cpu(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    argv = run_unsup_argv(tiny_encoder_dir, tmp_path, bf16="true", use_cpu="false")
    code, line = run_unsup_before_any_load(monkeypatch, capsys, argv)
    assert (code, line) == (
        2,
        "run_unsup.py: error: --bf16 true: this machine has no GPU that computes in bfloat16, and transformers runs "
        "bfloat16 on the CPU only with --use_cpu true: add it (bfloat16 autocast on the CPU), or drop --bf16 to "
        "train in float32.",
    )


@pytest.mark.parametrize(
    ("flags", "dtype", "recorded"), [({}, torch.float32, None), ({"bf16": "true"}, torch.bfloat16, "bf16")]
)
def test_bf16_on_the_cpu_autocasts_and_the_card_records_what_ran(
    flags: dict[str, str],
    dtype: torch.dtype,
    recorded: str | None,
    tiny_encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dtypes = LinearOutputDtypes()
    add_to_every_trainer(monkeypatch, dtypes)
    run_unsup.main(run_unsup_argv(tiny_encoder_dir, tmp_path, max_steps=2, save_strategy="no", **flags))
    assert dtypes.dtypes == {dtype}
    training = json.loads((tmp_path / "out" / TRAINING_SUMMARY_FILE).read_text(encoding="utf-8"))["training"]
    assert training.get("mixed_precision") == recorded and training["bf16"] is (recorded == "bf16")
    assert training["fp16"] is False
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert ("`mixed_precision` | `bf16`" in card) is (recorded == "bf16")
