"""Sentence-embedding heads over any ``AutoModel`` encoder.

:class:`CSEModel` holds the encoder under the encoder's own ``base_model_prefix`` (``bert``, ``roberta``, ...), the
way ``BertForSequenceClassification`` holds ``bert``. Its checkpoint is therefore an ordinary checkpoint of the
encoder's model type: ``AutoModel.from_pretrained(out_dir)`` strips the prefix and returns the trained encoder. No
``auto_map`` and no ``trust_remote_code``.

The encoder is built as ``AutoModel`` builds it, its own pooler (BERT's NSP head) included but frozen, so that an
exported checkpoint holds exactly the weights ``AutoModel`` expects. SimCSE's MLP head (``mlp.*``) is the one weight
``AutoModel`` does not know: when it is used in training only (``mlp_only_train``) it is training state, like the
optimizer's, kept in the Trainer's ``checkpoint-N`` folders and left out of exported models
(:meth:`CSEModel.inference_state_dict`). So is a token head (``token_head.*``: MNTP's LM head, which
:mod:`hf_cse.inputs.masked_next_tokens` attaches for training).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel
from transformers.utils import CONFIG_NAME, ModelOutput
from transformers.utils.output_capturing import maybe_install_capturing_hooks

from ..atomic_files import staged_publish
from ..errors import echo
from ..sources import PIP_MODEL_SCHEME, resolve_model_path, work_offline_if_hub_unreachable
from .attention_kernels import attention_support
from .backbone import check_attention, declares_bidirectional_attention, keep_4bit_weights_trainable
from .configuration_cse import PoolingConfig
from .packing import PackedBatch, padded_position_ids
from .poolers import PoolerInputs, masked_mean
from .positions import default_position_ids

__all__ = [
    "MLP_HEAD_PREFIX",
    "TOKEN_HEAD_PREFIX",
    "CSEModel",
    "CSEModelOutput",
    "MLPHead",
    "default_position_ids",
    "masked_mean",
]


@dataclass
class CSEModelOutput(ModelOutput):
    """Output of :class:`CSEModel`.

    Args:
        embeddings (`torch.FloatTensor` of shape `(batch_size, hidden_size)`):
            pooled sentence embeddings (L2-normalized at inference if the pooling config says so).
        last_hidden_state (`torch.FloatTensor` of shape `(batch_size, sequence_length, hidden_size)`):
            the encoder's last layer.
        token_logits (`torch.FloatTensor` of shape `(num_positions, vocab_size)`, *optional*):
            the token head's logits at the ``token_positions`` the forward was given.
    """

    embeddings: torch.FloatTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    token_logits: torch.FloatTensor | None = None


class MLPHead(nn.Module):
    """SimCSE's projection head over the ``[CLS]`` state: dense + tanh, ``[B, H] -> [B, H]``."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = nn.Tanh()

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(features))


def pooling_type_error(where: str, argument: str, value: object) -> TypeError:
    """The one-line error of a pooler given to ``where`` as ``argument=value`` (a pooler's name, say) instead of a
    :class:`PoolingConfig`: it names the two calls that take one."""
    name = repr(value) if isinstance(value, str) else "..."
    return TypeError(
        f"{where} got {argument}={echo(value)}: pass pooling=hf_cse.PoolingConfig(pooler={name}), or load with "
        f"hf_cse.SentenceEncoder.from_pretrained(..., pooler={name})."
    )


#: Prefix of the weights of SimCSE's MLP head in a :class:`CSEModel`'s state dict.
MLP_HEAD_PREFIX = "mlp."
#: Prefix of the weights of a training-only token head (:attr:`CSEModel.token_head`) in its state dict.
TOKEN_HEAD_PREFIX = "token_head."


def _freeze_encoder_pooler(encoder: PreTrainedModel) -> None:
    """Freeze the encoder's own pooler (BERT's NSP head), where it has one: hf_cse's poolers never use it (SimCSE's
    MLP is a separate head), but ``AutoModel`` loads it, so it is kept with its pretrained weights and saved
    unchanged; frozen, every trainable parameter stays in the gradient path (DDP needs that)."""
    pooler = getattr(encoder, "pooler", None)
    if isinstance(pooler, nn.Module):
        pooler.requires_grad_(False)


