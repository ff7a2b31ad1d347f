"""Gradient caching (Gao et al., 2021, "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup"),
in one process or several.

A contrastive loss needs the whole batch's embeddings at once, but their gradients only flow back through the
encoder row by row. So: embed the batch in chunks without keeping any graph, compute the loss and its gradient
with respect to the embeddings on the full batch, then re-encode each chunk with the graph and back-propagate
that chunk's embedding gradient. The re-encoding replays the random state each chunk saw the first time, so
dropout (the positive view itself) draws the same masks, and the parameter gradients equal those of encoding the
same chunks with the graph kept. Peak activation memory is one chunk's instead of the batch's.

Several processes (DDP): the chunks' embeddings are gathered like uncached ones (:func:`~hf_cse.distributed.
gather_with_grad`), so the gradient that reaches this process's chunks is already the sum of every process's loss
gradient for its rows, as in an uncached step. The replay must then all-reduce the parameters' gradients once, after
every gradient of the step has reached them: the caller runs the step's forwards under ``no_sync`` (a DDP forward
with gradients would otherwise arm the all-reduce for the loss's own backward), and the replay runs at the very end
of that backward (an autograd-engine callback), every chunk but the last under ``no_sync`` and the last in the
Trainer's own sync state, so DDP averages the accumulated gradients exactly once, as in an uncached step. Terms that
reach the parameters outside the chunks (OssCSE's recall term, a provider's forward) are then already summed in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

import torch

from ...inputs.base import SENTENCES

NoSync = Callable[[], AbstractContextManager[Any]]
"""A context in which a DDP forward and its backward leave the gradients unsynced (``model.no_sync``)."""


def _rng_devices() -> list[int]:
    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []


class _CachedChunks(torch.autograd.Function):
    """Forward: encode every chunk without graph. Backward: queue the replay of every chunk, with graph, for the end of
    the backward pass (:func:`_replay`)."""

    @staticmethod
    def forward(
        ctx, anchor: torch.Tensor, encode_chunk: Callable[[int], torch.Tensor], num_chunks: int, no_sync: NoSync
    ):
        ctx.encode_chunk, ctx.no_sync = encode_chunk, no_sync
        ctx.rng_states = []
        outputs = []
        for index in range(num_chunks):
            ctx.rng_states.append((torch.get_rng_state(), [torch.cuda.get_rng_state(d) for d in _rng_devices()]))
            with torch.no_grad():
                outputs.append(encode_chunk(index))
        ctx.sizes = [len(output) for output in outputs]
        return torch.cat(outputs)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        # Not now: other branches of this backward (a term on the parameters) may still be adding into the
        # parameters' gradients, and the last chunk's replay is where DDP all-reduces them.
        encode_chunk, no_sync, rng_states, sizes = ctx.encode_chunk, ctx.no_sync, ctx.rng_states, ctx.sizes
        torch.autograd.Variable._execution_engine.queue_callback(
            lambda: _replay(encode_chunk, grad.split(sizes), rng_states, no_sync)
        )
        return None, None, None, None


def _replay(
    encode_chunk: Callable[[int], torch.Tensor],
    chunk_grads: tuple[torch.Tensor, ...],
    rng_states: list[tuple[torch.Tensor, list[torch.Tensor]]],
    no_sync: NoSync,
) -> None:
    """Re-encode each chunk in the random state of its first encoding and back-propagate its embeddings' gradient;
    all but the last chunk under ``no_sync``."""
    last = len(chunk_grads) - 1
    # fork_rng restores the random state on exit, so the replay leaves later randomness untouched.
    with torch.random.fork_rng(devices=_rng_devices()):
        for index, chunk_grad in enumerate(chunk_grads):
            cpu_state, cuda_states = rng_states[index]
            torch.set_rng_state(cpu_state)
            for device, state in zip(_rng_devices(), cuda_states, strict=True):
                torch.cuda.set_rng_state(state, device)
            sync = no_sync() if index < last else contextlib.nullcontext()
            with sync, torch.enable_grad():  # the engine runs callbacks with gradients off
                torch.autograd.backward(encode_chunk(index), chunk_grad)


def cached_encode(
    encode_chunk: Callable[[int], torch.Tensor],
    num_chunks: int,
    device: torch.device,
    no_sync: NoSync = contextlib.nullcontext,
) -> torch.Tensor:
    """``cat([encode_chunk(0), ..., encode_chunk(num_chunks - 1)])`` whose backward re-encodes chunk by chunk.

    ``encode_chunk(i)`` must be deterministic given the random state (it is called twice per step). The re-encoding
    runs once the rest of the backward pass is done; ``no_sync`` (default: none) wraps every chunk's replay but the
    last.
    """
    anchor = torch.zeros((), device=device, requires_grad=True)  # gives the Function a graph to hang off
    return _CachedChunks.apply(anchor, encode_chunk, num_chunks, no_sync)


def encode_views_in_chunks(
    encode_views: Callable[[Mapping[str, Any]], torch.Tensor],
    batch: Mapping[str, Any],
    num_views: int,
    chunk_size: int,
    no_sync: NoSync = contextlib.nullcontext,
) -> list[torch.Tensor]:
    """The ``num_views`` views' embeddings ``[B, D]`` of a collated batch, encoded ``chunk_size`` sentences at a
    time with :func:`cached_encode`.

    Args:
        encode_views: ``rows -> [V * b, D]``, the stacked views of a sub-batch of ``b`` sentences (view-major).
        batch: token groups (``{key: [B, L]}``) and row columns (``[B]``), sliced to each chunk's rows.
        no_sync: the model's ``no_sync`` under DDP (default: none); see the module's docstring.
    """
    input_ids = batch[SENTENCES]["input_ids"]
    size = len(input_ids)
    # Consecutive rows, sliced on the host: no index tensor, whose values a list column would read back.
    chunks = [slice(start, min(start + chunk_size, size)) for start in range(0, size, chunk_size)]
    rows = [{key: _rows(value, chunk) for key, value in batch.items()} for chunk in chunks]
    encoded = cached_encode(lambda i: encode_views(rows[i]), len(chunks), input_ids.device, no_sync)
    # Chunk-major [chunk][view][row] -> view-major [view][row].
    lengths = [chunk.stop - chunk.start for chunk in chunks]
    per_chunk = [
        part.split(length)
        for part, length in zip(encoded.split([num_views * length for length in lengths]), lengths, strict=True)
    ]
    return [torch.cat([views[v] for views in per_chunk]) for v in range(num_views)]


def _rows(value: Mapping[str, torch.Tensor] | torch.Tensor | list, rows: slice) -> Any:
    """Rows ``rows`` of a token group (every tensor in it), of a row column (``[B]``) or of a host column (a list:
    sentence numbers, a streamed batch's texts)."""
    return {key: tensor[rows] for key, tensor in value.items()} if isinstance(value, Mapping) else value[rows]


def uses_chunks(batch: Mapping[str, Any], chunk_size: int | None) -> bool:
    """Whether a collated batch is encoded in chunks: ``chunk_size`` is set and below its number of sentences."""
    return chunk_size is not None and chunk_size < len(batch[SENTENCES]["input_ids"])
