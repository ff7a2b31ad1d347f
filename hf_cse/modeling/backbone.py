"""What hf_cse sets on the backbone itself, whatever its architecture: dropout, bidirectional attention, and how its
weights are loaded (dtype, attention kernel, 4-bit quantization).

Decoder LLMs (Qwen3, Llama, Mistral) ship ``attention_dropout 0.0`` and no hidden dropout, and attend causally. Both
matter to the SimCSE family: dropout makes the positive view, and under causal attention the first token sees
nothing of the sentence. The settings here change the model's own ``config.json`` fields (``attention_dropout``,
``hidden_dropout_prob``, ``use_bidirectional_attention``), so a saved checkpoint loads in plain ``AutoModel`` exactly
as it was trained; a setting transformers would not read back (bidirectional attention on an architecture without
the field, or one whose attention transformers keeps causal on padded batches despite the field) is refused, never
saved. Which fields exist is read from the config, and whether attention is bidirectional from a probe of the loaded
model through transformers' own forward (:func:`attention_is_bidirectional`), never from a list of architectures.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import logging
import math
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import torch
from packaging.requirements import Requirement
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

from ..errors import UsageError, echo
from ..registry import POOLERS
from .attention_kernels import check_kernel_fits, check_kernel_name, check_kernel_trains_on

if TYPE_CHECKING:
    from .configuration_cse import PoolingConfig

logger = logging.getLogger(__name__)

BIDIRECTIONAL_FIELD = "use_bidirectional_attention"
"""The config field through which transformers makes a decoder attend both ways (the Gemma family's, EmbeddingGemma's
setting)."""

KEEP_CAUSAL = (
    f"Leave --bidirectional unset to train it with its causal attention (in Python, {BIDIRECTIONAL_FIELD} unset)."
)
"""The fix the refusals of ``--bidirectional true`` name: the model trains as it attends (MNTP then predicts each
masked token from its left context only, which is not LLM2Vec's recipe)."""

TORCH_DTYPES = ("auto", "float32", "bfloat16", "float16")
"""``--torch_dtype`` values: ``auto`` takes the checkpoint's own dtype."""

BITSANDBYTES_REQUIREMENT = "bitsandbytes>=0.46.1"
"""What ``load_in_4bit`` needs, as setup.cfg's ``qlora`` extra declares it: transformers' own floor for its 4-bit
quantizer (``BITSANDBYTES_MIN_VERSION``; below it ``from_pretrained`` refuses, in a traceback). From that release on
bitsandbytes also runs its 4-bit layers on the CPU (0.46.1, 0.47.0, 0.48.0 and 0.50.2 were tried: an NF4 layer's
forward and input gradient equal those of its dequantized weight), so the same floor serves a GPU and a CPU."""

_HEAD_DROPOUT_WORDS = ("classifier", "summary", "lora")
"""Dropout fields of heads that ``AutoModel`` does not build (a classifier's), left alone by ``--dropout``."""


def dropout_fields(config: PretrainedConfig) -> dict[str, float]:
    """The backbone's dropout probabilities by config field: every numeric field named ``*dropout*`` or ``*_pdrop``
    (``hidden_dropout_prob`` and ``attention_probs_dropout_prob`` for BERT, ``attention_dropout`` for Qwen3, Llama and
    Gemma 3, ``resid_pdrop``/``attn_pdrop``/``embd_pdrop`` for GPT-2), except those of task heads."""
    return {
        key: float(value)
        for key, value in sorted(config.to_dict().items())
        if ("dropout" in key or key.endswith("_pdrop"))
        and isinstance(value, int | float)
        and not isinstance(value, bool)
        and not any(word in key for word in _HEAD_DROPOUT_WORDS)
    }


# A decoder small enough to build for a probe in milliseconds, in the field names the Gemma family's configs share (a
# config class that takes other names fails to build and is left out of the probed list, never guessed at).
_PROBE_DECODER_SIZES = {
    "vocab_size": 16,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 8,
}


@cache
def bidirectional_model_types() -> tuple[str, ...]:
    """The model types transformers makes attend both ways through :data:`BIDIRECTIONAL_FIELD`, padded batches
    included: each type whose config has the field is built tiny with random weights, the field set, and probed
    (:func:`attention_is_bidirectional`). ``gemma3_text`` in transformers 5.24; ``gemma`` and ``gemma2`` have the
    field but stay causal on a padded batch (``gemma2`` always), so a checkpoint trained bidirectional would not load
    back as trained. A few seconds (every config class is imported): only for error messages and tests."""
    from transformers import CONFIG_MAPPING, AutoModel

    types = []
    for model_type in CONFIG_MAPPING:
        try:
            config_class = CONFIG_MAPPING[model_type]
            parameters = inspect.signature(config_class.__init__).parameters
        except (ImportError, KeyError, AttributeError, ValueError, TypeError):  # a module that cannot load here
            continue
        if BIDIRECTIONAL_FIELD not in parameters and not hasattr(config_class, BIDIRECTIONAL_FIELD):
            continue
        try:
            with torch.random.fork_rng(devices=[]):  # the random weights leave the caller's random stream as it was
                torch.manual_seed(0)
                config = config_class(**_PROBE_DECODER_SIZES, **{BIDIRECTIONAL_FIELD: True})
                probe = AutoModel.from_config(config, trust_remote_code=False)
        except Exception:  # noqa: BLE001 - any architecture whose tiny config or model cannot be built is not probed
            continue
        if attention_is_bidirectional(probe):
            types.append(model_type)
    return tuple(sorted(types))


def declares_bidirectional_attention(encoder: nn.Module) -> bool:
    """Whether every attention module of ``encoder`` declares ``is_causal = False`` (transformers' attention classes
    carry the flag: BERT's ``False``, Qwen3's and Llama's ``True``, Gemma 3's ``not use_bidirectional_attention``).
    A model whose modules declare nothing counts as not declared: :meth:`CSEModel.encoder_attention_mask
    <hf_cse.modeling.modeling_cse.CSEModel.encoder_attention_mask>` then leaves the mask to transformers, which
    knows the architecture's causal and sliding-window masks."""
    flags = [module.is_causal for module in encoder.modules() if isinstance(getattr(module, "is_causal", None), bool)]
    return bool(flags) and not any(flags)


@torch.no_grad()
def attention_is_bidirectional(encoder: PreTrainedModel) -> bool:
    """Whether ``encoder``'s first position sees later tokens in transformers' own forward (the 2D attention mask
    ``AutoModel`` users pass), both in a batch without padding and in one with a padded row: transformers builds its
    mask differently for the two, and some architectures attend both ways in one only (Gemma with
    :data:`BIDIRECTIONAL_FIELD`: without padding only).

    Two 3-token rows that differ in their last token only (plus, in the second batch, a third row whose last token is
    padding), on the encoder's device, in eval mode (no dropout, no random numbers drawn); the first position's states
    are compared bit for bit. Under a causal mask the later keys' weights are exactly 0, so the states are equal."""
    vocab_size = int(getattr(encoder.config, "vocab_size", 0) or 0)
    pad = getattr(encoder.config, "pad_token_id", None)
    ids = [i for i in range(min(vocab_size, 8)) if i != pad][:4]
    if len(ids) < 4:
        raise UsageError(f"Cannot probe the attention of {type(encoder).__name__}: its vocabulary has {vocab_size}.")
    device = next(encoder.parameters()).device
    input_ids = torch.tensor([ids[:3], [*ids[:2], ids[3]], ids[:3]], device=device)
    attention_mask = torch.tensor([[1, 1, 1], [1, 1, 1], [1, 1, 0]], device=device)
    was_training = encoder.training
    encoder.eval()
    try:
        for rows in (2, 3):  # without padding, then with the padded row
            hidden = encoder(input_ids=input_ids[:rows], attention_mask=attention_mask[:rows]).last_hidden_state
            if torch.equal(hidden[0, 0], hidden[1, 0]):
                return False
    finally:
        encoder.train(was_training)
    return True


def check_attention(encoder: PreTrainedModel, pooling: PoolingConfig) -> None:
    """Refuse, in one line, what the loaded ``encoder``'s attention would silently undo
    (:func:`attention_is_bidirectional`):

    - a config that sets :data:`BIDIRECTIONAL_FIELD` on an architecture transformers keeps causal (on padded
      batches at least): hf_cse's forward would attend both ways, a plain ``AutoModel`` reload of its checkpoint not;
    - a pooler that :attr:`~hf_cse.modeling.poolers.Pooler.needs_bidirectional_attention` on causal attention: its
      embedding would depend on the first token alone. The message names the poolers that see the whole sentence
      and, where the architecture supports it, the bidirectional setting.
    """
    sets_bidirectional = getattr(encoder.config, BIDIRECTIONAL_FIELD, None) is True
    if not sets_bidirectional and not pooling.get_pooler().needs_bidirectional_attention:
        return
    if any(parameter.is_meta or parameter.numel() == 0 for parameter in encoder.parameters()):
        # Weights not materialized here (DeepSpeed ZeRO-3 partitions, a meta-device model): no probe can run.
        logger.warning("Cannot probe %s's attention (its weights are not loaded here).", type(encoder).__name__)
        return
    if attention_is_bidirectional(encoder):
        return
    model_type = encoder.config.model_type
    if sets_bidirectional:
        import transformers

        raise UsageError(
            f"bidirectional: transformers {transformers.__version__} keeps {model_type!r} attention causal on padded "
            f"batches although its config sets {BIDIRECTIONAL_FIELD}, so AutoModel would not load the checkpoint as "
            f"trained; it attends both ways for: {', '.join(bidirectional_model_types()) or 'no model type'}. "
            f"{KEEP_CAUSAL}"
        )
    usable = [name for name in POOLERS if not POOLERS[name].needs_bidirectional_attention]
    # The model alone does not say whether its tokenizer has a mask token (Gemma's has, Qwen3's not).
    with_mask = [repr(name) for name in usable if POOLERS[name].needs_mask_token]
    listed = ", ".join(repr(name) for name in usable if not POOLERS[name].needs_mask_token)
    listed += f"; with a tokenizer that has a mask token: {', '.join(with_mask)}" if with_mask else ""
    bidirectional = (
        " or make its attention bidirectional (--bidirectional true; in Python, "
        f"CSEModel.from_pretrained(..., {BIDIRECTIONAL_FIELD}=True))"
        if model_type in bidirectional_model_types()
        else ""
    )
    raise CausalPoolerError(
        f"pooler={pooling.pooler!r} reads the first token, which under {type(encoder).__name__}'s causal attention "
        f"sees only itself: the embedding would not depend on the sentence. Use a pooler that sees the whole "
        f"sentence ({listed})",
        bidirectional,
    )


class CausalPoolerError(UsageError):
    """A pooler that needs bidirectional attention on a model whose attention is causal (:func:`check_attention`),
    so that a loader whose pooler comes from a setting of its own can name that setting.

    Attributes:
        reason: the refusal and the poolers to use instead, without the bidirectional setting, which only the
            trained model's run applies (DCLR's frozen complementary model loads as saved).
    """

    def __init__(self, reason: str, bidirectional_hint: str = "") -> None:
        super().__init__(f"{reason}{bidirectional_hint}.")
        self.reason = reason


@dataclass
class BackboneSettings:
    """Settings of the backbone itself, applied to its config before the weights load.

    Args:
        dropout: set every attention and hidden dropout probability the architecture has (:func:`dropout_fields`) to
            this value; ``None`` (default) keeps the checkpoint's. Saved in ``config.json`` as those fields.
        bidirectional: make a decoder attend both ways through :data:`BIDIRECTIONAL_FIELD` (saved in ``config.json``,
            so ``AutoModel`` loads it bidirectional). Refused, in one line, on an architecture without the field, and
            once the weights load on one whose attention transformers keeps causal (:func:`check_attention`).
            ``False`` turns the field off where a checkpoint set it; ``None`` (default): the checkpoint's own
            attention.
        torch_dtype: the dtype the weights load in (:data:`TORCH_DTYPES`); ``None`` (default): float32, whatever
            the checkpoint's dtype (transformers 5 would load a bfloat16 checkpoint, as decoders ship, in bfloat16:
            AdamW would then update bfloat16 weights, losing any step below 2^-9 of a weight; ``--bf16`` autocasts
            the compute and keeps float32 weights).
        attn_implementation: the attention kernel, a key of
            :data:`~hf_cse.modeling.attention_kernels.ATTENTION_KERNELS` (``eager``, ``sdpa``, ``flash_attention_2``,
            ...), checked against the encoder and the device before anything loads; ``None`` (default):
            transformers' choice.
        load_in_4bit: load the weights 4-bit NF4 through bitsandbytes (QLoRA; needs bitsandbytes (the ``qlora``
            extra, :func:`check_bitsandbytes`) and LoRA; runs on a CUDA GPU or, slowly, on the CPU). Defaults to
            ``False``.
    """

    dropout: float | None = None
    bidirectional: bool | None = None
    torch_dtype: str | None = None
    attn_implementation: str | None = None
    load_in_4bit: bool = False

    def __post_init__(self) -> None:
        if self.dropout is not None and not (isinstance(self.dropout, int | float) and 0.0 <= self.dropout < 1.0):
            raise UsageError(f"dropout must be a probability in [0, 1), got {echo(self.dropout)}.")
        if self.torch_dtype is not None and self.torch_dtype not in TORCH_DTYPES:
            raise UsageError(f"torch_dtype {echo(self.torch_dtype)} is not one of: {', '.join(TORCH_DTYPES)}.")
        check_kernel_name(self.attn_implementation)
        if self.load_in_4bit:
            check_bitsandbytes()

    def check_device(self, device: torch.device) -> None:
        """Refuse an attention kernel that cannot train on ``device`` (the run's), before the data or the weights
        load (:func:`~hf_cse.modeling.attention_kernels.check_kernel_trains_on`)."""
        check_kernel_trains_on(self.attn_implementation, device)

    def apply(self, config: PretrainedConfig) -> None:
        """Set the dropout fields and the attention direction on ``config`` (before the model is built from it).

        Raises:
            UsageError: ``dropout`` on a config without a dropout field; ``bidirectional`` on an architecture
                without :data:`BIDIRECTIONAL_FIELD` (the message names the model types that attend both ways); an
                attention kernel the encoder does not support, or flex attention with attention dropout
                (:func:`~hf_cse.modeling.attention_kernels.check_kernel_fits`).
        """
        if self.dropout is not None:
            fields = dropout_fields(config)
            if not fields:
                raise UsageError(f"dropout: the {config.model_type} config has no dropout field to set.")
            for key in fields:
                setattr(config, key, float(self.dropout))
        if self.bidirectional is False and getattr(config, BIDIRECTIONAL_FIELD, None):
            setattr(config, BIDIRECTIONAL_FIELD, False)  # a bidirectional checkpoint (LLM2Vec's run 1) made causal
        if self.bidirectional:
            if not hasattr(config, BIDIRECTIONAL_FIELD):
                raise UsageError(
                    f"bidirectional: transformers reads no bidirectional-attention setting for model type "
                    f"{config.model_type!r}; it attends both ways for: {', '.join(bidirectional_model_types())}. "
                    f"hf_cse never saves a checkpoint that would load back causal. {KEEP_CAUSAL}"
                )
            setattr(config, BIDIRECTIONAL_FIELD, True)
        attention_dropout = {key: value for key, value in dropout_fields(config).items() if "att" in key}
        check_kernel_fits(self.attn_implementation, config, attention_dropout)

    def from_pretrained_kwargs(self, device: str | torch.device | None = None) -> dict[str, Any]:
        """Keyword arguments of ``from_pretrained`` for the dtype, attention kernel and quantization.

        Args:
            device: the device a 4-bit model loads on (``device_map``), the one its run trains on: bitsandbytes
                quantizes the weights where they load, and nothing moves a 4-bit model afterwards (the Trainer
                leaves it, so that ``--use_cpu`` on a machine with a GPU would train a model on the GPU with
                batches on the CPU). ``None`` (default): transformers' choice, the current GPU if there is one, else
                the CPU. Unused without ``load_in_4bit``.
        """
        dtype = self.torch_dtype or "float32"
        kwargs: dict[str, Any] = {"dtype": dtype if dtype == "auto" else getattr(torch, dtype)}
        if self.attn_implementation is not None:
            kwargs["attn_implementation"] = self.attn_implementation
        if self.load_in_4bit:
            from transformers import BitsAndBytesConfig

            kwargs["quantization_config"] = BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_quant_type="nf4",
                bnb_4bit_use_double_quant=True,
                bnb_4bit_compute_dtype=torch.bfloat16,
                # SimCSE's MLP head (CSEModel.mlp, "mlp.dense"): new weights that LoRA trains whole (a module to
                # save), which a 4-bit layer could not. The pattern matches from the start of a name: no encoder's
                # own layers. transformers' default skips are the output embeddings, which a CSEModel has none of.
                llm_int8_skip_modules=["mlp"],
            )
            if device is not None:
                kwargs["device_map"] = {"": device}
        return kwargs


