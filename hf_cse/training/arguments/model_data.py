"""``run_unsup.py``'s model and data arguments, parsed beside ``CSETrainingArguments``: :class:`ModelArguments` (the
encoder to start from, its pooling, backbone settings and LoRA adapter) and :class:`DataArguments` (the training
corpus). Each model flag sets the field of the part it names by that field's name (:meth:`ModelArguments.values_for`),
so a field added to a part and to these arguments reaches it with no list edited.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from peft import LoraConfig

from ...modeling.attention_kernels import ATTENTION_KERNELS
from ...modeling.backbone import TORCH_DTYPES, BackboneSettings
from ...modeling.configuration_cse import DEFAULT_PROMPT_TEMPLATE, POOLERS, PoolingConfig
from ..data.streaming import DEFAULT_SHUFFLE_BUFFER_SIZE
from ..training_args import parse_json_dict
from .checks import DATA_NUMBERS, MODEL_NUMBERS, check_numbers


@dataclass
class ModelArguments:
    """The encoder to start from and how it pools a sentence into one vector."""

    _argument_group_name = "hf_cse: model"

    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Local path, Hub id, or pip:MODULE for a model shipped in a PyPI package."},
    )
    pooler: str = field(
        default="cls",
        metadata={"help": f"Sentence pooler; one of: {', '.join(POOLERS)}, or one an --import_module registers."},
    )
    mlp_only_train: bool = field(
        default=True, metadata={"help": "cls pooler: use the MLP head in training only (unsupervised SimCSE)."}
    )
    prompt_template: str = field(
        default=DEFAULT_PROMPT_TEMPLATE, metadata={"help": "Template of the mask pooler ({sentence}, [MASK])."}
    )
    template_denoising: bool = field(
        default=False, metadata={"help": "mask pooler: subtract the template-only mask state (PromptBERT)."}
    )
    pooler_kwargs: str | None = field(
        default=None,
        metadata={"help": "JSON settings of a pooler of one's own, passed to its class (saved in config.json)."},
    )
    instruction: str | None = field(
        default=None,
        metadata={
            "help": "Text put before every anchor (and every query at encoding), its separator included, left out "
            "of the mean (LLM2Vec's supervised stage; avg or weighted_mean pooler, labelled pairs); saved as "
            "sentence-transformers' 'query' prompt."
        },
    )
    instruct_positives: bool = field(
        default=False,
        metadata={"help": "Put the instruction before the positives and hard negatives too (symmetric tasks)."},
    )
    normalize_embeddings: bool = field(default=False, metadata={"help": "L2-normalize embeddings at inference."})
    inference_max_seq_length: int | None = field(
        default=None,
        metadata={
            "help": "Truncation length saved for inference; unset = the base checkpoint's sentence-transformers "
            "max_seq_length (all-MiniLM-L6-v2: 256), else the tokenizer's limit."
        },
    )

    dropout: float | None = field(
        default=None,
        metadata={
            "help": "Set every attention and hidden dropout field of the backbone (decoders ship 0.0: SimCSE's views "
            "would be equal; LLM2Vec uses 0.3). Saved in config.json; unset = the checkpoint's."
        },
    )
    bidirectional: bool | None = field(
        default=None,
        metadata={
            "help": "Make a decoder attend both ways (use_bidirectional_attention, saved in config.json) where "
            "transformers does so on padded batches too (Gemma 3); refused in one line, naming those model types, "
            "elsewhere. false: causal, even from a bidirectional checkpoint; unset: the checkpoint's attention."
        },
    )
    torch_dtype: str | None = field(
        default=None,
        metadata={
            "help": f"Dtype to load the weights in; one of: {', '.join(TORCH_DTYPES)} (auto: the checkpoint's). "
            "Unset = float32, whatever the checkpoint's (AdamW then updates float32 weights; --bf16 autocasts)."
        },
    )
    attn_implementation: str | None = field(
        default=None,
        metadata={
            "help": f"Attention kernel, one of: {', '.join(ATTENTION_KERNELS)}, where the encoder supports it (flash: "
            "on a CUDA GPU, with its package; flex: on a GPU, without attention dropout); unset: transformers' choice."
        },
    )
    padding_free: bool = field(
        default=False,
        metadata={
            "help": "Encode each batch's real tokens as one packed row, no padding (--attn_implementation "
            "flash_attention_2/3 or flex_attention; refused in one line elsewhere). Dropout draws differ from padded."
        },
    )
    load_in_4bit: bool = field(
        default=False,
        metadata={"help": "QLoRA: load the weights 4-bit NF4 (bitsandbytes, GPU or CPU; needs --lora_r)."},
    )

    lora_r: int | None = field(default=None, metadata={"help": "Train LoRA adapters of this rank (unset = full)."})
    lora_alpha: int = field(default=16, metadata={"help": "LoRA alpha."})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout."})
    lora_target_modules: list[str] | None = field(
        default=None,
        metadata={"help": "Modules to adapt; unset = query and value (encoders), every projection (decoders)."},
    )

    def __post_init__(self) -> None:
        check_numbers(self, MODEL_NUMBERS)  # before anything loads: one line, naming the flag and its range

    def values_for(self, part: type) -> dict[str, Any]:
        """The flags that set a field of ``part`` (a dataclass: ``PoolingConfig``, ``BackboneSettings``, peft's
        ``LoraConfig``), by the field's name: every flag named as a field of ``part``, or renamed to one in
        :data:`RENAMED_FLAGS`; so a field added to ``part`` and to these arguments reaches it with no list edited."""
        names = {item.name for item in dataclasses.fields(part)}
        values = (
            (RENAMED_FLAGS.get(flag.name, flag.name), getattr(self, flag.name)) for flag in dataclasses.fields(self)
        )
        return {name: value for name, value in values if name in names}

    def pooling_config(self) -> PoolingConfig:
        """The pooling these flags give (``--pooler_kwargs`` parsed from its JSON)."""
        values = self.values_for(PoolingConfig)
        values["pooler_kwargs"] = parse_json_dict("pooler_kwargs", values["pooler_kwargs"])
        return PoolingConfig(**values)

    def backbone_settings(self) -> BackboneSettings:
        """The backbone's settings these flags give (dropout, attention direction, dtype, kernel, 4-bit)."""
        return BackboneSettings(**self.values_for(BackboneSettings))

    def lora_config(self) -> LoraConfig | None:
        """The LoRA adapter these flags give; ``None`` without ``--lora_r`` (full fine-tuning)."""
        return None if self.lora_r is None else LoraConfig(**self.values_for(LoraConfig))


