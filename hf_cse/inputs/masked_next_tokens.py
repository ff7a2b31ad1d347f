"""``masked_next_tokens``: the masked view and the LM-head logits of MNTP (:mod:`hf_cse.objectives.mntp`).

Each step, :meth:`MaskedNextTokens.stack_views` masks the batch's sentences (LLM2Vec's recipe,
:class:`MaskingRecipe`) and asks the model, in its one forward pass, for the LM head's logits at the position before
each drawn one (``CSEModel.forward(token_positions=...)``); :meth:`MaskedNextTokens.provide` hands the objective those
logits and the original tokens. The LM head is the checkpoint's own (:func:`causal_lm_head`), attached to the model as
its training-only ``token_head``: trained with it and kept in ``checkpoint-N`` folders, left out of exported models.

Which positions are drawn is decided on the host, from the batch's shape alone (the number of drawn positions, a
tensor's shape, is then known without reading the device); whether a drawn position may be masked (padding, special
tokens, a row's first token) is decided on the device. A drawn position that may not be masked keeps its token and
has no loss.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import transformers
from peft import PeftModel
from safetensors import safe_open
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedTokenizerBase
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
from transformers.utils import SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, cached_file

from ..device_copies import DeviceCopies
from ..errors import UsageError
from ..modeling.modeling_cse import CSEModel
from ..objectives.mntp import BLANK_MASK_TOKEN, IGNORE_INDEX, MNTP_LOGITS, MNTP_TARGETS
from ..registry import register_input_provider
from .base import SENTENCES, InputProvider, ProvidedInputs, StepContext, TrainingSetup, from_host

logger = logging.getLogger(__name__)

LM_HEAD = "lm_head"
"""The LM head's name in a causal LM's checkpoint (``lm_head.weight``, ``lm_head.bias`` where it has one)."""
MASK_REPLACE_PROBABILITY = 0.8
RANDOM_REPLACE_PROBABILITY = 0.1
"""BERT's replacement of a masked token, transformers' ``DataCollatorForLanguageModeling`` defaults: the mask token
80% of the time, a random token 10%, the token itself the remaining 10%."""
_UNSCALED_LOGIT_FIELDS = ("logit_scale", "logits_scaling")
"""Config fields of causal LMs that rescale the logits (Cohere's, Granite's), which :class:`CausalLMHead` does not."""


class CausalLMHead(nn.Module):
    """A causal LM's head over hidden states: ``[N, H] -> [N, V]`` logits, ``hidden @ W^T (+ b)``, then
    ``cap * tanh(logits / cap)`` where the config sets ``final_logit_softcapping`` (Gemma 2 and 3), as the
    ``*ForCausalLM`` model computes them.

    Args:
        weight: the untied head's ``[V, H]`` weight (trained unless ``frozen``); ``None`` for a head tied to
            ``embedding``.
        embedding: the encoder's input embedding, whose weight a tied head reads at each call. It is not registered
            as a submodule: its weight stays the encoder's alone, saved once.
        bias: the head's ``[V]`` bias, where the checkpoint has one.
        softcap: ``final_logit_softcapping``, or ``None``.
        frozen: keep ``weight`` and ``bias`` fixed (a LoRA run).
    """

    def __init__(
        self,
        weight: torch.Tensor | None,
        embedding: nn.Embedding,
        bias: torch.Tensor | None = None,
        softcap: float | None = None,
        frozen: bool = False,
    ) -> None:
        super().__init__()
        self.weight = None if weight is None else nn.Parameter(weight, requires_grad=not frozen)
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=not frozen)
        object.__setattr__(self, "embedding", embedding)  # a reference, not a submodule
        self.softcap = softcap

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        weight = self.embedding.weight if self.weight is None else self.weight
        logits = F.linear(hidden, weight, self.bias)
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits


def causal_lm_head(model: CSEModel, frozen: bool = False) -> CausalLMHead:
    """The LM head of the causal LM ``model``'s encoder was loaded from: its input embeddings when
    ``config.tie_word_embeddings``, else the checkpoint's ``lm_head.weight`` (and ``lm_head.bias``), read from the
    safetensors files of ``model.name_or_path``, in the embeddings' dtype and on their device.

    Raises:
        UsageError: the architecture's causal LM has no plain ``lm_head`` (BERT's ``cls.predictions``), rescales its
            logits, or the checkpoint holds no ``lm_head.weight`` for an untied head (an exported encoder).
    """
    config = model.config
    causal_lm = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.model_type)
    causal_lm_class = getattr(transformers, causal_lm, None) if causal_lm else None
    tied_keys = getattr(causal_lm_class, "_tied_weights_keys", None) or {}
    if f"{LM_HEAD}.weight" not in tied_keys:
        raise UsageError(
            f"Objective 'mntp' predicts masked tokens with the model's own LM head, {LM_HEAD} (a *ForCausalLM's); "
            f"model type {config.model_type!r} has none (its causal LM class: {causal_lm or 'none'}). Train it from a "
            "decoder LLM checkpoint (Qwen, Llama, Mistral, Gemma)."
        )
    for name in _UNSCALED_LOGIT_FIELDS:
        if getattr(config, name, 1.0) not in (None, 1.0):
            raise UsageError(
                f"Objective 'mntp' computes the LM head's logits without {config.model_type}'s {name}="
                f"{getattr(config, name)}; this architecture's logits are not supported."
            )
    embedding = model.encoder_model.get_input_embeddings()
    softcap = getattr(config, "final_logit_softcapping", None)
    if getattr(config, "tie_word_embeddings", False):
        return CausalLMHead(None, embedding, softcap=softcap)
    tensors = read_checkpoint_tensors(model.name_or_path, [f"{LM_HEAD}.weight", f"{LM_HEAD}.bias"])
    if f"{LM_HEAD}.weight" not in tensors:
        raise UsageError(
            f"Objective 'mntp' needs the LM head of {model.name_or_path or 'the model'!s} (tie_word_embeddings is "
            f"false), but its weights hold no {LM_HEAD}.weight: start from the causal LM's checkpoint, not from an "
            "exported encoder."
        )
    like = {"dtype": embedding.weight.dtype, "device": embedding.weight.device}
    weight = tensors[f"{LM_HEAD}.weight"].to(**like)
    if tuple(weight.shape) != tuple(embedding.weight.shape):
        raise UsageError(
            f"{LM_HEAD}.weight of {model.name_or_path} has shape {tuple(weight.shape)}; the input embeddings have "
            f"{tuple(embedding.weight.shape)}."
        )
    bias = tensors.get(f"{LM_HEAD}.bias")
    return CausalLMHead(weight, embedding, None if bias is None else bias.to(**like), softcap, frozen)


def read_checkpoint_tensors(path: str, names: Sequence[str]) -> dict[str, torch.Tensor]:
    """The tensors ``names`` that the safetensors weights of checkpoint ``path`` (a folder or a Hub id, sharded or
    not) hold, by name; names it lacks are absent. Reads those tensors alone, not the checkpoint."""
    if not path:
        return {}
    lookup = {"_raise_exceptions_for_missing_entries": False, "_raise_exceptions_for_connection_errors": False}
    index = cached_file(path, SAFE_WEIGHTS_INDEX_NAME, **lookup)
    if index is not None:
        with open(index, encoding="utf-8") as file:
            weight_map = json.load(file)["weight_map"]
        files = {name: weight_map[name] for name in names if name in weight_map}
    else:
        files = dict.fromkeys(names, SAFE_WEIGHTS_NAME)
    tensors = {}
    for shard in dict.fromkeys(files.values()):
        local = cached_file(path, shard, **lookup)
        if local is None:
            continue
        with safe_open(local, framework="pt") as weights:
            available = set(weights.keys())
            for name in (n for n, f in files.items() if f == shard and n in available):
                tensors[name] = weights.get_tensor(name)
    return tensors


def resolve_mask_token_id(tokenizer: PreTrainedTokenizerBase, mask_token_type: str) -> int:
    """The id that replaces a masked token: the tokenizer's own mask token where it has one, else ``"_"``
    (``blank``) or the end-of-sequence token (``eos``), as LLM2Vec's ``run_mntp.py`` chooses.

    Raises:
        UsageError: the chosen token is not in the vocabulary.
    """
    if tokenizer.mask_token is not None:
        return int(tokenizer.mask_token_id)
    token = BLANK_MASK_TOKEN if mask_token_type == "blank" else tokenizer.eos_token
    token_id = None if token is None else tokenizer.convert_tokens_to_ids(token)
    unknown = token_id is None or (token_id == tokenizer.unk_token_id and token != tokenizer.unk_token)
    if unknown:
        other = "eos" if mask_token_type == "blank" else "blank"
        raise UsageError(
            f"mask_token_type {mask_token_type!r}: {token!r} is no token of {type(tokenizer).__name__}'s vocabulary; "
            f"use mask_token_type {other!r}."
        )
    return int(token_id)


@dataclass
class MaskDraw:
    """A step's draws, on the host: ``positions`` ``[N, 2]`` (row, column) of the drawn tokens in row-major order,
    and ``replacement`` ``[N]``, each one's replacing id or -1 where it keeps its token."""

    positions: torch.Tensor
    replacement: torch.Tensor


