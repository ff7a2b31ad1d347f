"""LoRA through peft: :class:`~hf_cse.training.trainer.CSETrainer` takes ``peft_config`` (as TRL's trainers do),
wraps the model itself, trains the adapters, and saves the final model as a merged plain checkpoint with the
adapter beside it.

What a LoRA run's folders hold:

- ``checkpoint-N``: the adapter (``adapter_config.json``, ``adapter_model.safetensors``, SimCSE's MLP head
  included as a module to save), the optimizer and the rest of the Trainer's state: what resuming loads back into
  the wrapped model;
- the output folder itself (every ``save_model``): the merged model at the root, a plain checkpoint of the
  encoder's architecture that ``AutoModel`` and sentence-transformers load without peft, with its
  sentence-transformers files, and the adapter in ``adapter/`` (:data:`~hf_cse.export.upload_list.ADAPTER_DIR`),
  which ``PeftModel.from_pretrained(base, OUTPUT/adapter)`` loads and the model card reads
  (:func:`~hf_cse.export.model_card.read_lora_settings`).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import torch
from peft import LoraConfig, PeftConfig, PeftModel, get_peft_model, prepare_model_for_kbit_training
from transformers import PreTrainedTokenizerBase

from ..errors import UsageError
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
    config = dataclasses.replace(
        peft_config,
        target_modules=peft_config.target_modules or default_target_modules(model),
        modules_to_save=_with_mlp_head(model, peft_config.modules_to_save),
    )
    return get_peft_model(model, config)


def _check_lora(config: PeftConfig) -> None:
    if not isinstance(config, LoraConfig):
        raise UsageError(
            f"peft_config must be a peft LoraConfig (the final save merges the adapters), got {type(config).__name__}."
        )
    if config.r < 1:
        raise UsageError(f"LoRA rank r must be >= 1, got {config.r}.")


def _with_mlp_head(model: CSEModel, modules_to_save: list[str] | set[str] | None) -> list[str] | None:
    """``modules_to_save`` plus SimCSE's MLP head when the model has one: a fresh head trained from scratch, which a
    low-rank adapter could not learn."""
    names = list(modules_to_save or [])
    if model.mlp is not None and "mlp" not in names:
        names.append("mlp")
    return names or None


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


@torch.no_grad()
def merged_copy(model: PeftModel) -> CSEModel:
    """A plain :class:`CSEModel` whose weights are ``model``'s with the adapters merged in (``W + scale * B A``, the
    trained MLP head in place of the original), leaving ``model`` as it is so that training can go on after a save.

    Merges a deep copy (the model's size once more in memory, on the model's device): merging in place and
    unmerging would leave the base weights off by rounding, and differently on each process of a data-parallel run.
    """
    return copy.deepcopy(model).merge_and_unload()


def save_merged(model: PeftModel, folder: Path, tokenizer: PreTrainedTokenizerBase) -> CSEModel:
    """Save ``model`` with its adapters merged (:func:`merged_copy`) as a plain checkpoint, without a training-only
    MLP head (:meth:`CSEModel.inference_state_dict`), and ``tokenizer`` into ``folder``; return the merged model.

    ``folder`` is a staging folder of the run's one save path (:meth:`~hf_cse.training.saving.RunWriter.save_model`,
    published whole by :meth:`~hf_cse.training.saving.RunWriter.save_final`).
    """
    merged = merged_copy(model)
    merged.save_pretrained(folder, state_dict=merged.inference_state_dict())
    tokenizer.save_pretrained(folder)
    return merged
