"""The card's plain-transformers usage code, which reproduces hf_cse's embeddings for every pooler whose class gives
:meth:`~hf_cse.modeling.poolers.Pooler.transformers_code` (a fenced ```python block; user strings, the repository id
and prompt template, enter the code as Python string literals), and :func:`pooler_module`. The sentence-transformers
and hf_cse code, a few fixed lines, are in the card's template.
"""

from __future__ import annotations

from collections.abc import Callable

from ...markdown import code_block, code_span, python_string
from ...modeling.configuration_cse import PoolingConfig

EXAMPLE_SENTENCES = ["A man is playing a guitar.", "Someone plays an instrument."]

_SPECIAL_TOKENS_HELPER = '''
def special_tokens(tokenizer):
    """The ids the tokenizer puts before and after one sentence ([CLS] ... [SEP], <s> ... </s>)."""
    bare = tokenizer("hello", add_special_tokens=False)["input_ids"]
    framed = tokenizer("hello")["input_ids"]
    start = next(i for i in range(len(framed)) if framed[i : i + len(bare)] == bare)
    return framed[:start], framed[start + len(bare) :]
'''


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
    max_length = str(known) if known is not None else "min(tokenizer.model_max_length, 100_000)"
    lines = ["import torch", "from transformers import AutoModel, AutoTokenizer", ""]
    if pooling.uses_mlp_at_inference:
        lines[1:1] = ["from huggingface_hub import hf_hub_download", "from safetensors.torch import load_file"]
    lines.append(f"tokenizer = AutoTokenizer.from_pretrained({python_string(repo_id)})")
    if pooling.uses_mlp_at_inference:  # the one weight of the checkpoint that AutoModel does not know
        lines.append("# AutoModel reports the `mlp.dense.*` weights as unexpected: SimCSE's head, applied below.")
    lines += [
        f"model = AutoModel.from_pretrained({python_string(repo_id)}).eval()",
        f"sentences = {EXAMPLE_SENTENCES!r}",
        f"max_length = {max_length}  # hf_cse's truncation length at inference, special tokens included",
    ]
    if pooler.uses_prompt_template and pooler.tokenizes_prompt_whole:
        lines += _whole_prompt_tokenization_lines(pooler.prompt_template(pooling), pooler.rewrite_sentence)
    elif pooler.uses_prompt_template:
        lines += _template_tokenization_lines(pooler.prompt_template(pooling), pooler.needs_mask_token)
    else:
        lines += [
            "",
            'batch = tokenizer(sentences, padding=True, truncation=True, max_length=max_length, return_tensors="pt")',
        ]
    hidden = ", output_hidden_states=True" if pooler.needs_all_layers else ""
    lines += ["with torch.no_grad():", f"    outputs = model(**batch{hidden})", pooling_code]
    if pooling.uses_mlp_at_inference:
        lines += [
            "# This checkpoint applies SimCSE's MLP head (dense + tanh) at inference; its weights are saved as",
            '# mlp.dense.* in model.safetensors (for a local folder: load_file(f"{folder}/model.safetensors")).',
            f'state = load_file(hf_hub_download({python_string(repo_id)}, "model.safetensors"))',
            'embeddings = torch.tanh(embeddings @ state["mlp.dense.weight"].T + state["mlp.dense.bias"])',
        ]
    if pooling.normalize:
        lines.append("embeddings = torch.nn.functional.normalize(embeddings, dim=-1)  # saved with normalize=True")
    lines.append("similarity = torch.nn.functional.cosine_similarity(embeddings[0], embeddings[1], dim=0)")
    return code_block("\n".join(lines), "python")


