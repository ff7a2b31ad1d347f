"""Train a tiny model on 2 CPU processes (gloo) where only rank 1 receives SIGTERM, during step 3: both must stop
after the same step, with one checkpoint.

    accelerate launch --multi_gpu --num_processes 2 tests/preemption_processes.py MODEL_DIR OUT_DIR

Each process writes ``OUT_DIR/rank{R}.json``: ``{"global_step": N, "error": "<the PreemptedError's message>"}``.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import torch
from datasets import Dataset
from test_preemption import SignalAt
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
from hf_cse.distributed import leave_process_group
from hf_cse.errors import PreemptedError

SENTENCES = [f"sentence number {i} about a man and a dog" for i in range(48)]


def main(model_dir: str, out_dir: str) -> None:
    torch.manual_seed(0)
    args = CSETrainingArguments(
        output_dir=str(Path(out_dir) / "run"),
        per_device_train_batch_size=4,
        max_steps=6,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=0,
    )
    trainer = CSETrainer(
        model=CSEModel.from_pretrained(model_dir, pooling=PoolingConfig(pooler="cls")),
        args=args,
        train_dataset=Dataset.from_dict({"text": SENTENCES}),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )
    if args.process_index == 1:
        trainer.add_callback(SignalAt(3, signal.SIGTERM))
    error = None
    try:
        trainer.train()
    except PreemptedError as err:
        error = str(err)
    record = {"global_step": trainer.state.global_step, "error": error}
    (Path(out_dir) / f"rank{args.process_index}.json").write_text(json.dumps(record), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:3])
    leave_process_group()  # as hf_cse's commands end: a plain return aborts now and then on gloo
