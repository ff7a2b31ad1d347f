"""Step time of padding-free (packed) batches against padded ones, for an encoder and a decoder, on wiki1m's sentence
lengths and on texts of up to 256 tokens.

For each model (``encoder``: a random BERT; ``decoder``: a random Qwen3, both from the sizes of ``throughput.py`` and
``decoder_step.py``) and each kind of text (``wiki1m``: the corpus's sentences, ``--max_seq_length`` 32; ``long``:
the i-th text joins ``1 + i % 12`` consecutive wiki1m sentences, truncated at 256 tokens, so lengths spread from one
sentence's to 256), the arms train SimCSE through ``CSETrainer`` steps (``compute_loss``, backward, the run's fused
AdamW; the encoder whole, the decoder's LoRA adapters as issue 37's decoder runs), interleaved step by step after a
warm-up on the same batches, one model copy each:

- ``padded_sdpa``: the default run, padded batches under SDPA;
- ``padded_<kernel>`` and ``packed_<kernel>`` for each of ``--kernels``: padded, then padding-free
  (:mod:`hf_cse.modeling.packing`) under that kernel, so that the ratio of the two isolates packing from the choice
  of kernel.

It prints, per case, each arm's median step time and its ratio to ``padded_sdpa`` and to the same kernel padded,
with the share of real tokens in the padded batches (the most packing can save), and writes JSON with
``--output_json``. A kernel the machine cannot train with (flash attention without its package or off a GPU, flex
attention on a CPU) is recorded as skipped, with the reason, and the other arms run.

Attention dropout is off in every arm (flex attention refuses it): the encoder's views differ by its hidden dropout;
the decoder, whose only dropout is attention dropout, trains on equal views (speed does not depend on them). Under
``eager`` a packed row's document mask is dense ``[T, T]``: the CPU rehearsal (``--size tiny --kernels eager``) runs
the packed path that way, for its code, not its speed.

    python benchmarks/padding_free.py --device cuda --size gpu --bf16 --kernels flex_attention flash_attention_2 \\
        --output_json benchmarks/results/padding_free_gpu_bf16.json   # on a GPU
    python benchmarks/padding_free.py --size tiny --kernels eager --steps 2 --warmup 1   # the CPU rehearsal
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from _common import WIKI1M_HEAD, command_line, environment, write_json_atomic
from accelerate.utils import send_to_device
from datasets import Dataset
from decoder_step import LORA_TARGET_MODULES, build_tokenizer, save_random_decoder
from peft import LoraConfig
from throughput import trainer_step, write_random_model
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
from hf_cse.errors import UsageError
from hf_cse.modeling.attention_kernels import check_kernel_trains_on
from hf_cse.modeling.packing import keeps_packed_sentences_apart
from hf_cse.training.data.corpus import load_sentences

# Model sizes: tiny for the CPU rehearsal; gpu: BERT-base and decoder_step.py's ~1B Qwen3.
SIZES = {"tiny": {"encoder": "tiny", "decoder": "tiny"}, "gpu": {"encoder": "bert-base", "decoder": "1b"}}
TEXTS = {"wiki1m": 32, "long": 256}  # each kind of text and the max_seq_length it is truncated at
SENTENCES_PER_LONG_TEXT = 12
POOLERS = {"encoder": "cls", "decoder": "last_token"}
MODEL_SETTINGS = {
    "encoder": "all weights trained, float32 weights (bf16 autocast under --bf16), hidden dropout 0.1",
    "decoder": "LoRA r 16 on every projection, bf16 weights under --bf16, no dropout",
}
NO_ATTENTION_DROPOUT = {"encoder": {"attention_probs_dropout_prob": 0.0}, "decoder": {"attention_dropout": 0.0}}


def long_texts(sentences: list[str], count: int) -> list[str]:
    """``count`` texts, the i-th joining ``1 + i % 12`` consecutive ``sentences``."""
    texts, start = [], 0
    for i in range(count):
        size = 1 + i % SENTENCES_PER_LONG_TEXT
        texts.append(" ".join(sentences[start : start + size]))
        start += size
    return texts


def save_models(args: argparse.Namespace, sentences: list[str], folder: Path) -> dict[str, Path]:
    """The random encoder and decoder of ``args.size``, saved under ``folder`` with their tokenizers."""
    write_random_model(SIZES[args.size]["encoder"], folder / "encoder")
    tokenizer = build_tokenizer(sentences, args.vocab_words)
    save_random_decoder(folder / "decoder", SIZES[args.size]["decoder"], tokenizer, attention_dropout=0.0)
    return {"encoder": folder / "encoder", "decoder": folder / "decoder"}


def arm_step(
    model_dir: Path, model_kind: str, kernel: str, padding_free: bool, texts: list[str], args: argparse.Namespace
) -> Callable[[int], None]:
    """One arm's step function: a SimCSE ``CSETrainer`` step on batch ``index`` of ``texts``."""
    device = torch.device(args.device)
    decoder = model_kind == "decoder"
    model = CSEModel.from_pretrained(
        model_dir,
        pooling=PoolingConfig(pooler=POOLERS[model_kind]),
        attn_implementation=kernel,
        dtype=torch.bfloat16 if decoder and args.bf16 else torch.float32,
        **NO_ATTENTION_DROPOUT[model_kind],
    ).to(device)
    if padding_free and not keeps_packed_sentences_apart(model):
        raise UsageError(f"the {model_kind} attends across packed sentences under {kernel}")
    model.padding_free = padding_free
    training_args = CSETrainingArguments(
        output_dir=str(model_dir / "run"),
        objective="simcse",
        per_device_train_batch_size=args.batch_size,
        learning_rate=3e-5,
        max_seq_length=args.max_seq_length,
        report_to="none",
        bf16=args.bf16,
        use_cpu=device.type == "cpu",
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    lora = LoraConfig(r=16, lora_alpha=16, lora_dropout=0.0, target_modules=LORA_TARGET_MODULES) if decoder else None
    dataset = Dataset.from_dict({"text": texts})
    trainer = CSETrainer(model, training_args, dataset, processing_class=tokenizer, peft_config=lora)
    trainer.stop_on_identical_views = not decoder  # the decoder's views are equal (see the module's docstring)
    rows = [[trainer.train_dataset[i] for i in range(start, start + args.batch_size)]
            for start in range(0, len(texts) - args.batch_size + 1, args.batch_size)]  # fmt: skip
    batches = [send_to_device(trainer.data_collator(batch), device) for batch in rows]  # in order: every arm's same
    return trainer_step(trainer, batches)


def real_token_share(texts: list[str], tokenizer: Any, args: argparse.Namespace) -> float:
    """Real tokens over padded ones, over the timed batches of ``texts`` (the same batches every arm steps)."""
    real = padded = 0
    for start in range(0, len(texts) - args.batch_size + 1, args.batch_size):
        lengths = [len(ids) for ids in tokenizer(texts[start : start + args.batch_size], truncation=True,
                                                 max_length=args.max_seq_length)["input_ids"]]  # fmt: skip
        real, padded = real + sum(lengths), padded + max(lengths) * len(lengths)
    return real / padded


def time_case(arms: dict[str, Callable[[int], None]], args: argparse.Namespace) -> dict[str, float]:
    """Each arm's median step time, the arms interleaved step by step after ``args.warmup`` steps."""
    times: dict[str, list[float]] = {name: [] for name in arms}
    cuda = args.device.startswith("cuda")
    for index in range(args.warmup + args.steps):
        for name, step in arms.items():
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            step(index)
            if cuda:
                torch.cuda.synchronize()
            if index >= args.warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def usable_kernels(kernels: list[str], device: torch.device) -> tuple[list[str], dict[str, str]]:
    """The kernels of ``kernels`` that train on ``device``, and the others with the reason."""
    usable, skipped = [], {}
    for kernel in kernels:
        try:
            check_kernel_trains_on(kernel, device)
        except UsageError as error:
            skipped[kernel] = str(error)
        else:
            usable.append(kernel)
    return usable, skipped


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--kernels", nargs="+", default=["flex_attention"], help="the packing kernels to time")
    parser.add_argument("--models", nargs="+", choices=list(POOLERS), default=list(POOLERS))
    parser.add_argument("--texts", nargs="+", choices=list(TEXTS), default=list(TEXTS))
    parser.add_argument("--batch_size", type=int, default=64, help="wiki1m's batch")
    parser.add_argument("--long_batch_size", type=int, default=16, help="the long texts' batch")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (the Trainer's --bf16)")
    parser.add_argument("--vocab_words", type=int, default=8000, help="the decoder's WordLevel vocabulary")
    parser.add_argument("--train_file", default=str(WIKI1M_HEAD))
    parser.add_argument("--output_json", default=None)
    args = parser.parse_args(argv)

    sentences = load_sentences(args.train_file)["text"]
    kernels, skipped = usable_kernels(args.kernels, torch.device(args.device))
    cases: list[dict[str, Any]] = []
    result = {
        "command": command_line(None if argv is None else ["benchmarks/padding_free.py", *argv]),
        "environment": environment(),
        "settings": {**vars(args), "skipped_kernels": skipped, "models": MODEL_SETTINGS},
        "cases": cases,
    }
    with tempfile.TemporaryDirectory(prefix="hf_cse_padding_free-") as tmp:
        model_dirs = save_models(args, sentences, Path(tmp))
        for text_kind in args.texts:
            case_args = argparse.Namespace(**{**vars(args), "max_seq_length": TEXTS[text_kind]})
            if text_kind == "long":
                case_args.batch_size = args.long_batch_size
            count = case_args.batch_size * (args.warmup + args.steps)
            texts = long_texts(sentences, count) if text_kind == "long" else sentences[:count]
            for model_kind in args.models:
                arm_specs = [("padded_sdpa", "sdpa", False)]
                arm_specs += [(f"{mode}_{kernel}", kernel, mode == "packed") for kernel in kernels
                              for mode in ("padded", "packed")]  # fmt: skip
                arms = {name: arm_step(model_dirs[model_kind], model_kind, kernel, packed, texts, case_args)
                        for name, kernel, packed in arm_specs}  # fmt: skip
                medians = time_case(arms, case_args)
                share = real_token_share(texts, AutoTokenizer.from_pretrained(model_dirs[model_kind]), case_args)
                ratios = {f"packed_{kernel}/padded_{kernel}": medians[f"packed_{kernel}"] / medians[f"padded_{kernel}"]
                          for kernel in kernels}  # fmt: skip
                ratios |= {f"packed_{kernel}/padded_sdpa": medians[f"packed_{kernel}"] / medians["padded_sdpa"]
                           for kernel in kernels}  # fmt: skip
                case = {"model": model_kind, "texts": text_kind, "batch_size": case_args.batch_size,
                        "max_seq_length": case_args.max_seq_length, "real_token_share": share,
                        "median_step_s": medians, "ratios": ratios}  # fmt: skip
                cases.append(case)
                print(
                    f"{model_kind} on {text_kind} (batch {case_args.batch_size}, real tokens {share:.0%} of padded):"
                )
                for name, seconds in medians.items():
                    print(f"  {name:<28}{1e3 * seconds:10.1f} ms")
                for name, ratio in ratios.items():
                    print(f"  {name:<44}{ratio:6.3f}")
                if args.output_json:  # after each case: a run stopped at a GPU stage's cap keeps those it timed
                    write_json_atomic(args.output_json, result)
                del arms
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()  # the next case's model copies where this case's were
    return result


if __name__ == "__main__":
    main()