def _template_tokenization_lines(template: str, has_mask_token: bool) -> list[str]:
    """``batch`` from ``sentences`` wrapped in ``template``, as
    :class:`~hf_cse.modeling.tokenization.SentenceTokenizer` does (its ``[MASK]`` the tokenizer's own mask token when
    ``has_mask_token``); leaves ``lead``, ``prefix_ids``, ``suffix_ids``, ``trail`` and ``rows`` for the pooler's code
    (the ``mask`` pooler's template denoising)."""
    template_line = (
        f'template = {python_string(template)}.replace("[MASK]", tokenizer.mask_token)'
        if has_mask_token
        else f"template = {python_string(template)}"
    )
    return _SPECIAL_TOKENS_HELPER.rstrip("\n").split("\n") + [
        "",
        "",
        "# The prompt template" + ("; [MASK] becomes the tokenizer's own mask token." if has_mask_token else "."),
        template_line,
        'prefix, suffix = template.split("{sentence}")',
        'prefix_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"] if prefix else []',
        'suffix_ids = tokenizer(suffix, add_special_tokens=False)["input_ids"] if suffix else []',
        "lead, trail = special_tokens(tokenizer)",
        "# Truncation shortens the sentence only, never the template.",
        "budget = max_length - len(lead) - len(prefix_ids) - len(suffix_ids) - len(trail)",
        'bodies = tokenizer(sentences, add_special_tokens=False, truncation=True, max_length=budget)["input_ids"]',
        "rows = [lead + prefix_ids + body + suffix_ids + trail for body in bodies]",
        'batch = tokenizer.pad([{"input_ids": row} for row in rows], padding_side="right", return_tensors="pt")',
    ]


_PROMPTEOL_REWRITE_CODE = """\
def rewrite(sentence):
    \"\"\"PromptEOL's evaluation rewrite: a final period, single quotes for double ones.\"\"\"
    if sentence and sentence[-1] not in ".?\\"'":
        sentence += "."
    sentence = sentence.replace('"', "'")
    return sentence[:-1] + "." if sentence.endswith("?") else sentence
"""


def _whole_prompt_tokenization_lines(template: str, rewrite: Callable[[str, bool], str]) -> list[str]:
    """``batch`` from ``sentences`` wrapped in ``template`` and tokenized in one call per prompt, as
    :class:`~hf_cse.modeling.tokenization.SentenceTokenizer` does for a pooler that
    :attr:`~hf_cse.modeling.poolers.Pooler.tokenizes_prompt_whole` (PromptEOL); with PromptEOL's evaluation rewrite
    first where the pooler applies it at inference (``rewrite``, its
    :meth:`~hf_cse.modeling.poolers.Pooler.rewrite_sentence`, is probed)."""
    rewrites = rewrite('say "hi"', True) != 'say "hi"'
    lines = ["", "", "# The prompt template, filled and tokenized in one call (as PromptEOL does)."]
    lines.append(f"template = {python_string(template)}")
    if rewrites:
        lines += ["", "", *_PROMPTEOL_REWRITE_CODE.rstrip("\n").split("\n"), "", ""]
        lines.append("sentences = [rewrite(s) for s in sentences]")
    return lines + [
        "",
        "",
        "def prompt_ids(sentence):",
        '    """The prompt\'s ids; over max_length, rebuilt from the sentence\'s first tokens (template kept)."""',
        '    ids = tokenizer(template.replace("{sentence}", sentence).strip())["input_ids"]',
        '    words = tokenizer(sentence, add_special_tokens=False)["input_ids"]',
        "    keep = len(words)",
        "    while len(ids) > max_length and keep > 0:",
        "        keep = max(0, min(keep, len(words)) - (len(ids) - max_length))",
        '        ids = tokenizer(template.replace("{sentence}", tokenizer.decode(words[:keep])).strip())["input_ids"]',
        "    return ids",
        "",
        "",
        'batch = tokenizer.pad([{"input_ids": prompt_ids(s)} for s in sentences], padding_side="right", '
        'return_tensors="pt")',
    ]


def pooler_module(pooling: PoolingConfig) -> str | None:
    """The module that registers ``pooling``'s pooler when that is outside hf_cse (what ``--import_module`` must
    name before the checkpoint loads); ``None`` for hf_cse's own poolers and for one registered by a script
    (``__main__``, which cannot be imported by name)."""
    module = type(pooling.get_pooler()).__module__
    return None if module in ("hf_cse", "__main__") or module.startswith("hf_cse.") else module
