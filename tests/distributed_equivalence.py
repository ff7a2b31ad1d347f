"""Train a tiny model a few steps and dump losses and parameters; run with one process or many.

    python tests/distributed_equivalence.py MODEL_DIR OUT.json OBJECTIVE GLOBAL_BATCH [LOCAL_BATCH] [--view V [KW]]
    accelerate launch --multi_gpu --num_processes 2 tests/distributed_equivalence.py \
        MODEL_DIR OUT.json OBJECTIVE GLOBAL_BATCH [LOCAL_BATCH] [--view V [KW]] [--then MODEL_DIR OUT2.json ...]

``--then`` starts the arguments of another run, trained after the first in the same processes: each process spends
about 10 s importing hf_cse, which one launch pays once for all its runs.

With LOCAL_BATCH, negatives are not gathered (``gather_negatives=False``): each process contrasts its LOCAL_BATCH
sentences among themselves, and gradient accumulation makes up the global batch, so one process accumulating two
local batches must match two processes taking one each.

Dropout is off so that the two runs see the same views; the global batch is split evenly over the processes;
the optimizer is plain SGD so that equal parameters mean equal gradients; the model is float64, so that one process
and two differ only by float64 rounding (tests/rounding.py: the tolerance of their comparison). Every step reseeds
each process's RNG with a rank-dependent seed, as dropout on batches of different padded lengths would leave them:
random draws that must be shared (DCLR's noise) only agree if the code shares them.

``--view V [KW]`` sets ``view_augmentation`` to V (and its kwargs to the JSON object KW). Besides the losses and
the final parameters, the output holds the initial parameters and ``rank_spread``, the largest difference between
any process's final parameters and process 0's (0 when DDP averaged the gradients of every step).
"""

from __future__ import annotations

import json
import os
import sys

import torch
from conftest import split_runs
from datasets import Dataset
from transformers import AutoConfig, AutoTokenizer, TrainerCallback

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
from hf_cse.distributed import leave_process_group, world_size
from hf_cse.modeling.backbone import BackboneSettings


class RankDependentSeed(TrainerCallback):
    """Seed process ``rank`` with ``1000 * step + rank`` before every step: the processes' RNGs disagree."""

    def on_step_begin(self, args, state, control, **kwargs):
        torch.manual_seed(1000 * state.global_step + args.process_index)


SENTENCES = [f"sentence number {i} is about the {word}" for i, word in enumerate("abcdefghijklmnopqrstuvwx")]
DCLR_KWARGS = {"k": 1.0, "phi": 0.75, "phi_mode": "quantile"}
# OBJECTIVE on the command line: the training arguments it sets.
OBJECTIVES: dict[str, dict] = {
    # Mean pooling at 0.05: the tiny random encoder's [CLS] embeddings are nearly parallel (cosine > 0.99999), so at
    # the runs' temperature 1 every logit would be equal, the loss log(B) whatever the weights and the gradients ~0.
    "simcse": {"objective": "simcse", "pooler": "avg", "objective_kwargs": {"temperature": 0.05}},
    # Labelled pairs with a hard negative (supervised SimCSE, its log weight on): positives and hard negatives are
    # gathered with the anchors (data, not a training argument: popped below).
    "simcse-triplets": {
        "objective": "simcse",
        "pooler": "avg",
        "objective_kwargs": {"temperature": 0.05, "hard_negative_weight": 0.5},
        "triplets": True,
    },
    # A decoder (its MODEL_DIR a tiny Qwen3): gathered last-token embeddings.
    "simcse-last-token": {"objective": "simcse", "pooler": "last_token", "objective_kwargs": {"temperature": 0.05}},
    "dclr": {"objective": "dclr", "objective_kwargs": DCLR_KWARGS},
    # Matryoshka over DCLR: every truncation draws its own noise, which must be shared across processes too.
    "dclr-matryoshka": {
        "objective": "dclr",
        "objective_kwargs": DCLR_KWARGS,
        "matryoshka_dims": [32, 8],
        "matryoshka_weights": [1.0, 0.5],
    },
    # Two templates' [MASK] states with template denoising (pooler set below, not a training argument).
    "promptbert": {"objective": "promptbert", "pooler": "mask", "template_denoising": True},
    # SimCSE++'s off-dropout negatives gathered with their gradients. Its DCL term is per process (as the code's),
    # so it is off here, where one process sees the global batch; "simcsepp" with LOCAL_BATCH keeps it.
    "simcsepp-instance": {"objective": "simcsepp", "auxiliary_losses": {"dimension_contrast": {"weight": 0.0}}},
    "simcsepp": {"objective": "simcsepp"},
}