class CSEModel(PreTrainedModel):
    """An encoder plus the pooler of :class:`~hf_cse.modeling.configuration_cse.PoolingConfig`.

    ``config`` is the encoder's own config (``BertConfig``, ``RobertaConfig``, ...); the pooling settings are
    stored in it under ``config.hf_cse``. Build a fresh head from a pretrained encoder with
    ``CSEModel.from_pretrained(path, pooling=PoolingConfig(...))``; reload a trained one with
    ``CSEModel.from_pretrained(out_dir)``.
    """

    config_class = PretrainedConfig
    supports_gradient_checkpointing = True

    def __init__(self, config: PretrainedConfig, pooling: PoolingConfig | None = None) -> None:
        # transformers picks the attention kernel from the model's support flags before anything is built: a CSEModel
        # supports what its encoder does (Gemma 2 has no SDPA and gets eager; flash and flex attention where the
        # encoder has them), instead of one fixed answer for every architecture.
        for flag, supported in attention_support(config).items():
            setattr(self, flag, supported)
        if pooling is not None and not isinstance(pooling, PoolingConfig):  # a str has no save_to_model_config
            raise pooling_type_error("CSEModel", "pooling", pooling)
        super().__init__(config)
        self.pooling = pooling or PoolingConfig.from_model_config(config) or PoolingConfig()
        self.pooling.save_to_model_config(config)
        # The encoder exactly as AutoModel builds it, so a saved checkpoint has every weight AutoModel loads.
        encoder = AutoModel.from_config(config, trust_remote_code=False)  # a config's auto_map code never runs
        _freeze_encoder_pooler(encoder)
        # An instance attribute: the prefix depends on the wrapped architecture, and weight loading reads
        # `model.base_model_prefix` to add or strip it.
        self.base_model_prefix = encoder.base_model_prefix
        setattr(self, self.base_model_prefix, encoder)
        self.mlp = MLPHead(config.hidden_size) if self.pooling.uses_mlp_in_training else None
        # Training-only `[N, H] -> [N, V]` head over chosen positions (MNTP's LM head), attached by the objective's
        # input provider; never in an exported checkpoint, so a checkpoint-N's copy is no unexpected key.
        self.token_head: nn.Module | None = None
        ignored = [*(self._keys_to_ignore_on_load_unexpected or ()), r"^token_head\."]
        if (config.architectures or [None])[0] != type(self).__name__:
            # Not a CSEModel's own checkpoint, whose mlp.* belong to it: a task model's (Qwen3ForCausalLM,
            # BertForPreTraining), whose head (lm_head, cls.*) is no part of a sentence encoder, and which transformers
            # would list tensor by tensor as unexpected in a multi-line report before every run; the config may be
            # another's (a trained root's, to load its adapter over the base). Missing encoder weights are still
            # reported.
            ignored.append(rf"^(?!{re.escape(self.base_model_prefix)}\.)")
        self._keys_to_ignore_on_load_unexpected = ignored
        # Rotary decoders (Qwen3, Llama, Gemma) number positions 0, 1, ... by column, so a left-padded sentence's
        # tokens would sit at other angles than right-padded: CSEModel counts from each row's first real token.
        self.counts_positions_from_mask = isinstance(getattr(encoder, "rotary_emb", None), nn.Module)
        # The prepared SDPA mask (encoder_attention_mask) replaces transformers' own: bidirectional encoders without a
        # sliding window only, whose own mask is the padding mask.
        self.prepares_sdpa_mask = (
            declares_bidirectional_attention(encoder) and getattr(config, "sliding_window", None) is None
        )
        # Encode each batch's real tokens as one packed row (hf_cse.modeling.packing); a training setting, not saved.
        # hf_cse.modeling.packing.check_padding_free says whether the kernel and the model can.
        self.padding_free = False
        if self.pooling.get_pooler().needs_all_layers:
            # transformers installs the hooks that collect every layer at the first forward asking for them, under a
            # threading lock torch.compile cannot enter (a graph break in the first compiled step): install them now.
            maybe_install_capturing_hooks(encoder)
        self.post_init()
        if self.mlp is not None and not self.pooling.uses_mlp_at_inference:
            # A training-only head is absent from exported checkpoints (inference_state_dict) and fresh when training
            # starts from a plain encoder: initializing it is expected, not worth a "newly initialized" report.
            self._keys_to_ignore_on_load_missing = {*(self._keys_to_ignore_on_load_missing or ()), r"^mlp\."}

    @property
    def encoder_model(self) -> PreTrainedModel:
        return getattr(self, self.base_model_prefix)

    @classmethod
    def from_pretrained(
        cls, pretrained_model_name_or_path: str | os.PathLike, *args, pooling: PoolingConfig | None = None, **kwargs
    ) -> CSEModel:
        """Load from a hf_cse output directory, or wrap any encoder checkpoint (local path, Hub id or
        ``pip:PACKAGE``, resolved by :func:`~hf_cse.sources.resolve_model_path` as
        :meth:`~hf_cse.modeling.encoder.SentenceEncoder.from_pretrained` resolves it). A Hub id while the Hub does
        not answer switches the process offline first (:func:`~hf_cse.sources.work_offline_if_hub_unreachable`):
        the model comes from the local cache, without huggingface_hub's retries.

        ``pooling`` (a :class:`PoolingConfig`) overrides the settings saved in the checkpoint; without either,
        ``PoolingConfig()`` applies.

        Raises:
            TypeError: ``pooling`` is no :class:`PoolingConfig`, or ``pooler=`` is given (an argument of
                :meth:`~hf_cse.modeling.encoder.SentenceEncoder.from_pretrained`): one line saying to pass
                ``pooling=PoolingConfig(pooler="avg")``.
            UsageError: a ``pip:`` package that is missing or ships no model; the pooler cannot see the whole
                sentence under the encoder's causal attention, or the config asks for bidirectional attention that
                transformers does not give (:func:`~hf_cse.modeling.backbone.check_attention`).
        """
        if kwargs.pop("trust_remote_code", False):
            raise ValueError(
                "CSEModel loads no model with trust_remote_code=True: hf_cse never runs a model's own code."
            )
        if "pooler" in kwargs:  # SentenceEncoder.from_pretrained's argument: an unexpected keyword of __init__
            raise pooling_type_error("CSEModel.from_pretrained", "pooler", kwargs["pooler"])
        if pooling is not None and not isinstance(pooling, PoolingConfig):
            raise pooling_type_error("CSEModel.from_pretrained", "pooling", pooling)
        if str(pretrained_model_name_or_path).startswith(PIP_MODEL_SCHEME):  # transformers reads it as a Hub id
            pretrained_model_name_or_path = resolve_model_path(str(pretrained_model_name_or_path))
        elif not Path(pretrained_model_name_or_path).is_dir():  # a Hub id: offline at once if the Hub is silent
            work_offline_if_hub_unreachable(str(pretrained_model_name_or_path))
        if "config" not in kwargs:
            # Like PreTrainedModel.from_pretrained: keys the config knows (e.g. hidden_dropout_prob) override it.
            hub_kwargs = {
                k: kwargs.pop(k) for k in ("revision", "token", "cache_dir", "local_files_only") if k in kwargs
            }
            # Loading's own keys, which the config would otherwise take as fields: dtype="auto" stored as the
            # config's dtype fails in from_pretrained (no torch.auto), instead of taking the checkpoint's dtype.
            load_kwargs = {k: kwargs.pop(k) for k in ("dtype", "torch_dtype") if k in kwargs}
            config, kwargs = AutoConfig.from_pretrained(
                pretrained_model_name_or_path,
                return_unused_kwargs=True,
                trust_remote_code=False,  # never a model's own code, never a prompt
                **hub_kwargs,
                **kwargs,
            )
            kwargs = {**kwargs, **hub_kwargs, **load_kwargs, "config": config}
        if pooling is not None:
            pooling.save_to_model_config(kwargs["config"])
        model = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        _freeze_encoder_pooler(model.encoder_model)  # loading replaces the parameters, and their requires_grad
        keep_4bit_weights_trainable(model)  # before any eval forward (the probe below) repacks them on a CPU
        # A first-token pooler on a causal decoder would embed the first token alone, and a bidirectional setting
        # transformers ignores would load back causal: both refused once the weights load.
        check_attention(model.encoder_model, model.pooling)
        return model

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear) and module is getattr(self.mlp, "dense", None):
            std = getattr(self.config, "initializer_range", 0.02)
            module.weight.data.normal_(mean=0.0, std=std)
            module.bias.data.zero_()
        else:
            self.encoder_model._init_weights(module)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        template_lengths: torch.Tensor | None = None,
        template_width: int | None = None,
        token_positions: torch.Tensor | None = None,
        **encoder_kwargs,
    ) -> CSEModelOutput:
        """Encode ``input_ids`` ``[B, L]`` into ``embeddings`` ``[B, H]``.

        ``inputs_embeds`` ``[B, L, H]`` (word embeddings, e.g. augmented by :mod:`hf_cse.augment.views`) replaces
        the encoder's lookup of ``input_ids``; ``input_ids`` may still be given alongside and is then read only by
        the pooler (the ``mask`` pooler finds the mask token through it). ``attention_mask`` ``[B, L]`` is required.
        A rotary decoder's positions are counted from each row's first real token (padding on either side gives the
        same states) unless ``position_ids`` are passed. With :attr:`padding_free` set, the real tokens are encoded
        as one packed row and their states put back in place, zeros at the padding
        (:class:`~hf_cse.modeling.packing.PackedBatch`), so the pooler reads ``[B, L, H]`` as it would padded.

        The pooler is the registered class of ``self.pooling.pooler`` (:mod:`hf_cse.modeling.poolers`): the encoder
        returns every layer only when it :attr:`~hf_cse.modeling.poolers.Pooler.needs_all_layers`. A pooler with
        SimCSE's MLP head (``cls``) has it applied in training mode always, in eval mode only when ``mlp_only_train``
        is ``False`` (SimCSE's behaviour). ``template_lengths`` ``[B, 2]``: per-row template lengths for
        ``template_denoising`` when a batch mixes two templates, and ``template_width`` their largest sum when known
        on the host (else read from the device). ``token_positions`` ``[N, 2]`` (row, column): return
        :attr:`token_head`'s logits of the last hidden states there as ``token_logits`` ``[N, V]``, computed in this
        forward so that data parallelism sees the head's weights used.
        """
        if attention_mask is None:
            raise ValueError("CSEModel needs attention_mask: the poolers average over, or index, real tokens only.")
        if inputs_embeds is not None:
            # HF encoders refuse input_ids and inputs_embeds together: the ids stay here, for the mask pooler.
            encoder_kwargs["inputs_embeds"] = inputs_embeds
        elif input_ids is not None:
            encoder_kwargs["input_ids"] = input_ids
        else:
            raise ValueError("CSEModel needs input_ids or inputs_embeds.")
        if token_type_ids is not None:
            encoder_kwargs["token_type_ids"] = token_type_ids
        if self.counts_positions_from_mask and "position_ids" not in encoder_kwargs:
            # As generation numbers a left-padded row: the same positions, hence states, on either padding side.
            encoder_kwargs["position_ids"] = (attention_mask.long().cumsum(dim=1) - 1).clamp(min=0)
        pooler = self.pooling.get_pooler()
        if self.padding_free:
            # Scattered back to [B, L, H] (zeros at the padding): the pooler reads the tensors of a padded batch.
            encoder_kwargs["position_ids"] = padded_position_ids(self, encoder_kwargs)
            packing = PackedBatch.from_attention_mask(attention_mask)
            last, hidden_states = packing.encode(self.encoder_model, encoder_kwargs, pooler.needs_all_layers)
        else:
            outputs = self.encoder_model(
                attention_mask=self.encoder_attention_mask(attention_mask),
                output_hidden_states=pooler.needs_all_layers,
                return_dict=True,
                **encoder_kwargs,
            )
            last, hidden_states = outputs.last_hidden_state, outputs.hidden_states
        pooler_inputs = PoolerInputs(
            last_hidden_state=last,
            attention_mask=attention_mask,
            hidden_states=hidden_states if pooler.needs_all_layers else None,
            input_ids=input_ids,
            token_type_ids=token_type_ids,
            template_lengths=template_lengths,
            template_width=template_width,
        )
        embeddings = pooler.pool(pooler_inputs, self)
        if self.mlp is not None and (self.training or self.pooling.uses_mlp_at_inference):
            embeddings = self.mlp(embeddings)
        if self.pooling.normalize and not self.training:
            embeddings = nn.functional.normalize(embeddings, dim=-1)
        token_logits = None
        if token_positions is not None:
            if self.token_head is None:
                raise ValueError("CSEModel got token_positions but has no token_head (objective 'mntp' attaches one).")
            token_logits = self.token_head(last[token_positions[:, 0], token_positions[:, 1]])
        return CSEModelOutput(embeddings=embeddings, last_hidden_state=last, token_logits=token_logits)

    def inference_state_dict(self, state_dict: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
        """``state_dict`` (default: this model's) without the weights that inference does not use: SimCSE's MLP head
        when it is used in training only, and a token head (:attr:`token_head`). What an exported model saves, so
        that ``AutoModel`` (and sentence-transformers through it) finds exactly the weights of its architecture, none
        unexpected; the Trainer's ``checkpoint-N`` folders keep the heads, to resume training."""
        state_dict = self.state_dict() if state_dict is None else state_dict
        training_only = (TOKEN_HEAD_PREFIX,)
        if self.mlp is not None and not self.pooling.uses_mlp_at_inference:
            training_only += (MLP_HEAD_PREFIX,)
        return {key: value for key, value in state_dict.items() if not key.startswith(training_only)}

    def encoder_attention_mask(self, attention_mask: torch.Tensor) -> torch.Tensor:
        """The encoder's mask: under SDPA, ``attention_mask`` ``[B, L]`` as the boolean ``[B, 1, 1, L]`` (``True``:
        attend) that transformers would build from it, and passes on as it is.

        Given the 2D mask, transformers first asks the device whether it has any padding (``mask.all()``, to skip
        the mask): a host synchronization in every forward, which stalls a GPU's queue of kernels. The prepared mask
        attends exactly the same keys (``tests/test_modeling.py``); the price is that a batch without any padding no
        longer drops its mask (on a GPU, the flash kernel is then not chosen).

        Only for an encoder whose attention modules all declare themselves bidirectional
        (:func:`~hf_cse.modeling.backbone.declares_bidirectional_attention`): transformers takes a 4D mask as the whole
        mask, so a decoder given one would attend both ways. A decoder gets the 2D mask, from which transformers
        builds its causal (and sliding-window) mask.
        """
        if not self.prepares_sdpa_mask or getattr(self.encoder_model.config, "_attn_implementation", None) != "sdpa":
            return attention_mask
        return attention_mask.bool()[:, None, None, :]

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs) -> None:
        """Save like ``PreTrainedModel.save_pretrained``, but never leave a half-written checkpoint.

        Files are written to a staging folder inside ``save_directory`` (the same filesystem, so this works on a
        mount point or under a read-only parent) and then each moved into place with an atomic ``os.replace``
        (``config.json`` last, so a reader that finds a config finds complete weights); see
        :func:`~hf_cse.atomic_files.staged_publish`.
        """
        target = Path(save_directory)
        with staged_publish(target) as staging:
            super().save_pretrained(staging, *args, **kwargs)
            self._name_the_encoder_architecture(staging / CONFIG_NAME)

    def _name_the_encoder_architecture(self, config_file: Path) -> None:
        """Write the encoder's class (``BertModel``) as ``architectures`` in a saved ``config.json``, where
        ``save_pretrained`` wrote ``CSEModel``: the folder's root is a plain encoder checkpoint, and ``CSEModel`` is no
        transformers class (tools that read ``architectures``, like the Hub's widgets, would find nothing by it)."""
        if not config_file.is_file():  # not written on this rank, or a peft adapter-only save
            return
        values = json.loads(config_file.read_text(encoding="utf-8"))
        values["architectures"] = [type(self.encoder_model).__name__]
        # As PretrainedConfig.to_json_file writes it.
        config_file.write_text(json.dumps(values, indent=2, sort_keys=True) + "\n", encoding="utf-8")
