"""Train the tiny model 2 steps under DDP, as it is and with its encoder's own pooler unfrozen, and record what
``find_unused_parameters`` was set to; run with ``accelerate launch`` (2 processes).

    accelerate launch --config_file examples/accelerate_configs/cpu_multiprocess.yaml \\
        tests/ddp_unused_parameters.py MODEL_DIR OUT_DIR

No hf_cse pooler reads the encoder's own pooler: unfrozen, every step leaves it unused and DDP must search for it
(without the search, DDP's second step fails). Writes ``OUT_DIR/rank{N}.json``: for each case (``"as_is"``,
``"unfrozen_pooler"``) the setting, the steps trained and the training loss.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
from hf_cse.distributed import leave_process_group

SENTENCES = [f"sentence number {i} is about the {word}" for i, word in enumerate("abcdefghijklmnop")]


def train(model_dir: str, out_dir: str, unfreeze_encoder_pooler: bool) -> dict:
    torch.manual_seed(0)
    model = CSEModel.from_pretrained(model_dir, pooling=PoolingConfig(pooler="cls"))
    if unfreeze_encoder_pooler:
        model.encoder_model.pooler.requires_grad_(True)
    args = CSETrainingArguments(
        output_dir=f"{out_dir}/run-{unfreeze_encoder_pooler}",
        per_device_train_batch_size=4,
        max_steps=2,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=0,
    )
    trainer = CSETrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict({"text": SENTENCES}),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )
    result = trainer.train()
    return {
        "find_unused_parameters": trainer.accelerator.ddp_handler.find_unused_parameters,
        "world_size": args.world_size,
        "rank": args.process_index,
        "global_step": result.global_step,
        "train_loss": result.training_loss,
    }


def main(model_dir: str, out_dir: str) -> None:
    records = {case: train(model_dir, out_dir, case == "unfrozen_pooler") for case in ("as_is", "unfrozen_pooler")}
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    Path(out_dir, f"rank{records['as_is']['rank']}.json").write_text(json.dumps(records), encoding="utf-8")
    leave_process_group()  # as hf_cse's commands end: a plain return aborts now and then on gloo


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
