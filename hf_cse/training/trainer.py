"""``CSETrainer``: the Hugging Face ``Trainer`` with contrastive objectives and STS evaluation.

Overrides only ``train`` (output-folder lock, ``resume_from_checkpoint="true"``), ``compute_loss`` (two views,
objective), ``evaluate`` (STS dev Spearman), ``log`` (named loss parts), ``save_model`` (no non-finite weights),
``_save_checkpoint`` / ``_get_output_dir`` / ``_push_from_checkpoint`` (whole checkpoints renamed into place, then
pushed), ``_save`` (staged saves with sentence-transformers files), ``create_model_card``, and ``init_hf_repo`` /
``push_to_hub`` (one-line errors without the Hub, the local card kept unless the upload succeeds).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections import defaultdict
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from transformers import IntervalStrategy, PreTrainedTokenizerBase, Trainer
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, TrainOutput, rotate_checkpoints

from ..augment.views import build_view_augmentation
from ..evaluation import EmbeddingCache, STSDevSets, alignment_uniformity, load_sts_dev_sets, score_sts_dev
from ..export.hub import card_restored_on_failure, check_repo_id, hub_connection
from ..export.model_card import CardOptions, read_lora_settings, summarize_training, write_model_card
from ..export.sentence_transformers_files import write_sentence_transformers_files
from ..inputs.complementary import ComplementarySimilarities
from ..modeling.encoder import SentenceEncoder, check_max_seq_length
from ..modeling.modeling_cse import CSEModel
from ..objectives import AuxiliaryInputs, AuxiliaryLoss, ContrastiveObjective, build_auxiliary_loss, build_objective
from ..objectives.base import check_range
from ..text import SentenceTokenizer
from .data import (
    HAS_PAIR,
    NEGATION,
    PARAPHRASE,
    SENTENCE_INDEX,
    VIEW2,
    ContrastiveCollator,
    add_negations_and_paraphrases,
    drop_singleton_final_batch,
    pad_and_concatenate,
    split_prefixed,
    tokenize_dataset,
)
from .distributed import gather_no_grad, gather_with_grad
from .divergence import DivergenceCallback, NonFiniteLossMonitor, check_finite_parameters
from .gradient_cache import cached_encode
from .output_dir import (
    checkpoint_staging_root,
    disk_full_as_error,
    publish_checkpoint,
    publish_files,
    resolve_resume_checkpoint,
    run_lock,
    staging_folder,
)
from .run_arguments import training_arguments_record, write_training_arguments
from .training_args import CSETrainingArguments

logger = logging.getLogger(__name__)


class CSETrainer(Trainer):
    """Trains a :class:`~hf_cse.modeling.modeling_cse.CSEModel` with a contrastive objective.

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
        if args.gradient_cache_chunk_size is not None and args.world_size > 1:
            raise ValueError(
                "gradient_cache_chunk_size works in a single process for now; with "
                f"{args.world_size} processes, raise per_device_train_batch_size or drop gradient caching."
            )
        check_max_seq_length(args.max_seq_length, model)
        self.sentence_tokenizer = SentenceTokenizer(processing_class, model.pooling, args.max_seq_length)
        objective = objective if objective is not None else build_objective(args.objective, **args.objective_hparams())
        required_pooler = getattr(objective, "required_pooler", None)
        if required_pooler is not None and model.pooling.pooler != required_pooler:
            raise ValueError(
                f"Objective {objective.name!r} needs pooler={required_pooler!r}; the model uses "
                f"pooler={model.pooling.pooler!r}."
            )
        self.auxiliary_losses = build_weighted_auxiliary_losses(objective, args.auxiliary_losses)
        for term, _ in self.auxiliary_losses.values():
            term.bind(model)
        second_template = getattr(objective, "second_prompt_template", None)
        if second_template is not None and args.view_augmentation != "dropout":
            raise ValueError(
                f"Objective {objective.name!r} makes its two views with two prompt templates; it cannot be combined "
                f"with view_augmentation={args.view_augmentation!r} (use 'dropout')."
            )
        self.complementary: ComplementarySimilarities | None = None
        self.template_lengths: torch.Tensor | None = None
        if train_dataset is not None:
            needs_complementary = objective.needs_complementary_similarities or any(
                term.needs_complementary_similarities for term, _ in self.auxiliary_losses.values()
            )
            if needs_complementary:
                self.complementary, train_dataset = self._build_complementary(args, model, train_dataset)
            prefixed = {}
            if second_template is not None:
                second_pooling = replace(model.pooling, prompt_template=second_template)
                prefixed[VIEW2] = ("text", SentenceTokenizer(processing_class, second_pooling, args.max_seq_length))
                if model.pooling.template_denoising:  # each view subtracts its own template's bias
                    self.template_lengths = torch.tensor(
                        [[p.template_prefix_length, p.template_suffix_length] for p in (model.pooling, second_pooling)]
                    )
            if any(term.needs_negations_and_paraphrases for term, _ in self.auxiliary_losses.values()):
                train_dataset = add_negations_and_paraphrases(
                    train_dataset, args.negation_backend, args.paraphrase_source
                )
                prefixed[NEGATION] = ("negation", self.sentence_tokenizer)
                prefixed[PARAPHRASE] = ("paraphrase", self.sentence_tokenizer)
            if "text" in train_dataset.column_names:
                train_dataset = tokenize_dataset(train_dataset, self.sentence_tokenizer, prefixed)
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
        self.model_card_kwargs: dict[str, Any] = {}
        self.nonfinite_loss = NonFiniteLossMonitor(reduce_min=self.accelerator.gather)
        self.add_callback(DivergenceCallback(self.nonfinite_loss))
        self._checkpoint_staging_root: Path | None = None

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
            train_dataset["text"],  # a lazy Arrow column, not a list of a million strings
            pooler=args.complementary_pooler,
            max_seq_length=args.max_seq_length,  # the same truncated sentences as the trained model
            cache=args.complementary_cache,
            batch_size=args.per_device_eval_batch_size,
            cache_dtype=args.complementary_cache_dtype,
            device=args.device,
        )
        return complementary, train_dataset.add_column(SENTENCE_INDEX, np.arange(len(train_dataset)))

    def train(self, resume_from_checkpoint: str | bool | None = None, trial: Any = None, **kwargs: Any) -> TrainOutput:
        """``Trainer.train`` holding the output folder's lock (see :class:`~hf_cse.training.output_dir.OutputDirLock`).

        ``resume_from_checkpoint``: a checkpoint folder, or ``True``/``"true"`` for the latest *complete*
        ``checkpoint-N`` of ``output_dir`` (incomplete ones are skipped with a warning).
        """
        resume = resolve_resume_checkpoint(resume_from_checkpoint, self.args.output_dir)
        with run_lock(self.args.output_dir, self.args.should_save):
            return super().train(resume_from_checkpoint=resume, trial=trial, **kwargs)

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, torch.Tensor],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        """Encode the views of the batch in ONE forward pass (rows stacked: ``[V*B, L]``; in chunks under gradient
        caching), gather them across processes, and apply the objective plus the weighted auxiliary terms."""
        inputs = dict(inputs)
        sentence_index = inputs.pop(SENTENCE_INDEX, None)
        has_pair = inputs.pop(HAS_PAIR, None)
        groups = split_prefixed(inputs)
        num_views = 2 if VIEW2 in groups else 1 + getattr(self.objective, "num_positive_views", 1)
        outputs, (z1, z2, *extra_positives) = self._encode_views(model, groups, num_views)
        views, anchor_rows = [z1, z2, *extra_positives], None
        if self.args.gather_negatives:
            views, anchor_rows = gather_with_grad(views)
            if anchor_rows is not None and sentence_index is not None:
                sentence_index = gather_no_grad(sentence_index)
        complementary_sim = None if self.complementary is None else self.complementary(sentence_index)
        extra: dict[str, Any] = {"anchor_rows": anchor_rows}
        if extra_positives:
            extra["extra_positives"] = views[2:]
        if self.objective.needs_complementary_similarities:
            extra["complementary_sim"] = complementary_sim
        loss = self.objective(views[0], views[1], **extra)
        self._log_step(f"loss_{self.objective.name}", loss, self.objective.last_logs)
        if self.auxiliary_losses:  # per-process terms on the local rows
            if complementary_sim is not None and anchor_rows is not None:
                complementary_sim = complementary_sim[anchor_rows][:, anchor_rows]
            # Terms see the bare model (no DDP/compile wrapper): the parameter names recall's bind() recorded.
            auxiliary_inputs = AuxiliaryInputs(
                z1,
                z2,
                self.accelerator.unwrap_model(model),
                complementary_sim,
                *self._negations_and_paraphrases(model, groups, has_pair, z1),
            )
            for name, (term, weight) in self.auxiliary_losses.items():
                value = term(auxiliary_inputs)
                loss = loss + weight * value
                self._log_step(f"loss_{name}", value, term.last_logs)
        self.nonfinite_loss.record(loss, self.state.global_step + 1)
        return (loss, outputs) if return_outputs else loss

    def _encode_views(
        self, model: torch.nn.Module, groups: dict[str, dict[str, torch.Tensor]], num_views: int
    ) -> tuple[Any, list[torch.Tensor]]:
        """The model output (``None`` under gradient caching) and the ``num_views`` views' embeddings ``[B, D]``."""
        batch_size = groups[""]["input_ids"].shape[0]
        chunk = self.args.gradient_cache_chunk_size
        if chunk is None or chunk >= batch_size:
            outputs = model(**self._stack_views(model, groups, num_views))
            return outputs, list(outputs.embeddings.split(batch_size))
        chunks = torch.arange(batch_size, device=groups[""]["input_ids"].device).split(chunk)
        rows = [{p: {k: v[ids] for k, v in g.items()} for p, g in groups.items()} for ids in chunks]
        encoded = cached_encode(
            lambda i: model(**self._stack_views(model, rows[i], num_views)).embeddings,
            len(chunks),
            groups[""]["input_ids"].device,
        )
        # Chunk-major [chunk][view][row] -> view-major [view][row].
        per_chunk = [
            part.split(len(ids))
            for part, ids in zip(encoded.split([num_views * len(c) for c in chunks]), chunks, strict=True)
        ]
        return None, [torch.cat([views[v] for views in per_chunk]) for v in range(num_views)]

    def _stack_views(
        self, model: torch.nn.Module, groups: dict[str, dict[str, torch.Tensor]], num_views: int
    ) -> dict[str, torch.Tensor]:
        """Model inputs for the ``num_views`` views of a batch, rows stacked view by view: ``[V*B, L]``."""
        batch = groups[""]
        if VIEW2 not in groups:
            return self.view_augmentation.stack(model, batch, num_views)
        # Two prompt templates make the two views.
        stacked = pad_and_concatenate([batch, groups[VIEW2]], self.processing_class.pad_token_id)
        if self.template_lengths is not None:
            lengths = self.template_lengths.to(batch["input_ids"].device)
            stacked["template_lengths"] = lengths.repeat_interleave(len(batch["input_ids"]), dim=0)
        return stacked

    def _negations_and_paraphrases(
        self,
        model: torch.nn.Module,
        groups: dict[str, dict[str, torch.Tensor]],
        has_pair: torch.Tensor | None,
        anchors: torch.Tensor,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """Embeddings ``[B, D]`` of the negations and paraphrases (only rows with both are encoded; the other
        rows are zeros that the margin term skips), and ``has_pair`` ``[B]``."""
        if has_pair is None:
            return None, None, None
        has_pair = has_pair.bool()
        negations = anchors.new_zeros(anchors.shape)
        paraphrases = anchors.new_zeros(anchors.shape)
        rows = has_pair.nonzero().squeeze(1)
        if len(rows):
            selected = [
                {key: value[rows] for key, value in groups[prefix].items()} for prefix in (NEGATION, PARAPHRASE)
            ]
            encoded = model(**pad_and_concatenate(selected, self.processing_class.pad_token_id)).embeddings
            negations = negations.index_copy(0, rows, encoded[: len(rows)].to(anchors.dtype))
            paraphrases = paraphrases.index_copy(0, rows, encoded[len(rows) :].to(anchors.dtype))
        return negations, paraphrases, has_pair

    def _log_step(self, name: str, loss: torch.Tensor, diagnostics: dict[str, torch.Tensor]) -> None:
        self._step_logs[name].append(loss.detach())
        for key, value in diagnostics.items():
            self._step_logs[key].append(value.detach())

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and self._step_logs:
            for name, values in self._step_logs.items():  # averaged over steps, then over processes
                mean = self.accelerator.reduce(torch.stack(values).float().mean(), reduction="mean")
                logs[name] = round(mean.item(), 6)
            self._step_logs.clear()
        super().log(logs, start_time)

    def evaluate(
        self,
        eval_dataset: STSDevSets | None = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> dict[str, float]:
        """STS dev Spearman (×100) of the current model, and alignment/uniformity on STS-B dev (Wang & Isola):
        ``{"eval_stsb_spearman": ..., "eval_alignment": ..., "eval_uniformity": ...}``.

        ``eval_dataset`` defaults to the dev sets read at construction (``args.eval_sts_tasks``).
        """
        start = time.time()
        dev_sets = eval_dataset if eval_dataset is not None else self.eval_dataset
        if dev_sets is None:
            dev_sets = load_sts_dev_sets(self.args.sts_dir, self.args.eval_sts_tasks)
        model = self.accelerator.unwrap_model(self.model)
        encoder = SentenceEncoder(model, self.processing_class)
        # One cache per evaluation: the STS score and alignment/uniformity embed STS-B dev once between them.
        encode = EmbeddingCache(lambda s: encoder.encode(s, batch_size=self.args.per_device_eval_batch_size))
        scores = score_sts_dev(encode, dev_sets)
        if "stsb" in dev_sets.subsets:
            scores.update(alignment_uniformity(encode, dev_sets.subsets["stsb"]))
        metrics = {f"{metric_key_prefix}_{name}": value for name, value in scores.items()}
        metrics[f"{metric_key_prefix}_runtime"] = round(time.time() - start, 4)
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """``Trainer.save_model``, refusing (on every process) to save non-finite weights."""
        what = Path(output_dir).name if output_dir is not None else "the model"
        check_finite_parameters(self.model.named_parameters(), self.state.global_step, what)
        super().save_model(output_dir, _internal_call)

    def _get_output_dir(self, trial: Any) -> str:
        # While a checkpoint is being saved, the Trainer writes it under the staging root (see _save_checkpoint).
        if self._checkpoint_staging_root is not None:
            return str(self._checkpoint_staging_root)
        return super()._get_output_dir(trial)

    def _save_checkpoint(self, model: torch.nn.Module, trial: Any) -> None:
        """The Trainer's checkpoint (model, optimizer, scheduler, scaler, RNG and trainer state), written whole into
        ``OUTPUT/.checkpoint-N.partial/checkpoint-N`` and then renamed to ``OUTPUT/checkpoint-N``; a full disk is
        one :class:`~hf_cse.errors.DiskFullError`."""
        run_dir = Path(self._get_output_dir(trial))
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        staging_root = checkpoint_staging_root(run_dir, name)
        if self.args.should_save:
            shutil.rmtree(staging_root, ignore_errors=True)  # left by a run killed while saving
            staging_root.mkdir(parents=True)
        self.accelerator.wait_for_everyone()
        self._checkpoint_staging_root = staging_root
        try:
            with disk_full_as_error(name, run_dir):
                super()._save_checkpoint(model, trial)
                self.accelerator.wait_for_everyone()  # every process's files (e.g. rng_state_1.pth) are written
                if self.args.should_save:
                    if self.state.best_model_checkpoint == str(staging_root / name):
                        self.state.best_model_checkpoint = str(run_dir / name)
                        self.state.save_to_json(str(staging_root / name / TRAINER_STATE_NAME))
                    publish_checkpoint(staging_root / name, run_dir / name)
        finally:
            self._checkpoint_staging_root = None
            if self.args.should_save:
                shutil.rmtree(staging_root, ignore_errors=True)
        if self.args.push_to_hub:  # from the published folder: the staged one is gone, its upload would fail
            super()._push_from_checkpoint(str(run_dir / name))
        if self.args.should_save:  # the Trainer rotated the staging root; rotate the real folder
            rotate_checkpoints(
                output_dir=str(run_dir),
                save_total_limit=self.args.save_total_limit,
                best_model_checkpoint=self.state.best_model_checkpoint,
                use_mtime=True,
            )

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        # Trainer._save_checkpoint calls this while the checkpoint is still staged; _save_checkpoint pushes it once
        # published.
        if self._checkpoint_staging_root is None:
            super()._push_from_checkpoint(checkpoint_folder)

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        """Save into a staging folder inside ``output_dir``, add sentence-transformers files, then move each file
        into place (see :func:`~hf_cse.training.output_dir.publish_files`)."""
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        if not self.args.should_save:
            return super()._save(output_dir, state_dict)
        target = Path(output_dir)
        with disk_full_as_error("the model", target), staging_folder(target) as staging:
            super()._save(str(staging), state_dict)  # its training_args.bin has no token (see CSETrainingArguments)
            write_training_arguments(self.args, staging)  # the pickle-free copy that python -m hf_cse.push reads
            model = self.accelerator.unwrap_model(self.model)
            if isinstance(model, CSEModel):
                max_seq_length = SentenceTokenizer(self.processing_class, model.pooling).max_seq_length
                write_sentence_transformers_files(staging, model, max_seq_length)
            publish_files(staging, target)

    def create_model_card(self, **kwargs: Any) -> None:
        """Write ``README.md`` and ``hf_cse_training.json`` into ``args.output_dir`` (main process only).

        Takes the keywords of ``Trainer.create_model_card``, which ``push_to_hub`` forwards; ``self.model_card_kwargs``
        (e.g. ``finetuned_from``, ``dataset``) fill in what a call does not pass.
        """
        if self.is_world_process_zero():
            self._write_model_card(**{**self.model_card_kwargs, **kwargs})

    def _write_model_card(
        self,
        language: str | list[str] | None = None,
        license: str | None = None,
        tags: str | list[str] | None = None,
        model_name: str | None = None,
        finetuned_from: str | None = None,
        tasks: str | list[str] | None = None,
        dataset_tags: str | list[str] | None = None,
        dataset: str | list[str] | None = None,
        dataset_args: str | list[str] | None = None,
    ) -> None:
        """The card of ``create_model_card``, named ``hub_model_id`` (as resolved for the push, else as given), else
        ``model_name``, else the output folder's name.

        Args:
            language, license, tags: card metadata.
            finetuned_from: the starting checkpoint as the user named it; default: the model config's
                ``_name_or_path``.
            dataset: the training data as the user named it (several are joined with ``", "``).
            dataset_tags: Hub dataset ids for the ``datasets`` metadata; default: ``dataset`` when it is a Hub id.
            tasks, dataset_args: ``Trainer.create_model_card`` keywords with nothing to say here: the card's task is
                sentence similarity and its model-index comes from the STS scores.
        """
        del tasks, dataset_args
        output_dir = Path(self.args.output_dir)
        model = self.accelerator.unwrap_model(self.model)  # a CSEModel, or a peft model that forwards to one
        if isinstance(dataset, list | tuple):
            dataset = ", ".join(str(name) for name in dataset)
        summary = summarize_training(
            model.pooling,
            training_arguments_record(self.args),
            self.objective,
            self.auxiliary_losses,
            self.state.log_history,
            base_model=finetuned_from or model.config._name_or_path or None,
            dataset=dataset,
            lora=read_lora_settings(output_dir),
        )
        repo_id = self.hub_model_id or self.args.hub_model_id or model_name or output_dir.name
        options = CardOptions(language=language, license=license, tags=tags, datasets=dataset_tags)
        write_model_card(output_dir, summary, repo_id, options)

    def init_hf_repo(self, token: str | None = None, private: bool | None = None) -> None:
        """``Trainer.init_hf_repo`` (run at construction with ``push_to_hub``), after checking ``hub_model_id`` by the
        Hub's rule; an unreachable Hub raises a one-line ``HubUnreachableError`` before any training."""
        if self.args.hub_model_id is not None:
            check_repo_id(self.args.hub_model_id)
        with hub_connection(self.args.hub_model_id or Path(self.args.output_dir).absolute().name):
            super().init_hf_repo(token=token, private=private)

    def push_to_hub(self, *args: Any, **kwargs: Any) -> Any:
        """``Trainer.push_to_hub``; an unreachable Hub raises a one-line ``HubUnreachableError``, and the card this
        renders into ``output_dir`` is put back as it was unless the upload succeeds (with ``blocking=False``: starts).
        """
        card_kept = card_restored_on_failure(self.args.output_dir) if self.is_world_process_zero() else nullcontext()
        with hub_connection(self.hub_model_id or self.args.hub_model_id), card_kept:
            return super().push_to_hub(*args, **kwargs)


def build_weighted_auxiliary_losses(
    objective: ContrastiveObjective, overrides: dict[str, dict[str, Any]]
) -> dict[str, tuple[AuxiliaryLoss, float]]:
    """``{name: (term, weight)}``: the objective's default terms updated by ``overrides``; weight 0 drops one."""
    specs = {name: dict(spec) for name, spec in getattr(objective, "default_auxiliary_losses", {}).items()}
    for name, spec in overrides.items():
        if not isinstance(spec, dict):
            raise ValueError(f"auxiliary_losses[{name!r}] must be a mapping like {{'weight': 1.0}}, got {spec!r}.")
        specs[name] = {**specs.get(name, {}), **spec}
    terms = {}
    for name, spec in specs.items():
        weight = check_range(f"auxiliary_losses[{name!r}] weight", spec.pop("weight", 1.0), 0, 1000)
        if weight > 0:
            terms[name] = (build_auxiliary_loss(name, **spec), weight)
    return terms
