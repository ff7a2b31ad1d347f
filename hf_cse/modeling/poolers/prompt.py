"""The ``mask`` pooler (PromptBERT, used by OssCSE): the last hidden state at the mask token of a prompt template,
optionally minus that of the template alone (template denoising).

Wrapping sentences in the template is :class:`~hf_cse.modeling.tokenization.SentenceTokenizer`'s (it fills in
``PoolingConfig.mask_token_id`` and the template's token lengths from the tokenizer); this pooler finds the mask token
and, for denoising, encodes the template alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ...markdown import code_span
from ...registry import register_pooler
from ..positions import default_position_ids
from .base import Pooler, PoolerInputs, saved_template_lengths

if TYPE_CHECKING:
    from ..configuration_cse import PoolingConfig
    from ..modeling_cse import CSEModel

PROMPTBERT_CITATION = """@inproceedings{jiang2022promptbert,
    title = "{P}rompt{BERT}: Improving {BERT} Sentence Embeddings with Prompts",
    author = "Jiang, Ting and Jiao, Jian and Huang, Shaohan and Zhang, Zihan and Wang, Deqing and Zhuang, Fuzhen and
              Wei, Furu and Huang, Haizhen and Deng, Denvy and Zhang, Qi",
    booktitle = "Proceedings of the 2022 Conference on Empirical Methods in Natural Language Processing",
    year = "2022",
    pages = "8826--8837",
}"""

DEFAULT_PROMPT_TEMPLATE = 'This sentence : "{sentence}" means [MASK] .'
"""PromptBERT's template. ``{sentence}`` marks the sentence and ``[MASK]`` stands for the tokenizer's own mask
token (``<mask>`` for RoBERTa)."""

_DENOISING_CODE = """\
# Template denoising (PromptBERT): subtract the mask state of the template alone, its tokens
# placed at the positions they hold around each sentence.
n_prefix, n_suffix = len(lead) + len(prefix_ids), len(suffix_ids) + len(trail)
template_ids = torch.tensor([lead + prefix_ids + suffix_ids + trail] * len(rows))
first = model.embeddings.padding_idx + 1 if hasattr(model.embeddings, "create_position_ids_from_input_ids") else 0
positions = torch.tensor(
    [list(range(n_prefix)) + list(range(len(row) - n_suffix, len(row))) for row in rows]
) + first  # RoBERTa-style encoders number positions from padding_idx + 1
with torch.no_grad():
    template_states = model(
        input_ids=template_ids, attention_mask=torch.ones_like(template_ids), position_ids=positions
    ).last_hidden_state
embeddings = embeddings - template_states[template_ids == tokenizer.mask_token_id]"""


@register_pooler("mask")
class MaskPooler(Pooler):
    """The last hidden state at the mask token of ``PoolingConfig.prompt_template`` (PromptBERT / OssCSE); with
    ``template_denoising``, minus the mask state of the template alone, encoded at the positions it holds around the
    sentence: in training always, at inference (eval mode: evaluation during and after training, ``encode``, the
    exported model) when ``denoise_at_inference``. sentence-transformers cannot express it (its tokenization has no
    template).

    Args:
        denoise_at_inference: with ``template_denoising``, whether inference subtracts the template's mask state too
            (``True``, the default) or only training does (``False``). PromptBERT's released code trains its
            unsupervised models with denoising and tests them on template 1's plain mask state (``eval_only.sh``
            and ``run.sh unsup-bert``/``unsup-roberta`` pass no ``--mask_embedding_sentence_delta`` to
            ``evaluation.py``), as ``examples/configs/paper/promptbert_*.yaml`` do with ``False``. A setting of this
            pooler, saved in ``config.json`` with its ``pooler_kwargs``
            (``--pooler_kwargs '{"denoise_at_inference": false}'``); ``False`` without ``template_denoising`` is
            refused, as it would change nothing.
    """

    uses_prompt_template = True
    needs_mask_token = True
    citations = (PROMPTBERT_CITATION,)

    def __init__(self, denoise_at_inference: bool = True) -> None:
        if not isinstance(denoise_at_inference, bool):
            raise ValueError(
                f"The mask pooler's denoise_at_inference must be true or false, got {denoise_at_inference!r}."
            )
        self.denoise_at_inference = denoise_at_inference

    def check(self, pooling: PoolingConfig) -> None:
        for placeholder in ("{sentence}", "[MASK]"):
            if pooling.prompt_template.count(placeholder) != 1:
                raise ValueError(
                    f"prompt_template {pooling.prompt_template!r} must contain {placeholder} exactly once "
                    f"(found {pooling.prompt_template.count(placeholder)})."
                )
        if not self.denoise_at_inference and not pooling.template_denoising:
            raise ValueError(
                "The mask pooler's denoise_at_inference=false needs template_denoising: true (without it nothing is "
                "subtracted, in training or at inference); drop denoise_at_inference or set template_denoising."
            )

    def denoises(self, pooling: PoolingConfig, training: bool) -> bool:
        """Whether the template's mask state is subtracted: with ``template_denoising``, in training always and at
        inference when :attr:`denoise_at_inference`."""
        return pooling.template_denoising and (training or self.denoise_at_inference)

    def describe(self, pooling: PoolingConfig) -> str:
        text = f"the last hidden state at the mask token of the prompt {code_span(pooling.prompt_template)}"
        if self.denoises(pooling, training=False):
            return text + ", minus that of the template alone (template denoising)"
        if pooling.template_denoising:  # denoised in training only
            return text + "; template denoising in training only (inference subtracts nothing, as PromptBERT's code)"
        return text

    def transformers_code(self, pooling: PoolingConfig) -> str:
        """The mask state; when inference denoises, minus the template's, which reads the template tokenization's
        variables of the card's snippet (``lead``, ``prefix_ids``, ``suffix_ids``, ``trail``, ``rows``)."""
        code = (
            "# The last hidden state at the mask token: one per sentence.\n"
            'embeddings = outputs.last_hidden_state[batch["input_ids"] == tokenizer.mask_token_id]'
        )
        return code + "\n" + _DENOISING_CODE if self.denoises(pooling, training=False) else code

    def pool(self, inputs: PoolerInputs, model: CSEModel) -> torch.Tensor:
        embeddings = mask_states(inputs.input_ids, inputs.last_hidden_state, model)
        if self.denoises(model.pooling, model.training):
            embeddings = embeddings - template_bias(inputs, model)
        return embeddings


