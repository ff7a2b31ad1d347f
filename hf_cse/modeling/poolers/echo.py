"""The ``echo`` pooler (Echo embeddings, Springer et al., 2024): the sentence written twice in a prompt, pooled over
its second copy, whose tokens a causal decoder lets see the whole sentence (the first copy's).

As the released code (jakespringer/echo-embeddings, ``echo_embeddings.py``): ``EchoParser`` tokenizes each piece of
the template apart without the tokenizer's special tokens (its templates write ``<s>`` and ``</s>`` themselves,
"it isn't added for you") and joins the ids; ``EchoPooling`` averages (``mean``) or takes the last of (``last``) the
tokens its ``embed_mask`` marks: the second copy and the ``{</s>}`` after it. hf_cse's template writes ``[BOS]`` and
``[EOS]`` for the tokenizer's own (empty where it has none, as Qwen's BOS), and marks the tokens from the second copy
to the prompt's end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ...markdown import code_span
from ...registry import register_pooler
from .base import OwnTemplatePooler, PoolerInputs, masked_mean, real_token_ranks, saved_template_lengths
from .last_token import last_token_states

if TYPE_CHECKING:
    from ..configuration_cse import PoolingConfig
    from ..modeling_cse import CSEModel

ECHO_CITATION = """@inproceedings{springer2025repetition,
    title = "Repetition Improves Language Model Embeddings",
    author = "Springer, Jacob Mitchell and Kotha, Suhas and Fried, Daniel and Neubig, Graham and
              Raghunathan, Aditi",
    booktitle = "The Thirteenth International Conference on Learning Representations",
    year = "2025",
}"""

ECHO_TEMPLATE = "[BOS]Document:{sentence}\nDocument again:{sentence}[EOS]"
"""The released code's document template (``<s>Document:{!%%text%%}\\nDocument again:{%%text%%}{</s>}``): the
tokenizer's BOS, the sentence, the sentence again, the tokenizer's EOS; the second copy and the EOS are pooled."""

STRATEGIES = ("mean", "last")


@register_pooler("echo")
class EchoPooler(OwnTemplatePooler):
    """Echo embeddings: each sentence twice in ``template``, the last layer averaged over the second copy and what
    follows it (``strategy`` ``mean``), or its last token's state (``last``). The template's pieces are tokenized
    apart without the tokenizer's special tokens and joined (the released ``EchoParser``); ``[BOS]`` and ``[EOS]``
    stand for the tokenizer's own. Truncation shortens only the sentence, both copies alike, to half of what the
    template leaves (the released code cuts each copy at its ``max_length``). For causal decoders (on a
    bidirectional model the first copy already sees the sentence); sentence-transformers cannot express it (the
    saved folder makes it fail in one line).

    Args:
        template: the prompt, with ``{sentence}`` exactly twice and nothing but ``[EOS]`` after the second; saved in
            ``config.json`` as this pooler's ``pooler_kwargs``. Defaults to :data:`ECHO_TEMPLATE`.
        strategy: ``"mean"`` (default) or ``"last"``, the released ``EchoPooling``'s strategies.
    """

    sentence_copies = 2
    template_writes_special_tokens = True
    citations = (ECHO_CITATION,)

    def __init__(self, template: str = ECHO_TEMPLATE, strategy: str = "mean") -> None:
        super().__init__(template)
        if template.rsplit("{sentence}", 1)[1] not in ("", "[EOS]"):
            raise ValueError(
                f"echo's template {template!r} must end with its second {{sentence}} (then [EOS] or nothing): the "
                "pooled tokens run from the second copy to the prompt's end."
            )
        if strategy not in STRATEGIES:
            raise ValueError(f"echo's strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}.")
        self.strategy = strategy

    def describe(self, pooling: PoolingConfig) -> str:
        what = "the mean of the last layer over" if self.strategy == "mean" else "the last layer's state at the end of"
        return f"{what} the second copy of the sentence in the prompt {code_span(self.template)} (Echo embeddings)"

    def pool(self, inputs: PoolerInputs, model: CSEModel) -> torch.Tensor:
        if self.strategy == "last":
            return last_token_states(inputs.last_hidden_state, inputs.attention_mask)
        return masked_mean(inputs.last_hidden_state, echo_mask(inputs.attention_mask, model.pooling))


def echo_mask(attention_mask: torch.Tensor, pooling: PoolingConfig) -> torch.Tensor:
    """``[B, L]``: each row's tokens from the second copy of its sentence to its end. A row holds the template's
    ``template_prefix_length`` tokens before the second copy (the first copy left out), both copies of ``n`` tokens
    and ``template_suffix_length`` after: ``n = (length - prefix - suffix) / 2``, on the device."""
    prefix, suffix = saved_template_lengths(pooling, "pooler='echo'")
    lengths = attention_mask.long().sum(dim=1, keepdim=True)
    copy = torch.div(lengths - prefix - suffix, 2, rounding_mode="floor")
    return attention_mask.bool() & (real_token_ranks(attention_mask) >= lengths - suffix - copy)