def main(
    model_dir: str,
    out_path: str,
    objective: str,
    global_batch: int,
    local_batch: int | None = None,
    view: str = "dropout",
    view_kwargs: dict | None = None,
) -> None:
    torch.manual_seed(0)
    settings = dict(OBJECTIVES[objective])
    pooling = PoolingConfig(
        pooler=settings.pop("pooler", "cls"), template_denoising=settings.pop("template_denoising", False)
    )
    config = AutoConfig.from_pretrained(model_dir)
    BackboneSettings(dropout=0.0).apply(config)  # every dropout field the architecture has (BERT's two, Qwen3's one)
    model = CSEModel.from_pretrained(
        model_dir, config=config, pooling=pooling
    ).double()  # float64: one process and two sum in different orders, which float32 would show at ~1e-7
    initial = {name: p.detach().tolist() for name, p in model.named_parameters()}
    data = {"text": SENTENCES}
    if settings.pop("triplets", False):  # SimCSE's layout: each sentence, a paraphrase, another row's sentence
        data = {"sent0": SENTENCES, "sent1": [s.replace("is about", "concerns") for s in SENTENCES]}
        data["hard_neg"] = SENTENCES[1:] + SENTENCES[:1]
    args = CSETrainingArguments(
        output_dir=f"{out_path}.run",
        **settings,
        # At 0.05 a random noise vector's logit is ~e^-16 of the positive's: no tolerance could see it. At 1, every
        # negative, noise included, moves the loss.
        temperature=1.0,
        view_augmentation=view,
        view_augmentation_kwargs=view_kwargs or {},
        per_device_train_batch_size=local_batch or global_batch // world_size_from_env(),
        gradient_accumulation_steps=global_batch // (local_batch * world_size_from_env()) if local_batch else 1,
        gather_negatives=local_batch is None,
        # Plain SGD: parameter updates are the gradients themselves. Adam would turn float noise in near-zero
        # gradients (rare tokens' embeddings) into full-size steps and hide whether the gradients agree.
        optim="sgd",
        learning_rate=0.5,
        max_steps=3,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        dataloader_drop_last=True,
        seed=0,
    )
    trainer = CSETrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict(data),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        callbacks=[RankDependentSeed()],
    )
    trainer.stop_on_identical_views = False  # dropout is off on purpose (above): the views are equal
    trainer.train()
    final = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
    rank_spread = 0.0
    if torch.distributed.is_initialized():
        every_rank = [torch.empty_like(final) for _ in range(world_size())]
        torch.distributed.all_gather(every_rank, final)
        rank_spread = max((other - every_rank[0]).abs().max().item() for other in every_rank)
    if trainer.is_world_process_zero():
        result = {
            "world_size": world_size(),
            # What made the views: the view augmentation, or the objective's provider that makes them.
            "view_augmentation": getattr(trainer.view_maker, "augmentation", trainer.view_maker).name,
            "dtype": str(next(trainer.model.parameters()).dtype),
            "losses": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
            # Every logged loss part (loss_dclr_dim8, ...), step by step.
            "loss_parts": [
                {key: value for key, value in entry.items() if key.startswith("loss_")}
                for entry in trainer.state.log_history
                if "loss" in entry
            ],
            "initial_parameters": initial,
            "parameters": {name: p.detach().tolist() for name, p in trainer.model.named_parameters()},
            "rank_spread": rank_spread,
        }
        with open(out_path, "w", encoding="utf-8") as handle:
            json.dump(result, handle)


def world_size_from_env() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def run(argv: list[str]) -> None:
    """``main`` for each run of the command line's arguments (after the script's name), one after the other."""
    for positional in split_runs(argv):
        view: list[str] = []
        if "--view" in positional:
            at = positional.index("--view")
            positional, view = positional[:at], positional[at + 1 :]
        main(
            positional[0],
            positional[1],
            positional[2],
            int(positional[3]),
            int(positional[4]) if len(positional) > 4 else None,
            *view[:1],
            *[json.loads(kwargs) for kwargs in view[1:2]],
        )
    leave_process_group()  # as hf_cse's commands end: a plain return aborts now and then on gloo


if __name__ == "__main__":
    run(sys.argv[1:])
