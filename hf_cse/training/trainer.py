"""``CSETrainer``: the Hugging Face ``Trainer`` with contrastive objectives and STS evaluation.

A step (:meth:`CSETrainer.compute_loss`): the batch's views are encoded in one forward pass, gathered across
processes, and scored by the objective plus its weighted auxiliary terms; what else they read comes from the input
providers (:mod:`hf_cse.inputs`) they declare.

It overrides 12 of the Trainer's public methods, each for a reason (``tests/test_trainer_overrides.py`` counts
them), handing over to the collaborators it holds:

- the step: ``compute_loss``; ``floating_point_ops`` (the Trainer's estimate reads a top-level ``input_ids``, which
  an hf_cse batch of nested token groups lacks: :class:`~hf_cse.training.step.step_costs.TrainedTokens` counts the
  views); ``log`` (the named loss parts, averaged over steps and processes); ``evaluate`` (its evaluator: STS dev by
  default);
- the run: ``train`` (the output folder's lock, recovery, verified resume: :mod:`~hf_cse.training.saving.resume`,
  preemption); for a stream (:class:`~hf_cse.training.data.stream_position.StreamPosition`), ``get_train_dataloader``
  (whose passes draw nothing from the run's RNG) and ``get_resumed_dataloader`` (the stream already starts after the
  checkpoint's batches);
- the writes, to the run's one save path (:class:`~hf_cse.training.saving.RunWriter`, also the callback that commits
  each checkpoint the Trainer writes): ``save_model``, ``save_metrics``, ``save_state`` (whole or not at all, listed
  in the folder's manifest so that a push uploads them);
- the Hub (:class:`~hf_cse.training.saving.hub_push.HubPusher`): ``create_model_card`` (hf_cse's card) and
  ``push_to_hub`` (only the files the run wrote).

The repository is created by the Trainer's own ``init_hf_repo``, checked around the Trainer's construction;
``model_init`` is refused, so ``Trainer.hyperparameter_search`` stops before its first trial (``python -m
hf_cse.sweep`` sweeps settings as separate runs). No private Trainer method is overridden, and no training argument
is changed once the trainer is built.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import torch
from datasets import Dataset
from peft import PeftConfig, PeftModel
from torch.utils.data import DataLoader
from transformers import PreTrainedTokenizerBase, Trainer
from transformers.trainer_utils import HubStrategy, TrainOutput

from ..distributed import gather_with_grad
from ..errors import UsageError
from ..evaluation import STSDevSets
from ..evaluation.evaluators import Evaluator
from ..inputs import (
    SENTENCES,
    InputSettings,
    StepContext,
    TrainingSetup,
    build_input_providers,
    build_step_inputs,
    run_input_providers,
)
from ..inputs.duplicates import check_duplicates_masked
from ..modeling.backbone import check_views_differ
from ..modeling.encoder import check_max_seq_length, check_max_seq_length_value
from ..modeling.lora import wrap_for_training
from ..modeling.modeling_cse import CSEModel
from ..modeling.tokenization import SentenceTokenizer
from ..objectives import (
    ContrastiveObjective,
    build_objective,
    build_weighted_auxiliary_losses,
    with_matryoshka,
)
from ..objectives.base import accepted_poolers
from ..objectives.contract import Logs, check_output
from .data.pair_columns import num_hard_negatives
from .data.pairs import check_instruction_has_anchors, pairs_dataset, record_num_hard_negatives
from .data.stream_position import StreamPosition
from .data.streaming import SentenceStream, StreamingCorpus
from .data.training_data import prepare_training_data
from .evaluators import evaluator_for_call, score_model, training_evaluator
from .record.model_card import write_trainer_card
from .record.run_settings import RunSettingsRecord
from .saving import PreemptionCallback, RunWriter
from .saving.hub_push import HubPusher
from .saving.model_files import write_model_files
from .saving.output_dir import run_lock
from .saving.resume import start_run
from .step.compiled_loss import LossCompiler
from .step.divergence import DivergenceCallback, NonFiniteLossMonitor
from .step.gradient_cache import encode_views_in_chunks, uses_chunks
from .step.step_costs import TrainedTokens, find_unused_parameters_decided
from .training_args import CSETrainingArguments, record_objective


class CSETrainer(Trainer):
    """Trains a :class:`~hf_cse.modeling.modeling_cse.CSEModel` with a contrastive objective.

    Args:
        model: the model to train.
        args: training arguments; ``args.objective`` names the objective unless ``objective`` is given.
        train_dataset: sentences, either raw (a ``"text"`` column; tokenized here, once) or already tokenized; or a
            :class:`~hf_cse.training.data.streaming.StreamingCorpus` (``stream_sentences(path)``), read and tokenized
            batch by batch during training.
        processing_class: the model's tokenizer (required: it defines the prompt template's mask token).
        objective: an objective module in place of ``args.objective`` (which must then be left at its default), set
            into ``args`` as the saved arguments record it (:func:`~hf_cse.training.training_args.record_objective`);
            with ``args.matryoshka_dims`` it is wrapped
            in a :class:`~hf_cse.objectives.matryoshka.MatryoshkaObjective` (one already wrapped must have those
            dimensions; :func:`~hf_cse.objectives.matryoshka.with_matryoshka`).
        peft_config: a peft ``LoraConfig``: the model is wrapped here (:func:`~hf_cse.modeling.lora.wrap_for_training`;
            SimCSE's MLP head stays fully trainable), checkpoints hold the adapter, and every ``save_model`` writes the
            merged plain model at the root and the adapter in ``adapter/``. A ``PeftModel`` passed as ``model`` is
            trained and saved the same way.
        evaluator: what every evaluation scores (:mod:`hf_cse.evaluation.evaluators`); default: ``args.evaluators``,
            else STS dev (:class:`~hf_cse.evaluation.evaluators.STSEvaluator`). Its ``primary_metric`` and
            ``greater_is_better`` select checkpoints unless ``args.metric_for_best_model`` was given.
        input_settings: ``{provider: settings}`` of input providers the run builds, as
            :func:`~hf_cse.training.arguments.checks.check_input_paths` checked them before the model loaded (with
            what the check read: a paraphrase TSV's table, read once); default: each read from ``args``.
        **kwargs: passed to ``Trainer``.
    """

    # compute_loss returns a per-batch mean; the Trainer divides it by the gradient-accumulation steps.
    loss_is_scaled_for_ga = False
    stop_on_identical_views: bool = True
    """Stop at the first step when its two views are equal bit for bit (:func:`~hf_cse.modeling.backbone.
    check_views_differ`). Off only where views are made equal on purpose: exactness tests that turn dropout off so
    that one process and two draw no different masks."""

    def __init__(
        self,
        model: CSEModel | PeftModel,
        args: CSETrainingArguments,
        train_dataset: Dataset | StreamingCorpus | None = None,
        processing_class: PreTrainedTokenizerBase | None = None,
        objective: ContrastiveObjective | None = None,
        peft_config: PeftConfig | None = None,
        evaluator: Evaluator | None = None,
        input_settings: Mapping[str, InputSettings] | None = None,
        **kwargs: Any,
    ) -> None:
        if processing_class is None:
            raise ValueError("CSETrainer needs processing_class=<the model's tokenizer>.")
        if kwargs.get("model_init") is not None:
            # Without it, Trainer.hyperparameter_search stops before its first trial.
            raise UsageError(
                "CSETrainer takes no model_init: Trainer.hyperparameter_search, which needs it, would save each "
                "trial's checkpoints under output_dir/run-N, which hf_cse does not commit. Sweep hyper-parameters "
                "with `python -m hf_cse.sweep` (one run_unsup.py run per setting and seed, each selected on STS-B dev "
                "and scored)."
            )
        if not isinstance(args, CSETrainingArguments):
            raise TypeError(f"CSETrainer needs CSETrainingArguments, got {type(args).__name__}.")
        if args.save_total_limit is not None or args.hub_strategy != HubStrategy.END:
            raise UsageError(
                "save_total_limit and hub_strategy were set on CSETrainingArguments after they were built: hf_cse "
                "rotates and pushes checkpoints itself and reads them when the arguments are built "
                "(checkpoint_limit, checkpoint_hub_strategy); pass them to CSETrainingArguments(...)."
            )
        check_max_seq_length(args.max_seq_length, model, args.pad_to_multiple_of)
        model = wrap_for_training(model, peft_config)
        self.sentence_tokenizer = SentenceTokenizer(processing_class, model.pooling, args.max_seq_length)
        if model.pooling.max_seq_length is not None:  # the saved inference length: now, not when the run is saved
            check_max_seq_length_value(model.pooling.max_seq_length, processing_class)
        if getattr(model.config, "pad_token_id", None) is None:
            # A decoder's tokenizer just got its eos token as pad token (use_eos_for_padding, logged once): the config
            # follows now, as the Trainer's token alignment would next, with a second multi-line warning.
            model.config.pad_token_id = processing_class.pad_token_id
        if objective is None:
            objective = build_objective(args.objective, **args.objective_hparams())
        else:
            record_objective(args, objective)
        objective = with_matryoshka(
            objective, args.matryoshka_dims, args.matryoshka_weights, embedding_size=model.config.hidden_size
        )
        if not objective.accepts_pooler(model.pooling):
            accepted = " or ".join(f"pooler={name!r}" for name in accepted_poolers(objective))
            raise UsageError(
                f"Objective {objective.name!r} needs {accepted}; the model uses pooler={model.pooling.pooler!r}."
            )
        self.auxiliary_losses = build_weighted_auxiliary_losses(
            objective.default_auxiliary_losses, args.auxiliary_losses
        )
        for term, _ in self.auxiliary_losses.values():
            term.bind(model)
        if isinstance(train_dataset, Dataset):  # labelled pairs in either layout, into the training columns
            train_dataset = pairs_dataset(train_dataset)
        if train_dataset is not None:
            record_num_hard_negatives(args, num_hard_negatives(train_dataset))
            check_instruction_has_anchors(model.pooling, args, "the training dataset")
        corpus = train_dataset  # before tokenization: the resume contract identifies the corpus by its text
        setup = TrainingSetup(args, model, processing_class, self.sentence_tokenizer, objective)
        # The providers run_unsup.py checked before the model loaded: one decision (hf_cse.inputs.run_providers).
        run_providers = run_input_providers(objective, self.auxiliary_losses, vars(args))
        # The view maker: the run's view augmentation unless a required provider makes the views.
        self.input_providers, self.view_maker = build_input_providers(run_providers, setup, input_settings)
        # Every provider's columns and token groups are collated, the view maker's too (labelled pairs' positives).
        providers = list(dict.fromkeys([*self.input_providers.values(), self.view_maker]))
        train_dataset, kwargs["data_collator"] = prepare_training_data(
            train_dataset, args, self.sentence_tokenizer, providers, kwargs.get("data_collator")
        )
        # Dev sets and evaluator files read once here; every evaluation only re-encodes their sentences.
        self.evaluator, kwargs["eval_dataset"] = training_evaluator(args, evaluator, kwargs.get("eval_dataset"))
        self.run_writer = RunWriter(self, write_model_files)
        self.hub_pusher = HubPusher(self)
        self.model_card_kwargs: dict[str, Any] = {}
        """Card keywords (``finetuned_from``, ``dataset``, ...) filling in what a ``create_model_card`` call omits."""
        # DDP's find_unused_parameters decided for the Trainer to build it with; with push_to_hub the Trainer's init
        # ends by creating the repository (init_hf_repo, its only Hub request): hub_model_id checked first, an
        # unreachable Hub one line before any training.
        repository = self.hub_pusher.checked_repository(args) if args.push_to_hub else contextlib.nullcontext()
        with find_unused_parameters_decided(args, model, self.sentence_tokenizer), repository:
            super().__init__(
                model=model, args=args, train_dataset=train_dataset, processing_class=processing_class, **kwargs
            )
        self.objective = objective
        self.compile_loss = LossCompiler(args)  # --torch_compile: the loss parts too, beside the model
        self._step_logs: dict[str, list[torch.Tensor]] = defaultdict(list)
        self._views_checked = False
        self.nonfinite_loss = NonFiniteLossMonitor(reduce_min=self.accelerator.gather)
        self.preemption = PreemptionCallback()
        self.add_callback(self.preemption)  # before the divergence check, which then sees the preemption's save
        self.add_callback(DivergenceCallback(self.nonfinite_loss))
        self.add_callback(self.run_writer)  # commits every checkpoint the Trainer writes ...
        self.add_callback(self.hub_pusher)  # ... before the committed checkpoint is pushed
        self.trained_tokens = TrainedTokens(model)
        self.run_settings = RunSettingsRecord(self, corpus)
        self.run_writer.add_checkpoint_file(self.run_settings.write)
        self.stream_position = (
            StreamPosition(self.train_dataset, self.run_writer)
            if isinstance(self.train_dataset, SentenceStream)
            else None
        )
        for provider in providers:  # what a provider carries across steps (a momentum queue) resumes with the run
            self.run_writer.add_checkpoint_file(provider.save_state)

    # --- data: a stream's dataloader, resumed where its checkpoint says (hf_cse.training.data.stream_position) -------

    def get_train_dataloader(self) -> DataLoader:
        """``Trainer.get_train_dataloader``; a stream's is :meth:`StreamPosition.dataloader`, whose passes draw no
        random number from the run's RNG."""
        if self.stream_position is None:
            return super().get_train_dataloader()
        return self.stream_position.dataloader(self)

    def get_resumed_dataloader(self, dataloader: DataLoader, num_batches: int) -> DataLoader:
        """``Trainer.get_resumed_dataloader``, except for a stream: ``train`` started it right after the checkpoint's
        batches (:meth:`StreamPosition.start`), so it is returned as it is. The Trainer's skip would re-read and
        re-tokenize every batch already trained on, counted from the start of a stream that may have wrapped
        around."""
        return super().get_resumed_dataloader(dataloader, num_batches) if self.stream_position is None else dataloader

    # --- the run: lock, recovery, resume, preemption; every save handed over to the writer (hf_cse.training.saving) --

    def train(self, resume_from_checkpoint: str | bool | None = None, trial: Any = None, **kwargs: Any) -> TrainOutput:
        """``Trainer.train`` holding the output folder's lock (:class:`~hf_cse.folder_lock.FolderLock`), after
        putting right what a killed save left (:meth:`RunWriter.recover`).

        ``resume_from_checkpoint``: a checkpoint folder, which must verify, or ``True``/``"true"`` for the newest
        verified ``checkpoint-N`` of ``output_dir`` (others are skipped with a warning). A checkpoint at
        ``max_steps`` is a finished run: its weights are loaded and nothing is trained. SIGTERM or SIGUSR1 saves a
        checkpoint after the current step and raises :class:`~hf_cse.errors.PreemptedError`.
        """
        with run_lock(self.args.output_dir, self.args.should_save), self.hub_pusher.reporting_checkpoint_pushes():
            if self.args.should_save:
                self.run_writer.recover()
            self.accelerator.wait_for_everyone()
            checkpoint, finished = start_run(self, resume_from_checkpoint)
            if finished is not None:
                return finished
            if self.stream_position is not None:
                self.stream_position.start(checkpoint)
            signals = self.preemption.handling_signals(self.args.world_size)
            with signals, self.run_writer.unfinished_checkpoint_removed():
                output = super().train(resume_from_checkpoint=checkpoint, trial=trial, **kwargs)
            self.preemption.raise_if_stopped(self.args.output_dir, self.state.max_steps)
            return output

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Save the model through the run's writer (:meth:`RunWriter.save_model`): the exported model, published
        whole, or into the checkpoint the Trainer writes; refused, on every process, when a weight is not finite.
        Pushes it when called with ``push_to_hub`` (not from the Trainer's own saves), as ``Trainer.save_model``
        does."""
        self.run_writer.save_model(output_dir, _internal_call)
        if self.args.push_to_hub and not _internal_call:
            self.push_to_hub(commit_message="Model save", revision=self.args.hub_revision)

    def save_metrics(self, split: str, metrics: dict[str, float], combined: bool = True) -> None:
        """``Trainer.save_metrics`` (``SPLIT_results.json``, merged into ``all_results.json``), each file written
        whole or not at all and listed in the folder's manifest, so that a push uploads it
        (:meth:`RunWriter.save_metrics`)."""
        self.run_writer.save_metrics(split, metrics, combined)

    def save_state(self) -> None:
        """``Trainer.save_state`` (``trainer_state.json``), written whole or not at all and listed in the folder's
        manifest (:meth:`RunWriter.save_state`)."""
        self.run_writer.save_state()

    # --- the card and the Hub (hf_cse.training.saving.hub_push) ------------------------------------------------------

    def create_model_card(self, **kwargs: Any) -> None:
        """Write ``README.md`` and ``hf_cse_training.json`` into ``args.output_dir`` (main process only).

        Takes the keywords of ``Trainer.create_model_card``, which ``push_to_hub`` forwards; ``self.model_card_kwargs``
        (e.g. ``finetuned_from``, ``dataset``) fill in what a call does not pass.
        """
        if self.is_world_process_zero():
            write_trainer_card(self, **{**self.model_card_kwargs, **kwargs})

    def push_to_hub(self, commit_message: str | None = "End of training", blocking: bool = True, **kwargs: Any) -> Any:
        """``Trainer.push_to_hub`` uploading only the files hf_cse wrote, with one-line Hub errors and the local card
        kept unless the upload succeeds: :meth:`HubPusher.push_model
        <hf_cse.training.saving.hub_push.HubPusher.push_model>`, whose arguments it takes."""
        return self.hub_pusher.push_model(commit_message, blocking, **kwargs)

    # --- the step ----------------------------------------------------------------------------------------------------

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        """Encode the ``1 + num_positive_views`` views of the batch (and, on labelled pairs, each row's hard
        negatives) in ONE forward pass (rows stacked: ``[V*B, L]``; in chunks under gradient caching), gather them
        across processes, and apply the objective plus the weighted auxiliary terms, with what their input providers
        give. A stream's batch carries its position, recorded here as trained (a checkpoint after this step resumes
        after it)."""
        if self.stream_position is not None:
            self.stream_position.record(inputs)
        num_views = self.num_views
        chunked = uses_chunks(inputs, self.args.gradient_cache_chunk_size)
        # Under gradient caching the step's forwards leave DDP's all-reduce to the replay of the last chunk, at the end
        # of the backward (hf_cse.training.step.gradient_cache).
        with self.accelerator.no_sync(model) if chunked else contextlib.nullcontext():
            outputs, local_views = self._encode_views(model, inputs, num_views, chunked)
            if self.stop_on_identical_views and not self._views_checked:  # once: a decoder's dropout 0
                check_views_differ(local_views, self.accelerator.unwrap_model(model), self.objective.name)
                self._views_checked = True
            views, anchor_rows = gather_with_grad(local_views) if self.args.gather_negatives else (local_views, None)
            step = StepContext(model, inputs, local_views[0], anchor_rows, outputs)
            # Terms see the bare model (no DDP/compile wrapper): the parameter names recall's bind() recorded.
            objective_inputs, auxiliary_inputs = build_step_inputs(
                self.input_providers.values(),
                step,
                views,
                local_views,
                self.accelerator.unwrap_model(model, keep_torch_compile=False),
                self.args.num_hard_negatives or 0,
            )
        objective = self.compile_loss(self.objective)
        output = check_output(objective(objective_inputs), f"objective {self.objective.name!r}")
        if self.args.mask_duplicates:
            check_duplicates_masked(output.logs, self.objective.name)
        self._log_step(f"loss_{self.objective.name}", output.loss, output.logs)
        loss = output.loss
        for name, (term, weight) in self.auxiliary_losses.items():  # per-process terms on the local rows
            term_output = check_output(self.compile_loss(term)(auxiliary_inputs), f"auxiliary loss {name!r}")
            loss = loss + weight * term_output.loss
            self._log_step(f"loss_{name}", term_output.loss, term_output.logs)
        self.nonfinite_loss.record(loss, self.state.global_step + 1)
        return (loss, outputs) if return_outputs else loss

    @property
    def num_views(self) -> int:
        """The views a step encodes in its one forward pass: the anchors, their ``num_positive_views`` positive views
        and, on labelled pairs, each row's ``num_hard_negatives`` hard negatives."""
        return 1 + self.objective.num_positive_views + (self.args.num_hard_negatives or 0)

    def stack_views(self, batch: Mapping[str, Any], num_views: int) -> dict[str, Any]:
        """Model inputs for the ``num_views`` views of a collated batch, rows stacked view by view: ``[V*B, L]``.
        The run's view maker makes them (:func:`~hf_cse.inputs.run_input_providers`)."""
        stacked = self.view_maker.stack_views(batch, num_views)
        self.trained_tokens.add(stacked)  # here, outside the model: a hook in it would cost torch.compile graphs
        return stacked

    def floating_point_ops(self, inputs: dict[str, Any]) -> int:
        """The step's ``total_flos`` estimate: ``6 x`` non-embedding parameters ``x`` the tokens of the views it
        encoded with gradients (:class:`~hf_cse.training.step.step_costs.TrainedTokens`); ``inputs`` is not read."""
        return self.trained_tokens.pop_flops()

    def _encode_views(
        self, model: torch.nn.Module, batch: Mapping[str, Any], num_views: int, chunked: bool
    ) -> tuple[Any, list[torch.Tensor]]:
        """The model output (``None`` under gradient caching) and the ``num_views`` views' embeddings ``[B, D]``."""
        if not chunked:
            outputs = model(**self.stack_views(batch, num_views))
            return outputs, list(outputs.embeddings.split(len(batch[SENTENCES]["input_ids"])))
        views = encode_views_in_chunks(
            lambda rows: model(**self.stack_views(rows, num_views)).embeddings,
            batch,
            num_views,
            self.args.gradient_cache_chunk_size,
            functools.partial(self.accelerator.no_sync, model),
        )
        return None, views

    def _log_step(self, name: str, loss: torch.Tensor, diagnostics: Logs) -> None:
        """Keep a loss part and an output's ``logs`` for :meth:`log`, which averages them over steps and processes."""
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
        eval_dataset: Evaluator | STSDevSets | None = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> dict[str, float]:
        """The evaluator's metrics for the current model, prefixed: by default STS dev Spearman (×100) and
        alignment/uniformity on STS-B dev, ``{"eval_stsb_spearman": ..., "eval_alignment": ..., ...}``.

        ``eval_dataset``: for this call only, another evaluator, or STS dev sets; default: the trainer's evaluator.
        """
        start = time.time()
        scores = score_model(self, evaluator_for_call(self, eval_dataset))
        metrics = {f"{metric_key_prefix}_{name}": value for name, value in scores.items()}
        metrics[f"{metric_key_prefix}_runtime"] = round(time.time() - start, 4)
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics
