"""The decoder example configs are GPU configs (``bf16: true``): each one's header says so and gives the command that
runs it on a CPU, and that command, with only the model and corpus swapped for a tiny stand-in, trains. (The other
decoder-config test, ``tests/test_decoder_configs.py``, rewrites every GPU setting; this one adds only what the
header tells a user to add.)"""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path

import pytest
import torch
import yaml
from common.config_stand_ins import stand_in_corpus, stand_in_max_seq_length
from conftest import REPO_ROOT, run_unsup

from hf_cse.errors import UsageError

CONFIGS = sorted((REPO_ROOT / "examples" / "configs" / "decoder").glob("*.yaml"))
FAMILIES = {"qwen": "qwen3", "gemma": "gemma3_text"}
"""The tiny decoder standing in for a config's model, by a word of its name (a run's own output: its config says
which family in its name, ``llm2vec-mntp-gemma3-1b``)."""
CPU_FLAGS = ("--bf16 false", "--use_cpu true")
"""The two ways the headers name; either runs the config on a CPU."""


def header_command(config_path: Path) -> list[str]:
    """The arguments of the header's ``python run_unsup.py ...`` line for running the config on a CPU."""
    text = config_path.read_text(encoding="utf-8")
    found = re.findall(r"^#   python run_unsup\.py (--config \S+ --bf16 false)$", text, flags=re.MULTILINE)
    assert len(found) == 1, f"{config_path.name}'s header has no single CPU command"
    return shlex.split(found[0])


def stand_in_arguments(config_path: Path, decoder_dirs: dict[str, Path], tmp_path: Path) -> list[str]:
    """Arguments replacing what this machine lacks but the precision: the model (and the length it reads), the corpus,
    the STS sets."""
    shipped = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    model = shipped["model_name_or_path"].lower()
    family = next(FAMILIES[word] for word in FAMILIES if word in model)
    values = {
        "model_name_or_path": decoder_dirs[family],
        "train_file": stand_in_corpus(shipped["train_file"], tmp_path),
        "max_seq_length": stand_in_max_seq_length(shipped.get("max_seq_length")),
        "output_dir": tmp_path / "out",
        "per_device_train_batch_size": 4,
        "max_steps": 2,
        "eval_strategy": "no",
        "load_best_model_at_end": "false",
        "save_strategy": "no",
        "report_to": "none",
    }
    return [part for key, value in values.items() for part in (f"--{key}", str(value))]


@pytest.mark.parametrize("config_path", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_the_header_names_the_config_a_gpu_config_and_both_cpu_flags(config_path: Path) -> None:
    assert yaml.safe_load(config_path.read_text(encoding="utf-8"))["bf16"] is True
    header = " ".join(line.lstrip("# ") for line in config_path.read_text(encoding="utf-8").splitlines())
    assert "A GPU config (bf16: true)" in header and all(flag in header for flag in CPU_FLAGS)
    assert header_command(config_path)[1] == str(config_path.relative_to(REPO_ROOT))


@pytest.mark.skipif(torch.cuda.is_available(), reason="bf16 is refused only without a CUDA GPU")
def test_as_shipped_a_decoder_config_is_refused_on_a_cpu_naming_both_cpu_flags(
    tiny_decoder_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    config_path = CONFIGS[0]
    with pytest.raises(UsageError, match="^--bf16 true: this machine has no GPU that computes in bfloat16.*") as error:
        run_unsup.main(["--config", str(config_path), *stand_in_arguments(config_path, tiny_decoder_dirs, tmp_path)])
    assert "--use_cpu true" in str(error.value) and "drop --bf16" in str(error.value)


@pytest.mark.parametrize("cpu_flag", CPU_FLAGS)
@pytest.mark.parametrize("config_path", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_the_headers_cpu_flag_trains_the_config_on_its_tiny_stand_in(
    config_path: Path,
    cpu_flag: str,
    tiny_decoder_dirs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO_ROOT)  # the header's command runs from the repository root
    command = header_command(config_path)
    command = [*command[:2], *shlex.split(cpu_flag)]  # the header's own command, or its alternative flag
    metrics = run_unsup.main([*command, *stand_in_arguments(config_path, tiny_decoder_dirs, tmp_path)])
    assert math.isfinite(metrics["train_loss"])