def check_bitsandbytes() -> None:
    """Refuse, in one line naming the ``qlora`` extra, a bitsandbytes missing or below
    :data:`BITSANDBYTES_REQUIREMENT`, which transformers would report in a traceback as the model loads.

    Raises:
        UsageError: bitsandbytes is not installed, or is below the floor.
    """
    requirement = Requirement(BITSANDBYTES_REQUIREMENT)
    try:
        installed: str | None = importlib.metadata.version(requirement.name)
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed is not None and requirement.specifier.contains(installed, prereleases=True):
        return
    found = "is not installed" if installed is None else f"is {installed}"
    raise UsageError(
        f"load_in_4bit loads the weights 4-bit through bitsandbytes, which {found} here; it needs "
        f'{BITSANDBYTES_REQUIREMENT}: pip install "hf_cse[qlora]" (in a clone of hf_cse: pip install -e ".[qlora]").'
    )


def keep_4bit_weights_trainable(model: nn.Module) -> None:
    """Keep every bitsandbytes 4-bit layer of ``model`` in the layout it was loaded in (a no-op for a model without
    them).

    bitsandbytes' CPU backend (0.50, on a CPU with AVX512-BF16) repacks a 4-bit layer's weight for its inference
    kernel at the layer's first forward in eval mode without gradients (an evaluation, the attention probe of
    :func:`attention_is_bidirectional`): its block scales rounded to bfloat16, in a layout that has no backward (the
    training steps after it get no gradient through the layer, silently) and that ``dequantize_4bit`` does not read
    (a merge would read other numbers). hf_cse loads 4-bit weights to train LoRA over them, so it turns the repacking
    off (``Linear4bit.support_avx512bf16_for_cpu``, which the layer reads at each forward; on a GPU it is never
    used)."""
    for module in model.modules():
        if hasattr(module, "support_avx512bf16_for_cpu"):
            module.support_avx512bf16_for_cpu = False