@dataclass
class MaskedBatch:
    """A masked batch on the device: ``input_ids`` ``[B, L]`` with the masked tokens replaced; ``token_positions``
    ``[N, 2]`` the position before each drawn one, whose state predicts it; ``targets`` ``[N]`` the original tokens,
    :data:`~hf_cse.objectives.mntp.IGNORE_INDEX` where the drawn position may not be masked."""

    input_ids: torch.Tensor
    token_positions: torch.Tensor
    targets: torch.Tensor


@dataclass(eq=False)
class MaskingRecipe:
    """LLM2Vec's masking (``run_mntp.py``, with transformers' ``DataCollatorForLanguageModeling.torch_mask_tokens``
    or its own all-mask variant): every token is drawn with probability ``mask_probability``; a drawn token is masked
    unless it is padding, one of ``special_ids`` or its row's first real token (no position before it predicts it);
    a masked token is replaced by ``mask_token_id`` (all of them with ``all_mask``; else 80%), a token drawn
    uniformly from ``range(vocab_size)`` (10%), or kept (10%).

    The draws are those of transformers' collator, from torch's global CPU random generator and in its order
    (drawn tokens; then, without ``all_mask``, the mask-token replacement, the random replacement and the random
    tokens, each over the whole ``[B, L]`` batch): under the same seed a batch is masked as the collator masks it
    when told those tokens are special (``special_ids``, held as a sorted ``[K]`` long tensor).
    """

    mask_probability: float
    all_mask: bool
    mask_token_id: int
    vocab_size: int
    special_ids: Sequence[int] | torch.Tensor

    def __post_init__(self) -> None:
        self.special_ids = torch.tensor(sorted(set(self.special_ids)), dtype=torch.long)
        self._special_ids = DeviceCopies(self.special_ids)

    def draw(self, shape: tuple[int, int]) -> MaskDraw:
        """The draws for a ``[B, L]`` batch, on the host."""
        drawn = torch.bernoulli(torch.full(shape, self.mask_probability)).bool()
        replacement = torch.full(shape, -1, dtype=torch.long)
        if self.all_mask:
            replacement[drawn] = self.mask_token_id
        else:
            replaced = torch.bernoulli(torch.full(shape, MASK_REPLACE_PROBABILITY)).bool() & drawn
            random_share = RANDOM_REPLACE_PROBABILITY / (1 - MASK_REPLACE_PROBABILITY)
            randomized = torch.bernoulli(torch.full(shape, random_share)).bool() & drawn & ~replaced
            random_tokens = torch.randint(self.vocab_size, shape, dtype=torch.long)
            replacement[replaced] = self.mask_token_id
            replacement[randomized] = random_tokens[randomized]
        # Host tensors: their count is known here, with no read-back of the device.
        return MaskDraw(torch.argwhere(drawn), replacement[drawn])

    def apply(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor, replacement: torch.Tensor
    ) -> MaskedBatch:
        """Mask ``input_ids`` ``[B, L]`` at the drawn ``positions`` (``[N, 2]``, on its device) that may be masked:
        device operations only, of shapes known on the host."""
        rows, columns = positions.unbind(dim=1)
        before = (columns - 1).clamp_min(0)
        original = input_ids[rows, columns]
        real = attention_mask.bool()
        maskable = (
            (columns > 0)
            & real[rows, columns]
            & real[rows, before]
            & ~torch.isin(original, self._special_ids.on(input_ids.device))
        )
        replaced = torch.where(maskable & (replacement >= 0), replacement, original)
        return MaskedBatch(
            input_ids=input_ids.index_put((rows, columns), replaced),
            token_positions=torch.stack([rows, before], dim=1),
            targets=torch.where(maskable, original, IGNORE_INDEX),
        )


