"""``benchmarks/padding_free.py``, packed against padded step times, rehearsed on the CPU with tiny models (eager
attention standing in for the packing kernels, which cannot train on a CPU), and its stage in
``benchmarks/gpu_session.py``: the GPU command, and the ratios the session's record shows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG_GUARD_S, SENTENCES

BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS_DIR))  # the scripts import their helpers as `from _common import ...`

import gpu_session  # noqa: E402 - after the benchmarks folder is on the path


@pytest.fixture
def team_data(tiny_tokenizer_dir: Path, tmp_path: Path) -> Path:
    """A team data folder as the benchmarks read it: the test vocabulary standing in for bert-base-uncased's, and a
    wiki1m head of the test sentences."""
    data = tmp_path / "data"
    shutil.copytree(tiny_tokenizer_dir, data / "models" / "bert-base-uncased-tokenizer")
    (data / "wiki1m").mkdir()
    lines = [f"{sentence} {i % 7} ." for i in range(8) for sentence in SENTENCES]
    (data / "wiki1m" / "wiki1m_for_simcse.head11914.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return data


@pytest.mark.slow  # four model copies per case, each a CSETrainer: about a minute of a loaded 2-core CPU
def test_the_rehearsal_times_every_arm_and_skips_a_kernel_that_cannot_train_here(
    team_data: Path, tmp_path: Path
) -> None:
    output = tmp_path / "padding_free.json"
    command = [sys.executable, "benchmarks/padding_free.py", "--size", "tiny", "--kernels", "eager", "flex_attention",
               "--steps", "1", "--warmup", "1", "--batch_size", "4", "--long_batch_size", "2",
               "--output_json", str(output)]  # fmt: skip
    environment = {**os.environ, "HF_CSE_DATA_DIR": str(team_data), "HF_HUB_OFFLINE": "1"}
    subprocess.run(
        command, cwd=BENCHMARKS_DIR.parent, env=environment, check=True, capture_output=True, timeout=HANG_GUARD_S
    )
    result = json.loads(output.read_text(encoding="utf-8"))
    assert [(case["model"], case["texts"]) for case in result["cases"]] == [
        ("encoder", "wiki1m"), ("decoder", "wiki1m"), ("encoder", "long"), ("decoder", "long")
    ]  # fmt: skip
    for case in result["cases"]:
        assert set(case["median_step_s"]) == {"padded_sdpa", "padded_eager", "packed_eager"}
        assert all(seconds > 0 for seconds in case["median_step_s"].values())
        steps = case["median_step_s"]
        assert case["ratios"]["packed_eager/padded_eager"] == steps["packed_eager"] / steps["padded_eager"]
        assert 0 < case["real_token_share"] < 1  # sentences of several lengths: padding that packing leaves out
    assert "no backward pass" in result["settings"]["skipped_kernels"]["flex_attention"]
    # The session's record shows each case's ratios, read from where the stage writes its JSON.
    logs = tmp_path / "out" / "logs"
    logs.mkdir(parents=True)
    shutil.copy(output, logs / gpu_session.PADDING_FREE_JSON)
    figures = gpu_session.padding_free_headline(logs / gpu_session.PADDING_FREE_JSON)
    assert (
        figures["encoder_wiki1m"]["packed_eager/padded_sdpa"]
        == result["cases"][0]["ratios"]["packed_eager/padded_sdpa"]
    )
    assert "flex_attention" in figures["skipped"]


def test_the_gpu_stage_times_both_packing_kernels_on_the_gpu_sizes_and_keeps_its_json_in_the_logs() -> None:
    out = Path("/out")
    stages = {stage.name: stage for stage in gpu_session.build_stages("gpu", out)}
    names = list(stages)
    assert names.index("padding_free") == names.index("decoder_1b") - 1
    stage = stages["padding_free"]
    command = " ".join(stage.argv)
    assert "--device cuda --size gpu --bf16 --kernels flex_attention flash_attention_2" in command
    assert stage.output is None and stage.argv[-1] == str(out / "logs" / gpu_session.PADDING_FREE_JSON)
    rehearsal = {stage.name: stage for stage in gpu_session.build_stages("tiny", out)}["padding_free"]
    assert "--kernels eager" in " ".join(rehearsal.argv)
