"""A decoder LLM as hf_cse's backbone: step time and peak memory of full fine-tuning against LoRA, each with and
without gradient checkpointing, as ratios to full fine-tuning (issue 37, item 8).

The model is a Qwen3 built in-process from transformers' ``Qwen3Config`` with random weights (seed 0, the same for
every arm): no decoder weights exist offline, and a step's cost does not depend on the weights. Its tokenizer is
built in-process too: a ``tokenizers`` WordLevel vocabulary of the corpus's most frequent words with a Whitespace
pre-tokenizer, wrapped in ``PreTrainedTokenizerFast`` with an end-of-sequence token that is also the padding token
(as decoder tokenizers without a pad token are used).

Each arm trains unsupervised SimCSE with hf_cse's ``CSETrainer`` over a ``CSEModel`` with mean pooling (``avg``):

- ``full``: every weight trained (AdamW);
- ``full_gc``: the same with gradient checkpointing;
- ``lora``: LoRA adapters (rank ``--lora_r``, alpha 16, dropout 0.05) on the attention and MLP projections
  (``q_proj k_proj v_proj o_proj gate_proj up_proj down_proj``), the rest frozen;
- ``lora_gc``: LoRA with gradient checkpointing.

Qwen3 ships ``attention_dropout 0.0`` and no hidden dropout, which would give SimCSE two identical views; the config's
``attention_dropout`` is set to ``--attention_dropout`` (0.1) so that they differ. Every batch is padded to
``max_seq_length`` (``pad_to_max_seq_length``), so each step encodes exactly ``2 x batch_size x max_seq_length``
tokens. The first warm-up step checks that every trainable weight got a gradient (a LoRA arm under checkpointing that
trained nothing would time nothing useful).

Timing: the arms' steps are interleaved (every arm takes its step before any takes the next), after ``--warmup``
steps; the median over ``--steps`` steps, each ending with a CUDA synchronize on a GPU. Ratios are to the reference
arm, ``full`` when it ran, else the first arm.

Peak memory:

- on CPU (resource-based, not tracemalloc, which sees no tensor memory): a fresh process builds only that arm and
  takes a warm-up and one step; its peak resident set size (``VmHWM``, reset through ``/proc/self/clear_refs`` once
  the libraries are imported) minus its resident size at that point: weights, gradients, AdamW's moments, activations
  and the allocator's slack of that arm alone;
- on CUDA: the arm's weights and optimizer state (its tensors' bytes) plus the most memory its steps allocated above
  what was allocated before each step (``torch.cuda.max_memory_allocated``), so the arms held side by side do not
  count each other.

Model FLOPs per step (for MFU, against the GPU's dense bf16 peak, :func:`flops.mfu`): each linear weight ``W`` costs
``2|W|`` per token forward, ``4|W|`` more in the backward if trained (gradients of its input and its weight), ``2|W|``
if frozen (its input's gradient only: a LoRA arm's base weights); attention ``4 L h d_h`` per token forward per layer,
three times that trained. Gradient checkpointing's recomputed forward is not counted (model FLOPs, as MFU defines
them). Bytes and the H100 floor as :mod:`flops` counts them.

    python benchmarks/decoder_step.py --output_json benchmarks/results/decoder_step_cpu.json
    python benchmarks/decoder_step.py --device cuda --size 1b --dtype bfloat16 --bf16 --arms lora lora_gc \\
        --batch_size 64 --output_json benchmarks/results/decoder_step_gpu_1b.json   # on a GPU
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _common import WIKI1M_HEAD, command_line, environment, write_json_atomic
from accelerate.utils import send_to_device
from datasets import Dataset
from flops import ParamBytes, floor_seconds, forward_bytes, mfu, step_bytes
from throughput import prepared_model

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
from hf_cse.training.data import load_sentences

ARMS = ("full", "full_gc", "lora", "lora_gc")
LORA_TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
EOS_TOKEN = "<|endoftext|>"
UNK_TOKEN = "<unk>"

# Qwen3 sizes. cpu: small enough for 2 CPU cores; 1b: about 1.0B non-embedding weights (Qwen3's head and MLP widths at
# 20 layers) with Qwen3's 151,936-row embedding (1.3B in all), for a GPU; tiny: the test suite's rehearsal.
SIZES: dict[str, dict[str, int]] = {
    "tiny": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
             "head_dim": 16, "intermediate_size": 64},
    "cpu": {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 64, "intermediate_size": 768},
    "1b": {"hidden_size": 2048, "num_hidden_layers": 20, "num_attention_heads": 16, "num_key_value_heads": 8,
           "head_dim": 128, "intermediate_size": 6144, "vocab_size": 151936},
}  # fmt: skip


def build_tokenizer(sentences: list[str], vocab_words: int) -> Any:
    """A decoder-style tokenizer made offline: WordLevel over the ``vocab_words`` most frequent words of
    ``sentences`` (the whole corpus file; Whitespace pre-tokenizer, lower-cased), ``<unk>`` for the rest, and an
    end-of-sequence token that pads. Deterministic for the same sentences (ties broken by first appearance)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pre_tokenizer = pre_tokenizers.Whitespace()
    counts = collections.Counter(
        word for sentence in sentences for word, _ in pre_tokenizer.pre_tokenize_str(sentence.lower())
    )
    words = [word for word, _ in counts.most_common(vocab_words)]
    vocab = {token: index for index, token in enumerate([EOS_TOKEN, UNK_TOKEN, *words])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK_TOKEN))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizer
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token=EOS_TOKEN, pad_token=EOS_TOKEN, unk_token=UNK_TOKEN, model_max_length=512
    )