@register_input_provider("masked_next_tokens")
class MaskedNextTokens(InputProvider):
    """MNTP's one view (the masked sentences) and its step inputs ``mntp_logits`` and ``mntp_targets``, with the
    objective's ``mask_probability``, ``all_mask`` and ``mask_token_type`` (its ``get_config_dict()``).

    Built with the run, it attaches the LM head (:func:`causal_lm_head`; frozen in a LoRA run) to the model as
    ``token_head``, and freezes SimCSE's MLP head where the pooler has one (MNTP's loss never reaches it; under
    data parallelism an untouched trainable weight would stall the gradient reduction).

    Raises:
        UsageError: the objective lacks those settings; the run asks for what MNTP has no use for (another view
            augmentation, gradient caching, Matryoshka, duplicate masking, auxiliary losses) or a pooler with a
            prompt template (MNTP trains on the bare text, as LLM2Vec does); or :func:`causal_lm_head` and
            :func:`resolve_mask_token_id` refuse the model or tokenizer.
    """

    makes_views = True
    views_made_with = "masked tokens"

    def __init__(self, setup: TrainingSetup) -> None:
        super().__init__(setup)
        config = setup.objective.get_config_dict()
        missing = [key for key in ("mask_probability", "all_mask", "mask_token_type") if key not in config]
        if missing:
            raise UsageError(f"Objective {setup.objective.name!r} needs {missing} for its masked tokens.")
        self._check_run(setup)
        model = setup.model.get_base_model() if isinstance(setup.model, PeftModel) else setup.model
        if not isinstance(model, CSEModel):
            raise UsageError(f"The masked_next_tokens input provider needs a CSEModel, got {type(model).__name__}.")
        tokenizer = setup.tokenizer
        embedding_rows = model.encoder_model.get_input_embeddings().num_embeddings
        if len(tokenizer) > embedding_rows:
            raise UsageError(
                f"The tokenizer has {len(tokenizer)} tokens, the model's embeddings {embedding_rows} rows: a random "
                "replacement token could fall outside them."
            )
        self.recipe = MaskingRecipe(
            config["mask_probability"],
            config["all_mask"],
            resolve_mask_token_id(tokenizer, config["mask_token_type"]),
            len(tokenizer),
            tokenizer.all_special_ids,
        )
        model.token_head = causal_lm_head(model, frozen=isinstance(setup.model, PeftModel))
        if model.mlp is not None:
            model.mlp.requires_grad_(False)
            logger.info("MNTP does not train SimCSE's MLP head of pooler %r: frozen.", model.pooling.pooler)
        if not getattr(model.config, "use_bidirectional_attention", False):
            logger.warning(
                "MNTP on a causal %s: the state before a masked token never sees the tokens after it. LLM2Vec trains "
                "MNTP with bidirectional attention (--bidirectional true, where the architecture has it).",
                model.config.model_type,
            )
        self._targets: torch.Tensor | None = None

    @staticmethod
    def _check_run(setup: TrainingSetup) -> None:
        args, name = setup.args, setup.objective.name
        refused = {
            f"view_augmentation={args.view_augmentation!r}": args.view_augmentation != "dropout",
            "gradient caching (gradient_cache_chunk_size)": args.gradient_cache_chunk_size is not None,
            "Matryoshka (matryoshka_dims)": bool(args.matryoshka_dims),
            "mask_duplicates": bool(args.mask_duplicates),
            "auxiliary_losses": any(
                not isinstance(spec, Mapping) or spec.get("weight", 1.0) != 0
                for spec in (args.auxiliary_losses or {}).values()
            ),
        }
        for setting, is_set in refused.items():
            if is_set:
                raise UsageError(
                    f"Objective {name!r} masks tokens and scores the LM head's predictions of them, not sentence "
                    f"embeddings: it cannot be combined with {setting}."
                )
        pooling = setup.model.pooling
        if pooling.get_pooler().uses_prompt_template:
            raise UsageError(
                f"Objective {name!r} trains on the bare sentences, as LLM2Vec does; pooler={pooling.pooler!r} wraps "
                "them in a prompt template. Train MNTP with --pooler avg (or last_token) and choose the prompt "
                "pooler in the next run."
            )

    def stack_views(self, batch: Mapping[str, Any], num_views: int) -> dict[str, Any]:
        """The masked sentences (MNTP's one view) and the positions whose LM-head logits the forward returns."""
        if num_views != 1:
            raise UsageError(f"MNTP masks one view of the sentences, not {num_views} (num_positive_views must be 0).")
        sentences = batch[SENTENCES]
        input_ids = sentences["input_ids"]
        draw = self.recipe.draw(tuple(input_ids.shape))
        device = input_ids.device
        masked = self.recipe.apply(
            input_ids,
            sentences["attention_mask"],
            from_host(draw.positions, device),
            from_host(draw.replacement, device),
        )
        self._targets = masked.targets
        return {**sentences, "input_ids": masked.input_ids, "token_positions": masked.token_positions}

    def provide(self, step: StepContext) -> ProvidedInputs:
        """This process's ``mntp_logits`` (the forward's ``token_logits``) and ``mntp_targets``, for the objective
        (not gathered: a token-level loss needs no other process's tokens) and the auxiliary terms."""
        if self._targets is None or step.outputs is None or getattr(step.outputs, "token_logits", None) is None:
            raise UsageError("masked_next_tokens: provide() needs this step's stack_views() and model output first.")
        values = {MNTP_LOGITS: step.outputs.token_logits, MNTP_TARGETS: self._targets}
        self._targets = None
        return ProvidedInputs(dict(values), dict(values))
