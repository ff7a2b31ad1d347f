"""LoRA through peft: :class:`~hf_cse.training.trainer.CSETrainer` takes ``peft_config`` (as TRL's trainers do),
wraps the model itself, trains the adapters, and saves the final model as a merged plain checkpoint with the
adapter beside it.

What a LoRA run's folders hold:

- ``checkpoint-N``: the adapter (``adapter_config.json``, ``adapter_model.safetensors``, SimCSE's MLP head
  included as a module to save), the optimizer and the rest of the Trainer's state: what resuming loads back into
  the wrapped model;
- the output folder itself (every ``save_model``): the merged model at the root, a plain checkpoint of the
  encoder's architecture that ``AutoModel`` and sentence-transformers load without peft (float32 for a model trained
  over half-precision weights, and, for one trained over 4-bit weights, without bitsandbytes: float32, merged into the
  dequantized weights, :func:`merged_copy`), with
  its sentence-transformers files, and the adapter in ``adapter/`` (:data:`~hf_cse.export.upload_list.ADAPTER_DIR`),
  which ``PeftModel.from_pretrained`` loads over ``CSEModel.from_pretrained(BASE, config=AutoConfig.from_pretrained(
  OUTPUT))`` (its keys are a CSEModel's: over a plain ``AutoModel`` it loads nothing) and the model card reads
  (:func:`~hf_cse.export.model_card.read_lora_settings`).
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from pathlib import Path

import torch
from peft import (
    LoraConfig,
    PeftConfig,
    PeftModel,
    get_peft_model,
    get_peft_model_state_dict,
    prepare_model_for_kbit_training,
    set_peft_model_state_dict,
)
from transformers import PreTrainedTokenizerBase

from ..errors import UsageError
from .backbone import HALF_PRECISION_DTYPES
from .modeling_cse import CSEModel


def wrap_for_training(model: CSEModel | PeftModel, peft_config: PeftConfig | None) -> CSEModel | PeftModel:
    """The model a :class:`~hf_cse.training.trainer.CSETrainer` trains.

    With ``peft_config`` (a ``LoraConfig``), ``model`` is frozen and wrapped with peft's ``get_peft_model``, which
    adds the adapters to ``model`` in place: ``target_modules=None`` adapts :func:`default_target_modules` (every
    projection of a decoder LLM, an encoder's attention query and value), and SimCSE's MLP head, when the model has
    one, stays fully trainable (a module to save). A model loaded in 4 bits (QLoRA) is first prepared by peft's
    ``prepare_model_for_kbit_training``. The user's config is not changed.

    A model the user already wrapped (a ``PeftModel`` of LoRA adapters over a :class:`CSEModel`) is trained and
    saved as it is, the same way; its MLP head is trained only if its config names ``mlp`` among the modules to
    save. Without ``peft_config``, a plain model is returned unchanged.

    Raises:
        UsageError: ``peft_config`` is not a ``LoraConfig`` or has ``r < 1``; or is given for a model that is
            already a ``PeftModel`` (pass the plain model); or a ``PeftModel`` holds other adapters than LoRA (the
            final save merges them into the weights).
    """
    if isinstance(model, PeftModel):
        if peft_config is not None:
            raise UsageError(
                "CSETrainer got a PeftModel and a peft_config; pass the plain CSEModel with peft_config, or the "
                "PeftModel alone."
            )
        _check_lora(model.peft_config[model.active_adapter])
        return model
    if peft_config is None:
        return model
    _check_lora(peft_config)
    if getattr(model, "is_loaded_in_4bit", False):  # QLoRA: frozen 4-bit weights, norms in float32
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    # SimCSE's MLP head, where the model has one, trained whole: a fresh head a low-rank adapter could not learn.
    modules_to_save = list(peft_config.modules_to_save or [])
    modules_to_save += ["mlp"] if model.mlp is not None and "mlp" not in modules_to_save else []
    config = dataclasses.replace(
        peft_config,
        target_modules=peft_config.target_modules or default_target_modules(model),
        modules_to_save=modules_to_save or None,
    )
    return wrapped_by_peft(model, config)


PEFT_CHECKPOINTING_WARNING = "`is_gradient_checkpointing` is deprecated"
"""The start of transformers 5's FutureWarning for ``PreTrainedModel.is_gradient_checkpointing``, which peft's
``PeftModel`` reads as it wraps a model."""


def wrapped_by_peft(model: CSEModel, config: PeftConfig, adapter_name: str = "default") -> PeftModel:
    """``get_peft_model(model, config, adapter_name=...)`` without :data:`PEFT_CHECKPOINTING_WARNING`: it came
    before every LoRA run's first step, about a line of peft's, with nothing for the user to change (a user's own
    read of that name still warns)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=PEFT_CHECKPOINTING_WARNING, category=FutureWarning)
        return get_peft_model(model, config, adapter_name=adapter_name)


def _check_lora(config: PeftConfig) -> None:
    if not isinstance(config, LoraConfig):
        raise UsageError(
            f"peft_config must be a peft LoraConfig (the final save merges the adapters), got {type(config).__name__}."
        )
    if config.r < 1:
        raise UsageError(f"LoRA rank r must be >= 1, got {config.r}.")


