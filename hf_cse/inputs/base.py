"""Input providers: what an objective or auxiliary term needs beyond the sentences' two views.

A provider has two steps. :meth:`InputProvider.prepare` runs once on the raw corpus (a ``"text"`` column) before
tokenization: it may add columns (a negation per sentence, a sentence number) and name text columns to tokenize as
extra token groups. :meth:`InputProvider.provide` runs every training step on the collated batch
(:class:`StepContext`): it encodes its groups or looks values up and returns them by name
(:class:`ProvidedInputs`), over the global batch for the objective and over this process's rows for the auxiliary
terms; :func:`build_step_inputs` puts them in the two :class:`~hf_cse.objectives.contract.StepInputs` of the step.
A provider declares which of its values are embeddings of the trained model (:attr:`InputProvider.embeddings`), so
that Matryoshka truncates those and no other.

Objectives and auxiliary terms name the providers they need (``required_inputs``); which providers a run builds is
decided once, from its arguments (:func:`~hf_cse.inputs.run_providers.run_input_providers`), and the trainer builds
each once from the :class:`TrainingSetup` and loops over them. Providers are registered by name
(:func:`~hf_cse.registry.register_input_provider`), and every module of this package is imported by the package,
so a user's provider (in a module imported with ``--import_module``) plugs in like the built-ins:

- ``prompt_template_views`` (:mod:`~hf_cse.inputs.prompt_views`): the second view under a second prompt template;
- ``negations_and_paraphrases`` (:mod:`~hf_cse.inputs.negation_pairs`): each sentence's negation and paraphrase;
- ``complementary_similarities`` (:mod:`~hf_cse.inputs.complementary`): a frozen model's similarities.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from datasets import Dataset
from torch import nn
from transformers import PreTrainedTokenizerBase

from ..distributed import gather_no_grad, gather_with_grad
from ..errors import UsageError
from ..modeling.tokenization import SentenceTokenizer
from ..objectives.contract import StepInputs

if TYPE_CHECKING:
    from ..modeling.modeling_cse import CSEModel
    from ..objectives.base import ContrastiveObjective
    from ..training.training_args import CSETrainingArguments

SENTENCES = "sentences"
"""The token group of the training sentences themselves; providers add groups under their own names."""
TokenGroups = Mapping[str, Mapping[str, torch.Tensor]]
"""``{group: {"input_ids": [B, L], "attention_mask": [B, L], ...}}``, each group padded on its own."""


@dataclass
class TrainingSetup:
    """What a provider is built from, once per trainer.

    Args:
        args: the run's training arguments.
        model: the model being trained (unwrapped).
        tokenizer: its tokenizer.
        sentence_tokenizer: tokenizes sentences the way the model reads them (prompt template, truncation).
        objective: the run's objective.
    """

    args: CSETrainingArguments
    model: CSEModel
    tokenizer: PreTrainedTokenizerBase
    sentence_tokenizer: SentenceTokenizer
    objective: ContrastiveObjective


@dataclass
class StepContext:
    """One training step as a provider sees it.

    Args:
        model: the model to call for forward passes; possibly wrapped (DDP), so calls through it sync gradients.
        batch: the collated batch: token groups (:data:`TokenGroups`) and row columns (``[B]`` tensors).
        anchors: this process's first-view embeddings ``[B, D]``.
        anchor_rows: this process's rows in the views gathered from every process (``None`` without gathering).
        outputs: the model's output of the step's forward pass (``CSEModelOutput``: MNTP's ``token_logits``);
            ``None`` under gradient caching, whose forwards are chunked. Defaults to ``None``.
    """

    model: nn.Module
    batch: Mapping[str, Any]
    anchors: torch.Tensor
    anchor_rows: torch.Tensor | None
    outputs: Any = None

    def gather(self, rows: torch.Tensor) -> torch.Tensor:
        """``rows`` (``[B, ...]``, one per sentence of this process) over the global batch the objective sees:
        concatenated from every process in rank order when the views are gathered, else ``rows`` itself.

        A tensor that requires grad (an embedding from the live model) keeps its gradient path: every process's
        gradient of this process's rows flows back into them, as for the views."""
        if self.anchor_rows is None:
            return rows
        if rows.requires_grad:
            (gathered,), _ = gather_with_grad([rows])
            return gathered
        return gather_no_grad(rows)


@dataclass
class ProvidedInputs:
    """A provider's values for one step, by name.

    Args:
        objective: values over the global batch (:meth:`StepContext.gather`), for the objective's inputs.
        auxiliary: values over this process's rows, for the auxiliary terms' inputs.
    """

    objective: dict[str, Any] = field(default_factory=dict)
    auxiliary: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def per_sentence(cls, step: StepContext, **rows: torch.Tensor) -> ProvidedInputs:
        """Per-sentence values ``[B, ...]`` of this process's rows: as they are for the auxiliary terms, and
        gathered (:meth:`StepContext.gather`) for the objective."""
        return cls({name: step.gather(value) for name, value in rows.items()}, dict(rows))


@dataclass
class InputSettings:
    """A provider's own settings: subclass it as a dataclass whose fields (each with a default) are the keys the run's
    ``input_kwargs`` mapping takes for that provider (``{"negations": {"negation_backend": "rules"}}``), and set it
    as the provider's :attr:`InputProvider.Settings`. Check values in ``__post_init__`` (a one-line
    :class:`~hf_cse.errors.UsageError` naming the value and the valid ones). This base has no field: a provider that
    takes no settings."""

    def record(self) -> dict[str, Any]:
        """What the run reports of these settings, JSON-ready, ``{key: value}``; the one place a provider names them
        outside its class. It goes into every checkpoint's run settings (:mod:`hf_cse.training.record.run_settings`: a
        resume with other values is refused; a key that a checkpoint from before the provider recorded it lacks is not
        compared) and into the model card's training settings (local paths by their last component). Default: every
        field by its name."""
        return {item.name: getattr(self, item.name) for item in fields(self)}

    def check_inputs(self, names: Mapping[str, str]) -> None:
        """Check what these settings name outside the run (a model, a file), which the provider reads only once the
        model has loaded, before anything loads (``run_unsup.py``,
        :func:`~hf_cse.training.arguments.checks.check_input_paths`, for the providers the run builds): a typo is one
        line at once. ``names``: each setting as the run was given it, for messages (:func:`setting_names`). What a
        check reads whole (a paraphrase TSV's table) it may keep on these settings for its provider, which the run
        builds from them, so that the file is read once. Default: nothing to check.

        Raises:
            UsageError: naming the setting as given, the value, what is wrong and what it takes.
        """


class InputProvider:
    """Base class of the input providers; every hook is optional.

    Args:
        setup: what the provider is built from (the run's model, tokenizer, objective, arguments).
        settings: its own settings (:attr:`Settings`, from the run's ``input_kwargs[name]``); ``None`` (default): the
            defaults. A provider that takes none may define ``__init__(self, setup)`` alone.

    Attributes:
        name: the registry key (set by :func:`~hf_cse.registry.register_input_provider`).
        Settings: the dataclass of its settings (:class:`InputSettings`, the default: none).
        row_columns: per-sentence columns (added by :meth:`prepare`) the collator passes through as ``[B]``
            tensors.
        host_columns: per-sentence columns (added by :meth:`prepare`) the collator passes through as Python lists,
            which stay on the host: for looking rows up in host memory without reading the device back (a GPU
            synchronization).
        makes_views: the provider builds the positive views itself (:meth:`stack_views`); a run has one such view
            maker (:func:`~hf_cse.inputs.run_providers.run_input_providers`: the run's view augmentation where the
            objective requires none).
        views_made_with: how it makes them, for messages (``"two prompt templates"``); ``None``: by its name.
        embeddings: the names of the values :meth:`provide` gives that are embeddings of the trained model
            (``[B, D]``, the views' ``D``): Matryoshka truncates them with the views. Every other value
            (similarities, flags, weights) is passed whole at every truncation.
        takes_labelled_pairs: its values are right when the training data are labelled pairs (the in-batch
            candidates are the positives, hard negatives follow): a run on pairs refuses a provider without it.
    """

    name: ClassVar[str]
    Settings: ClassVar[type[InputSettings]] = InputSettings
    row_columns: ClassVar[tuple[str, ...]] = ()
    host_columns: ClassVar[tuple[str, ...]] = ()
    makes_views: ClassVar[bool] = False
    views_made_with: ClassVar[str | None] = None
    embeddings: ClassVar[tuple[str, ...]] = ()
    takes_labelled_pairs: ClassVar[bool] = False
    identity: dict[str, str | None] = {}
    """What :meth:`content_identity` gives: a provider that reads inputs assigns it (a new dict) when it reads them."""

    def __init__(self, setup: TrainingSetup, settings: InputSettings | None = None) -> None:
        self.setup = setup
        self.settings = settings if settings is not None else self.Settings()

    def prepare(self, dataset: Dataset) -> Dataset:
        """Once, before tokenization: the raw corpus (a ``"text"`` column) with this provider's columns added."""
        return dataset

    @property
    def token_groups(self) -> dict[str, tuple[str, SentenceTokenizer]]:
        """Token groups to add at tokenization: ``{group: (text column, tokenizer)}``."""
        return {}

    def provide(self, step: StepContext) -> ProvidedInputs:
        """Every step: the values this provider contributes, by name."""
        return ProvidedInputs()

    def stack_views(self, batch: Mapping[str, Any], num_views: int) -> dict[str, Any]:
        """Model inputs for ONE forward pass over the ``num_views`` views, rows stacked view by view
        (``[V*B, L]`` tensors, and host values such as ``template_width``); only for providers that set
        :attr:`makes_views`."""
        raise NotImplementedError(f"The {self.name!r} input provider does not make views.")

    def content_identity(self) -> dict[str, str | None]:
        """What identifies, by content, the inputs this provider read beyond the corpus and its settings (a file, a
        model, a lexicon): ``{key: SHA-256 hex, or None where there was none}``
        (:mod:`hf_cse.content_identity`), computed once, when it read them (:meth:`prepare`), so that an input edited
        in place (same path, same size) is another input. The run records it beside :meth:`InputSettings.record`
        in every checkpoint's run settings: a resume whose inputs differ is refused, naming the key. Keys must be
        the provider's own (a key another provider or the run reports is refused). Default: :attr:`identity`, which
        is empty until the provider assigns it (nothing read)."""
        return self.identity

    def save_state(self, checkpoint: Path) -> None:
        """Write what the provider carries from step to step (a queue, an EMA model) into the ``checkpoint`` folder
        being staged, so that a resumed run equals a straight one; the checkpoint's manifest covers the files. Called
        on the main process only (every process must hold the same state). Default: nothing to save."""

    def load_state(self, checkpoint: Path) -> None:
        """Read back what :meth:`save_state` wrote, on every process, before a resumed run's first step. Default:
        nothing to load."""


def from_host(values: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``values`` (on the host) on ``device``, queued rather than waited for: a CUDA copy goes from pinned memory,
    so the host never stalls behind the device's queue of kernels (a GPU synchronization)."""
    if device.type == "cuda":
        values = values.pin_memory()
    return values.to(device, non_blocking=True)


def pad_and_concatenate(batches: list[Mapping[str, torch.Tensor]], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Stack token batches of different lengths along the batch axis, right-padding to the longest."""
    length = max(batch["input_ids"].shape[1] for batch in batches)
    result = {}
    for key in batches[0]:
        fill = pad_token_id if key == "input_ids" else 0
        result[key] = torch.cat(
            [nn.functional.pad(batch[key], (0, length - batch[key].shape[1]), value=fill) for batch in batches]
        )
    return result


def provider_settings(cls: type[InputProvider], arguments: Mapping[str, Any]) -> InputSettings:
    """The settings of provider ``cls`` in a run with training ``arguments`` (``CSETrainingArguments`` as a mapping,
    or the ``training_args.json`` a checkpoint saved them in): ``arguments["input_kwargs"][cls.name]`` into
    :attr:`~InputProvider.Settings`. So a run's provider and a card re-rendered from a checkpoint read the same
    settings.

    Raises:
        UsageError: a key the provider does not take (the message lists those it takes), or a value the settings
            refuse.
    """
    given = (arguments.get("input_kwargs") or {}).get(cls.name) or {}
    accepted = [item.name for item in fields(cls.Settings)]
    unknown = sorted(set(given) - set(accepted))
    if unknown:
        takes = f"it takes: {', '.join(accepted)}" if accepted else "it takes none"
        raise UsageError(f"Input provider {cls.name!r} got unknown settings {unknown} in input_kwargs; {takes}.")
    return cls.Settings(**given)


def setting_names(cls: type[InputProvider]) -> dict[str, str]:
    """``{setting: how the run was given it}`` for provider ``cls``'s settings: its place in ``input_kwargs``
    (``input_kwargs complementary_similarities.model_name_or_path``); for messages."""
    return {item.name: f"input_kwargs {cls.name}.{item.name}" for item in fields(cls.Settings)}


def build_step_inputs(
    providers: Iterable[InputProvider],
    step: StepContext,
    views: list[torch.Tensor],
    local_views: list[torch.Tensor],
    bare_model: nn.Module,
    num_hard_negatives: int = 0,
) -> tuple[StepInputs, StepInputs]:
    """The step's two containers: the objective's (the gathered ``views``, ``anchor_rows``, the providers' global
    values) and the auxiliary terms' (this process's ``local_views``, ``bare_model``, their local values). The last
    ``num_hard_negatives`` views are the labelled pairs' hard negatives, the views between them and view ``1`` the
    extra positive views; each provider's declared :attr:`~InputProvider.embeddings` are marked. An objective without
    positive views (MNTP: one view) gets ``positives=None``.

    Raises:
        UsageError: two providers give a value of the same name.
    """
    values: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    embeddings: set[str] = set()
    given_by: dict[str, str] = {}
    for provider in providers:
        provided = provider.provide(step)
        for name in {*provided.objective, *provided.auxiliary}:
            if given_by.setdefault(name, provider.name) != provider.name:
                raise UsageError(
                    f"Input providers {given_by[name]!r} and {provider.name!r} both give {name!r}; rename one."
                )
        values[0].update(provided.objective)
        values[1].update(provided.auxiliary)
        embeddings.update(provider.embeddings)
    sentence_views = len(views) - num_hard_negatives
    global_inputs = StepInputs(
        views[0],
        views[1] if sentence_views > 1 else None,
        anchor_rows=step.anchor_rows,
        extra_positives=views[2:sentence_views],
        hard_negatives=views[sentence_views:],
        embeddings=embeddings & set(values[0]),
        **values[0],
    )
    local_inputs = StepInputs(
        local_views[0],
        local_views[1] if sentence_views > 1 else None,
        bare_model,
        extra_positives=local_views[2:sentence_views],
        hard_negatives=local_views[sentence_views:],
        embeddings=embeddings & set(values[1]),
        **values[1],
    )
    return global_inputs, local_inputs
