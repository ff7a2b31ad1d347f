"""``CSETrainingArguments``: ``TrainingArguments`` plus the objective and STS-evaluation settings."""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import IntervalStrategy, TrainingArguments
from transformers.trainer_utils import HubStrategy
from transformers.utils import is_torch_bf16_gpu_available, is_torch_xla_available

from ..augment.views import VIEW_AUGMENTATIONS
from ..errors import UsageError, echo
from ..evaluation.evaluators import parse_evaluator_spec, primary_metric_of_specs
from ..inputs import provider_settings
from ..objectives import AUXILIARY_LOSSES, OBJECTIVES
from ..objectives.base import ContrastiveObjective, check_temperature
from ..objectives.matryoshka import MatryoshkaObjective, check_matryoshka_dims
from ..registry import INPUT_PROVIDERS
from .arguments.checks import TRAINING_NUMBERS, check_numbers, check_output_dir, check_training_length

logger = logging.getLogger(__name__)

DEFAULT_TEMPERATURE = 0.05
"""The similarity temperature of a run that sets none (SimCSE's)."""
EVAL_STS_TASKS = ("stsb", "sickr")


LIST_ARGUMENTS = ("matryoshka_dims", "matryoshka_weights", "eval_sts_tasks", "evaluators")
"""The arguments that hold lists (the command line's ``nargs``), given in Python as anything but a list or tuple."""


