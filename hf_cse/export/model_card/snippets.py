"""The card's plain-transformers usage code, which reproduces hf_cse's embeddings for every pooler whose class gives
:meth:`~hf_cse.modeling.poolers.Pooler.transformers_code` (a fenced ```python block rendered from the Jinja2 template
``transformers_code.md`` beside this module; user strings, the repository id and prompt template, enter the code as
Python string literals), and :func:`pooler_module`. The sentence-transformers and hf_cse code, a few fixed lines, are
in the card's template.
"""

from __future__ import annotations

from ...markdown import code_span
from ...modeling.configuration_cse import PoolingConfig
from .templating import ENVIRONMENT

EXAMPLE_SENTENCES = ["A man is playing a guitar.", "Someone plays an instrument."]


def transformers_snippet(repo_id: str, pooling: PoolingConfig, max_seq_length: int | None = None) -> str:
    """Plain-transformers code that reproduces hf_cse's embeddings for ``pooling`` (a ```python block): the
    tokenization (through the prompt template for a pooler that uses one), the encoder's forward pass (every layer's
    output for a pooler that needs them), the pooler's own :meth:`~hf_cse.modeling.poolers.Pooler.transformers_code`,
    then SimCSE's MLP head and normalization where the settings apply them. A pooler without such code gets a
    sentence pointing at hf_cse instead. ``max_seq_length``: the truncation length in effect when ``pooling`` saves
    none (``None``: the tokenizer's limit, written as code)."""
    pooler = pooling.get_pooler()
    pooling_code = pooler.transformers_code(pooling)
    if pooling_code is None:
        qualified_name = f"{type(pooler).__module__}.{type(pooler).__qualname__}"
        return (
            f"The {code_span(pooling.pooler)} pooler ({code_span(qualified_name)}) gives no plain-transformers code; "
            "use hf_cse (below)."
        )
    # The length hf_cse truncates at: the saved one, else the one in effect (the tokenizer's limit capped at the
    # model's positions: a decoder's tokenizer may claim 131,072 tokens over 40,960 positions), else the tokenizer's.
    known = pooling.max_seq_length if pooling.max_seq_length is not None else max_seq_length
    prompt_template = pooler.prompt_template(pooling) if pooler.uses_prompt_template else None
    whole_prompt = prompt_template is not None and pooler.tokenizes_prompt_whole  # PromptEOL's: filled, then tokenized
    return ENVIRONMENT.get_template("transformers_code.md").render(
        repo_id=repo_id,
        pooling=pooling,
        pooler=pooler,
        pooling_code=pooling_code,
        example_sentences=EXAMPLE_SENTENCES,
        max_length=str(known) if known is not None else "min(tokenizer.model_max_length, 100_000)",
        prompt_template=prompt_template,
        whole_prompt=whole_prompt,
        # PromptEOL's evaluation rewrite, where the pooler applies it at inference (probed)
        rewrites=whole_prompt and pooler.rewrite_sentence('say "hi"', True) != 'say "hi"',
    )


def pooler_module(pooling: PoolingConfig) -> str | None:
    """The module that registers ``pooling``'s pooler when that is outside hf_cse (what ``--import_module`` must
    name before the checkpoint loads); ``None`` for hf_cse's own poolers and for one registered by a script
    (``__main__``, which cannot be imported by name)."""
    module = type(pooling.get_pooler()).__module__
    return None if module in ("hf_cse", "__main__") or module.startswith("hf_cse.") else module