def decoder_config(size: str, tokenizer: Any, attention_dropout: float) -> Any:
    """The Qwen3 config of ``size``: the tokenizer's vocabulary unless the size names Qwen3's own, its end-of-sequence
    token as padding, and ``attention_dropout`` for SimCSE's two views."""
    from transformers import Qwen3Config

    sizes = {"vocab_size": len(tokenizer), **SIZES[size]}
    return Qwen3Config(**sizes, attention_dropout=attention_dropout, max_position_embeddings=512,
                       pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)  # fmt: skip


def linear_flops_per_token(model: torch.nn.Module) -> float:
    """Training FLOPs per token of the model's linear layers: ``6|W|`` for a trained weight, ``4|W|`` for a frozen
    one (forward, and its input's gradient)."""
    total = 0.0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            total += (6 if module.weight.requires_grad else 4) * module.weight.numel()
    return total


def step_flops(model: torch.nn.Module, config: Any, rows: int, length: int) -> float:
    """Model FLOPs of one training step over ``rows`` rows of ``length`` tokens (see the module's docstring)."""
    tokens = rows * length
    attention = 3 * 4 * length * config.num_attention_heads * config.head_dim * config.num_hidden_layers
    return tokens * (linear_flops_per_token(model) + attention)


class Arm:
    """One arm: its trainer, the model as the Trainer runs it, the Trainer's optimizer and its batches."""

    def __init__(self, name: str, args: argparse.Namespace, config: Any, tokenizer: Any, corpus: list[str], tmp: Path):
        from peft import LoraConfig

        self.name = name
        self.lora = name.startswith("lora")
        self.gradient_checkpointing = name.endswith("_gc")
        device = torch.device(args.device)
        torch.manual_seed(0)  # the same random weights in every arm
        with torch.device(device):
            model = CSEModel(config.__class__.from_dict(config.to_dict()), pooling=PoolingConfig(pooler=args.pooler))
        model.to(getattr(torch, args.dtype))
        peft_config = (
            LoraConfig(r=args.lora_r, lora_alpha=16, lora_dropout=0.05, target_modules=LORA_TARGET_MODULES)
            if self.lora
            else None
        )
        training_args = CSETrainingArguments(
            output_dir=str(tmp / name), objective="simcse", per_device_train_batch_size=args.batch_size,
            max_seq_length=args.max_seq_length, pad_to_max_seq_length=True, report_to="none", bf16=args.bf16,
            use_cpu=device.type == "cpu", gradient_checkpointing=self.gradient_checkpointing,
        )  # fmt: skip
        dataset = Dataset.from_dict({"text": corpus})
        self.trainer = CSETrainer(model, training_args, dataset, processing_class=tokenizer, peft_config=peft_config)
        if self.gradient_checkpointing:  # what Trainer.train does before its first step
            enable = getattr(self.trainer.model, "activation_checkpointing_enable", None)
            (enable or self.trainer.model.gradient_checkpointing_enable)()
        self.model = prepared_model(self.trainer)
        self.optimizer = self.trainer.create_optimizer()
        self.trainable = [p for p in self.trainer.model.parameters() if p.requires_grad]
        per_step, tokenized = args.batch_size, self.trainer.train_dataset
        self.batches = [
            send_to_device(self.trainer.data_collator([tokenized[i] for i in range(start, start + per_step)]), device)
            for start in range(0, per_step * (args.warmup + args.steps), per_step)
        ]
        rows = 2 * args.batch_size  # SimCSE's two views, stacked
        self.flops = step_flops(self.trainer.model, config, rows, args.max_seq_length)
        params = ParamBytes.of(self.trainer.model)
        self.bytes = forward_bytes(params, config, rows * args.max_seq_length, trained=True) + step_bytes(params)
        self.checked = False

    def step(self, index: int) -> None:
        trainer = self.trainer
        with trainer.compute_loss_context_manager():
            loss = trainer.compute_loss(self.model, self.batches[index])
        loss.backward()
        if not self.checked:
            missing = sum(p.grad is None for p in self.trainable)
            if missing:
                raise RuntimeError(f"arm {self.name}: {missing} of {len(self.trainable)} trainable tensors got no "
                                   "gradient in the first step")  # fmt: skip
            self.checked = True
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def resident_bytes(self) -> int:
        """Bytes of the arm's weights, buffers and optimizer state (what it holds between steps)."""
        tensors = {id(t): t for t in [*self.trainer.model.parameters(), *self.trainer.model.buffers()]}
        for state in self.optimizer.state.values():
            tensors |= {id(t): t for t in state.values() if torch.is_tensor(t)}
        return sum(t.numel() * t.element_size() for t in tensors.values())

    def summary(self) -> dict[str, Any]:
        model = self.trainer.model
        return {
            "arm": self.name,
            "lora": self.lora,
            "gradient_checkpointing": self.gradient_checkpointing,
            "parameters": sum(p.numel() for p in model.parameters()),
            "trainable_parameters": sum(p.numel() for p in self.trainable),
        }


