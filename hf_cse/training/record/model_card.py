"""The card of a finished :class:`~hf_cse.training.trainer.CSETrainer` run: the trainer side reads its own objects
(model, arguments, objective, log history, evaluator) into a :class:`~hf_cse.export.model_card.TrainingSummary` and
hands it over; :mod:`hf_cse.export.model_card` renders cards from summaries and never imports the trainer."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...evaluation.paper_comparison import PaperComparison
from ...export.model_card import (
    CardOptions,
    STSCardResults,
    read_lora_settings,
    read_matryoshka_results,
    summarize_training,
    write_model_card,
)
from ...modeling.backbone import backbone_record
from ...modeling.encoder import SentenceEncoder
from ..evaluators import evaluator_model_index
from .run_arguments import training_arguments_record

if TYPE_CHECKING:
    from ..trainer import CSETrainer


def write_trainer_card(
    trainer: CSETrainer,
    language: str | list[str] | None = None,
    license: str | None = None,
    tags: str | list[str] | None = None,
    model_name: str | None = None,
    finetuned_from: str | None = None,
    tasks: str | list[str] | None = None,
    dataset_tags: str | list[str] | None = None,
    dataset: str | list[str] | None = None,
    dataset_args: str | list[str] | None = None,
    sts_results: Any = None,
    paper_comparison: PaperComparison | None = None,
) -> None:
    """The card of ``CSETrainer.create_model_card`` (its keywords are ``Trainer.create_model_card``'s), written
    into ``trainer.args.output_dir`` and named ``hub_model_id`` (as resolved for the push, else as given), else
    ``model_name``, else the output folder's name. Its usage code loads ``hub_model_id``, else the output folder
    (``args.output_dir`` as given).

    Args:
        language, license, tags: card metadata.
        finetuned_from: the starting checkpoint as the user named it; default: the model config's
            ``name_or_path``.
        dataset: the training data as the user named it (several are joined with ``", "``).
        dataset_tags: Hub dataset ids for the ``datasets`` metadata; default: ``dataset`` when it is a Hub id.
        tasks, dataset_args: ``Trainer.create_model_card`` keywords with nothing to say here: the card's task is
            sentence similarity and its model-index comes from the STS scores.
        sts_results: STS test results for the Evaluation section and the model-index (anything
            :meth:`STSCardResults.from_any` reads); default: none, the card shows the command that computes them.
        paper_comparison: those results beside the paper's (``run_unsup.py`` with a paper config), in a section of
            their own.
    """
    del tasks, dataset_args
    output_dir = Path(trainer.args.output_dir)
    model = trainer.accelerator.unwrap_model(trainer.model)  # a CSEModel, or a peft model that forwards to one
    if isinstance(dataset, list | tuple):
        dataset = ", ".join(str(name) for name in dataset)
    summary = summarize_training(
        model.pooling,
        training_arguments_record(trainer.args),
        trainer.objective,
        trainer.auxiliary_losses,
        trainer.state.log_history,
        base_model=finetuned_from or model.config.name_or_path or None,
        dataset=dataset,
        lora=read_lora_settings(output_dir),
        inference_max_seq_length=SentenceEncoder(model, trainer.processing_class).sentence_tokenizer.max_seq_length,
        settings_changes=trainer.run_settings.changes,
        encoder=backbone_record(model.config),
    )
    summary.evaluator_results = evaluator_model_index(trainer.evaluator, summary.final_dev)
    hub_repo_id = trainer.hub_model_id or trainer.args.hub_model_id
    options = CardOptions(
        sts=None if sts_results is None else STSCardResults.from_any(sts_results),
        language=language,
        license=license,
        tags=tags,
        datasets=dataset_tags,
        paper_comparison=paper_comparison,
        # The usage code loads the model from where it is: the Hub repository, else the output folder as given
        # (a bare folder name would be looked up on the Hub).
        model_name_or_path=hub_repo_id or str(trainer.args.output_dir),
        # Read from the folder, as hf_cse.push does: one source for both cards (written by run_unsup.py).
        matryoshka=read_matryoshka_results(output_dir, summary),
    )
    write_model_card(output_dir, summary, hub_repo_id or model_name or output_dir.name, options)
