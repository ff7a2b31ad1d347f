"""Peak memory and time of one training step with and without gradient caching (``gradient_cache_chunk_size``).

Each arm runs in a fresh process that builds the same random BERT and batch, takes a warm-up step, then measures
one step (``CSETrainer.compute_loss`` and its backward, dropout on): on a GPU the most CUDA memory allocated during
the step above what was allocated before it; on CPU the growth of the resident set during the step (``VmHWM`` after
the step minus ``VmRSS`` before it, the high-water mark reset first through ``/proc/self/clear_refs``; Linux and
glibc, with a fixed mmap threshold so that freed tensors leave the resident set).
Memory saved is the ratio of the two, printed with the step times (caching encodes every chunk twice).

    python benchmarks/gradient_cache_memory.py                       # CPU: random 4-layer BERT, batch 128, chunk 16
    python benchmarks/gradient_cache_memory.py --random_config bert-base --batch_size 512 --chunk_size 64  # a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _common import RESULTS_DIR, command_line, environment, write_json_atomic
from datasets import Dataset
from throughput import RANDOM_CONFIGS, write_random_model
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig

# A BERT small enough for a CPU step in seconds, large enough that activations dominate the step's memory.
RANDOM_CONFIGS.setdefault(
    "bert-small", {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 1024}
)


def resident_kib(field: str) -> int:
    """``VmRSS`` or ``VmHWM`` of this process, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"No {field} in /proc/self/status: CPU memory is measured on Linux only.")


def measure_arm(model_dir: str, batch_size: int, chunk_size: int | None, max_seq_length: int) -> dict[str, Any]:
    """One measured step (after a warm-up) of SimCSE on ``batch_size`` sentences, chunked by ``chunk_size``."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    words = [w for w in tokenizer.get_vocab() if w.isalpha()][:5000]
    generator = torch.Generator().manual_seed(0)
    # Sentences long enough to fill max_seq_length, so every row costs the same.
    corpus = [" ".join(words[int(i)] for i in torch.randint(len(words), (max_seq_length,), generator=generator))
              for _ in range(batch_size)]  # fmt: skip
    torch.manual_seed(0)
    model = CSEModel.from_pretrained(model_dir, pooling=PoolingConfig(pooler="cls")).to(device).train()
    args = CSETrainingArguments(
        output_dir=tempfile.mkdtemp(),
        objective="simcse",
        per_device_train_batch_size=batch_size,
        gradient_cache_chunk_size=chunk_size,
        max_seq_length=max_seq_length,
        report_to="none",
        use_cpu=device == "cpu",
    )
    trainer = CSETrainer(model, args, Dataset.from_dict({"text": corpus}), processing_class=tokenizer)
    batch = trainer._prepare_inputs(trainer.data_collator([trainer.train_dataset[i] for i in range(batch_size)]))

    def step() -> None:
        trainer.compute_loss(model, batch).backward()
        model.zero_grad(set_to_none=False)  # gradients stay allocated: their memory is not the step's

    step()  # warm-up: gradient buffers, allocator caches
    if device == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current VmRSS
        before = resident_kib("VmRSS") * 1024
    start = time.perf_counter()
    step()
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else resident_kib("VmHWM") * 1024
    return {"device": device, "step_peak_mib": (peak - before) / 2**20, "step_s": seconds}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--random_config", default="bert-small", choices=sorted(RANDOM_CONFIGS))
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--chunk_size", type=int, default=16)
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--output_json", default=str(RESULTS_DIR / "gradient_cache_memory.json"))
    parser.add_argument("--arm", help=argparse.SUPPRESS)  # a child: "whole" or "chunked"
    parser.add_argument("--model_dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.arm:
        chunk = args.chunk_size if args.arm == "chunked" else None
        print(json.dumps(measure_arm(args.model_dir, args.batch_size, chunk, args.max_seq_length)))
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        model = write_random_model(args.random_config, Path(tmp))
        arms = {}
        for arm in ("whole", "chunked"):
            command = [sys.executable, __file__, "--arm", arm, "--model_dir", tmp,
                       "--chunk_size", str(args.chunk_size), "--batch_size", str(args.batch_size),
                       "--max_seq_length", str(args.max_seq_length)]  # fmt: skip
            # A fixed mmap threshold (it also turns glibc's adaptive one off): every block from 64 KiB up is mapped on
            # malloc and unmapped on free, so the resident set follows the live tensors instead of keeping the heap
            # pages a freed step left behind, which the next step would reuse unseen.
            env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
            done = subprocess.run(command, capture_output=True, text=True, env=env)
            if done.returncode != 0:
                raise RuntimeError(f"Arm {arm!r} failed:\n{done.stderr[-2000:]}")
            arms[arm] = json.loads(done.stdout.strip().splitlines()[-1])
    whole, chunked = arms["whole"], arms["chunked"]
    result = {
        "command": command_line(),
        "environment": environment(),
        "settings": {
            "model": model,
            "batch_size": args.batch_size,
            "chunk_size": args.chunk_size,
            "max_seq_length": args.max_seq_length,
            "objective": "simcse",
        },  # fmt: skip
        "arms": arms,
        "memory_ratio_whole_to_chunked": whole["step_peak_mib"] / chunked["step_peak_mib"],
        "time_ratio_chunked_to_whole": chunked["step_s"] / whole["step_s"],
    }
    print(f"{'arm':<8} {'step peak MiB':>14} {'step s':>8}   ({whole['device']}, batch {args.batch_size})")
    for arm, values in arms.items():
        label = arm if arm == "whole" else f"chunk {args.chunk_size}"
        print(f"{label:<8} {values['step_peak_mib']:>14.1f} {values['step_s']:>8.2f}")
    print(f"memory saved: {result['memory_ratio_whole_to_chunked']:.2f}x less at the step's peak; "
          f"time: {result['time_ratio_chunked_to_whole']:.2f}x the uncached step")  # fmt: skip
    write_json_atomic(args.output_json, result)
    return result


if __name__ == "__main__":
    main()