def proc_status_kib(field: str) -> int | None:
    """A ``/proc/self/status`` field in KiB (``VmHWM``, ``VmRSS``); ``None`` off Linux."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set size to its current one (Linux ``clear_refs`` 5); whether it did."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def memory_probe(args: argparse.Namespace, config: Any, tokenizer: Any, corpus: list[str]) -> dict[str, Any]:
    """This process's peak RSS while it builds one arm and takes a warm-up and one step, above its RSS before."""
    reset = reset_peak_rss()
    baseline = proc_status_kib("VmRSS") or 0
    with tempfile.TemporaryDirectory(prefix="hf_cse_decoder_probe-") as tmp:
        arm = Arm(args.memory_probe, args, config, tokenizer, corpus, Path(tmp))
        for index in range(2):
            arm.step(index)
    peak = proc_status_kib("VmHWM") or 0
    return {"peak_rss_gib": peak / 2**20, "baseline_rss_gib": baseline / 2**20, "hwm_reset": reset,
            "arm_peak_gib": (peak - baseline) / 2**20}  # fmt: skip


def probe_cpu_memory(arm: str, argv: list[str]) -> dict[str, Any]:
    """:func:`memory_probe` of ``arm`` in a fresh process (this script with ``--memory_probe``)."""
    command = [sys.executable, __file__, *argv, "--memory_probe", arm, "--steps", "1", "--warmup", "1"]
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"Memory probe of arm {arm!r} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def time_arms(arms: list[Arm], args: argparse.Namespace) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Interleaved steps: each arm's timed step times and, on CUDA, its most memory allocated above what was
    allocated before its step (bytes)."""
    cuda = args.device.startswith("cuda")
    times: dict[str, list[float]] = {arm.name: [] for arm in arms}
    transient: dict[str, float] = {arm.name: 0.0 for arm in arms}
    for index in range(args.warmup + args.steps):
        for arm in arms:
            if cuda:
                torch.cuda.synchronize()
                before = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            arm.step(index)
            if cuda:
                torch.cuda.synchronize()
                transient[arm.name] = max(transient[arm.name], torch.cuda.max_memory_allocated() - before)
            if index >= args.warmup:
                times[arm.name].append(time.perf_counter() - start)
    return times, transient


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="cpu")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--train_file", default=str(WIKI1M_HEAD))
    parser.add_argument("--vocab_words", type=int, default=8000, help="WordLevel vocabulary: most frequent words")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="weights' dtype")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (the Trainer's --bf16)")
    parser.add_argument("--lora_r", type=int, default=16)
    parser.add_argument("--attention_dropout", type=float, default=0.1)
    parser.add_argument("--pooler", default="avg")
    parser.add_argument("--no_memory", action="store_true", help="skip the CPU memory probes (one process per arm)")
    parser.add_argument("--output_json", default=None)
    parser.add_argument("--memory_probe", choices=ARMS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else list(argv)

    sentences = load_sentences(args.train_file)["text"]
    corpus = sentences[: args.batch_size * (args.warmup + args.steps)]
    if len(corpus) < args.batch_size * (args.warmup + args.steps):
        raise SystemExit(f"{args.train_file} has {len(corpus)} sentences; {args.warmup + args.steps} steps of "
                         f"{args.batch_size} need {args.batch_size * (args.warmup + args.steps)}.")  # fmt: skip
    tokenizer = build_tokenizer(sentences, args.vocab_words)  # the whole file's words, not only the steps'
    load_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    config = decoder_config(args.size, tokenizer, args.attention_dropout)
    if args.memory_probe:
        print(json.dumps(memory_probe(args, config, tokenizer, corpus)))
        return None

    cuda = args.device.startswith("cuda")
    with tempfile.TemporaryDirectory(prefix="hf_cse_decoder-") as tmp:
        arms = [Arm(name, args, config, tokenizer, corpus, Path(tmp)) for name in args.arms]
        times, transient = time_arms(arms, args)
        load_end = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        resident = {arm.name: arm.resident_bytes() for arm in arms}
        rows = [arm.summary() | {"model_flops_per_step": arm.flops, "bytes_per_step": arm.bytes} for arm in arms]
        del arms
    if cuda:
        memory = {name: (resident[name] + transient[name]) / 2**30 for name in resident}
        memory_method = "CUDA: the arm's weights and optimizer state plus the most its steps allocated above that"
    elif args.no_memory:
        memory, memory_method = {}, None
    else:
        probes = {row["arm"]: probe_cpu_memory(row["arm"], argv) for row in rows}
        memory = {name: probe["arm_peak_gib"] for name, probe in probes.items()}
        reset = all(probe["hwm_reset"] for probe in probes.values())
        memory_method = (
            "CPU, resource-based: peak RSS (VmHWM"
            + (", reset after the imports" if reset else ", not resettable here: imports included")
            + ") of a process building only that arm and taking two steps, minus its RSS before the model was built"
        )
    gpu = torch.cuda.get_device_name() if cuda else None
    reference = "full" if "full" in times else rows[0]["arm"]
    ref_time = statistics.median(times[reference])
    for row in rows:
        name = row["arm"]
        median = statistics.median(times[name])
        value, reason = mfu(row["model_flops_per_step"], median, gpu)
        floor = floor_seconds(row["model_flops_per_step"], row["bytes_per_step"])
        row |= {
            "median_step_s": median,
            "step_times_s": times[name],
            "time_vs_reference": median / ref_time,
            "peak_memory_gib": memory.get(name),
            "memory_vs_reference": memory[name] / memory[reference] if memory.get(reference) else None,
            "tokens_per_s": 2 * args.batch_size * args.max_seq_length / median,
            "mfu": value,
            "mfu_note": reason,
            "h100_floor_s": floor["floor_s"],
            "h100_floor_bound": floor["bound"],
        }
    result = {
        "command": command_line(None if argv is None else [__file__, *argv]),
        # The machine's 1-minute load average when the timing began and ended: on a shared CPU, what the times share.
        "environment": environment() | {"load_average_1min": [load_start, load_end]},
        "settings": {
            **{key: value for key, value in vars(args).items() if key != "memory_probe"},
            "model_config": {
                "model_type": config.model_type,
                **SIZES[args.size],
                "vocab_size": config.vocab_size,
                "attention_dropout": config.attention_dropout,
                "weights": "random (seed 0)",
            },
            "lora": {"r": args.lora_r, "lora_alpha": 16, "lora_dropout": 0.05, "target_modules": LORA_TARGET_MODULES},
            "objective": "simcse",
            "tokens_per_step": 2 * args.batch_size * args.max_seq_length,
            "reference_arm": reference,
            "memory": memory_method,
        },  # fmt: skip
        "arms": rows,
    }
    print(f"{'arm':<10}{'step s':>9}{'x ref':>8}{'GiB':>8}{'x ref':>8}{'MFU':>8}")
    for row in rows:
        memory_cell = f"{row['peak_memory_gib']:8.3f}" if row["peak_memory_gib"] is not None else f"{'-':>8}"
        ratio_cell = f"{row['memory_vs_reference']:8.3f}" if row["memory_vs_reference"] is not None else f"{'-':>8}"
        mfu_cell = f"{100 * row['mfu']:7.1f}%" if row["mfu"] is not None else f"{'-':>8}"
        print(f"{row['arm']:<10}{row['median_step_s']:9.3f}{row['time_vs_reference']:8.3f}{memory_cell}{ratio_cell}"
              f"{mfu_cell}")  # fmt: skip
    if args.output_json:
        write_json_atomic(args.output_json, result)
    return result


if __name__ == "__main__":
    main()
