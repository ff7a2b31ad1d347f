"""The poolers that read the last real token's state, the embedding of decoder LLMs: ``last_token`` (Qwen3-Embedding,
sentence-transformers' ``lasttoken``) and ``prompt_last_token`` (PromptEOL: the sentence wrapped in a prompt that
asks for one word, the state of its last token).

Under causal attention the last token is the only one that has seen the whole sentence, which is why decoders pool
there; the ``avg`` pooler (mean over tokens, :mod:`.mean`) is the other choice LLM2Vec reports for decoders, and
works unchanged. Padding may be on either side: the last real token is found from the attention mask, not assumed
at the end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ...markdown import code_span
from ...registry import register_pooler
from .base import OwnTemplatePooler, Pooler, PoolerInputs

if TYPE_CHECKING:
    from ..configuration_cse import PoolingConfig
    from ..modeling_cse import CSEModel

PROMPTEOL_CITATION = """@inproceedings{jiang2024scaling,
    title = "Scaling Sentence Embeddings with Large Language Models",
    author = "Jiang, Ting and Huang, Shaohan and Luan, Zhongzhi and Wang, Deqing and Zhuang, Fuzhen",
    booktitle = "Findings of the Association for Computational Linguistics: EMNLP 2024",
    year = "2024",
    pages = "3182--3196",
}"""

PROMPTEOL_TEMPLATE = 'This sentence : "{sentence}" means in one word:"'
"""PromptEOL's template (kongds/scaling_sentemb): the sentence's meaning asked for in one word, read at the last
token."""

_LAST_TOKEN_CODE = """\
# The last real token's state, whichever side the tokenizer pads on.
mask = batch["attention_mask"]
last = (torch.arange(mask.shape[1]) * mask).amax(dim=1)
embeddings = outputs.last_hidden_state[torch.arange(len(last)), last]"""


def last_token_states(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Each row's hidden state at its last non-padding token: ``[B, L, H], [B, L] -> [B, H]``.

    The position is the largest index whose mask is 1, so left- and right-padded batches give the same states;
    a gather on the device, with no read of the mask on the host.
    """
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    last = (positions * attention_mask).amax(dim=1)
    return hidden[torch.arange(len(hidden), device=hidden.device), last]


@register_pooler("last_token")
class LastTokenPooler(Pooler):
    """The last layer's state at the last non-padding token (Qwen3-Embedding's pooling); left or right padding give
    the same embedding. sentence-transformers expresses it as its ``lasttoken`` Pooling mode."""

    sentence_transformers_mode = "lasttoken"
    description = "the last layer's state at the sentence's last token"

    def pool(self, inputs: PoolerInputs, model: CSEModel) -> torch.Tensor:
        return last_token_states(inputs.last_hidden_state, inputs.attention_mask)

    def transformers_code(self, pooling: PoolingConfig) -> str:
        return _LAST_TOKEN_CODE


def prompteol_rewrite(sentence: str) -> str:
    """PromptEOL's rewrite of a sentence at evaluation (kongds/scaling_sentemb, ``evaluation.py``'s ``batcher``): a
    final ``.`` added unless the sentence ends in ``. ? " '`` (or is empty), every ``"`` turned into ``'``, and then a
    final ``?`` turned into ``.``; in that order, so ``Is it?`` becomes ``Is it.`` and ``say "hi"`` becomes
    ``say 'hi'``. Its training code (``ft_llm.py``) does not rewrite."""
    if sentence and sentence[-1] not in ".?\"'":
        sentence += "."
    sentence = sentence.replace('"', "'")
    if sentence and sentence[-1] == "?":
        sentence = sentence[:-1] + "."
    return sentence


@register_pooler("prompt_last_token")
class PromptLastTokenPooler(OwnTemplatePooler, LastTokenPooler):
    """PromptEOL (Jiang et al., 2024): each sentence wrapped in ``template`` (default
    ``This sentence : "{sentence}" means in one word:"``), the last layer's state at the last token. The filled
    prompt is tokenized in one call, as PromptEOL's ``evaluation.py`` and ``ft_llm.py`` do (not the template's pieces
    and the sentence apart: a SentencePiece or byte-level BPE tokenizer merges across the quotes). Truncation shortens
    only the sentence, as PromptEOL's training does (the sentence's first tokens, decoded, in the template), so the
    template is always whole. sentence-transformers cannot express a template around the sentence (its prompts are
    prefixes only): the saved folder makes it fail in one line (:mod:`hf_cse.export.sentence_transformers_files`) and
    the card shows the plain-transformers code instead.

    Args:
        template: the prompt, with ``{sentence}`` exactly once; saved in ``config.json`` as this pooler's
            ``pooler_kwargs`` (``--pooler_kwargs '{"template": "..."}'``). Defaults to PromptEOL's.
        rewrite_at_inference: apply PromptEOL's evaluation rewrite (:func:`prompteol_rewrite`: a final ``.`` added,
            ``"`` turned into ``'``) to every sentence encoded outside training: evaluation during and after
            training, ``encode``, the exported model through hf_cse. Training sentences are encoded as given, as
            PromptEOL's training code does. Defaults to ``False`` (every sentence as given);
            ``examples/configs/decoder/prompteol_focal_qwen3.yaml`` sets it, as PromptEOL evaluates.
    """

    sentence_transformers_mode = None
    tokenizes_prompt_whole = True
    citations = (PROMPTEOL_CITATION,)

    def __init__(self, template: str = PROMPTEOL_TEMPLATE, rewrite_at_inference: bool = False) -> None:
        if not isinstance(rewrite_at_inference, bool):
            raise ValueError(
                f"prompt_last_token's rewrite_at_inference must be true or false, got {rewrite_at_inference!r}."
            )
        self.rewrite_at_inference = rewrite_at_inference
        super().__init__(template)
        if "[MASK]" in template:
            raise ValueError(
                f"prompt_last_token's template {template!r} holds [MASK], the mask pooler's placeholder; this pooler "
                "reads the prompt's last token: write the template without it (PromptEOL's ends in 'in one word:\"')."
            )

    def rewrite_sentence(self, sentence: str, inference: bool) -> str:
        return prompteol_rewrite(sentence) if inference and self.rewrite_at_inference else sentence

    def describe(self, pooling: PoolingConfig) -> str:
        # Only PromptEOL's own template is PromptEOL; another is the same method with a template of the user's.
        method = "PromptEOL" if self.template == PROMPTEOL_TEMPLATE else "PromptEOL's method, another template"
        text = f"the last layer's state at the last token of the prompt {code_span(self.template)} ({method})"
        if self.rewrite_at_inference:
            text += "; at inference each sentence ends in `.` and its `\"` become `'` first (PromptEOL's evaluation)"
        return text
