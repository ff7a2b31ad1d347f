"""LoRA through peft: wrap a CSEModel, train adapters, and export a merged plain checkpoint."""

from __future__ import annotations

from pathlib import Path

from peft import LoraConfig, PeftModel, get_peft_model
from transformers import PreTrainedTokenizerBase

from ..atomic_files import staged_publish
from ..export.sentence_transformers_files import write_sentence_transformers_files
from ..text import SentenceTokenizer
from .modeling_cse import CSEModel


def add_lora(
    model: CSEModel,
    r: int,
    alpha: int = 16,
    dropout: float = 0.05,
    target_modules: list[str] | None = None,
) -> PeftModel:
    """Freeze ``model`` and add LoRA adapters of rank ``r`` (SimCSE's MLP head, when present, stays fully trainable).

    Args:
        r: adapter rank (>= 1).
        alpha: LoRA scaling numerator; defaults to 16.
        dropout: dropout on the adapter input; defaults to 0.05.
        target_modules: module names to adapt; ``None`` uses peft's default for the architecture (BERT/RoBERTa:
            the attention ``query`` and ``value`` projections).
    """
    if r < 1:
        raise ValueError(f"lora_r must be >= 1, got {r}.")
    config = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=target_modules or _default_targets(model),
        modules_to_save=["mlp"] if model.mlp is not None else None,
    )
    return get_peft_model(model, config)


def _default_targets(model: CSEModel) -> list[str]:
    names = {name.rsplit(".", 1)[-1] for name, _ in model.encoder_model.named_modules()}
    for candidates in (["query", "value"], ["q", "v"], ["q_proj", "v_proj"]):
        if set(candidates) <= names:
            return candidates
    raise ValueError(
        f"No default LoRA target modules for {type(model.encoder_model).__name__}; set lora_target_modules "
        f"(module names include: {sorted(names)[:20]})."
    )


def export_merged(
    model: PeftModel, tokenizer: PreTrainedTokenizerBase, directory: str | Path, save: bool = True
) -> CSEModel:
    """Merge the adapters into the weights and save a plain checkpoint (``AutoModel`` and sentence-transformers
    load it) with its tokenizer into ``directory``; return the merged model. Under data parallelism every process
    merges and only the main one saves (``save=False`` on the others). The files are published together
    (:func:`~hf_cse.atomic_files.staged_publish`): a crash leaves the earlier ones or the new ones."""
    merged: CSEModel = model.merge_and_unload()
    if not save:
        return merged
    with staged_publish(Path(directory)) as staging:
        merged.save_pretrained(staging, state_dict=merged.inference_state_dict())
        tokenizer.save_pretrained(staging)
        max_seq_length = SentenceTokenizer(tokenizer, merged.pooling).max_seq_length
        write_sentence_transformers_files(staging, merged, max_seq_length)
    return merged
