"""Gradient caching (Gao et al., 2021, "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup").

A contrastive loss needs the whole batch's embeddings at once, but their gradients only flow back through the
encoder row by row. So: embed the batch in chunks without keeping any graph, compute the loss and its gradient
with respect to the embeddings on the full batch, then re-encode each chunk with the graph and back-propagate
that chunk's embedding gradient. The re-encoding replays the random state each chunk saw the first time, so
dropout (the positive view itself) draws the same masks, and the parameter gradients equal those of encoding the
same chunks with the graph kept. Peak activation memory is one chunk's instead of the batch's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from ..inputs.base import SENTENCES


def _rng_devices() -> list[int]:
    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []


def _capture_rng() -> tuple[torch.Tensor, list[torch.Tensor]]:
    return torch.get_rng_state(), [torch.cuda.get_rng_state(d) for d in _rng_devices()]


class _CachedChunks(torch.autograd.Function):
    """Forward: encode every chunk without graph. Backward: re-encode each chunk with graph and back-propagate."""

    @staticmethod
    def forward(ctx, anchor: torch.Tensor, encode_chunk: Callable[[int], torch.Tensor], num_chunks: int):
        ctx.encode_chunk = encode_chunk
        ctx.rng_states = []
        outputs = []
        for index in range(num_chunks):
            ctx.rng_states.append(_capture_rng())
            with torch.no_grad():
                outputs.append(encode_chunk(index))
        ctx.sizes = [len(output) for output in outputs]
        return torch.cat(outputs)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        # fork_rng restores the random state on exit, so the replay leaves later randomness untouched.
        with torch.random.fork_rng(devices=_rng_devices()):
            for index, chunk_grad in enumerate(grad.split(ctx.sizes)):
                cpu_state, cuda_states = ctx.rng_states[index]
                torch.set_rng_state(cpu_state)
                for device, state in zip(_rng_devices(), cuda_states, strict=True):
                    torch.cuda.set_rng_state(state, device)
                with torch.enable_grad():
                    torch.autograd.backward(ctx.encode_chunk(index), chunk_grad)
        return None, None, None


def cached_encode(encode_chunk: Callable[[int], torch.Tensor], num_chunks: int, device: torch.device) -> torch.Tensor:
    """``cat([encode_chunk(0), ..., encode_chunk(num_chunks - 1)])`` whose backward re-encodes chunk by chunk.

    ``encode_chunk(i)`` must be deterministic given the random state (it is called twice per step).
    """
    anchor = torch.zeros((), device=device, requires_grad=True)  # gives the Function a graph to hang off
    return _CachedChunks.apply(anchor, encode_chunk, num_chunks)


def encode_views_in_chunks(
    encode_views: Callable[[Mapping[str, Any]], torch.Tensor],
    batch: Mapping[str, Any],
    num_views: int,
    chunk_size: int,
) -> list[torch.Tensor]:
    """The ``num_views`` views' embeddings ``[B, D]`` of a collated batch, encoded ``chunk_size`` sentences at a
    time with :func:`cached_encode`.

    Args:
        encode_views: ``rows -> [V * b, D]``, the stacked views of a sub-batch of ``b`` sentences (view-major).
        batch: token groups (``{key: [B, L]}``) and row columns (``[B]``), sliced to each chunk's rows.
    """
    input_ids = batch[SENTENCES]["input_ids"]
    device = input_ids.device
    chunks = torch.arange(len(input_ids), device=device).split(chunk_size)
    rows = [{key: _rows(value, ids) for key, value in batch.items()} for ids in chunks]
    encoded = cached_encode(lambda i: encode_views(rows[i]), len(chunks), device)
    # Chunk-major [chunk][view][row] -> view-major [view][row].
    per_chunk = [
        part.split(len(ids))
        for part, ids in zip(encoded.split([num_views * len(c) for c in chunks]), chunks, strict=True)
    ]
    return [torch.cat([views[v] for views in per_chunk]) for v in range(num_views)]


def _rows(value: Mapping[str, torch.Tensor] | torch.Tensor, ids: torch.Tensor) -> Any:
    """Rows ``ids`` of a token group (every tensor in it), of a row column, or of a list (a streamed batch's
    texts)."""
    if isinstance(value, list):
        return [value[i] for i in ids.tolist()]
    return {key: tensor[ids] for key, tensor in value.items()} if isinstance(value, Mapping) else value[ids]
