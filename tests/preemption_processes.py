"""Train a tiny model on 2 CPU processes (gloo) where only rank 1 receives SIGTERM, during step 3: both must stop
after the same step, with one checkpoint.

    accelerate launch --multi_gpu --num_processes 2 tests/preemption_processes.py MODEL_DIR OUT_DIR [ARGS ...]

With ``SIGNAL_EVERY_PROCESS=1``, rank 1 sends SIGTERM during step 3 to every process of the job instead, as SLURM
does: the launcher's agent (which sends it on to each worker: a repeat), rank 0 and itself.

Each process writes ``OUT_DIR/rank{R}.json``: ``{"global_step": N, "error": "<the PreemptedError's message>"}``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import torch
from common.preemption import SignalAt
from datasets import Dataset
from transformers import AutoTokenizer, TrainerCallback

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
from hf_cse.distributed import leave_process_group
from hf_cse.errors import PreemptedError

SENTENCES = [f"sentence number {i} about a man and a dog" for i in range(48)]


class SignalEveryProcess(TrainerCallback):
    """During step ``step``: SIGTERM to the launcher's agent (this process's parent), the other rank and this one."""

    def __init__(self, step: int, out_dir: Path) -> None:
        self.step, self.out_dir = step, out_dir

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step + 1 == self.step:
            other = int((self.out_dir / "pid0").read_text(encoding="utf-8"))
            for pid in (os.getppid(), other, os.getpid()):
                os.kill(pid, signal.SIGTERM)


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
    (Path(out_dir) / f"pid{args.process_index}").write_text(str(os.getpid()), encoding="utf-8")
    if args.process_index == 1 and os.environ.get("SIGNAL_EVERY_PROCESS") == "1":
        trainer.add_callback(SignalEveryProcess(3, Path(out_dir)))
    elif args.process_index == 1:
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
