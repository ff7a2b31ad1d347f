"""Negatives across processes: gather embeddings from every data-parallel process, keeping their gradients."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.nn.functional import all_gather


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def gather_with_grad(tensors: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.Tensor | None]:
    """Concatenate each ``[B, ...]`` tensor over all processes (rank order) and say which rows are this process's.

    Gradients flow back through the gathered copies (``torch.distributed.nn.functional.all_gather`` sums the
    gradients every process computes for a row into the process that owns it), unlike SimCSE's no-grad gather
    that keeps only the local rows differentiable. With one process it returns the inputs and ``None``.

    Raises:
        ValueError: processes hold batches of different sizes (use ``dataloader_drop_last=True``).
    """
    size = world_size()
    if size == 1:
        return tensors, None
    batch = tensors[0].shape[0]
    sizes = [torch.zeros(1, dtype=torch.long, device=tensors[0].device) for _ in range(size)]
    dist.all_gather(sizes, torch.tensor([batch], device=tensors[0].device))
    if any(int(s) != batch for s in sizes):
        raise ValueError(
            f"Processes hold batches of different sizes {[int(s) for s in sizes]}; gathering negatives needs equal "
            "batches: set dataloader_drop_last=True or gather_negatives=False."
        )
    gathered = [torch.cat(all_gather(tensor)) for tensor in tensors]
    rows = torch.arange(batch, device=tensors[0].device) + dist.get_rank() * batch
    return gathered, rows


def gather_no_grad(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate ``tensor`` over all processes without gradient (indices, frozen similarities' inputs)."""
    if world_size() == 1:
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return torch.cat(parts)


def broadcast_from_main(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` as the main process (rank 0) holds it, on every process; with one process, ``tensor`` itself.

    For random draws that every process must share, such as DCLR's noise negatives over the gathered batch: each
    process's RNG drifts from the others' (dropout masks depend on the local batch's padded length).
    """
    if world_size() == 1:
        return tensor
    tensor = tensor.contiguous()
    dist.broadcast(tensor, src=0)
    return tensor