@dataclass
class CSETrainingArguments(TrainingArguments):
    """Training arguments of :class:`~hf_cse.training.trainer.CSETrainer`.

    Objective:
        objective: registered objective name (see ``hf_cse.objectives.OBJECTIVES``). Defaults to ``"simcse"``.
        temperature: similarity temperature. Defaults to 0.05.
        objective_kwargs: further hyper-parameters of the objective, as a dict or a JSON string.

    Matryoshka embeddings (see :class:`~hf_cse.objectives.matryoshka.MatryoshkaObjective`):
        matryoshka_dims: apply the objective to the first ``d`` dimensions of the embeddings for each listed ``d``
            (distinct, each in ``[1, embedding size]``) and sum the losses; ``None`` (default): the full embedding
            only. Auxiliary terms always read the full embedding.
        matryoshka_weights: one weight per dimension; defaults to 1.0 each.

    Positive views:
        view_augmentation: how the second view of each sentence differs from the first: ``dropout`` (default:
            dropout alone), ``shuffle``, ``token_cutoff``, ``span_cutoff`` or ``feature_cutoff`` (DCLR §6.1).
        view_augmentation_kwargs: its hyper-parameters (e.g. ``{"rate": 0.2}``), as a dict or a JSON string.

    Extra loss terms (added with weights to the objective; one place combines them, see CSETrainer.compute_loss):
        auxiliary_losses: ``{name: {"weight": w, **hparams}}`` for terms of
            ``hf_cse.objectives.AUXILIARY_LOSSES`` (``margin``, ``recall``, ``distill``), as a dict or JSON; merged
            over the objective's own defaults (``osscse`` turns on ``margin`` and ``recall``); weight 0 turns one off.

    Input providers (what the objective and its terms read besides the views, :mod:`hf_cse.inputs`):
        input_kwargs: ``{provider: {setting: value}}``, as a dict or a JSON string, for the providers the objective
            and its terms use, each mapping read into that provider's own settings class, e.g.
            ``{"negations_and_paraphrases": {"negation_backend": "rules", "paraphrase_source": "tsv:p.tsv"}}``
            (OssCSE, :class:`~hf_cse.inputs.negation_pairs.NegationAndParaphraseSettings`) or
            ``{"complementary_similarities": {"model_name_or_path": ..., "pooler": ...}}`` (DCLR,
            :class:`~hf_cse.inputs.complementary.ComplementarySettings`). Naming a provider the run does not use is
            an error (:func:`~hf_cse.inputs.run_providers.run_input_settings`).

    Scale:
        gather_negatives: under data parallelism, contrast each process's sentences with the embeddings of all
            processes, gradients flowing through the gathered copies (default ``True``). Gradient accumulation does
            not enlarge the negative set: each micro-batch only sees its own (gathered) sentences.
        mask_duplicates: a negative whose text (token ids after truncation) is its anchor's leaves the denominator,
            for every objective and loss form, across processes; ``duplicate_negative_share`` logs their share.
            Defaults to ``False``: whether it never hurts the STS proxy is not measured yet. On labelled pairs, a
            candidate (another row's positive or any hard negative) whose text is the anchor's positive.

    Training data:
        num_hard_negatives: ``None`` (default) for a corpus of one sentence a row; for labelled pairs
            (:mod:`hf_cse.training.data.pairs`), the hard negatives each row holds (0: pairs alone). Set by the trainer
            from its training data's columns, and recorded so that a resume, the model card and a re-rendered card
            know the data were pairs; given, it must agree with the data.

        gradient_cache_chunk_size: encode the batch in chunks of this many sentences with gradient caching, for
            batches larger than memory (gradients equal those of the uncached chunks; with several processes, the
            embeddings are gathered and DDP all-reduces once per step, as without caching).
            Defaults to ``None`` (one forward pass for the whole batch).

    Output:
        overwrite_output_dir: let ``run_unsup.py`` start a new run in an ``output_dir`` that already holds files,
            moving the earlier run into ``OUTPUT/_previous-run-TIME/`` (without it, and without
            ``resume_from_checkpoint``, that is refused, as in transformers' examples).
        allow_changed_settings: resume from a checkpoint trained with other settings (objective, temperature, batch
            size, corpus, ...; see :mod:`hf_cse.training.record.run_settings`), which the log, the model card and
            ``hf_cse_training.json`` then record with the step; default ``False``: such a resume is refused.

    Data:
        max_seq_length: training truncation length in tokens (prompt template included). Defaults to 32.
        pad_to_multiple_of: pad each batch's length up to a multiple of this; default ``None``: 8 under
            ``torch_compile``, else the longest row.
        pad_to_max_seq_length: pad every batch to ``max_seq_length`` (one shape per run, for CUDA graphs); default
            ``False``.

    Evaluation (STS dev Spearman every ``eval_steps``, logged as ``eval_stsb_spearman``):
        sts_dir: folder of STS data in SentEval layout; ``None`` reads the MTEB copies from the Hub.
        eval_sts_tasks: dev sets to score: ``stsb`` (STS-B dev) and/or ``sickr`` (SICK-R trial).
        evaluators: what to evaluate instead, as specs (``sts``, ``pairs:FILE``, ``ir:FOLDER``; see
            :mod:`hf_cse.evaluation.evaluators.specs`); ``None`` (default): ``sts``. ``CSETrainer(evaluator=...)``
            overrides it.

    Defaults changed from ``TrainingArguments``: ``learning_rate=3e-5``, ``per_device_train_batch_size=64``,
    ``per_device_eval_batch_size=128``, ``remove_unused_columns=False``, ``logging_nan_inf_filter=False``,
    ``dataloader_pin_memory`` on only when an accelerator is available, and then ``accelerator_config``'s
    ``non_blocking`` on (unless the config given sets it or is a file or ``AcceleratorConfig``), and with evaluation
    on, ``metric_for_best_model="stsb_spearman"`` (higher is better): the evaluators' primary metric, which is what
    ``CSETrainer(evaluator=...)`` puts in its place unless ``metric_for_best_model`` was given
    (``metric_for_best_model_is_default`` says which). ``save_total_limit`` and ``hub_strategy`` are kept as
    ``checkpoint_limit`` and ``checkpoint_hub_strategy``, which hf_cse's checkpoint rotation and push read; the fields
    themselves are set to ``None`` and ``"end"``, so that the Trainer neither rotates nor pushes a checkpoint before
    its manifest is written (:mod:`hf_cse.training.saving.writer`).

    Every numeric argument, the Trainer's included, is checked first against its range
    (:data:`~hf_cse.training.arguments.checks.TRAINING_NUMBERS`: no NaN or infinity, ``gradient_accumulation_steps``
    >= 1, ``max_grad_norm`` >= 0, ...), and ``output_dir`` must be able to be a folder: one line naming the value.
    """

    objective: str = field(
        default="simcse", metadata={"help": f"Objective name; one of: {', '.join(sorted(OBJECTIVES))}."}
    )
    temperature: float = field(default=DEFAULT_TEMPERATURE, metadata={"help": "Temperature of the similarity logits."})
    objective_kwargs: dict[str, Any] | str | None = field(
        default=None, metadata={"help": "Extra objective hyper-parameters as JSON, e.g. '{\"tau_plus\": 0.1}'."}
    )
    matryoshka_dims: list[int] | None = field(
        default=None,
        metadata={"help": "Matryoshka: also train the first d dimensions for each d listed, e.g. 768 512 256 128."},
    )
    matryoshka_weights: list[float] | None = field(
        default=None, metadata={"help": "Matryoshka: one loss weight per --matryoshka_dims value (default: 1 each)."}
    )
    view_augmentation: str = field(
        default="dropout", metadata={"help": f"Positive view; one of: {', '.join(VIEW_AUGMENTATIONS)}."}
    )
    view_augmentation_kwargs: dict[str, Any] | str | None = field(
        default=None, metadata={"help": "Hyper-parameters of the view augmentation as JSON, e.g. '{\"rate\": 0.2}'."}
    )
    auxiliary_losses: dict[str, Any] | str | None = field(
        default=None, metadata={"help": 'Extra loss terms as JSON, e.g. \'{"recall": {"weight": 1, "gamma": 2e-3}}\'.'}
    )
    input_kwargs: dict[str, Any] | str | None = field(
        default=None,
        metadata={
            "help": "Settings of the input providers, as JSON {provider: {setting: value}}, e.g. "
            '\'{"negations": {"negation_backend": "rules"}}\'; the objective and its terms name the providers.'
        },
    )
    gather_negatives: bool = field(
        default=True, metadata={"help": "Contrast with the embeddings of every process (with gradients)."}
    )
    mask_duplicates: bool = field(
        default=False,
        metadata={"help": "Drop a negative whose text (token ids) is its anchor's; logs duplicate_negative_share."},
    )
    num_hard_negatives: int | None = field(
        default=None,
        metadata={
            "help": "Set from the training data: unset for one sentence a row, the hard negatives per row for "
            "labelled pairs (0: pairs alone). Leave it unset."
        },
    )
    gradient_cache_chunk_size: int | None = field(
        default=None, metadata={"help": "Gradient caching: sentences per encoding chunk (unset = no caching)."}
    )
    max_seq_length: int = field(default=32, metadata={"help": "Training truncation length in tokens."})
    pad_to_multiple_of: int | None = field(
        default=None,
        metadata={
            "help": "Pad each training batch's length up to a multiple of this; unset: 8 with --torch_compile (few "
            "distinct shapes to compile), else the longest row. 1 turns it off."
        },
    )
    pad_to_max_seq_length: bool = field(
        default=False,
        metadata={
            "help": "Pad every training batch to max_seq_length tokens: one shape for the whole run, as CUDA graphs "
            "(--torch_compile_mode reduce-overhead) need; costs the padded tokens' compute. Negations and "
            "paraphrases are then encoded for every row, not only the rows that have one."
        },
    )
    sts_dir: str | None = field(
        default=None,
        metadata={"help": "STS data folder (SentEval layout) for evaluation; unset reads MTEB copies from the Hub."},
    )
    eval_sts_tasks: list[str] = field(
        default_factory=lambda: ["stsb"],
        metadata={"help": f"Dev sets scored at each evaluation; any of: {', '.join(EVAL_STS_TASKS)}."},
    )
    evaluators: list[str] | None = field(
        default=None,
        metadata={
            "help": "What each evaluation scores, e.g. sts pairs:my_pairs.tsv ir:beir/scifact/qrels/dev.tsv (one or "
            "more of sts, pairs:FILE, ir:FOLDER); unset = sts. Several: metrics prefixed by each one's name."
        },
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "run_unsup.py: move the run in output_dir into _previous-run-TIME/, train anew."},
    )
    allow_changed_settings: bool = field(
        default=False,
        metadata={"help": "Resume from a checkpoint trained with other settings; the model card records the change."},
    )
    metric_for_best_model: str | None = field(
        default=None,
        metadata={
            "help": "The eval metric that picks the best checkpoint (load_best_model_at_end); unset: the evaluators' "
            "primary metric, stsb_spearman (STS-B dev Spearman) by default, higher is better."
        },
    )
    learning_rate: float = field(default=3e-5, metadata={"help": "The initial learning rate for AdamW."})
    per_device_train_batch_size: int = field(default=64, metadata={"help": "Sentences per device per step."})
    per_device_eval_batch_size: int = field(default=128, metadata={"help": "Sentences per encoding batch in eval."})
    logging_nan_inf_filter: bool = field(
        default=False,
        metadata={
            "help": "Kept False: a non-finite loss stops training with an error (hf_cse.training.step.divergence), "
            "never hidden from the logged loss; the filter would also synchronize with the device every step."
        },
    )
    remove_unused_columns: bool = field(
        default=False, metadata={"help": "Kept False: objectives may need extra columns (e.g. sentence indices)."}
    )
    dataloader_pin_memory: bool | None = field(
        default=None,
        metadata={"help": "Pin the DataLoader's memory; unset = pin when an accelerator (GPU) is available."},
    )

    def __post_init__(self) -> None:
        if isinstance(self.objective, torch.nn.Module):  # ContrastiveObjective, MatryoshkaObjective
            raise UsageError(
                f"objective takes a registered objective's name, got a {type(self.objective).__name__} object: pass "
                "the object as CSETrainer(objective=...), which uses it instead of the arguments' objective."
            )
        OBJECTIVES.check(self.objective)
        for name in LIST_ARGUMENTS:  # else a string is read letter by letter ("sickr": tasks 's', 'i', 'c', ...)
            value = getattr(self, name)
            if value is not None and not isinstance(value, list | tuple):
                raise UsageError(f"{name} takes a list, got {echo(value)}: write [{echo(value)}] for one item.")
        if self.output_dir is not None:
            check_output_dir(self.output_dir)  # a file there is one line now, not FileExistsError at the lock
        if isinstance(self.max_steps, int) and isinstance(self.num_train_epochs, int | float):
            check_training_length(self.max_steps, self.num_train_epochs)
        # Every number in its range (no NaN or infinity anywhere) before anything else reads one.
        check_numbers(self, TRAINING_NUMBERS)
        self.temperature = check_temperature(self.temperature)
        if self.view_augmentation not in VIEW_AUGMENTATIONS:
            raise unknown_value("view_augmentation", self.view_augmentation, VIEW_AUGMENTATIONS, "augmentations")
        if self.matryoshka_dims is not None:
            # The embedding size is checked once the model is known (CSETrainer).
            dims, weights = check_matryoshka_dims(self.matryoshka_dims, self.matryoshka_weights)
            self.matryoshka_dims, self.matryoshka_weights = list(dims), list(weights)
        elif self.matryoshka_weights is not None:
            raise UsageError("matryoshka_weights needs matryoshka_dims, the dimensions they weight.")
        for name in ("objective_kwargs", "view_augmentation_kwargs", "auxiliary_losses"):
            setattr(self, name, parse_json_dict(name, getattr(self, name)))
        self.input_kwargs = check_input_kwargs(self)
        if unknown_terms := sorted(set(self.auxiliary_losses) - set(AUXILIARY_LOSSES)):
            raise unknown_value("auxiliary_losses", unknown_terms, sorted(AUXILIARY_LOSSES), "terms")
        if unknown_tasks := sorted(set(self.eval_sts_tasks) - set(EVAL_STS_TASKS)):
            raise unknown_value("eval_sts_tasks", unknown_tasks, EVAL_STS_TASKS, "tasks")
        if self.dataloader_pin_memory is None:
            # Pinned memory only speeds up copies to an accelerator; without one, torch warns on every DataLoader.
            self.dataloader_pin_memory = accelerator_available()
        if isinstance(self.accelerator_config, str) and self.accelerator_config.lstrip().startswith("{"):
            self.accelerator_config = parse_json_dict("accelerator_config", self.accelerator_config)  # a flag's JSON
        configurable = self.accelerator_config is None or isinstance(self.accelerator_config, dict)
        if self.dataloader_pin_memory and not self.use_cpu and configurable:  # use_cpu turns pinning off
            # Batches go to the device from pinned memory without the host waiting: with accelerate's default, each
            # step's copy waited for every kernel of the step before it, so Python never ran ahead of the GPU.
            self.accelerator_config = {"non_blocking": True, **(self.accelerator_config or {})}
        for spec in self.evaluators or ():
            parse_evaluator_spec(spec)  # an unknown kind is one line now, not at the first evaluation
        # Whether metric_for_best_model is this default (the evaluator's primary metric), which CSETrainer replaces
        # by its evaluator's; a value the user gave is kept.
        self.metric_for_best_model_is_default = False
        if IntervalStrategy(self.eval_strategy) != IntervalStrategy.NO and self.metric_for_best_model is None:
            self.metric_for_best_model = primary_metric_of_specs(self.evaluators or ["sts"], self.eval_sts_tasks)
            self.greater_is_better = True
            self.metric_for_best_model_is_default = True
        check_bf16_device(self)  # before transformers' own refusal, which does not name --use_cpu
        super().__post_init__()  # sets torch_compile when a compile backend or mode is given
        check_fp16_device(self)  # the device is known now (TrainingArguments.__post_init__ reads it)
        # hf_cse rotates and pushes checkpoints after their manifest (hf_cse.training.saving.writer); the Trainer,
        # which would do both before it, gets no limit and no push. The values given are kept, and saved.
        self.checkpoint_limit, self.save_total_limit = self.save_total_limit, None
        self.checkpoint_hub_strategy, self.hub_strategy = self.hub_strategy, HubStrategy.END
        if self.pad_to_max_seq_length:
            if self.pad_to_multiple_of not in (None, self.max_seq_length):
                raise ValueError(
                    f"pad_to_max_seq_length pads every batch to max_seq_length={self.max_seq_length}; "
                    f"pad_to_multiple_of={self.pad_to_multiple_of} asks for another length: drop one of them."
                )
            # No row is longer than max_seq_length, so its multiple is max_seq_length itself: one shape per run.
            self.pad_to_multiple_of = self.max_seq_length
        if self.pad_to_multiple_of is None and self.torch_compile:
            self.pad_to_multiple_of = 8  # see ContrastiveCollator: bounded shapes, no recompilation per batch
        contrastive_batch = self.per_device_train_batch_size * (self.world_size if self.gather_negatives else 1)
        if contrastive_batch < 2:
            raise ValueError(
                f"per_device_train_batch_size={self.per_device_train_batch_size} gives each sentence no in-batch "
                "negative: use 2 or more sentences per batch."
            )
        if self.gradient_accumulation_steps > 1:
            logger.warning(
                "gradient_accumulation_steps=%d does not enlarge the contrastive batch: each micro-batch of %d "
                "sentences per process is contrasted only with itself (and the other processes' micro-batches).",
                self.gradient_accumulation_steps,
                self.per_device_train_batch_size,
            )

    def __getstate__(self) -> dict[str, Any]:
        # training_args.bin (torch.save of these arguments, by the Trainer in every checkpoint and in each push of
        # push_to_hub) is uploaded to the Hub: it never carries the token.
        return {**self.__dict__, "hub_token": None}

    def objective_hparams(self) -> dict[str, Any]:
        """Hyper-parameters passed to ``build_objective(self.objective, ...)``."""
        return objective_hparams(self.objective, self.temperature, self.objective_kwargs)


