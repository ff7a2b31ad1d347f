"""Padding-free batches: a batch's sentences encoded as one row of their real tokens, then put back in place.

A padded batch ``[B, L]`` spends the encoder's compute on its padding: wiki1m's sentences average well under the
32 tokens a batch pads to. Where the attention kernel takes rows of varying length (flash attention's varlen
kernel, flex attention's document masks), the real tokens are concatenated into one row ``[1, T]`` instead, each
sentence at the positions it holds in the padded batch (so its position ids restart at every sentence), and
transformers keeps the sentences apart: it reads the restarts of ``position_ids`` into a document mask
(``masking_utils.find_packed_sequence_indices``) for flex attention, and flash attention takes the sentences'
cumulative lengths (``cu_seq_lens_q``/``cu_seq_lens_k``). The states are scattered back to ``[B, L, H]``, zeros at
the padding, so every pooler, the MLP head and every objective see the tensors of a padded batch
(:meth:`CSEModel.forward <hf_cse.modeling.modeling_cse.CSEModel.forward>`).

What it changes: the rounding (other matrix shapes), and the dropout masks, which are drawn over ``[1, T, H]``
rather than ``[B, L, H]`` (the same distribution, other draws). What it costs: the batch's token count is read back
from the device once per forward (the packed row's length), a host synchronization a padded step does not have.

Whether a model can be packed is probed, not listed: :func:`keeps_packed_sentences_apart` encodes two packed
sentences twice, the first one changed, and checks that the second one's states do not move by a bit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from transformers import PreTrainedModel

from ..errors import UsageError, echo
from .positions import default_position_ids

if TYPE_CHECKING:
    from .modeling_cse import CSEModel

PACKING_KERNELS = ("flash_attention_2", "flash_attention_3", "flex_attention")
"""The attention kernels that attend within each packed sentence at the cost of its own length. Under ``sdpa`` and
``eager`` transformers builds a dense ``[T, T]`` mask over the packed row: exact, but slower than padding, so
``padding_free`` refuses them (the tests use ``eager`` for the gradients that flex attention has no CPU kernel for)."""

FLASH_KERNELS = ("flash_attention_2", "flash_attention_3")
"""The kernels handed the sentences' cumulative lengths (``cu_seq_lens_*``, ``max_length_*``): otherwise transformers
derives them from ``position_ids`` in every layer, reading the device each time."""

PACKED_TENSORS = ("input_ids", "inputs_embeds", "token_type_ids", "position_ids")
"""The per-token encoder inputs ``[B, L]`` or ``[B, L, H]`` that are packed into ``[1, T]`` or ``[1, T, H]``."""


@dataclass(frozen=True)
class PackedBatch:
    """Where a padded batch's real tokens go in its packed row.

    Attributes:
        indices: ``[T]``, the flat position ``row * L + column`` of each real token, in row order.
        rows: ``B``, the padded batch's rows.
        columns: ``L``, its length.
        cu_seq_lens: ``[B + 1]`` int32, where each row's tokens start in the packed row (and ``T`` last).
        max_length: the longest row's token count.
    """

    indices: torch.Tensor
    rows: int
    columns: int
    cu_seq_lens: torch.Tensor
    max_length: int

    @classmethod
    def from_attention_mask(cls, attention_mask: torch.Tensor) -> PackedBatch:
        """The packing of a batch whose ``attention_mask`` ``[B, L]`` marks its real tokens (on either side)."""
        lengths = attention_mask.sum(dim=1)
        # The one read from the device: the packed row's length sizes every tensor after it.
        host_lengths = lengths.tolist()
        real = attention_mask.flatten().bool()
        indices = torch.nonzero_static(real, size=sum(host_lengths)).squeeze(1)  # sized on the host: no second read
        cu_seq_lens = torch.nn.functional.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))
        rows, columns = attention_mask.shape
        return cls(indices, rows, columns, cu_seq_lens, max(host_lengths, default=0))

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        """``[B, L, ...] -> [1, T, ...]``: the real tokens' entries, row after row."""
        return tensor.flatten(0, 1).index_select(0, self.indices).unsqueeze(0)

    def unpack(self, packed: torch.Tensor) -> torch.Tensor:
        """``[1, T, ...] -> [B, L, ...]``: each token's entry back at its place, zeros at the padding (a gradient
        reaches the packed entries only)."""
        flat = packed.new_zeros(self.rows * self.columns, *packed.shape[2:])
        return flat.index_copy(0, self.indices, packed[0]).view(self.rows, self.columns, *packed.shape[2:])

    def encode(
        self, encoder: PreTrainedModel, inputs: Mapping[str, torch.Tensor], output_hidden_states: bool = False
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None]:
        """Run ``encoder`` on the packed row of ``inputs`` (``position_ids`` among them, as the padded batch would
        number its tokens; the :data:`PACKED_TENSORS` are packed, any other keyword is passed on as it is) and return
        its last layer ``[B, L, H]`` and, with ``output_hidden_states``, every layer, each unpacked."""
        packed = {name: self.pack(value) if name in PACKED_TENSORS else value for name, value in inputs.items()}
        if getattr(encoder.config, "_attn_implementation", None) in FLASH_KERNELS:  # the others read position_ids
            lengths = {"cu_seq_lens_q": self.cu_seq_lens, "cu_seq_lens_k": self.cu_seq_lens}
            packed |= lengths | {"max_length_q": self.max_length, "max_length_k": self.max_length}
        outputs = encoder(
            **packed,
            attention_mask=None,  # the document mask comes from position_ids, or the cumulative lengths
            use_cache=False,  # a cache turns transformers' packed-sequence detection off
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        hidden_states = None
        if output_hidden_states:
            hidden_states = tuple(self.unpack(layer) for layer in outputs.hidden_states)
        return self.unpack(outputs.last_hidden_state), hidden_states


def padded_position_ids(model: CSEModel, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The position ids ``[B, L]`` the encoder would give ``inputs`` padded: ``position_ids`` when given; else those
    it derives from ``input_ids`` (:func:`~hf_cse.modeling.positions.default_position_ids`); else, from
    ``inputs_embeds`` alone, every column numbered from the first position (RoBERTa's ``padding_idx + 1``), as
    transformers' encoders do."""
    if "position_ids" in inputs:
        return inputs["position_ids"]
    if "input_ids" in inputs:
        return default_position_ids(model, inputs["input_ids"])
    columns = inputs["inputs_embeds"][..., 0]
    unpadded = torch.full(columns.shape, (model.config.pad_token_id or 0) + 1, device=columns.device)
    return default_position_ids(model, unpadded)


@torch.no_grad()
def keeps_packed_sentences_apart(model: CSEModel) -> bool:
    """Whether ``model``'s encoder, under its attention kernel, attends within each packed sentence only.

    Two sentences of 3 and 2 tokens are packed and encoded twice, the first sentence's tokens changed the second
    time; the second sentence's states must be equal bit for bit: a masked key's attention weight is exactly 0,
    and the two runs' shapes and orders of summation are the same. A model whose masks do not read the sentences'
    boundaries from the packed ``position_ids`` attends across them and changes those states. In eval mode (no
    dropout), on the model's device."""
    encoder = model.encoder_model
    device = next(encoder.parameters()).device
    pad = model.config.pad_token_id
    tokens = [i for i in range(min(int(model.config.vocab_size), 16)) if i != pad][:6]
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], device=device)
    packing = PackedBatch.from_attention_mask(mask)
    states = []
    was_training = encoder.training
    encoder.eval()
    try:
        for first in (tokens[:3], tokens[3:6]):
            ids = torch.tensor([first, [tokens[0], tokens[1], pad or 0]], device=device)
            inputs = {"input_ids": ids, "position_ids": padded_position_ids(model, {"input_ids": ids})}
            last, _ = packing.encode(encoder, inputs)
            states.append(last[1, :2])
    finally:
        encoder.train(was_training)
    return torch.equal(states[0], states[1])


def check_packing_kernel(kernel: str | None) -> None:
    """Raise :class:`~hf_cse.errors.UsageError` in one line unless ``kernel`` is one of :data:`PACKING_KERNELS`
    (``None``, transformers' choice, is SDPA where the model has it); checked before anything loads."""
    if kernel not in PACKING_KERNELS:
        raise UsageError(
            f"padding_free needs attn_implementation {', '.join(PACKING_KERNELS[:-1])} or {PACKING_KERNELS[-1]}, "
            f"and this model runs {echo(kernel)}: under it transformers masks a packed row densely, slower than "
            "padding."
        )


def check_padding_free(model: CSEModel) -> None:
    """Raise :class:`~hf_cse.errors.UsageError` in one line unless ``model`` can encode padding-free batches: its
    attention kernel is one of :data:`PACKING_KERNELS` (:func:`check_packing_kernel`) and its encoder keeps packed
    sentences apart (:func:`keeps_packed_sentences_apart`)."""
    kernel = getattr(model.config, "_attn_implementation", None)
    check_packing_kernel(kernel)
    if not keeps_packed_sentences_apart(model):
        raise UsageError(
            f"padding_free: transformers' {model.config.model_type!r} model attends across packed sentences under "
            f"{kernel} (it does not read their boundaries from position_ids); train it padded."
        )
