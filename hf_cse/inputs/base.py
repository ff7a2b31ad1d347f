"""Input providers: what an objective or auxiliary term needs beyond the sentences' two views.

A provider has two steps. :meth:`InputProvider.prepare` runs once on the raw corpus (a ``"text"`` column) before
tokenization: it may add columns (a negation per sentence, a sentence number) and name text columns to tokenize as
extra token groups. :meth:`InputProvider.provide` runs every training step on the collated batch: it encodes its
groups or looks values up and returns them as keywords of the objective (global batch) and fields of
:class:`~hf_cse.objectives.auxiliary.AuxiliaryInputs` (this process's rows).

Objectives and auxiliary terms name the providers they need (``required_inputs``); the trainer builds each named
provider once from the :class:`TrainingSetup` and loops over them. Providers are registered by name
(:func:`~hf_cse.registry.register_input_provider`), so a user's provider plugs in like the built-ins:

- ``prompt_template_views`` (:mod:`~hf_cse.inputs.prompt_views`): the second view under a second prompt template;
- ``negations_and_paraphrases`` (:mod:`~hf_cse.inputs.negation_pairs`): each sentence's negation and paraphrase;
- ``complementary_similarities`` (:mod:`~hf_cse.inputs.complementary`): a frozen model's similarities.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from datasets import Dataset
from torch import nn
from transformers import PreTrainedTokenizerBase

from ..registry import INPUT_PROVIDERS
from ..text import SentenceTokenizer

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
class StepInputs:
    """One training step as a provider sees it.

    Args:
        model: the model to call for forward passes; possibly wrapped (DDP), so calls through it sync gradients.
        batch: the collated batch: token groups (:data:`TokenGroups`) and row columns (``[B]`` tensors).
        anchors: this process's first-view embeddings ``[B, D]``.
        anchor_rows: this process's rows in the views gathered from every process (``None`` without gathering).
    """

    model: nn.Module
    batch: Mapping[str, Any]
    anchors: torch.Tensor
    anchor_rows: torch.Tensor | None


@dataclass
class ProvidedInputs:
    """A provider's values for one step.

    Args:
        objective: keywords of the objective's ``forward``, over the (gathered) global batch.
        auxiliary: fields of :class:`~hf_cse.objectives.auxiliary.AuxiliaryInputs`, over this process's rows.
    """

    objective: dict[str, Any] = field(default_factory=dict)
    auxiliary: dict[str, Any] = field(default_factory=dict)


class InputProvider:
    """Base class of the input providers; every hook is optional.

    Attributes:
        name: the registry key (set by :func:`~hf_cse.registry.register_input_provider`).
        row_columns: per-sentence columns (added by :meth:`prepare`) the collator passes through as ``[B]``
            tensors.
        makes_views: the provider builds the positive views itself (:meth:`stack_views`) instead of the run's view
            augmentation.
    """

    name: ClassVar[str]
    row_columns: ClassVar[tuple[str, ...]] = ()
    makes_views: ClassVar[bool] = False

    def __init__(self, setup: TrainingSetup) -> None:
        self.setup = setup

    def prepare(self, dataset: Dataset) -> Dataset:
        """Once, before tokenization: the raw corpus (a ``"text"`` column) with this provider's columns added."""
        return dataset

    @property
    def token_groups(self) -> dict[str, tuple[str, SentenceTokenizer]]:
        """Token groups to add at tokenization: ``{group: (text column, tokenizer)}``."""
        return {}

    def provide(self, step: StepInputs) -> ProvidedInputs:
        """Every step: the values this provider contributes."""
        return ProvidedInputs()

    def stack_views(self, batch: Mapping[str, Any], num_views: int) -> dict[str, torch.Tensor]:
        """Model inputs for ONE forward pass over the ``num_views`` views, rows stacked view by view
        (``[V*B, L]``); only for providers that set :attr:`makes_views`."""
        raise NotImplementedError(f"The {self.name!r} input provider does not make views.")


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


def build_input_providers(names: Iterable[str], setup: TrainingSetup) -> dict[str, InputProvider]:
    """``{name: provider}`` for each registered provider in ``names`` (duplicates built once, order kept)."""
    return {name: INPUT_PROVIDERS[INPUT_PROVIDERS.check(name)](setup) for name in dict.fromkeys(names)}
