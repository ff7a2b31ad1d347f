"""What a pooler is: the class every pooler subclasses, the tensors the model hands it, and the name lookup.

A pooler turns the encoder's hidden states into one embedding per sentence. Everything that depends on which pooler a
model uses is a declaration of its class, read where it is needed, never a list of names kept elsewhere:

- :meth:`Pooler.pool`: the embedding, in :meth:`CSEModel.forward <hf_cse.modeling.modeling_cse.CSEModel.forward>`;
- :attr:`Pooler.needs_all_layers`: whether the encoder runs with ``output_hidden_states=True``;
- :attr:`Pooler.mlp_head`: whether SimCSE's MLP head sits on its output (the ``cls`` pooler's);
- :attr:`Pooler.uses_prompt_template` and :meth:`Pooler.prompt_template`: whether sentences are wrapped in a prompt
  template, and which (:class:`~hf_cse.modeling.tokenization.SentenceTokenizer`); :attr:`Pooler.needs_mask_token`:
  whether the template holds the tokenizer's mask token;
- :attr:`Pooler.needs_bidirectional_attention`: whether the embedding is meaningless under causal attention (the
  first token's state), so that a decoder is refused (:func:`~hf_cse.modeling.backbone.check_attention`);
- :attr:`Pooler.sentence_transformers_mode`: sentence-transformers' ``Pooling`` mode that computes the same
  embedding, for ``modules.json`` (:mod:`hf_cse.export.sentence_transformers_files`), or ``None``;
- :meth:`Pooler.describe`, :meth:`Pooler.transformers_code` and :attr:`Pooler.citations`: what the model card says
  the embedding is, the plain-transformers code that computes it, and the papers it comes from.

A user's pooler registers from any module; ``config.json`` stores its name, so the module must be imported before a
checkpoint that uses it is loaded::

    import torch
    from hf_cse import Pooler, PoolerInputs, register_pooler

    @register_pooler("max_tokens")
    class MaxTokens(Pooler):
        \"\"\"The maximum over the sentence's tokens of each dimension of the last layer.\"\"\"

        sentence_transformers_mode = "max"
        description = "the maximum over the sentence's tokens of the last layer"

        def pool(self, inputs: PoolerInputs, model) -> torch.Tensor:
            padding = inputs.attention_mask.unsqueeze(-1) == 0
            return inputs.last_hidden_state.masked_fill(padding, float("-inf")).amax(dim=1)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from ...errors import echo
from ...registry import POOLERS

if TYPE_CHECKING:
    from ..configuration_cse import PoolingConfig
    from ..modeling_cse import CSEModel


@dataclass(frozen=True)
class PoolerInputs:
    """What :meth:`CSEModel.forward <hf_cse.modeling.modeling_cse.CSEModel.forward>` hands a pooler.

    Attributes:
        last_hidden_state: the encoder's last layer, ``[B, L, H]``.
        attention_mask: ``[B, L]``, 1 for a real token, 0 for padding.
        hidden_states: every layer's output, ``num_hidden_layers + 1`` tensors ``[B, L, H]`` (the embeddings' output
            first), when the pooler :attr:`~Pooler.needs_all_layers`; else ``None``.
        input_ids: ``[B, L]``, or ``None`` when the model got ``inputs_embeds`` alone.
        token_type_ids: ``[B, L]`` as the model got them, or ``None``.
        template_lengths: ``[B, 2]`` per-row ``(prefix, suffix)`` token counts of the prompt template, for a batch
            that mixes two templates (``mask`` pooler's template denoising); ``None`` otherwise.
        template_width: the largest ``prefix + suffix`` of ``template_lengths``, when the caller knows it on the host;
            ``None``: read back from the device (a synchronization, and a graph break under ``torch.compile``).
    """

    last_hidden_state: torch.Tensor
    attention_mask: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None
    input_ids: torch.Tensor | None = None
    token_type_ids: torch.Tensor | None = None
    template_lengths: torch.Tensor | None = None
    template_width: int | None = None


def masked_mean(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean over non-padding tokens: ``[B, L, H], [B, L] -> [B, H]``."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


class Pooler:
    """One way to turn an encoder's hidden states into a sentence embedding; subclass it, implement :meth:`pool`,
    and register it with :func:`hf_cse.register_pooler`.

    A pooler holds no weights: the settings it reads (``normalize`` is applied after it by the model) are the model's
    :class:`~hf_cse.modeling.configuration_cse.PoolingConfig`, ``model.pooling``, which ``config.json`` stores.
    Instances are made per call (``PoolingConfig.get_pooler()``) with ``PoolingConfig.pooler_kwargs``: a pooler with
    settings of its own takes them as keyword arguments of ``__init__`` (JSON values; ``--pooler_kwargs``): among
    the built-in ones, ``mask`` takes ``denoise_at_inference`` and ``prompt_last_token`` its ``template``.
    """

    name: ClassVar[str] = ""
    """The registered name (set by :func:`~hf_cse.register_pooler`): what ``--pooler`` and ``config.json`` hold."""
    needs_all_layers: ClassVar[bool] = False
    """Whether :meth:`pool` reads :attr:`PoolerInputs.hidden_states` (every layer): the encoder then returns them,
    which costs memory; the last layer alone otherwise."""
    mlp_head: ClassVar[bool] = False
    """Whether SimCSE's MLP head (dense + tanh, ``mlp.*`` weights of :class:`~hf_cse.modeling.modeling_cse.CSEModel`)
    is applied to the pooled state: always in training, and at inference unless ``PoolingConfig.mlp_only_train``."""
    uses_prompt_template: ClassVar[bool] = False
    """Whether sentences are wrapped in :meth:`prompt_template` before encoding (the ``mask`` pooler's PromptBERT
    template, the ``prompt_last_token`` pooler's PromptEOL template); only such a pooler may use
    ``template_denoising``."""
    needs_mask_token: ClassVar[bool] = False
    """Whether :meth:`prompt_template` holds ``[MASK]`` once, which becomes the tokenizer's own mask token (the
    ``mask`` pooler reads its state); a tokenizer without a mask token is then refused in one line."""
    needs_bidirectional_attention: ClassVar[bool] = False
    """Whether the embedding reads a position that, under causal attention, cannot see the whole sentence (the first
    token's state: ``cls``). Such a pooler is refused on a model whose attention is causal (a decoder LLM without
    ``--bidirectional``), which a probe of the loaded model decides, not a list of architectures."""
    sentence_transformers_mode: ClassVar[str | None] = None
    """sentence-transformers' ``Pooling`` mode computing the same embedding from the last layer (``"cls"``,
    ``"mean"``, ``"max"``, ``"mean_sqrt_len_tokens"``, ``"weightedmean"``, ``"lasttoken"``); the MLP head and
    normalization become modules after it. ``None`` (default): sentence-transformers cannot express the pooler, no
    ``modules.json`` is written (it would silently mean-pool) and the card says so."""
    citations: ClassVar[tuple[str, ...]] = ()
    """BibTeX of the papers the pooler comes from, listed on the card after the objective's; default none."""
    description: ClassVar[str] = ""
    """What the embedding is, for the card ("the mean of the last layer over the sentence's tokens"); read by the
    default :meth:`describe`."""

    def pool(self, inputs: PoolerInputs, model: CSEModel) -> torch.Tensor:
        """The sentence embeddings ``[B, H]`` (before the MLP head and normalization, which the model applies).

        Args:
            inputs: the encoder's hidden states and the batch's masks and ids.
            model: the model; ``model.pooling`` holds the settings, ``model.training`` the mode, and
                ``model.encoder_model`` the encoder, for a pooler that runs it again (template denoising).
        """
        raise NotImplementedError(f"{type(self).__qualname__} must implement pool(inputs, model).")

    def check(self, pooling: PoolingConfig) -> None:
        """Raise ``ValueError`` (one line, naming the value) for settings this pooler cannot work with; called when a
        :class:`~hf_cse.modeling.configuration_cse.PoolingConfig` naming it is made. Default: any settings."""

    def prompt_template(self, pooling: PoolingConfig) -> str | None:
        """The template sentences are wrapped in (``{sentence}`` marks the sentence, once), for a pooler that
        :attr:`uses_prompt_template`; ``None`` otherwise. Default: ``pooling.prompt_template`` for such a pooler."""
        return pooling.prompt_template if self.uses_prompt_template else None

    def with_prompt_template(self, pooling: PoolingConfig, template: str) -> PoolingConfig:
        """``pooling`` with :meth:`prompt_template` replaced by ``template`` (a second view's template: PromptBERT,
        SNCSE, OssCSE). Default: ``pooling.prompt_template`` replaced; a pooler keeping its template among its own
        settings overrides this."""
        return dataclasses.replace(pooling, prompt_template=template)

    def describe(self, pooling: PoolingConfig) -> str:
        """What the card says the embedding is, a Markdown phrase; default :attr:`description`, else the class."""
        return self.description or f"the output of `{type(self).__module__}.{type(self).__qualname__}`"

    def transformers_code(self, pooling: PoolingConfig) -> str | None:
        """Python lines computing ``embeddings`` ``[B, H]`` from ``outputs`` (the encoder's output on ``batch``,
        ``output_hidden_states=True`` when :attr:`needs_all_layers`) and ``batch`` (the tokenizer's output), for the
        card's plain-transformers snippet. The MLP head and normalization follow it there. ``None`` (default): the
        card gives no such snippet and points at hf_cse."""
        return None


def pooler_class(name: str) -> type[Pooler]:
    """The pooler registered as ``name``.

    Raises:
        ValueError: an unknown name (a ValueError, like PoolingConfig's other checks; the command lines print it as
            one line); the message lists the registered poolers in their order, and names the one computing the
            sentence-transformers pooling mode ``name`` is (``mean`` -> ``avg``). (A checkpoint
            naming an unregistered pooler is refused earlier, by ``PoolingConfig.from_model_config``, with how to
            import the module that registers it.)
    """
    if name not in POOLERS:
        # sentence-transformers' names ("mean", "lasttoken") are what its users type first.
        same_mode = next(
            (known for known, pooler in POOLERS.items() if pooler.sentence_transformers_mode == name), None
        )
        alias = f" (sentence-transformers' name: hf_cse's is {same_mode})" if same_mode else ""
        raise ValueError(f"Unknown pooler {echo(name)}{alias}; valid poolers are: {', '.join(POOLERS)}.")
    return POOLERS[name]
