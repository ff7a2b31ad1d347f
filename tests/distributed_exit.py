"""A 2-process DDP script that trains a linear layer for a few steps, gathers and all-reduces a few tensors, and
ends; the way it ends is the argument: ``leave`` (the default) through :func:`hf_cse.distributed.leave_process_group`,
as hf_cse's commands do, ``return`` by returning, as a plain script does.

    python -m torch.distributed.run --nproc_per_node 2 tests/distributed_exit.py [leave|return]

On gloo, ``return`` aborts a process now and then after its work is done (the reason is in
``leave_process_group``'s docstring); ``leave`` must always exit 0.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

from hf_cse.distributed import leave_process_group


def main(ending: str = "leave") -> None:
    if ending not in ("leave", "return"):
        raise SystemExit(f"the ending must be leave or return, not {ending!r}")
    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 16))
    for _ in range(3):
        model(torch.randn(4, 16)).sum().backward()
    for _ in range(10):
        tensor = torch.randn(100)
        dist.all_gather([torch.empty_like(tensor) for _ in range(dist.get_world_size())], tensor)
        dist.all_reduce(tensor)
    if ending == "leave":
        leave_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:2])