RENAMED_FLAGS = {
    "normalize_embeddings": "normalize",  # PoolingConfig
    "inference_max_seq_length": "max_seq_length",  # PoolingConfig: beside the training --max_seq_length
    "lora_r": "r",  # LoraConfig
    "lora_target_modules": "target_modules",  # LoraConfig
}
"""``ModelArguments`` flags named otherwise than the field of the part they set (:meth:`ModelArguments.values_for`):
``--flag`` -> field."""


@dataclass
class DataArguments:
    """The unlabeled training sentences."""

    _argument_group_name = "hf_cse: data"

    train_file: str | None = field(
        default=None,
        metadata={"help": "A .txt (one sentence per line), .csv/.json/.jsonl file, gensim:lee, or a Hub dataset id."},
    )
    text_column: str | None = field(default=None, metadata={"help": "Text column of csv/json files or Hub datasets."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Hub dataset configuration name."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only the first N sentences."})
    streaming: bool = field(
        default=False,
        metadata={"help": "Read and tokenize the corpus batch by batch during training (memory flat in its size)."},
    )
    shuffle_buffer_size: int = field(
        default=DEFAULT_SHUFFLE_BUFFER_SIZE, metadata={"help": "Streaming: sentences in the shuffle buffer."}
    )

    def __post_init__(self) -> None:
        check_numbers(self, DATA_NUMBERS)