def unknown_value(name: str, given: Any, valid: Iterable[str], plural: str) -> ValueError:
    """The error of a ``name`` whose ``given`` value (or values) is none of ``valid``, naming both."""
    return ValueError(f"Unknown {name} {echo(given)}; valid {plural} are: {', '.join(valid)}.")


def check_input_kwargs(args: CSETrainingArguments) -> dict[str, dict[str, Any]]:
    """``args.input_kwargs`` parsed (``{provider: {setting: value}}``), each named provider's settings checked as the
    provider will read them (:func:`~hf_cse.inputs.provider_settings`), so that a bad one is one line before anything
    loads.

    Raises:
        UsageError: not a JSON object of objects, an unknown provider (the message lists the registered ones), or a
            setting the provider does not take or refuses.
    """
    input_kwargs = parse_json_dict("input_kwargs", args.input_kwargs)
    for name, settings in input_kwargs.items():
        INPUT_PROVIDERS.check(name)
        if not isinstance(settings, dict):
            raise UsageError(f"input_kwargs[{name!r}] must be an object of settings, got {echo(settings)}.")
        provider_settings(INPUT_PROVIDERS[name], {"input_kwargs": input_kwargs})
    return input_kwargs


def check_bf16_device(args: TrainingArguments) -> None:
    """Refuse ``--bf16`` (or ``--bf16_full_eval``) where ``TrainingArguments`` would: no GPU computes in bfloat16 here
    and ``--use_cpu`` is not set. Its message ("Your setup doesn't support bf16/gpu. You need to assign use_cpu")
    names no flag; on a CPU, accelerate does run bfloat16 autocast once ``--use_cpu true`` is given.

    Raises:
        UsageError: one line naming the flag and the two ways on (``--use_cpu true``; ``--fp16`` on an older GPU).
    """
    flag = "--bf16 true" if args.bf16 else "--bf16_full_eval true" if args.bf16_full_eval else None
    if flag is None or args.use_cpu or is_torch_bf16_gpu_available() or is_torch_xla_available():
        return
    if torch.cuda.is_available():  # a GPU older than Ampere
        raise UsageError(
            f"{flag}: this machine's GPU does not compute in bfloat16 (Ampere or newer ones do): pass --fp16 true "
            "for mixed precision on it, or add --use_cpu true to train on the CPU with bfloat16 autocast."
        )
    raise UsageError(
        f"{flag}: this machine has no GPU that computes in bfloat16, and transformers runs bfloat16 on the CPU only "
        f"with --use_cpu true: add it (bfloat16 autocast on the CPU), or drop {flag.split()[0]} to train in float32."
    )


