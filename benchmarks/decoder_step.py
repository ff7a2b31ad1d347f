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
- ``lora_gc``: LoRA with gradient checkpointing;
- ``lora_eager``: LoRA with transformers' ``eager`` attention (a softmax of the explicit scores) in place of
  ``--attn_implementation`` (default ``sdpa``, torch's ``scaled_dot_product_attention``, which dispatches to its own
  flash, memory-efficient, cuDNN or math kernel by device, dtype and mask; ``flash_attention_2`` needs the
  flash-attn package);
- ``qlora``: LoRA over weights loaded 4-bit NF4 through bitsandbytes the way ``run_unsup.py --load_in_4bit true``
  loads them: the arm's random weights are saved to a temporary folder and loaded back by
  ``CSEModel.from_pretrained`` with hf_cse's ``BackboneSettings(load_in_4bit=True)``, and ``CSETrainer`` prepares
  them (peft's ``prepare_model_for_kbit_training``) before adding the adapters (on the CPU, through bitsandbytes' CPU
  backend). Without bitsandbytes hf_cse refuses it in one line; its row then holds that error (the other arms run: it
  is the one arm whose needs may be missing where it runs, so a failure to build or step is recorded, with its
  traceback on stderr, not raised).

The default arms are the first four; ``lora_eager`` and ``qlora`` run when ``--arms`` names them.

Qwen3 ships ``attention_dropout 0.0`` and no hidden dropout, which would give SimCSE two identical views; the config's
``attention_dropout`` is set to ``--attention_dropout`` (0.1) so that they differ. Every batch is padded to
``max_seq_length`` (``pad_to_max_seq_length``), so each step encodes exactly ``2 x batch_size x max_seq_length``
tokens. The first warm-up step checks that every trainable weight got a gradient (a LoRA arm under checkpointing that
trained nothing would time nothing useful).

Which attention ran: the last warm-up step of each arm runs under torch's profiler, and its row lists the attention
operators that step called (``attention_ops``): the SDPA kernel torch picked (``attention_backend``:
``flash_attention``, ``efficient_attention``, ``cudnn_attention``, ``attention_math``; ``flash_attention_for_cpu`` on
CPU), or ``eager``. A padded batch of a causal decoder hands SDPA an explicit mask, which torch's flash kernel does not
take.

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
  count each other. A 4-bit weight counts its packed bytes; bitsandbytes' quantization constants are no parameter
  and are left out (with double quantization about 0.127 bits per weight, 3% of the 4-bit bytes).

Model FLOPs per step (for MFU, against the GPU's dense bf16 peak, :func:`flops.mfu`): each linear weight ``W`` costs
``2|W|`` per token forward, ``4|W|`` more in the backward if trained (gradients of its input and its weight), ``2|W|``
if frozen (its input's gradient only: a LoRA arm's base weights); attention ``4 L h d_h`` per token forward per layer,
three times that trained. Gradient checkpointing's recomputed forward is not counted (model FLOPs, as MFU defines
them). A 4-bit weight counts as the matrix it stands for (``in_features x out_features``; its dequantization is not
counted). Bytes and the H100 floor as :mod:`flops` counts them.

With ``--qlora_run_steps N``, hf_cse's QLoRA path end to end: ``run_unsup.py`` itself, for ``N`` steps on a small
random Qwen3 (``--qlora_run_size``, saved with the tokenizer to a temporary folder like a Hub checkpoint), once with
``--load_in_4bit true`` and once without (bf16 LoRA, the reference), both ``--lora_r`` over the same weights and
sentences at ``--qlora_run_learning_rate``. For each run, under ``qlora_run`` in the JSON: its exit status (and error
line), its logged losses and whether they are all finite, how many LoRA ``B`` matrices moved off their zero
initialisation, its steps per second, and what the saved folder holds: the root's quantization config and weight
dtypes (hf_cse merges the adapters into the weights at the root: over 4-bit weights, into their dequantized float32
values, saved unquantized), and how the root, the saved adapter over the base (loaded as the run loaded it: what was
trained, computing in its dtype, bfloat16 for 4-bit layers) and the base alone embed a few sentences: the largest
differences over the largest embedding component. The root against the adapter is what the export loses plus the
adapter's own rounding in its compute dtype; the adapter against the base is what training changed. A QLoRA arm or
run that fails, losses that are not finite, adapters that did not move, a root that does not load, is a bitsandbytes
checkpoint or is closer to the base than to the adapter (the training lost) make the script exit 1 once the JSON is
written, on a GPU as on the CPU.

    python benchmarks/decoder_step.py --output_json benchmarks/results/decoder_step_cpu.json

