"""Usage code on a card: plain transformers (reproducing hf_cse's embeddings, for every pooler), sentence-transformers
(for the poolers it expresses) and hf_cse. Each snippet is a fenced ```python block; user strings (repository id,
prompt template) enter the code as Python string literals.
"""

from __future__ import annotations

from ...markdown import code_block, python_string
from ...modeling.configuration_cse import PoolingConfig
from ..sentence_transformers_files import SENTENCE_TRANSFORMERS_POOLERS

EXAMPLE_SENTENCES = ["A man is playing a guitar.", "Someone plays an instrument."]

_SPECIAL_TOKENS_HELPER = '''
def special_tokens(tokenizer):
    """The ids the tokenizer puts before and after one sentence ([CLS] ... [SEP], <s> ... </s>)."""
    bare = tokenizer("hello", add_special_tokens=False)["input_ids"]
    framed = tokenizer("hello")["input_ids"]
    start = next(i for i in range(len(framed)) if framed[i : i + len(bare)] == bare)
    return framed[:start], framed[start + len(bare) :]
'''

_POOLING_CODE = {
    "cls": "embeddings = outputs.last_hidden_state[:, 0]  # the [CLS] state",
    "cls_before_pooler": "embeddings = outputs.last_hidden_state[:, 0]  # the [CLS] state",
    "avg": (
        'mask = batch["attention_mask"].unsqueeze(-1).to(outputs.last_hidden_state.dtype)\n'
        "embeddings = (outputs.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # mean of real tokens"
    ),
    "avg_first_last": (
        'mask = batch["attention_mask"].unsqueeze(-1).to(outputs.last_hidden_state.dtype)\n'
        "hidden = (outputs.hidden_states[1] + outputs.last_hidden_state) / 2.0  # first layer's output + last layer\n"
        "embeddings = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)"
    ),
    "avg_top2": (
        'mask = batch["attention_mask"].unsqueeze(-1).to(outputs.last_hidden_state.dtype)\n'
        "hidden = (outputs.hidden_states[-2] + outputs.last_hidden_state) / 2.0  # last two layers\n"
        "embeddings = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)"
    ),
}


def transformers_snippet(repo_id: str, pooling: PoolingConfig) -> str:
    """Plain-transformers code that reproduces hf_cse's embeddings for ``pooling`` (a ```python block)."""
    max_length = (
        str(pooling.max_seq_length)
        if pooling.max_seq_length is not None
        else "min(tokenizer.model_max_length, 100_000)"
    )
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
    if pooling.pooler == "mask":
        lines += _mask_snippet_lines(pooling)
    else:
        hidden = ", output_hidden_states=True" if pooling.pooler in ("avg_first_last", "avg_top2") else ""
        lines += [
            "",
            'batch = tokenizer(sentences, padding=True, truncation=True, max_length=max_length, return_tensors="pt")',
            "with torch.no_grad():",
            f"    outputs = model(**batch{hidden})",
            _POOLING_CODE[pooling.pooler],
        ]
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


def _mask_snippet_lines(pooling: PoolingConfig) -> list[str]:
    lines = _SPECIAL_TOKENS_HELPER.rstrip("\n").split("\n") + [
        "",
        "",
        "# The prompt template; [MASK] becomes the tokenizer's own mask token.",
        f'template = {python_string(pooling.prompt_template)}.replace("[MASK]", tokenizer.mask_token)',
        'prefix, suffix = template.split("{sentence}")',
        'prefix_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"] if prefix else []',
        'suffix_ids = tokenizer(suffix, add_special_tokens=False)["input_ids"] if suffix else []',
        "lead, trail = special_tokens(tokenizer)",
        "# Truncation shortens the sentence only, never the template: the mask token is always kept.",
        "budget = max_length - len(lead) - len(prefix_ids) - len(suffix_ids) - len(trail)",
        'bodies = tokenizer(sentences, add_special_tokens=False, truncation=True, max_length=budget)["input_ids"]',
        "rows = [lead + prefix_ids + body + suffix_ids + trail for body in bodies]",
        'batch = tokenizer.pad([{"input_ids": row} for row in rows], return_tensors="pt")',
        "with torch.no_grad():",
        "    outputs = model(**batch)",
        "    # The last hidden state at the mask token: one per sentence.",
        '    embeddings = outputs.last_hidden_state[batch["input_ids"] == tokenizer.mask_token_id]',
    ]
    if pooling.template_denoising:
        lines += [
            "    # Template denoising (PromptBERT): subtract the mask state of the template alone, its tokens",
            "    # placed at the positions they hold around each sentence.",
            "    n_prefix, n_suffix = len(lead) + len(prefix_ids), len(suffix_ids) + len(trail)",
            "    template_ids = torch.tensor([lead + prefix_ids + suffix_ids + trail] * len(rows))",
            "    first = model.embeddings.padding_idx + 1 if hasattr(model.embeddings, "
            '"create_position_ids_from_input_ids") else 0',
            "    positions = torch.tensor(",
            "        [list(range(n_prefix)) + list(range(len(row) - n_suffix, len(row))) for row in rows]",
            "    ) + first  # RoBERTa-style encoders number positions from padding_idx + 1",
            "    template_states = model(",
            "        input_ids=template_ids, attention_mask=torch.ones_like(template_ids), position_ids=positions",
            "    ).last_hidden_state",
            "    embeddings = embeddings - template_states[template_ids == tokenizer.mask_token_id]",
        ]
    return lines


def sentence_transformers_snippet(repo_id: str, pooling: PoolingConfig) -> str:
    """sentence-transformers code for ``repo_id`` (a ```python block), or a sentence saying why there is none (a
    pooler sentence-transformers cannot express: the repository then has no ``modules.json``)."""
    if pooling.pooler not in SENTENCE_TRANSFORMERS_POOLERS:
        return (
            f"sentence-transformers cannot express the `{pooling.pooler}` pooler (it supports "
            f"{', '.join(f'`{p}`' for p in SENTENCE_TRANSFORMERS_POOLERS)}), so this repository has no "
            "`modules.json`; "
            "use transformers (above) or hf_cse (below)."
        )
    code = f"""from sentence_transformers import SentenceTransformer

model = SentenceTransformer({python_string(repo_id)})
embeddings = model.encode({EXAMPLE_SENTENCES!r})
similarity = model.similarity(embeddings[:1], embeddings[1:])"""
    return code_block(code, "python")


def hf_cse_snippet(repo_id: str) -> str:
    """``hf_cse.SentenceEncoder`` code for ``repo_id`` (a ```python block)."""
    code = f"""from hf_cse import SentenceEncoder

encoder = SentenceEncoder.from_pretrained({python_string(repo_id)})  # the saved pooler, template and truncation length
embeddings = encoder.encode({EXAMPLE_SENTENCES!r})"""
    return code_block(code, "python")