def check_fp16_device(args: TrainingArguments) -> None:
    """Refuse fp16 mixed precision on a run whose device is the CPU: accelerate enables fp16 autocast and loss
    scaling only off the CPU, so such a run trained in float32 without a word, while its card said ``fp16``. Read
    after ``TrainingArguments.__post_init__``, which sets ``mixed_precision`` (from ``--fp16``, or from accelerate's
    ``ACCELERATE_MIXED_PRECISION``) and the device.

    Raises:
        UsageError: one line naming where fp16 came from and what runs on a CPU (``--bf16 true --use_cpu true``).
    """
    if getattr(args, "mixed_precision", None) != "fp16" or args.deepspeed or args.device.type != "cpu":
        return
    if args.fp16:
        given, without = "--fp16 true", "drop --fp16"
    else:
        given = "ACCELERATE_MIXED_PRECISION=fp16 (accelerate launch --mixed_precision fp16 sets it)"
        without = "unset it"
    raise UsageError(
        f"{given}: fp16 mixed precision needs a GPU, and this run trains on the CPU, where accelerate would train in "
        f"float32 instead: for mixed precision on the CPU pass --bf16 true --use_cpu true (bfloat16 autocast), or "
        f"{without} to train in float32."
    )


def accelerator_available() -> bool:
    """Whether torch sees an accelerator (CUDA, MPS, XPU, ...): the test behind the DataLoader's ``pin_memory``
    warning (``torch.accelerator``, torch >= 2.6; CUDA alone before)."""
    accelerator = getattr(torch, "accelerator", None)
    return bool(accelerator.is_available()) if accelerator is not None else torch.cuda.is_available()