HALF_PRECISION_DTYPES = (torch.bfloat16, torch.float16)
"""The 16-bit dtypes whose full fine-tuning loses small updates (:func:`warn_if_full_weights_are_half_precision`)."""


def warn_if_full_weights_are_half_precision(model: nn.Module) -> None:
    """Warn, in one line, when ``model``'s trainable weights are bfloat16 or float16 in full fine-tuning (call it
    without LoRA; ``--torch_dtype bfloat16``, or ``auto`` from a bfloat16 checkpoint): AdamW's updates below half a
    step of the dtype are lost (2 steps of a tiny Qwen3 at lr 3e-5 changed 26% of bfloat16 weights, 88% of float32
    ones)."""
    dtypes = {parameter.dtype for parameter in model.parameters() if parameter.requires_grad}
    dtypes &= set(HALF_PRECISION_DTYPES)
    if not dtypes:
        return
    dtype = sorted(dtypes, key=str)[0]
    logger.warning(
        "Full fine-tuning of %s weights: an AdamW update smaller than 2^%d of a weight rounds away. Leave "
        "--torch_dtype unset for float32 weights (--bf16 still computes in bfloat16), or train LoRA (--lora_r).",
        str(dtype).removeprefix("torch."),
        int(math.log2(torch.finfo(dtype).eps)) - 2,  # half a step (eps / 4, at a binade's top): bfloat16 -9
    )