def mask_states(input_ids: torch.Tensor | None, last: torch.Tensor, model: CSEModel) -> torch.Tensor:
    """Each row's last hidden state at its mask token: ``[B, L], [B, L, H] -> [B, H]``."""
    if input_ids is None:
        raise ValueError(
            "pooler='mask' finds the mask token through input_ids; pass input_ids alongside inputs_embeds "
            "(hf_cse.augment.views.ViewAugmentation.stack does)."
        )
    mask_token_id = model.pooling.mask_token_id
    if mask_token_id is None:
        raise ValueError(
            "pooler='mask' needs PoolingConfig.mask_token_id; hf_cse.modeling.tokenization.SentenceTokenizer sets it "
            "from the tokenizer."
        )
    is_mask = input_ids == mask_token_id
    if not model.training:
        # Reading the check on the host synchronizes with the device, so it runs outside training only: the
        # trainer's inputs come from SentenceTokenizer, which checks every row's one mask token as it tokenizes.
        per_row = is_mask.sum(dim=1)
        if not bool((per_row == 1).all()):
            bad = int((per_row != 1).nonzero()[0, 0])
            raise ValueError(
                f"pooler='mask' needs exactly one mask token (id {mask_token_id}) per sentence; row {bad} has "
                f"{int(per_row[bad])}. Encode sentences through the prompt template."
            )
    # A gather at each row's mask position, not `last[is_mask]`: boolean indexing sizes its output on the host.
    position = is_mask.int().argmax(dim=1)
    return last[torch.arange(len(last), device=last.device), position]


def template_bias(inputs: PoolerInputs, model: CSEModel) -> torch.Tensor:
    """PromptBERT's template denoising term ``[B, H]``: the mask state of the template alone.

    Each row's template tokens (its first ``prefix`` and last ``suffix`` real tokens) are encoded without the
    sentence but at the positions they hold in the full input, so the bias matches the sentence's length; the
    pooled embedding is ``h_mask(sentence) - h_mask(template)``. ``inputs.template_lengths`` ``[B, 2]`` gives
    ``(prefix, suffix)`` per row (rows of two templates in one batch), ``inputs.template_width`` their largest sum
    when the caller knows it; by default the pooling config's.
    """
    input_ids, attention_mask, template_lengths = inputs.input_ids, inputs.attention_mask, inputs.template_lengths
    if template_lengths is None:
        prefix, suffix = saved_template_lengths(model.pooling, "template_denoising")
        width = prefix + suffix  # known on the host: no read of the device, no graph break under torch.compile
        # Filled on the device: a tensor of Python data would be copied from the host, which a GPU's host waits for.
        prefix, suffix = (
            input_ids.new_full((len(input_ids), 1), length, dtype=torch.long) for length in (prefix, suffix)
        )
    else:
        prefix, suffix = template_lengths[:, :1], template_lengths[:, 1:]
        # Rows of two templates: the caller knows their longest, or it is read from the device (a synchronization).
        width = int((prefix + suffix).max()) if inputs.template_width is None else inputs.template_width
    size = prefix + suffix
    lengths = attention_mask.sum(dim=1, keepdim=True)
    offsets = torch.arange(width, device=input_ids.device).unsqueeze(0)
    valid = offsets < size
    # Template token k sits at k in the prefix and at length - size + k in the suffix; padding slots read 0.
    columns = torch.where(offsets < prefix, offsets, lengths - size + offsets).clamp(min=0) * valid
    template_ids = input_ids.gather(1, columns).masked_fill(~valid, model.config.pad_token_id or 0)
    positions = default_position_ids(model, input_ids).gather(1, columns)
    token_type_ids = inputs.token_type_ids
    template_kwargs = {"token_type_ids": token_type_ids.gather(1, columns)} if token_type_ids is not None else {}
    hidden = model.encoder_model(
        input_ids=template_ids,
        attention_mask=model.encoder_attention_mask(valid.long()),  # prepared as the sentence's: no read of the device
        position_ids=positions,
        return_dict=True,
        **template_kwargs,
    ).last_hidden_state
    return mask_states(template_ids, hidden, model)