def objective_hparams(objective: str, temperature: float, objective_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Hyper-parameters passed to ``build_objective(objective, ...)``: the temperature and ``objective_kwargs``
    (these win), from :class:`CSETrainingArguments` or from the ``training_args.json`` a checkpoint saved them in.

    An objective without a temperature (``mntp``, a registered objective of the user's own) gets none: every run
    has one, and the default one is not a setting the user gave.

    Raises:
        UsageError: an unknown objective (the message lists the registered ones), or a temperature other than the
            default for an objective that has none.
    """
    parameters = inspect.signature(OBJECTIVES[OBJECTIVES.check(objective)].__init__).parameters
    takes_temperature = "temperature" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    if takes_temperature:
        return {"temperature": temperature, **objective_kwargs}
    if temperature != DEFAULT_TEMPERATURE:
        raise UsageError(
            f"Objective {objective!r} has no temperature; got temperature {echo(temperature)}: leave --temperature "
            f"at its default ({DEFAULT_TEMPERATURE})."
        )
    return dict(objective_kwargs)


def record_objective(args: CSETrainingArguments, objective: ContrastiveObjective) -> None:
    """Make ``args`` name ``objective``, a module given to ``CSETrainer`` in place of ``args.objective``: its
    registered name, temperature and other hyper-parameters (its ``get_config_dict()``, which rebuilds it), so that
    ``training_args.json``, a resume's comparison of settings and ``python -m hf_cse.push`` rebuild the objective that
    trained, not the one ``args`` named. A module of a class registered under no name is left as ``args`` has it.

    Raises:
        UsageError: ``args.objective`` names another objective than its default: two objectives were given.
    """
    default = CSETrainingArguments.__dataclass_fields__["objective"].default
    if args.objective not in (default, objective.name):
        raise UsageError(
            f"CSETrainer got objective={type(objective).__name__} ({objective.name!r}) and "
            f"args.objective={args.objective!r}: give one of them (the module takes the place of the default, "
            f"{default!r})."
        )
    plain = objective.objective if isinstance(objective, MatryoshkaObjective) else objective
    if objective.name not in OBJECTIVES or OBJECTIVES[objective.name] is not type(plain):
        return
    hparams = plain.get_config_dict()
    args.objective, args.temperature = objective.name, hparams.pop("temperature", args.temperature)
    args.objective_kwargs = hparams


def parse_json_dict(name: str, value: dict[str, Any] | str | None) -> dict[str, Any]:
    if not isinstance(value, str):
        return dict(value or {})
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as err:
        raise ValueError(f"{name} is not valid JSON: {echo(value)} ({err}).") from err
    if not isinstance(parsed, dict):
        raise ValueError(f"{name} must be a JSON object of hyper-parameters, got {echo(value)}.")
    return parsed
