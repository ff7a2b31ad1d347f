"""The files of a saved model, in a checkpoint or exported: what :meth:`RunWriter.save_model
<hf_cse.training.saving.writer.RunWriter.save_model>` has :func:`write_model_files` write into the folder it stages.

The Trainer's own files (``save_pretrained`` of the model and the tokenizer, the pickled ``training_args.bin``, as
``Trainer._save`` writes them), then hf_cse's: ``training_args.json`` (the pickle-free copy ``python -m hf_cse.push``
reads) and the sentence-transformers files. hf_cse writes them itself rather than through ``Trainer._save``, a private
method: the exported model leaves out the training-only heads, a LoRA model is exported merged, and the saved
arguments are those the user gave.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from peft import PeftModel
from torch import nn
from transformers import PreTrainedTokenizerBase
from transformers.trainer import TRAINING_ARGS_NAME

from ...export.sentence_transformers_files import write_sentence_transformers_files
from ...modeling.encoder import SentenceEncoder
from ...modeling.lora import save_merged
from ...modeling.modeling_cse import CSEModel
from ...run_files import ADAPTER_DIR
from ..record.run_arguments import write_training_arguments

if TYPE_CHECKING:
    from transformers import TrainingArguments


def save_trainer_files(
    folder: Path,
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    arguments: TrainingArguments,
    state_dict: dict[str, torch.Tensor] | None,
) -> None:
    """What ``Trainer._save`` writes: the model's ``save_pretrained`` (a peft model: its adapter), the tokenizer's,
    and ``training_args.bin`` (``arguments`` pickled)."""
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, state_dict=state_dict)
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    torch.save(arguments, os.path.join(folder, TRAINING_ARGS_NAME))


def write_model_files(
    folder: Path,
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase | None,
    arguments: TrainingArguments,
    state_dict: dict[str, torch.Tensor] | None,
    exported: bool,
) -> None:
    """Write the model into ``folder`` (main process only).

    Args:
        folder: the ``checkpoint-N`` the Trainer writes, or the staging folder of the final model.
        model: the bare model (no DDP or compile wrapper).
        tokenizer: saved beside the model.
        arguments: the training arguments as the user gave them.
        state_dict: gathered weights of a sharded model (FSDP, DeepSpeed), else ``None``.
        exported: ``False`` in a checkpoint, which keeps every weight to resume from (a LoRA model: its adapter);
            ``True`` outside one: a :class:`~hf_cse.modeling.modeling_cse.CSEModel` without its training-only heads
            (:meth:`~hf_cse.modeling.modeling_cse.CSEModel.inference_state_dict`), a LoRA model's adapter in
            ``adapter/`` and the merged plain model at the root (:func:`~hf_cse.modeling.lora.save_merged`).
    """
    if isinstance(model, CSEModel) and exported:
        state_dict = model.inference_state_dict(state_dict)
    root_model = model
    if isinstance(model, PeftModel) and exported:
        save_trainer_files(folder / ADAPTER_DIR, model, tokenizer, arguments, state_dict)
        root_model = save_merged(model, folder, tokenizer)
    else:
        save_trainer_files(folder, model, tokenizer, arguments, state_dict)  # its training_args.bin holds no token
    write_training_arguments(arguments, folder)
    if isinstance(root_model, CSEModel):
        # The length hf_cse truncates at, capped at the model's positions, as SentenceEncoder reads it.
        max_seq_length = SentenceEncoder(root_model, tokenizer).sentence_tokenizer.max_seq_length
        write_sentence_transformers_files(folder, root_model, max_seq_length)
