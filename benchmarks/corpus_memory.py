"""Memory and start-up time against corpus size: peak RSS and time to the first training step.

Each arm (objective x corpus size) runs in a fresh process that does what a user's run does before step 1: load
the corpus (``load_sentences``), build the model and ``CSETrainer`` (tokenization; for DCLR, the complementary
model's pass over the whole corpus), and start training. The process stops at the first step. Measured per arm:

- peak RSS: the child's ``ru_maxrss`` as the kernel reports it to the parent (``os.wait4``, the per-child form of
  ``getrusage(RUSAGE_CHILDREN)``), interpreter, torch and model included;
- time to the first step: from just before the parent starts the child to the first ``on_step_begin``.

With ``--streaming`` the child streams the corpus instead (``stream_sentences``: read, shuffled and tokenized batch by
batch during training; DCLR encodes each batch with the complementary model, no table); store such a run under its
own ``--label``.

The model is a random BERT with hidden size 768 (so the complementary embedding table has its real width: 1M x 768)
and no transformer layer (embeddings, LayerNorm and pooling only), with the bert-base-uncased vocabulary: even one
768-wide layer makes encoding a million sentences take about an hour on 2 CPU cores. The arms therefore measure the
data path (reading, tokenizing, the embedding table), which is what grows with the corpus. The corpus repeats the
wiki1m head, each copy prefixed with its number.

    python benchmarks/corpus_memory.py --output_json benchmarks/results/corpus_memory.json
    # the streaming arms, beside the in-memory ones
    python benchmarks/corpus_memory.py --streaming --label streaming \\
        --output_json benchmarks/results/corpus_memory.json
    # the same arms on other code (a worktree of an older commit), stored beside them under another label
    python benchmarks/corpus_memory.py --label baseline --hf_cse_root /tmp/wt-base \\
        --output_json benchmarks/results/corpus_memory.json
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

from _common import REPO_ROOT, SHARED_DATA, WIKI1M_HEAD, command_line, environment, git_commit, write_json_atomic

TOKENIZER_DIR = SHARED_DATA / "models" / "bert-base-uncased-tokenizer"
OBJECTIVES = ("simcse", "dclr")
MODEL_SETTINGS = {"hidden_size": 768, "num_hidden_layers": 0, "num_attention_heads": 12}
GIB = 1024**3


def write_corpus(path: Path, num_lines: int, source: Path = WIKI1M_HEAD) -> Path:
    """``num_lines`` sentences: the lines of ``source`` over and over, copy ``r`` prefixed with ``"r "``."""
    lines = [line.strip() for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    with path.open("w", encoding="utf-8") as handle:
        for i in range(num_lines):
            handle.write(f"{i // len(lines)} {lines[i % len(lines)]}\n")
    return path


def write_model(directory: Path, tokenizer_dir: Path = TOKENIZER_DIR, **overrides: int) -> Path:
    """Save a random BERT (``MODEL_SETTINGS``, seed 0) and its tokenizer into ``directory``."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), **{**MODEL_SETTINGS, **overrides})
    BertModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def run_child(args: argparse.Namespace) -> None:
    """One arm, in this process: train until the first step begins, then write the elapsed time to ``--result``."""
    from transformers import AutoTokenizer, TrainerCallback

    from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
    from hf_cse.training.data.corpus import load_sentences

    class StopAtFirstStep(TrainerCallback):
        def on_step_begin(self, training_args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            elapsed = time.time() - args.start_time
            Path(args.result).write_text(json.dumps({"time_to_first_step_s": elapsed}), encoding="utf-8")
            control.should_training_stop = True

    if args.streaming:
        from hf_cse.training.data.streaming import stream_sentences

        sentences = stream_sentences(args.train_file)
    else:
        sentences = load_sentences(args.train_file)
    training_args = CSETrainingArguments(
        output_dir=args.output_dir,
        objective=args.objective,
        max_steps=1,
        per_device_train_batch_size=args.batch_size,
        max_seq_length=args.max_seq_length,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
    )
    model = CSEModel.from_pretrained(args.model_dir, pooling=PoolingConfig(pooler="cls"))
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    trainer = CSETrainer(model, training_args, sentences, processing_class=tokenizer, callbacks=[StopAtFirstStep()])
    trainer.train()


def measure_arm(
    objective: str, train_file: Path, model_dir: Path, workdir: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """Peak RSS (GiB) and time to the first step (s) of one arm, run in a fresh process on ``--hf_cse_root``."""
    result = workdir / f"{objective}-{train_file.stem}.json"
    env = {**os.environ, "PYTHONPATH": str(args.hf_cse_root), "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, __file__, "--child", "--objective", objective, "--train_file", str(train_file),
               "--model_dir", str(model_dir), "--output_dir", str(workdir / "out"), "--result", str(result),
               "--batch_size", str(args.batch_size), "--max_seq_length", str(args.max_seq_length),
               *(["--streaming"] if getattr(args, "streaming", False) else [])]  # fmt: skip
    start = time.time()
    with (workdir / "child.log").open("w") as log:
        child = subprocess.Popen(
            [*command, "--start_time", repr(start)], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.time() - start
    if os.waitstatus_to_exitcode(status) != 0:
        tail = (workdir / "child.log").read_text(encoding="utf-8", errors="replace")[-3000:]
        raise RuntimeError(f"arm {objective} on {train_file.name} exited with status {status}:\n{tail}")
    return {
        "objective": objective,
        "sentences": sum(1 for _ in train_file.open(encoding="utf-8")),
        "peak_rss_gib": usage.ru_maxrss * 1024 / GIB,  # ru_maxrss is in KiB on Linux
        "time_to_first_step_s": json.loads(result.read_text(encoding="utf-8"))["time_to_first_step_s"],
        "wall_s": wall,
    }


def merge_arm(results: dict[str, Any], label: str, run: dict[str, Any], arm: dict[str, Any]) -> dict[str, Any]:
    """``results`` with ``arm`` stored under the run ``label``, replacing an earlier arm of the same objective and
    size there; the run's other fields are updated from ``run``, other runs are kept."""
    runs = {kept["label"]: kept for kept in results.get("runs", [])}
    previous = runs.get(label, {}).get("arms", [])
    same = (arm["objective"], arm["sentences"])
    arms = [kept for kept in previous if (kept["objective"], kept["sentences"]) != same]
    runs[label] = {**run, "label": label, "arms": [*arms, arm]}
    return {**results, "runs": list(runs.values())}


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="Corpus sizes in lines.")
    parser.add_argument("--objectives", nargs="+", choices=OBJECTIVES, default=list(OBJECTIVES))
    parser.add_argument("--label", default="this commit", help="Name of this run in the JSON (same label: replaced).")
    parser.add_argument("--hf_cse_root", type=Path, default=REPO_ROOT, help="Checkout whose hf_cse is measured.")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--max_seq_length", type=int, default=32)
    parser.add_argument("--streaming", action="store_true", help="Stream the corpus (hf_cse.training.data.streaming).")
    parser.add_argument("--output_json", type=Path, default=None)
    child = parser.add_argument_group("one arm (internal: the parent runs each arm as a child)")
    child.add_argument("--child", action="store_true")
    for name in ("--objective", "--train_file", "--model_dir", "--output_dir", "--result"):
        child.add_argument(name)
    child.add_argument("--start_time", type=float)
    args = parser.parse_args(argv)
    if args.child:
        run_child(args)
        return None

    try:
        results = json.loads(args.output_json.read_text(encoding="utf-8")) if args.output_json else {}
    except FileNotFoundError:
        results = {}
    results["settings"] = {
        "model": {**MODEL_SETTINGS, "vocabulary": "bert-base-uncased", "pooler": "cls"},
        "batch_size": args.batch_size,
        "max_seq_length": args.max_seq_length,
        "corpus": f"{WIKI1M_HEAD.name}, repeated",
    }
    run = {
        "streaming": args.streaming,
        "code_commit": git_commit(args.hf_cse_root.resolve()),
        "command": command_line(),
        "environment": environment(),
    }
    with tempfile.TemporaryDirectory(prefix="hf_cse_corpus_memory_") as tmp:
        workdir = Path(tmp)
        model_dir = write_model(workdir / "model")
        for size in args.sizes:
            train_file = write_corpus(workdir / f"corpus-{size}.txt", size)
            for objective in args.objectives:
                arm = measure_arm(objective, train_file, model_dir, workdir, args)
                print(json.dumps(arm), flush=True)
                results = merge_arm(results, args.label, run, arm)
                if args.output_json:  # after every arm: a run stopped half-way keeps what it measured
                    write_json_atomic(args.output_json, results)
    return results


if __name__ == "__main__":
    main()
