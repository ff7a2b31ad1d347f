"""Train a tiny model on a streamed corpus for 6 steps (a checkpoint at step 3) and write the sentences of each
step; run with one process or many, from the start or resumed from a checkpoint.

    accelerate launch --multi_gpu --num_processes 2 tests/streaming_shards.py MODEL_DIR TRAIN_FILE OUT_DIR OBJECTIVE \
        [RESUME_FROM_CHECKPOINT]

Each process writes ``OUT_DIR/rank{R}.json``: ``{"steps": [[sentence, ...], ...], "complementary_sim_shape": [G, G]}``
(the shape for DCLR: the similarities over the gathered global batch); the main process also writes the final
weights, ``OUT_DIR/weights.pt``. The run's checkpoints go to ``OUT_DIR/run``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
from hf_cse.distributed import leave_process_group
from hf_cse.training.data.streaming import stream_sentences


class RecordingTrainer(CSETrainer):
    """Records each step's sentences (this process's) and the shape of the objective's complementary similarities."""

    def compute_loss(self, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        self.steps.append(list(inputs["text"]))
        provider = self.input_providers.get("complementary_similarities")
        if provider is not None:
            from hf_cse.inputs import StepContext

            step = StepContext(model, inputs, torch.zeros(len(inputs["text"]), 1), self._anchor_rows(inputs))
            self.complementary_shape = list(provider.provide(step).objective["complementary_sim"].shape)
        return super().compute_loss(model, inputs, *args, **kwargs)

    def _anchor_rows(self, inputs: dict[str, Any]) -> torch.Tensor | None:
        if self.args.world_size == 1:
            return None
        size = len(inputs["text"])
        return torch.arange(size) + self.args.process_index * size


def main(model_dir: str, train_file: str, out_dir: str, objective: str, resume: str | None = None) -> None:
    torch.manual_seed(0)
    args = CSETrainingArguments(
        output_dir=str(Path(out_dir) / "run"),
        objective=objective,
        objective_kwargs={"phi": 0.8, "phi_mode": "quantile"} if objective == "dclr" else {},
        per_device_train_batch_size=3,
        max_steps=6,
        logging_steps=1,
        save_strategy="steps",
        save_steps=3,
        report_to="none",
        use_cpu=True,
        seed=0,
    )
    trainer = RecordingTrainer(
        model=CSEModel.from_pretrained(model_dir, pooling=PoolingConfig(pooler="cls")),
        args=args,
        train_dataset=stream_sentences(train_file, shuffle_buffer_size=4),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )
    trainer.steps, trainer.complementary_shape = [], None
    trainer.train(resume_from_checkpoint=resume)
    result = {"steps": trainer.steps, "complementary_sim_shape": trainer.complementary_shape}
    (Path(out_dir) / f"rank{args.process_index}.json").write_text(json.dumps(result), encoding="utf-8")
    if args.process_index == 0:
        torch.save(trainer.accelerator.unwrap_model(trainer.model).state_dict(), Path(out_dir) / "weights.pt")


if __name__ == "__main__":
    main(*sys.argv[1:6])
    leave_process_group()  # as hf_cse's commands end: a plain return aborts now and then on gloo
