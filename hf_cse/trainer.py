"""``CSETrainer``: the Hugging Face ``Trainer`` with contrastive objectives and STS evaluation.

Overrides only ``compute_loss`` (two views, objective), ``evaluate`` (STS dev Spearman), ``log`` (named loss
parts), ``_save`` (crash-safe checkpoints with sentence-transformers files) and ``create_model_card``.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from transformers import IntervalStrategy, PreTrainedTokenizerBase, Trainer

from .augment.views import build_view_augmentation
from .complementary import ComplementarySimilarities
from .data import SENTENCE_INDEX, ContrastiveCollator, drop_singleton_final_batch, tokenize_dataset
from .encoder import SentenceEncoder
from .evaluation import STSDevSets, load_sts_dev_sets, score_sts_dev
from .model_card import write_model_card
from .modeling_cse import CSEModel, publish_directory
from .objectives import ContrastiveObjective, build_objective
from .sentence_transformers_files import write_sentence_transformers_files
from .text import SentenceTokenizer
from .training_args import CSETrainingArguments

logger = logging.getLogger(__name__)


class CSETrainer(Trainer):
    """Trains a :class:`~hf_cse.modeling_cse.CSEModel` with a contrastive objective.

    Args:
        model: the model to train.
        args: training arguments; ``args.objective`` names the objective unless ``objective`` is given.
        train_dataset: sentences, either raw (a ``"text"`` column; tokenized here, once) or already tokenized.
        processing_class: the model's tokenizer (required: it defines the prompt template's mask token).
        objective: an objective module, overriding ``args.objective``.
        **kwargs: passed to ``Trainer``.
    """

    # compute_loss returns a per-batch mean; the Trainer divides it by the gradient-accumulation steps.
    loss_is_scaled_for_ga = False

    def __init__(
        self,
        model: CSEModel,
        args: CSETrainingArguments,
        train_dataset: Dataset | None = None,
        processing_class: PreTrainedTokenizerBase | None = None,
        objective: ContrastiveObjective | None = None,
        **kwargs: Any,
    ) -> None:
        if processing_class is None:
            raise ValueError("CSETrainer needs processing_class=<the model's tokenizer>.")
        if not isinstance(args, CSETrainingArguments):
            raise TypeError(f"CSETrainer needs CSETrainingArguments, got {type(args).__name__}.")
        self.sentence_tokenizer = SentenceTokenizer(processing_class, model.pooling, args.max_seq_length)
        objective = objective if objective is not None else build_objective(args.objective, **args.objective_hparams())
        self.complementary: ComplementarySimilarities | None = None
        if train_dataset is not None:
            if objective.needs_complementary_similarities:
                self.complementary, train_dataset = self._build_complementary(args, model, train_dataset)
            if "text" in train_dataset.column_names:
                train_dataset = tokenize_dataset(train_dataset, self.sentence_tokenizer)
            if not args.dataloader_drop_last:
                train_dataset = drop_singleton_final_batch(train_dataset, args.per_device_train_batch_size)
        kwargs.setdefault("data_collator", ContrastiveCollator(self.sentence_tokenizer))
        if kwargs.get("eval_dataset") is None and (
            IntervalStrategy(args.eval_strategy) != IntervalStrategy.NO or args.eval_on_start
        ):
            # Read the dev sets once here; every evaluation only re-encodes their sentences.
            kwargs["eval_dataset"] = load_sts_dev_sets(args.sts_dir, args.eval_sts_tasks)
        super().__init__(
            model=model, args=args, train_dataset=train_dataset, processing_class=processing_class, **kwargs
        )
        self.objective = objective
        self.view_augmentation = build_view_augmentation(args.view_augmentation, **args.view_augmentation_kwargs)
        self._step_logs: dict[str, list[torch.Tensor]] = defaultdict(list)

    @staticmethod
    def _build_complementary(
        args: CSETrainingArguments, model: CSEModel, train_dataset: Dataset
    ) -> tuple[ComplementarySimilarities, Dataset]:
        """Load the frozen complementary model and number the sentences so each step can look them up."""
        if "text" not in train_dataset.column_names:
            raise ValueError("The objective needs a complementary model, which needs the raw 'text' column.")
        path = args.complementary_model_name_or_path or model.config._name_or_path
        complementary = ComplementarySimilarities.from_pretrained(
            path,
            train_dataset["text"],
            pooler=args.complementary_pooler,
            cache=args.complementary_cache,
            batch_size=args.per_device_eval_batch_size,
            device=args.device,
        )
        return complementary, train_dataset.add_column(SENTENCE_INDEX, list(range(len(train_dataset))))

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, torch.Tensor],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        """Encode the views of the batch in ONE forward pass (rows stacked: ``[V*B, L]``), apply the objective."""
        inputs = dict(inputs)
        sentence_index = inputs.pop(SENTENCE_INDEX, None)
        batch_size = inputs["input_ids"].shape[0]
        num_views = 1 + getattr(self.objective, "num_positive_views", 1)
        outputs = model(**self.view_augmentation.stack(model, inputs, num_views))
        z1, z2, *extra_positives = outputs.embeddings.split(batch_size)
        extra: dict[str, Any] = {"extra_positives": extra_positives} if extra_positives else {}
        if self.objective.needs_complementary_similarities:
            if sentence_index is None or self.complementary is None:
                raise ValueError(f"Objective {self.objective.name!r} needs the complementary model's similarities.")
            extra["complementary_sim"] = self.complementary(sentence_index)
        loss = self.objective(z1, z2, **extra)
        self._step_logs[f"loss_{self.objective.name}"].append(loss.detach())
        for name, value in self.objective.last_logs.items():
            self._step_logs[name].append(value.detach())
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and self._step_logs:
            for name, values in self._step_logs.items():
                logs[name] = round(torch.stack(values).float().mean().item(), 6)
            self._step_logs.clear()
        super().log(logs, start_time)

    def evaluate(
        self,
        eval_dataset: STSDevSets | None = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> dict[str, float]:
        """STS dev Spearman (×100) of the current model: ``{"eval_stsb_spearman": ..., ...}``.

        ``eval_dataset`` defaults to the dev sets read at construction (``args.eval_sts_tasks``).
        """
        start = time.time()
        dev_sets = eval_dataset if eval_dataset is not None else self.eval_dataset
        if dev_sets is None:
            dev_sets = load_sts_dev_sets(self.args.sts_dir, self.args.eval_sts_tasks)
        model = self.accelerator.unwrap_model(self.model)
        encoder = SentenceEncoder(model, self.processing_class)
        scores = score_sts_dev(
            lambda sentences: encoder.encode(sentences, batch_size=self.args.per_device_eval_batch_size), dev_sets
        )
        metrics = {f"{metric_key_prefix}_{name}": value for name, value in scores.items()}
        metrics[f"{metric_key_prefix}_runtime"] = round(time.time() - start, 4)
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        """Save into a staging folder, add sentence-transformers files, then publish atomically."""
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        if not self.args.should_save:
            return super()._save(output_dir, state_dict)
        target = Path(output_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        try:
            super()._save(str(staging), state_dict)
            model = self.accelerator.unwrap_model(self.model)
            if isinstance(model, CSEModel):
                write_sentence_transformers_files(staging, model, self.inference_max_seq_length(model))
            publish_directory(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def inference_max_seq_length(self, model: CSEModel) -> int:
        """The truncation length hf_cse uses at inference for this model (the saved one, else the tokenizer's)."""
        return SentenceTokenizer(self.processing_class, model.pooling).max_seq_length

    def create_model_card(self, **kwargs: Any) -> None:
        """Write ``README.md`` into ``args.output_dir``: base model, objective, pooling, evaluation, usage."""
        if not self.is_world_process_zero():
            return
        model = self.accelerator.unwrap_model(self.model)
        write_model_card(
            Path(self.args.output_dir),
            model=model,
            args=self.args,
            objective=self.objective,
            log_history=self.state.log_history,
            **kwargs,
        )
