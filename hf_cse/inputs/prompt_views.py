"""``prompt_template_views``: the positive pair is the same sentence under two prompt templates (OssCSE, after
PromptBERT): view 1 under the model's own template, view 2 under the objective's ``second_prompt_template``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import torch

from ..device_copies import DeviceCopies
from ..errors import UsageError
from ..modeling.configuration_cse import PoolingConfig
from ..modeling.tokenization import SentenceTokenizer
from ..objectives.promptbert import PROMPTBERT_SECOND_TEMPLATE, PROMPTEOL_SECOND_TEMPLATE
from ..registry import register_input_provider
from .base import SENTENCES, InputProvider, TrainingSetup, pad_and_concatenate

SECOND_VIEW = "second_view"
"""The token group of the sentences under the second template."""


def second_template_pooling(setup: TrainingSetup, template: str) -> PoolingConfig:
    """The model's pooling with the objective's second prompt ``template`` in place of its own, where the pooler keeps
    it (:meth:`~hf_cse.modeling.poolers.Pooler.with_prompt_template`: ``mask`` in ``prompt_template``,
    ``prompt_last_token`` in its own settings).

    Raises:
        UsageError: the pooler refuses ``template`` (a ``[MASK]`` in it for ``prompt_last_token``, none for ``mask``,
            no ``{sentence}``): one line naming the objective's setting and a template that fits the pooler.
    """
    pooling = setup.model.pooling
    pooler = pooling.get_pooler()
    try:
        return pooler.with_prompt_template(pooling, template)
    except ValueError as err:  # the pooler names only its own template setting, which the user did not set
        example = PROMPTBERT_SECOND_TEMPLATE if pooler.needs_mask_token else PROMPTEOL_SECOND_TEMPLATE
        raise UsageError(
            f"Objective {setup.objective.name!r}'s second_prompt_template (--objective_kwargs) does not fit "
            f"pooler={pooling.pooler!r}: {err} One that does: --objective_kwargs "
            f"'{json.dumps({'second_prompt_template': example})}'."
        ) from err


@register_input_provider("prompt_template_views")
class PromptTemplateViews(InputProvider):
    """Tokenizes every sentence a second time under ``setup.objective.second_prompt_template`` and stacks both
    templates' inputs as the two views. With ``template_denoising`` each view subtracts its own template's bias: the
    rows' template lengths go to the model with the longest template's width, known here on the host (the pooler
    would otherwise read it back from the device at every forward).

    Raises:
        UsageError: the objective has no ``second_prompt_template``, or the model's pooler refuses it (a ``[MASK]``
            in it for ``prompt_last_token``, none for ``mask``, no ``{sentence}``): one line naming the setting and
            one that fits the pooler.
    """

    makes_views = True
    views_made_with = "two prompt templates"

    def __init__(self, setup: TrainingSetup) -> None:
        super().__init__(setup)
        objective = setup.objective
        template = objective.get_config_dict().get("second_prompt_template")
        if not isinstance(template, str):
            raise UsageError(f"Objective {objective.name!r} needs a second_prompt_template for its second view.")
        pooling = setup.model.pooling
        second_pooling = second_template_pooling(setup, template)
        self.second_tokenizer = SentenceTokenizer(setup.tokenizer, second_pooling, setup.args.max_seq_length)
        self.pad_token_id = setup.tokenizer.pad_token_id
        self.template_lengths = self.template_width = self._template_lengths = None
        if pooling.template_denoising:
            pairs = [[p.template_prefix_length, p.template_suffix_length] for p in (pooling, second_pooling)]
            self.template_lengths = torch.tensor(pairs)
            self.template_width = int(self.template_lengths.sum(dim=1).max())
            self._template_lengths = DeviceCopies(self.template_lengths)

    @property
    def token_groups(self) -> dict[str, tuple[str, SentenceTokenizer]]:
        return {SECOND_VIEW: ("text", self.second_tokenizer)}

    def stack_views(self, batch: Mapping[str, Any], num_views: int) -> dict[str, Any]:
        if num_views != 2:
            raise UsageError(f"Two prompt templates make 2 views, not {num_views} (num_positive_views must be 1).")
        sentences = batch[SENTENCES]
        stacked = pad_and_concatenate([sentences, batch[SECOND_VIEW]], self.pad_token_id)
        if self._template_lengths is not None:
            lengths = self._template_lengths.on(sentences["input_ids"].device)
            stacked["template_lengths"] = lengths.repeat_interleave(len(sentences["input_ids"]), dim=0)
            stacked["template_width"] = self.template_width
        return stacked