On a GPU it runs as ``gpu_session.py``'s ``decoder_1b`` stage (``python benchmarks/gpu_session.py --out $OUT``, with
bitsandbytes among the carried wheels), whose definition holds its flags; ``BENCHMARKS.md`` prints that command.
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from _common import REPO_ROOT, WIKI1M_HEAD, command_line, environment, write_json_atomic
from accelerate.utils import send_to_device
from datasets import Dataset
from flops import ParamBytes, floor_seconds, forward_bytes, mfu, step_bytes
from throughput import prepared_model

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig, SentenceEncoder
from hf_cse.modeling.backbone import BackboneSettings
from hf_cse.training.data.corpus import load_sentences

ARMS = ("full", "full_gc", "lora", "lora_gc", "lora_eager", "qlora")
DEFAULT_ARMS = ARMS[:4]
# The arm whose needs may be missing where it runs (bitsandbytes, its native library for the device): its failure is
# recorded in its row and the other arms go on, so that one GPU call still times them.
OPTIONAL_ARMS = ("qlora",)
ATTN_IMPLEMENTATIONS = ("sdpa", "eager", "flash_attention_2")
SDPA_OP_PREFIX = "aten::_scaled_dot_product_"  # the backends torch's scaled_dot_product_attention dispatches to
EAGER_ATTENTION_OPS = ("aten::softmax", "aten::_softmax")  # eager attention's; the loss's is log_softmax
COMPARED_SENTENCES = 8  # sentences the QLoRA run's saved models embed
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
    one (forward, and its input's gradient). ``|W|`` is ``in_features x out_features``: a bitsandbytes 4-bit layer
    (an ``nn.Linear``) packs two weights per stored byte."""
    total = 0.0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            total += (6 if module.weight.requires_grad else 4) * module.in_features * module.out_features
    return total


def step_flops(model: torch.nn.Module, config: Any, rows: int, length: int) -> float:
    """Model FLOPs of one training step over ``rows`` rows of ``length`` tokens (see the module's docstring)."""
    tokens = rows * length
    attention = 3 * 4 * length * config.num_attention_heads * config.head_dim * config.num_hidden_layers
    return tokens * (linear_flops_per_token(model) + attention)


def load_4bit(config: Any, args: argparse.Namespace, folder: Path) -> CSEModel:
    """The arm's random weights (seed 0, as every arm's) saved into ``folder`` and loaded back 4-bit NF4 as
    ``run_unsup.py --load_in_4bit true`` loads a checkpoint: ``CSEModel.from_pretrained`` with
    ``BackboneSettings(load_in_4bit=True)``'s keyword arguments, on ``--device``.

    Raises:
        UsageError: no bitsandbytes, or one below hf_cse's floor (its one-line refusal, before anything is saved).
    """
    settings = BackboneSettings(
        torch_dtype=args.dtype, attn_implementation=config._attn_implementation, load_in_4bit=True
    )
    torch.manual_seed(0)
    with torch.device(args.device):
        model = CSEModel(config, pooling=PoolingConfig(pooler=args.pooler))
    model.to(getattr(torch, args.dtype)).save_pretrained(folder)
    del model
    release_memory()
    return CSEModel.from_pretrained(folder, **settings.from_pretrained_kwargs(device=args.device))


def release_memory() -> None:
    """Free what dropped models held: Python's cycles, then the CUDA allocator's cached blocks."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class Arm:
    """One arm: its trainer, the model as the Trainer runs it, the Trainer's optimizer and its batches; and what
    :func:`time_arms` measures of it (``times``, ``transient_bytes``, ``attention_ops``)."""

    def __init__(self, name: str, args: argparse.Namespace, config: Any, tokenizer: Any, corpus: list[str], tmp: Path):
        from peft import LoraConfig

        self.name = name
        self.quantized = name == "qlora"
        self.lora = name.startswith("lora") or self.quantized
        self.gradient_checkpointing = name.endswith("_gc")
        device = torch.device(args.device)
        config = config.__class__.from_dict(config.to_dict())
        config._attn_implementation = "eager" if name == "lora_eager" else args.attn_implementation
        if self.quantized:
            model = load_4bit(config, args, tmp / f"{name}_weights")
        else:
            torch.manual_seed(0)  # the same random weights in every arm
            with torch.device(device):
                model = CSEModel(config, pooling=PoolingConfig(pooler=args.pooler))
            model.to(getattr(torch, args.dtype))
        peft_config = (
            LoraConfig(r=args.lora_r, lora_alpha=16, lora_dropout=0.05, target_modules=LORA_TARGET_MODULES)
            if self.lora
            else None
        )
        training_args = CSETrainingArguments(
            output_dir=str(tmp / name), objective="simcse", per_device_train_batch_size=args.batch_size,
            max_seq_length=args.max_seq_length, pad_to_max_seq_length=True, report_to="none", bf16=args.bf16,
            use_cpu=device.type == "cpu", activation_checkpointing=self.gradient_checkpointing,
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
        self.times: list[float] = []
        self.transient_bytes = 0.0
        self.attention_ops: list[str] | None = None

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
            "load_in_4bit": self.quantized,
            "attn_implementation": model.config._attn_implementation,  # what transformers runs, not what was asked
            "attention_ops": self.attention_ops,
            "attention_backend": attention_backend(self.attention_ops),
            "parameters": sum(p.numel() for p in model.parameters()),  # a 4-bit weight: its packed bytes' count
            "trainable_parameters": sum(p.numel() for p in self.trainable),
        }


def profiled_attention_ops(step: Callable[[], None]) -> list[str]:
    """Run ``step`` under torch's profiler (host side only: the operator names say which kernel family ran) and
    return the attention operators it called: ``aten::scaled_dot_product_attention`` and the backend it dispatched
    to (:data:`SDPA_OP_PREFIX`), with their backward, or eager attention's softmax."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        step()
    names = {event.key for event in profiler.key_averages()}
    return sorted(name for name in names if "scaled_dot_product" in name or name in EAGER_ATTENTION_OPS)


def attention_backend(ops: list[str] | None) -> str | None:
    """The attention kernel of :func:`profiled_attention_ops`' operators: the SDPA backend(s) of the forward
    (``flash_attention``, ``efficient_attention``, ``cudnn_attention``, ``attention_math``,
    ``flash_attention_for_cpu``), ``eager``, or ``None`` when the arm was not profiled (no warm-up step)."""
    if ops is None:
        return None
    backends = [op.removeprefix(SDPA_OP_PREFIX) for op in ops if op.startswith(SDPA_OP_PREFIX)]
    forward = [name for name in backends if not name.endswith("_backward")]
    if forward:
        return "+".join(forward)
    return "eager" if any(op in EAGER_ATTENTION_OPS for op in ops) else "none found"


def error_line(error: BaseException) -> str:
    """``Type: message`` of an error (its message's first 2,000 characters), for a row of the JSON."""
    return f"{type(error).__name__}: {error}"[:2000]


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


def build_arms(
    args: argparse.Namespace, config: Any, tokenizer: Any, corpus: list[str], tmp: Path
) -> tuple[list[Arm], dict[str, str]]:
    """The arms of ``args.arms`` that could be built, and the error of each :data:`OPTIONAL_ARMS` arm that could not
    (its traceback printed to stderr); any other arm's error is raised."""
    arms, failed = [], {}
    for name in args.arms:
        try:
            arms.append(Arm(name, args, config, tokenizer, corpus, tmp))
        except Exception as error:
            if name not in OPTIONAL_ARMS:
                raise
            traceback.print_exc()
            failed[name] = error_line(error)
            release_memory()
    return arms, failed


def time_arms(arms: list[Arm], args: argparse.Namespace) -> dict[str, str]:
    """Interleaved steps: each arm's timed step times (``arm.times``), on CUDA the most memory its steps allocated
    above what was allocated before each step (``arm.transient_bytes``), and the attention operators of its last
    warm-up step (``arm.attention_ops``, :func:`profiled_attention_ops`). An :data:`OPTIONAL_ARMS` arm whose step
    raises takes no more steps; returned: such arms' errors by name (tracebacks on stderr)."""
    cuda = args.device.startswith("cuda")
    failed: dict[str, str] = {}
    for index in range(args.warmup + args.steps):
        for arm in [arm for arm in arms if arm.name not in failed]:
            if cuda:
                torch.cuda.synchronize()
                before = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            try:
                if index == args.warmup - 1:
                    arm.attention_ops = profiled_attention_ops(functools.partial(arm.step, index))
                else:
                    arm.step(index)
            except Exception as error:
                if arm.name not in OPTIONAL_ARMS:
                    raise
                traceback.print_exc()
                failed[arm.name] = error_line(error)
                continue
            if cuda:
                torch.cuda.synchronize()
                arm.transient_bytes = max(arm.transient_bytes, torch.cuda.max_memory_allocated() - before)
            if index >= args.warmup:
                arm.times.append(time.perf_counter() - start)
    return failed


def save_random_decoder(folder: Path, size: str, tokenizer: Any, attention_dropout: float) -> Path:
    """A random Qwen3 of ``size`` (seed 0) and ``tokenizer`` saved into ``folder``, like a Hub checkpoint."""
    from transformers import Qwen3Model

    torch.manual_seed(0)
    Qwen3Model(decoder_config(size, tokenizer, attention_dropout)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def run_record(out: Path, completed: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """What one ``run_unsup.py`` run did: its exit status and, if it failed, its ``error:`` line; else its logged
    losses, its speed, how many LoRA ``B`` matrices moved off zero (peft starts every one at zero), and what the
    saved root holds (quantization config, weight dtypes)."""
    from safetensors import safe_open

    record: dict[str, Any] = {"returncode": completed.returncode}
    if completed.returncode != 0:
        lines = completed.stdout.strip().splitlines() or [""]
        record["error"] = next((line for line in reversed(lines) if ": error: " in line), lines[-1])
        return record
    history = json.loads((out / "trainer_state.json").read_text(encoding="utf-8"))["log_history"]
    losses = [entry["loss"] for entry in history if "loss" in entry]
    metrics = json.loads((out / "all_results.json").read_text(encoding="utf-8"))
    with safe_open(out / "adapter" / "adapter_model.safetensors", "pt") as adapter:
        lora_b = [adapter.get_tensor(key) for key in adapter.keys() if "lora_B" in key]
    dtypes: collections.Counter[str] = collections.Counter()
    for path in sorted(out.glob("*.safetensors")):
        with safe_open(path, "pt") as weights:
            dtypes.update(weights.get_slice(key).get_dtype() for key in weights.keys())
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    return record | {
        "losses": losses,
        "losses_finite": bool(losses) and all(math.isfinite(loss) for loss in losses),
        "train_runtime_s": metrics.get("train_runtime"),
        "steps_per_s": metrics.get("train_steps_per_second"),
        "lora_B_matrices": len(lora_b),
        "lora_B_moved": sum(bool(matrix.any()) for matrix in lora_b),
        "root_quantization_config": config.get("quantization_config"),
        "root_weight_dtypes": dict(sorted(dtypes.items())),
    }


def embedding_gaps(out: Path, base: Path, settings: BackboneSettings, args: argparse.Namespace) -> dict[str, Any]:
    """How a run's saved folder embeds :data:`COMPARED_SENTENCES` sentences: the root (``CSEModel.from_pretrained``,
    the merged model hf_cse exports), the saved adapter over ``base`` loaded with ``settings`` (what was trained:
    ``PeftModel.from_pretrained(base, OUTPUT/adapter)``, as the adapter's card says) and ``base`` alone; each pair's
    largest absolute difference over the adapter embeddings' largest absolute component. A root that does not load
    gives its error instead."""
    from peft import PeftModel
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(out)
    sentences = load_sentences(args.train_file)["text"][:COMPARED_SENTENCES]

    def embed(model: torch.nn.Module) -> torch.Tensor:
        if not getattr(model, "is_loaded_in_4bit", False):  # a 4-bit model loaded on it
            model.to(args.device)
        return SentenceEncoder(model, tokenizer).encode(sentences).float().cpu()

    try:
        root = embed(CSEModel.from_pretrained(out))
    except Exception as error:
        traceback.print_exc()
        return {"root_load_error": error_line(error)}
    pooling = PoolingConfig(pooler=args.pooler)
    base_model = CSEModel.from_pretrained(base, pooling=pooling, **settings.from_pretrained_kwargs(args.device))
    plain = embed(base_model)
    adapted = embed(PeftModel.from_pretrained(base_model, out / "adapter"))
    scale = adapted.abs().max().item()
    return {
        "max_abs_embedding": scale,
        "root_vs_adapter": (root - adapted).abs().max().item() / scale,
        "adapter_vs_base": (adapted - plain).abs().max().item() / scale,
        "root_vs_base": (root - plain).abs().max().item() / scale,
    }


def qlora_run(args: argparse.Namespace, tokenizer: Any, tmp: Path) -> dict[str, Any]:
    """``run_unsup.py`` with and without ``--load_in_4bit true`` on the same small random Qwen3 (see the module's
    docstring): each run's :func:`run_record` and, where it trained, :func:`embedding_gaps`."""
    base = save_random_decoder(tmp / "qlora_run_base", args.qlora_run_size, tokenizer, args.attention_dropout)
    cpu = not args.device.startswith("cuda")
    runs = {}
    for name, quantized in (("lora", False), ("qlora", True)):
        out = tmp / f"qlora_run_{name}"
        argv = [sys.executable, str(REPO_ROOT / "run_unsup.py"), "--model_name_or_path", str(base),
                "--train_file", args.train_file, "--output_dir", str(out), "--pooler", args.pooler,
                "--lora_r", str(args.lora_r), "--max_steps", str(args.qlora_run_steps),
                "--per_device_train_batch_size", str(args.batch_size), "--max_seq_length", str(args.max_seq_length),
                "--learning_rate", str(args.qlora_run_learning_rate), "--logging_steps", "1", "--seed", "0",
                "--save_strategy", "no", "--report_to", "none", "--torch_dtype", args.dtype,
                "--attn_implementation", args.attn_implementation, *(["--bf16", "true"] if args.bf16 else []),
                *(["--use_cpu", "true"] if cpu else []),
                *(["--load_in_4bit", "true"] if quantized else [])]  # fmt: skip
        start = time.perf_counter()
        completed = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(completed.stdout[-6000:], flush=True)  # the stage's log keeps each run's end
        record = {"command": command_line(argv[1:]), "seconds": time.perf_counter() - start}
        record |= run_record(out, completed)
        if completed.returncode == 0:
            settings = BackboneSettings(
                torch_dtype=args.dtype, attn_implementation=args.attn_implementation, load_in_4bit=quantized
            )
            record["embeddings"] = embedding_gaps(out, base, settings, args)
            release_memory()
        runs[name] = record
    return {
        "settings": {"size": args.qlora_run_size, **SIZES[args.qlora_run_size], "steps": args.qlora_run_steps,
                     "learning_rate": args.qlora_run_learning_rate, "compared_sentences": COMPARED_SENTENCES},
        "runs": runs,
    }  # fmt: skip


def qlora_problems(rows: list[dict[str, Any]], qlora: dict[str, Any] | None) -> list[str]:
    """What failed of the QLoRA checks: the error of an :data:`OPTIONAL_ARMS` arm; a run's non-zero exit; and of a
    run that trained: losses not all finite, LoRA ``B`` matrices left at zero, a root that does not load, that is a
    bitsandbytes checkpoint (its config's ``quantization_config``), or that embeds closer to the base than to the
    adapter it was merged from."""
    problems = [f"arm {row['arm']}: {row['error']}" for row in rows if row.get("error")]
    for name, run in (qlora or {}).get("runs", {}).items():
        if run["returncode"] != 0:
            problems.append(f"run {name}: exit {run['returncode']}: {run.get('error')}")
            continue
        if not run["losses_finite"]:
            problems.append(f"run {name}: losses not all finite: {run['losses']}")
        if not 0 < run["lora_B_moved"] == run["lora_B_matrices"]:
            problems.append(f"run {name}: {run['lora_B_moved']} of {run['lora_B_matrices']} LoRA B matrices moved")
        if run["root_quantization_config"]:
            problems.append(f"run {name}: the saved root is quantized: {run['root_quantization_config']}")
        gaps = run.get("embeddings", {})
        if "root_load_error" in gaps:
            problems.append(f"run {name}: the saved root does not load: {gaps['root_load_error']}")
        elif gaps and gaps["root_vs_base"] < gaps["root_vs_adapter"]:
            problems.append(f"run {name}: the saved root embeds closer to the base ({gaps['root_vs_base']:.3g}) than "
                            f"to the adapter ({gaps['root_vs_adapter']:.3g})")  # fmt: skip
    return problems


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="cpu")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(DEFAULT_ARMS))
    parser.add_argument(
        "--attn_implementation",
        choices=ATTN_IMPLEMENTATIONS,
        default="sdpa",
        help="every arm's attention but lora_eager's (flash_attention_2 needs the flash-attn package)",
    )
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
    parser.add_argument(
        "--qlora_run_steps",
        type=int,
        default=0,
        help="run_unsup.py's QLoRA and bf16 LoRA runs of this many steps (0: none)",
    )
    parser.add_argument("--qlora_run_size", choices=sorted(SIZES), default="cpu", help="their random Qwen3's size")
    parser.add_argument(
        "--qlora_run_learning_rate",
        type=float,
        default=1e-3,
        help="their learning rate: adapters that move well past rounding in a few steps",
    )
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
        arms, failed = build_arms(args, config, tokenizer, corpus, Path(tmp))
        failed |= time_arms(arms, args)
        load_end = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        ran = {arm.name: arm for arm in arms if arm.name not in failed}
        rows = [
            {"arm": name, "error": failed[name]}
            if name in failed
            else ran[name].summary() | {"model_flops_per_step": ran[name].flops, "bytes_per_step": ran[name].bytes}
            for name in args.arms
        ]
        resident = {name: arm.resident_bytes() for name, arm in ran.items()}
        times = {name: arm.times for name, arm in ran.items()}
        transient = {name: arm.transient_bytes for name, arm in ran.items()}
        del arms, ran
        release_memory()
        qlora = qlora_run(args, tokenizer, Path(tmp)) if args.qlora_run_steps else None
    if cuda:
        memory = {name: (resident[name] + transient[name]) / 2**30 for name in resident}
        memory_method = "CUDA: the arm's weights and optimizer state plus the most its steps allocated above that"
    elif args.no_memory:
        memory, memory_method = {}, None
    else:
        probes = {name: probe_cpu_memory(name, argv) for name in times}
        memory = {name: probe["arm_peak_gib"] for name, probe in probes.items()}
        reset = all(probe["hwm_reset"] for probe in probes.values())
        memory_method = (
            "CPU, resource-based: peak RSS (VmHWM"
            + (", reset after the imports" if reset else ", not resettable here: imports included")
            + ") of a process building only that arm and taking two steps, minus its RSS before the model was built"
        )
    gpu = torch.cuda.get_device_name() if cuda else None
    reference = "full" if "full" in times else next(iter(times), None)
    for row in rows:
        name = row["arm"]
        if name not in times:
            continue
        median = statistics.median(times[name])
        ref_time = statistics.median(times[reference])
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
            "attn_implementation": args.attn_implementation,
            "memory": memory_method,
        },  # fmt: skip
        "arms": rows,
        "qlora_run": qlora,
    }
    print(f"{'arm':<12}{'step s':>9}{'x ref':>8}{'GiB':>8}{'x ref':>8}{'MFU':>8}  attention")
    for row in rows:
        if row.get("error"):
            print(f"{row['arm']:<12}failed: {row['error'][:200]}")
            continue
        memory_cell = f"{row['peak_memory_gib']:8.3f}" if row["peak_memory_gib"] is not None else f"{'-':>8}"
        ratio_cell = f"{row['memory_vs_reference']:8.3f}" if row["memory_vs_reference"] is not None else f"{'-':>8}"
        mfu_cell = f"{100 * row['mfu']:7.1f}%" if row["mfu"] is not None else f"{'-':>8}"
        print(f"{row['arm']:<12}{row['median_step_s']:9.3f}{row['time_vs_reference']:8.3f}{memory_cell}{ratio_cell}"
              f"{mfu_cell}  {row['attention_backend']}")  # fmt: skip
    for name, run in (qlora or {}).get("runs", {}).items():
        print(f"run_unsup {name}: " + json.dumps({key: value for key, value in run.items() if key != "command"}))
    if args.output_json:
        write_json_atomic(args.output_json, result)
    problems = qlora_problems(rows, qlora)
    if problems:  # after the JSON is written: it holds what did run
        raise SystemExit("decoder_step.py: " + "; ".join(problems))
    return result


if __name__ == "__main__":
    main()
