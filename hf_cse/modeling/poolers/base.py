"""What a pooler is: the class every pooler subclasses, the tensors the model hands it, and the name lookup.

A pooler turns the encoder's hidden states into one embedding per sentence. Everything that depends on which pooler a
model uses is a declaration of its class, read where it is needed, never a list of names kept elsewhere:

- :meth:`Pooler.pool`: the embedding, in :meth:`CSEModel.forward <hf_cse.modeling.modeling_cse.CSEModel.forward>`;
- :attr:`Pooler.needs_all_layers`: whether the encoder runs with ``output_hidden_states=True``;
- :attr:`Pooler.mlp_head`: whether SimCSE's MLP head sits on its output (the ``cls`` pooler's);
- :attr:`Pooler.uses_prompt_template` and :meth:`Pooler.prompt_template`: whether sentences are wrapped in a prompt
  template, and which (:class:`~hf_cse.modeling.tokenization.SentenceTokenizer`); :attr:`Pooler.needs_mask_token`:
  whether the template holds the tokenizer's mask token;
- :attr:`Pooler.leaves_out_instruction`: whether a model with an instruction before its anchors may use it;
- :attr:`Pooler.needs_bidirectional_attention`: whether the embedding is meaningless under causal attention (the
  first token's state), so that a decoder is refused (:func:`~hf_cse.modeling.backbone.check_attention`);
- :attr:`Pooler.tokenizes_prompt_whole` and :attr:`Pooler.template_writes_special_tokens`: how a template's prompt
  becomes token ids; :meth:`Pooler.rewrite_sentence`: a rewrite of the sentence before it (PromptEOL's, at
  inference); :meth:`Pooler.sentence_span`: which tokens around the sentence a mean leaves out (LLM2Vec's BOS);
- :attr:`Pooler.sentence_transformers_mode` and :meth:`Pooler.sentence_transformers_pooling`: sentence-transformers'
  ``Pooling`` mode that computes the same embedding, for ``modules.json``
  (:mod:`hf_cse.export.sentence_transformers_files`), or ``None``;
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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

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
            that mixes two templates (``mask`` pooler's template denoising), or the tokens a mean leaves out around
            each row's sentence where some rows begin with an instruction (``PoolingConfig.instruction``: anchors
            with it, positives without); ``None`` otherwise.
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


def real_token_ranks(attention_mask: torch.Tensor) -> torch.Tensor:
    """Each position's index among its row's real tokens (``0`` for the first real token, whichever side the row is
    padded on; padding gets the rank of the real token before it, or ``-1``): ``[B, L] -> [B, L]``."""
    return attention_mask.long().cumsum(dim=1) - 1


def span_mask(attention_mask: torch.Tensor, prefix: int | torch.Tensor, suffix: int | torch.Tensor) -> torch.Tensor:
    """``attention_mask`` ``[B, L]`` with each row's first ``prefix`` and last ``suffix`` real tokens masked out too
    (ints, or ``[B, 1]`` per row): the sentence's own tokens between a prompt's (or the tokenizer's special tokens')
    prefix and suffix, on either padding side, computed on the device."""
    ranks = real_token_ranks(attention_mask)
    lengths = attention_mask.long().sum(dim=1, keepdim=True)
    return attention_mask.bool() & (ranks >= prefix) & (ranks < lengths - suffix)


def saved_template_lengths(pooling: PoolingConfig, user: str) -> tuple[int, int]:
    """``pooling``'s ``(template_prefix_length, template_suffix_length)``, which ``user`` (for the message) reads."""
    prefix, suffix = pooling.template_prefix_length, pooling.template_suffix_length
    if prefix is None or suffix is None:
        raise ValueError(
            f"{user} needs the template's token lengths; hf_cse.modeling.tokenization.SentenceTokenizer sets them."
        )
    return prefix, suffix


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
    tokenizes_prompt_whole: ClassVar[bool] = False
    """For a pooler that :attr:`uses_prompt_template`: whether the filled prompt (the template with the sentence in
    it, stripped) is tokenized in one call, as PromptEOL's code does (``prompt_last_token``), or the template's
    prefix, the sentence and its suffix are tokenized apart and their ids joined, as PromptBERT's training code does
    (``mask``; the default). The two differ where the tokenizer merges across a joint: a SentencePiece tokenizer
    gives ``▁"A`` for ``"A`` in one piece and ``▁" ▁A`` in pieces, a byte-level BPE ``."`` and ``. "``; BERT's
    WordPiece splits at every punctuation mark, so on the templates' quotes both give the same ids
    (``tests/test_prompt_tokenization.py``). Truncation shortens only the sentence either way
    (:class:`~hf_cse.modeling.tokenization.SentenceTokenizer`)."""
    template_writes_special_tokens: ClassVar[bool] = False
    """For a pooler that :attr:`uses_prompt_template` tokenized in pieces: whether the template writes the special
    tokens itself (``[BOS]`` and ``[EOS]`` in it become the tokenizer's own, empty where it has none) and each piece is
    tokenized without the tokenizer's special tokens, as the Echo embeddings' released code does (its templates begin
    with ``<s>``, "it isn't added for you"); ``False`` (default): the tokenizer's own special tokens frame the prompt
    (``[CLS]`` ... ``[SEP]``, a BOS), as PromptBERT's code frames it."""
    leaves_out_instruction: ClassVar[bool] = False
    """Whether :meth:`pool` averages each row's tokens between :attr:`PoolerInputs.template_lengths` when given, so
    that an instruction before the sentence (``PoolingConfig.instruction``) is left out, as LLM2Vec's ``embed_mask``
    leaves it out (``avg``, ``weighted_mean``); a model with an instruction needs such a pooler."""
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
    sentence_transformers_kwargs: ClassVar[Mapping[str, Any]] = {}
    """The ``pooler_kwargs`` under which the pooler computes its :attr:`sentence_transformers_mode` whatever the
    tokenizer: what a checkpoint sentence-transformers saved is loaded with (``avg``: ``{"tokens": "all"}``, as
    sentence-transformers' ``mean`` counts a decoder's BOS; :func:`~hf_cse.modeling.saved_pooling.
    plain_checkpoint_pooling`). Default: none."""
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

    def sentence_span(self, lead: int, trail: int) -> tuple[int, int] | None:
        """For a pooler without a prompt template: how many of each row's first and last tokens its mean leaves out,
        given the ``lead`` and ``trail`` special tokens the tokenizer puts around a sentence (Llama's BOS: 1 and 0;
        BERT's ``[CLS]``/``[SEP]``: 1 and 1), or ``None`` for none. :class:`~hf_cse.modeling.tokenization.
        SentenceTokenizer` stores the answer in ``PoolingConfig.template_prefix_length`` and
        ``template_suffix_length``, where :meth:`pool` reads it, as it stores a template's lengths (from the
        tokenizer, whenever sentences are tokenized for the model: training, ``SentenceEncoder``). Default:
        ``None``."""
        return None

    def sentence_transformers_pooling(self, pooling: PoolingConfig) -> str | None:
        """sentence-transformers' ``Pooling`` mode that computes this pooler's embedding under ``pooling``, or
        ``None`` (the saved folder then makes sentence-transformers fail in one line). Default:
        :attr:`sentence_transformers_mode`; a pooler whose settings decide (a mean that leaves out the BOS, which
        sentence-transformers' ``mean`` averages) overrides it."""
        return self.sentence_transformers_mode

    def rewrite_sentence(self, sentence: str, inference: bool) -> str:
        """The text this pooler encodes for ``sentence``, before any template (``inference``: encoding outside
        training, :class:`~hf_cse.modeling.encoder.SentenceEncoder`: evaluation, ``encode``). Default: the sentence
        as given; ``prompt_last_token`` may apply PromptEOL's evaluation rewrite at inference."""
        return sentence

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


class OwnTemplatePooler(Pooler):
    """A pooler that :attr:`~Pooler.uses_prompt_template` and keeps its template among its own settings
    (``pooler_kwargs``' ``template``, saved in ``config.json``): ``prompt_last_token``, ``echo``."""

    uses_prompt_template = True
    sentence_copies: ClassVar[int] = 1
    """How many times the template must hold ``{sentence}``."""

    def __init__(self, template: str) -> None:
        found = template.count("{sentence}") if isinstance(template, str) else "not a string"
        if found != self.sentence_copies:
            times = {1: "once", 2: "twice"}[self.sentence_copies]
            raise ValueError(
                f"{self.name}'s template {template!r} must contain {{sentence}} exactly {times} (found {found})."
            )
        self.template = template

    def prompt_template(self, pooling: PoolingConfig) -> str:
        return self.template

    def with_prompt_template(self, pooling: PoolingConfig, template: str) -> PoolingConfig:
        return dataclasses.replace(pooling, pooler_kwargs={**pooling.pooler_kwargs, "template": template})


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
