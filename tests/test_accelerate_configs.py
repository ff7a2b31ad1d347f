"""The Accelerate configs in examples/accelerate_configs: each parses as accelerate reads it, and the CPU
multi-process one really starts 2 ranks that the Trainer sees as one data-parallel group."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import HANG_GUARD_S, REPO_ROOT

CONFIG_DIR = REPO_ROOT / "examples" / "accelerate_configs"

# name -> (distributed_type, processes, machines, mixed_precision)
EXPECTED = {
    "cpu": ("NO", 1, 1, "no"),
    "cpu_multiprocess": ("MULTI_GPU", 2, 1, "no"),
    "single_gpu": ("NO", 1, 1, "bf16"),
    "multi_gpu_ddp": ("MULTI_GPU", 8, 1, "bf16"),
    "fsdp": ("FSDP", 8, 1, "bf16"),
    "multi_node_ddp": ("MULTI_GPU", 16, 2, "bf16"),
}


def test_the_expected_configs_are_shipped() -> None:
    assert sorted(path.stem for path in CONFIG_DIR.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_config_loads_as_accelerate_reads_it(name: str) -> None:
    from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file

    path = CONFIG_DIR / f"{name}.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key in ("compute_environment", "distributed_type", "num_processes", "num_machines", "mixed_precision"):
        assert key in raw, f"{name}.yaml lacks {key}"
    config = load_config_from_file(str(path))  # raises on unknown keys
    assert isinstance(config, ClusterConfig)
    distributed_type, processes, machines, precision = EXPECTED[name]
    assert config.distributed_type.value == distributed_type
    assert (config.num_processes, config.num_machines, config.mixed_precision) == (processes, machines, precision)
    assert 0 <= config.machine_rank < config.num_machines
    if name == "fsdp":
        fsdp = config.fsdp_config
        assert fsdp["fsdp_version"] == 2 and fsdp["fsdp_state_dict_type"] == "FULL_STATE_DICT"
        assert fsdp["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP" and fsdp["fsdp_transformer_layer_cls_to_wrap"]
    if name == "multi_node_ddp":
        assert config.main_process_ip and config.main_process_port
        text = path.read_text(encoding="utf-8")
        assert "--machine_rank" in text and "main_process_ip" in text  # the placeholders are documented


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_accelerate_launch_accepts_config(name: str) -> None:
    """``accelerate launch``'s own validation of the file (what it does before starting any process)."""
    launch = pytest.importorskip("accelerate.commands.launch")
    validate = getattr(launch, "_validate_launch_command", None)
    if validate is None:
        pytest.skip("accelerate has no _validate_launch_command")
    args = launch.launch_command_parser().parse_args(["--config_file", str(CONFIG_DIR / f"{name}.yaml"), "train.py"])
    args, defaults, _ = validate(args)
    assert args.num_processes == EXPECTED[name][1]
    assert args.multi_gpu == (EXPECTED[name][0] == "MULTI_GPU")
    assert args.use_fsdp == (name == "fsdp")


PROBE = """
import json, os, sys
import torch.distributed as dist
from transformers import TrainingArguments

args = TrainingArguments(output_dir=sys.argv[1], use_cpu=True, report_to="none")
record = {
    "rank": int(os.environ["RANK"]),
    "world_size_env": int(os.environ["WORLD_SIZE"]),
    "trainer_world_size": args.world_size,
    "process_index": args.process_index,
    "backend": dist.get_backend() if dist.is_initialized() else None,
}
with open(os.path.join(sys.argv[1], f"rank{record['rank']}.json"), "w") as f:
    json.dump(record, f)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_cpu_multiprocess_config_starts_two_ranks(tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE, encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(CONFIG_DIR / "cpu_multiprocess.yaml"),
        "--main_process_port",
        str(_free_port()),
        str(script),
        str(tmp_path),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=HANG_GUARD_S, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    records = sorted((json.loads(p.read_text()) for p in tmp_path.glob("rank*.json")), key=lambda r: r["rank"])
    assert [r["rank"] for r in records] == [0, 1]
    for record in records:
        assert record["world_size_env"] == 2 and record["trainer_world_size"] == 2
        assert record["process_index"] == record["rank"] and record["backend"] == "gloo"
