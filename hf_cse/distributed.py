"""Negatives across processes: gather embeddings from every data-parallel process, keeping their gradients; and
the end of a process's part in a multi-process run (:func:`record_error_for_launcher`,
:func:`leave_process_group`).

Below the training code on purpose: objectives (DCLR's shared noise) and input providers (complementary
similarities) gather and broadcast too, and must not depend on hf_cse.training. Needs torch and the atomic writer
only.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

from .atomic_files import write_json_atomic
from .errors import CSEError


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def gather_with_grad(tensors: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.Tensor | None]:
    """Concatenate each ``[B, ...]`` tensor over all processes (rank order) and say which rows are this process's.

    Gradients flow back through the gathered copies (:class:`_GatherWithGrad` sums the gradients every process
    computes for a row into the process that owns it), unlike SimCSE's no-grad gather that keeps only the local
    rows differentiable. With one process it returns the inputs and ``None``.

    Raises:
        ValueError: processes hold batches of different sizes (use ``dataloader_drop_last=True``).
    """
    size = world_size()
    if size == 1:
        return tensors, None
    batch = tensors[0].shape[0]
    _check_equal_batches(batch, tensors[0].device)
    gathered = [_GatherWithGrad.apply(tensor) for tensor in tensors]
    rows = torch.arange(batch, device=tensors[0].device) + dist.get_rank() * batch
    return gathered, rows


_CHECKED_GROUPS: set[int] = set()
"""The default process groups (by ``id``) whose processes' batch sizes :func:`_check_equal_batches` compared."""


def _check_equal_batches(batch: int, device: torch.device) -> None:
    """Raise if the processes hold batches of different sizes, at the first gather of a process group only.

    Reading the sizes back from the device is a host synchronization on a GPU, so it is not done every step; and
    once is enough for hf_cse's data: accelerate's ``even_batches`` and the stream's filled final chunk
    (:mod:`hf_cse.training.data.streaming`) give every process the same number of rows at every step. Every process
    makes its first gather at the same step, so all of them take part in the check.
    """
    group = id(dist.group.WORLD)
    if group in _CHECKED_GROUPS:
        return
    sizes_seen = gather_no_grad(torch.tensor([batch], device=device)).tolist()
    if any(size != batch for size in sizes_seen):
        raise ValueError(
            f"Processes hold batches of different sizes {sizes_seen}; gathering negatives needs equal batches: set "
            "dataloader_drop_last=True or gather_negatives=False."
        )
    _CHECKED_GROUPS.add(group)


class _GatherWithGrad(torch.autograd.Function):
    """All-gather along dim 0 whose backward sums every process's gradient of this process's rows into them.

    Replaces ``torch.distributed.nn.functional.all_gather``, deprecated in torch 2.13 (a FutureWarning per process
    per run). The successors it names live in the private ``torch.distributed._functional_collectives``, whose
    names change between releases (2.13 deprecates ``all_gather_tensor_autograd`` too, and ``reduce_scatter_tensor``
    for ``reduce_scatter_single``), while hf_cse supports torch>=2.6. ``dist.all_gather`` (list form) and
    ``dist.all_reduce`` are public, undeprecated and on every backend, gloo included, so the backward all-reduces
    the whole gathered gradient and keeps this process's slice: the sum a reduce-scatter gives, for about twice its
    traffic on a batch x hidden tensor, small beside DDP's all-reduce of the model's gradients.
    """

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, tensor: torch.Tensor) -> torch.Tensor:
        ctx.rows = slice(dist.get_rank() * tensor.shape[0], (dist.get_rank() + 1) * tensor.shape[0])
        return gather_no_grad(tensor)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
        # all_reduce works in place: a copy, since autograd may hand the same gradient buffer to other nodes.
        grad = grad.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rows]


def gather_no_grad(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate ``tensor`` over all processes without gradient (indices, frozen similarities' inputs)."""
    if world_size() == 1:
        return tensor
    tensor = tensor.contiguous()  # collectives need contiguous memory
    parts = [torch.empty_like(tensor) for _ in range(world_size())]
    dist.all_gather(parts, tensor)
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


ERROR_FILE_VARIABLE = "TORCHELASTIC_ERROR_FILE"
"""Where ``torchrun`` and ``accelerate launch`` (torch.distributed.elastic) tell each process to write the error it
dies of, which their failure summary prints as the root cause."""


def record_error_for_launcher(message: str) -> None:
    """Write ``message`` to this process's :data:`ERROR_FILE_VARIABLE` file, in the layout of
    torch.distributed.elastic's own error files (``py_callstack`` is what the summary prints); nothing when the
    variable is unset (not launched so).

    Whole or not at all (:func:`~hf_cse.atomic_files.write_json_atomic`): the launcher parses the file as JSON, and one
    cut short by a full disk makes it log "Failed to parse reply file" and raise, a traceback in place of the summary.
    A write that fails is dropped: the caller prints ``message`` itself, the one line that matters, and without the
    file the launcher says that the process failed, with its exit status.
    """
    error_file = os.environ.get(ERROR_FILE_VARIABLE)
    if not error_file:
        return
    details = {"message": message, "extraInfo": {"py_callstack": message, "timestamp": str(int(time.time()))}}
    with contextlib.suppress(CSEError):  # DiskFullError, SaveFailedError: the atomic writer left nothing there
        write_json_atomic(error_file, {"message": details})


def leave_process_group(exit_code: int = 0) -> None:
    """End this process's part in a multi-process run, as the last thing a command does; without a process group,
    return at once.

    Destroys the default process group (what ``Trainer.end`` does: NCCL warns at exit without it). On gloo (the CPU
    backend) the process then exits with ``exit_code`` after the exit work Python would do (non-daemon threads
    joined, ``atexit`` handlers run, output flushed) but *before* the interpreter is torn down. The reason: gloo's
    worker threads drop each finished collective a moment after the caller sees it done, and dropping it releases
    the Python objects of its tensors. DDP keeps the group, and so those threads, alive past
    ``destroy_process_group``; when a release falls into interpreter finalization the thread cannot take the GIL,
    and the process aborts (SIGABRT, "terminate called without an active exception") after a run that succeeded,
    so the launcher kills the other processes and exits 1. A 2-process DDP script that only trains and returns
    aborted like this in 13 of 20 launches on 2 CPU cores (``tests/distributed_exit.py``).
    """
    if not (dist.is_available() and dist.is_initialized()):
        return
    exit_now = dist.get_backend() == "gloo"
    dist.destroy_process_group()
    if not exit_now:
        return
    for thread in threading.enumerate():  # what Python waits for before its atexit handlers
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # logging's flush, huggingface_hub's pending commits, trackers
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