DECODER_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The linear layers of a decoder LLM's block (Llama, Qwen, Mistral, Gemma): LoRA's default there, as QLoRA and
LLM2Vec adapt them all."""


def default_target_modules(model: CSEModel) -> list[str]:
    """LoRA's modules by default: on a decoder LLM (a gated MLP, ``gate_proj``/``up_proj``, beside ``q_proj``), every
    attention and MLP projection of :data:`DECODER_PROJECTIONS` it has; on an encoder, the attention query and value
    projections, by the names BERT-like (``query``/``value``), T5-like (``q``/``v``) and other (``q_proj``/``v_proj``)
    architectures give them.

    Raises:
        UsageError: the encoder has none of them (the message lists module names to choose from).
    """
    names = {name.rsplit(".", 1)[-1] for name, _ in model.encoder_model.named_modules()}
    if "q_proj" in names and names & {"gate_proj", "up_proj"}:
        return [name for name in DECODER_PROJECTIONS if name in names]
    for candidates in (["query", "value"], ["q", "v"], ["q_proj", "v_proj"]):
        if set(candidates) <= names:
            return candidates
    raise UsageError(
        f"No default LoRA target modules for {type(model.encoder_model).__name__}; set lora_target_modules "
        f"(module names include: {sorted(names)[:20]})."
    )


MERGED_DTYPE = torch.float32
"""The dtype of the merged model of a LoRA run over 4-bit (QLoRA) or half-precision (``--torch_dtype bfloat16`` or
``float16``) weights, whatever the dtype it computed in.

The merge adds the adapters' delta (float32: peft keeps LoRA weights in float32) to the base weight.
bfloat16 has 8 significant bits: rounding ``W + delta`` to it moves each weight by up to ``2**-9`` of ``|W|``, as much
as a short run's delta may be, and erases such updates the way re-quantizing to 4 bits does. float32 holds
a bfloat16 or float16 weight exactly and rounds the sum by ``2**-24`` of ``|W + delta|``, so the merged model
computes what the adapter over the run's weights does, at twice a bfloat16 checkpoint's size; whoever wants
bfloat16 loads it so (``dtype=torch.bfloat16``), which rounds the float32 sum once more: within one bfloat16
rounding of the exact sum, plus one float32 rounding."""


@torch.no_grad()
def merged_copy(model: PeftModel) -> CSEModel:
    """A plain :class:`CSEModel` whose weights are ``model``'s with the adapters merged in (``W + scale * B A``, the
    trained MLP head in place of the original), leaving ``model`` as it is so that training can go on after a save.

    Merges a deep copy (the model's size once more in memory, on the model's device): merging in place and
    unmerging would leave the base weights off by rounding, and differently on each process of a data-parallel run.
    A model whose base weights are half precision is merged in :data:`MERGED_DTYPE` on the CPU (its copy moved
    there: twice its size, more than a GPU that fits the run may hold); one loaded in 4 bits is merged by
    :func:`merged_over_dequantized`.
    """
    if getattr(model.get_base_model(), "is_loaded_in_4bit", False):
        return merged_over_dequantized(model)
    copied = copy.deepcopy(model)
    if any(parameter.dtype in HALF_PRECISION_DTYPES for parameter in model.get_base_model().parameters()):
        copied.to("cpu", MERGED_DTYPE)  # every weight exactly, before the sums round once, in float32
    return copied.merge_and_unload()


@torch.no_grad()
def merged_over_dequantized(model: PeftModel) -> CSEModel:
    """The merge of a LoRA model over 4-bit weights into a plain, unquantized :class:`CSEModel` of
    :data:`MERGED_DTYPE` on the CPU: every 4-bit layer's dequantized weight (as bitsandbytes dequantizes it for
    the forward) plus its adapter's delta, the other weights (embeddings, norms, the trained MLP head) as trained.

    peft's own merge of a 4-bit layer re-quantizes ``W + delta`` to 4 bits, which loses most of a run's delta (a 4-bit
    step is far larger than it) and saves a bitsandbytes checkpoint that nothing loads without bitsandbytes. Here a
    deep copy of ``model`` (its 4-bit size, on its device) sheds its adapters, moves to the CPU (the float32 model is
    8 times the 4-bit one, more than the GPU a 4-bit model was loaded to fit may hold) and is dequantized there by
    transformers (``PreTrainedModel.dequantize``, which also drops the quantization config); the trained adapter is
    put back on it with its own config and weights (peft's state dict, as ``adapter/`` saves it) and merged by peft
    in float32, as for any model.

    Raises:
        RuntimeError: the adapter's weights do not all find their place in the dequantized copy.
    """
    adapter = model.active_adapter
    trained = get_peft_model_state_dict(model, adapter_name=adapter)
    base = copy.deepcopy(model).unload().to("cpu")
    base.dequantize(dtype=MERGED_DTYPE)
    base.is_loaded_in_4bit = False  # transformers sets it when loading and leaves it when dequantizing
    base.to(MERGED_DTYPE)  # the weights that were not quantized: float32 already once peft prepared them
    plain = wrapped_by_peft(base, copy.deepcopy(model.peft_config[adapter]), adapter_name=adapter)
    loading = set_peft_model_state_dict(plain, trained, adapter_name=adapter)
    if loading.unexpected_keys:
        raise RuntimeError(f"The adapter's weights {loading.unexpected_keys} have no place in the dequantized model.")
    return plain.merge_and_unload()


def save_merged(model: PeftModel, folder: Path, tokenizer: PreTrainedTokenizerBase) -> CSEModel:
    """Save ``model`` with its adapters merged (:func:`merged_copy`) as a plain checkpoint, without a training-only
    MLP head (:meth:`CSEModel.inference_state_dict`), and ``tokenizer`` into ``folder``; return the merged model.

    ``folder`` is a staging folder of the run's one save path (:meth:`~hf_cse.training.saving.RunWriter.save_model`,
    which publishes it whole).
    """
    merged = merged_copy(model)
    merged.save_pretrained(folder, state_dict=merged.inference_state_dict())
    tokenizer.save_pretrained(folder)
    return merged