def weight_settings(config: PretrainedConfig) -> dict[str, Any]:
    """How the encoder's weights were loaded, for the resume contract: their dtype (``--torch_dtype``) and their
    quantization (``--load_in_4bit``: bitsandbytes' method and 4-bit type; ``None`` unquantized). A resume that loads
    the base otherwise would go on training over other weights than the checkpoint's adapter was trained over."""
    quantization = getattr(config, "quantization_config", None)
    if quantization is not None and not isinstance(quantization, dict):
        quantization = quantization.to_dict()
    dtype = getattr(config, "dtype", None)
    return {
        "dtype": str(dtype).removeprefix("torch.") if dtype is not None else None,
        "quantization": None
        if quantization is None
        else {key: quantization.get(key) for key in ("quant_method", "load_in_4bit", "bnb_4bit_quant_type")},
    }


def encoder_settings(config: PretrainedConfig) -> dict[str, Any]:
    """What of the encoder's config changes what is trained, for the resume contract: its dropout fields and whether
    it attends bidirectionally through :data:`BIDIRECTIONAL_FIELD` (``None`` for an architecture without it)."""
    return {"dropout": dropout_fields(config), "bidirectional": getattr(config, BIDIRECTIONAL_FIELD, None)}


def backbone_record(config: PretrainedConfig) -> dict[str, Any]:
    """What the card says of the backbone as trained: :func:`encoder_settings` and, as ``weights``,
    :func:`weight_settings` (a 4-bit base is gone from the saved root's ``config.json``, which holds the adapters
    merged into the dequantized weights: the card is where it is said)."""
    return {**encoder_settings(config), "weights": weight_settings(config)}


