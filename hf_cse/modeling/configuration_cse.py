"""How hf_cse turns an encoder's hidden states into one sentence embedding.

Everything that changes how a sentence is encoded lives in :class:`PoolingConfig` and is written into the encoder's
own ``config.json`` under the key ``"hf_cse"``. The checkpoint stays a plain checkpoint of the encoder's model type
(``AutoModel`` loads it without ``trust_remote_code``); hf_cse reads the extra key back so that a reloaded model
encodes exactly like the trained one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from transformers import PretrainedConfig

CONFIG_KEY = "hf_cse"

POOLERS = ("cls", "cls_before_pooler", "avg", "avg_first_last", "avg_top2", "mask")
"""Valid pooler names.

- ``cls``: the ``[CLS]`` hidden state passed through SimCSE's MLP head (dense + tanh). With
  ``mlp_only_train=True`` the head is used in training only and inference returns the raw ``[CLS]`` state.
- ``cls_before_pooler``: the raw ``[CLS]`` hidden state, no head.
- ``avg``: mean of the last layer over non-padding tokens.
- ``avg_first_last``: mean over tokens of (first layer + last layer) / 2; the "first layer" is the output of the
  first transformer layer, as in SimCSE's code.
- ``avg_top2``: mean over tokens of (last layer + second-to-last layer) / 2.
- ``mask``: the last hidden state at the mask token of a prompt template (PromptBERT / OssCSE).
"""

PROMPTBERT_CITATION = """@inproceedings{jiang2022promptbert,
    title = "{P}rompt{BERT}: Improving {BERT} Sentence Embeddings with Prompts",
    author = "Jiang, Ting and Jiao, Jian and Huang, Shaohan and Zhang, Zihan and Wang, Deqing and Zhuang, Fuzhen and
              Wei, Furu and Huang, Haizhen and Deng, Denvy and Zhang, Qi",
    booktitle = "Proceedings of the 2022 Conference on Empirical Methods in Natural Language Processing",
    year = "2022",
    pages = "8826--8837",
}"""

POOLER_CITATIONS: dict[str, tuple[str, ...]] = {"mask": (PROMPTBERT_CITATION,)}
"""BibTeX of the papers poolers come from (besides the objective's), listed on model cards."""


DEFAULT_PROMPT_TEMPLATE = 'This sentence : "{sentence}" means [MASK] .'
"""PromptBERT's template. ``{sentence}`` marks the sentence and ``[MASK]`` stands for the tokenizer's own mask
token (``<mask>`` for RoBERTa)."""


@dataclass
class PoolingConfig:
    """Inference-relevant settings of a sentence encoder.

    Args:
        pooler: one of :data:`POOLERS`. Defaults to ``"cls"`` (unsupervised SimCSE).
        mlp_only_train: for ``pooler="cls"``, use the MLP head in training only (unsupervised SimCSE's choice).
            Defaults to ``True``.
        prompt_template: template with ``{sentence}`` and ``[MASK]``; used only by ``pooler="mask"``.
        normalize: L2-normalize the embeddings returned at inference. Defaults to ``False``.
        max_seq_length: truncation length at inference (template included); ``None`` means the model's limit.
        mask_token_id: the tokenizer's mask token id, filled in from the tokenizer for ``pooler="mask"``.
        template_denoising: ``pooler="mask"`` only: subtract the mask state of the template alone, encoded at the
            positions it holds around the sentence (PromptBERT's template denoising). Defaults to ``False``.
        template_prefix_length, template_suffix_length: token counts of the template before and after the
            sentence, special tokens included; filled in from the tokenizer.
    """

    pooler: str = "cls"
    mlp_only_train: bool = True
    prompt_template: str = DEFAULT_PROMPT_TEMPLATE
    normalize: bool = False
    max_seq_length: int | None = None
    mask_token_id: int | None = None
    template_denoising: bool = False
    template_prefix_length: int | None = None
    template_suffix_length: int | None = None

    def __post_init__(self) -> None:
        if self.pooler not in POOLERS:
            raise ValueError(f"Unknown pooler {self.pooler!r}; valid poolers are: {', '.join(POOLERS)}.")
        if self.pooler == "mask":
            for placeholder in ("{sentence}", "[MASK]"):
                if self.prompt_template.count(placeholder) != 1:
                    raise ValueError(
                        f"prompt_template {self.prompt_template!r} must contain {placeholder} exactly once "
                        f"(found {self.prompt_template.count(placeholder)})."
                    )
        if self.template_denoising and self.pooler != "mask":
            raise ValueError(f"template_denoising needs pooler='mask', got pooler={self.pooler!r}.")
        if self.max_seq_length is not None and self.max_seq_length < 2:
            raise ValueError(f"max_seq_length must be >= 2 or None, got {self.max_seq_length}.")

    @property
    def uses_mlp_at_inference(self) -> bool:
        return self.pooler == "cls" and not self.mlp_only_train

    @property
    def uses_mlp_in_training(self) -> bool:
        return self.pooler == "cls"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> PoolingConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown hf_cse pooling settings {unknown}; valid keys are: {sorted(known)}.")
        return cls(**values)

    @classmethod
    def from_model_config(cls, config: PretrainedConfig) -> PoolingConfig | None:
        """The settings saved in ``config`` by hf_cse, or ``None`` for a plain encoder checkpoint."""
        values = getattr(config, CONFIG_KEY, None)
        return None if values is None else cls.from_dict(dict(values))

    def save_to_model_config(self, config: PretrainedConfig) -> None:
        setattr(config, CONFIG_KEY, self.to_dict())