VIEWS_REMEDY = (
    "Set --dropout 0.1 (in Python, those config fields: CSEModel.from_pretrained(..., attention_dropout=0.1); LLM2Vec "
    "uses 0.3 on decoders), or a --view_augmentation that changes the text."
)
"""How a run gets views that differ: hf_cse's settings, on the command line and in Python."""


def check_views_differ(
    views: list[torch.Tensor], model: nn.Module, objective: str, remedy: str = VIEWS_REMEDY
) -> None:
    """Stop, in one line, a run whose first batch's two views are equal bit for bit: with no dropout (a decoder's
    ``attention_dropout 0.0``, or a model left in eval mode) and a view augmentation that changed nothing, every
    positive is its anchor and the objective learns nothing from it. Called once, at the first step (one read of the
    device).

    Args:
        views: the step's views on this process, each ``[B, D]``; only the first two are compared.
        model: the model the views came from (a ``CSEModel``, a peft model over one, or the transformers model
            inside a SentenceTransformer), whose dropout fields the message names.
        objective: the objective's name, for the message.
        remedy: the message's last sentence, how to make the views differ (default :data:`VIEWS_REMEDY`).
    """
    if len(views) < 2 or not torch.equal(views[0], views[1]):
        return
    config = model.config
    if not model.training:
        cause = "the model is in eval mode, so its dropout is off"
    else:
        fields = dropout_fields(config)
        named = ", ".join(f"{key}={value:g}" for key, value in fields.items()) or "no dropout field at all"
        cause = f"the {config.model_type} model's dropout is off ({named})"
    raise UsageError(
        f"The two views of the first batch are identical, so objective {objective!r} has nothing to learn: {cause} "
        f"and the view augmentation changed nothing. {remedy}"
    )
