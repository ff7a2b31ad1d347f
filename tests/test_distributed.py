"""gather_with_grad in two real gloo processes: one process's gradients over the global batch, and no warnings; and
how a process leaves a multi-process run (leave_process_group)."""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from conftest import HANG_GUARD_S, REPO_ROOT, free_port
from distributed_gather import GLOBAL_BATCH, contrastive_loss, global_inputs
from rounding import assert_equal_up_to_float64_rounding

from hf_cse import distributed

PROCESSES = 2


def start_processes(*script: str) -> list[subprocess.Popen]:
    """``script`` (a test script and its arguments) started as each of the ``PROCESSES`` ranks of a gloo group."""
    rendezvous = {"WORLD_SIZE": str(PROCESSES), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    environments = [{**os.environ, **rendezvous, "RANK": str(rank)} for rank in range(PROCESSES)]
    command = [sys.executable, *script]
    return [subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True) for env in environments]


def wait_for(workers: list[subprocess.Popen]) -> tuple[list[int], str]:
    """Each worker's exit status, and their standard errors joined."""
    try:
        errors = [worker.communicate(timeout=HANG_GUARD_S)[1] for worker in workers]
    finally:
        for worker in workers:
            worker.kill()  # only if one hung past the timeout: the other waits for it forever
    return [worker.returncode for worker in workers], "\n".join(errors)


def test_two_process_gather_gives_each_process_the_global_gradient_of_its_rows(tmp_path: Path) -> None:
    """The gradient each process receives for its rows is the sum of every process's loss's gradient for them: the
    gradient of one process's summed loss over the global batch (DDP then averages, as one process's mean would)."""
    codes, errors = wait_for(start_processes(str(REPO_ROOT / "tests" / "distributed_gather.py"), str(tmp_path)))
    assert codes == [0] * PROCESSES, errors

    first, second = (view.requires_grad_() for view in global_inputs())
    everything = torch.arange(GLOBAL_BATCH)
    contrastive_loss(first, second, everything).backward()
    local = GLOBAL_BATCH // PROCESSES
    for rank in range(PROCESSES):
        result = json.loads((tmp_path / f"rank{rank}.json").read_text(encoding="utf-8"))
        assert result["warnings"] == []
        mine = slice(rank * local, (rank + 1) * local)
        assert result["rows"] == everything[mine].tolist()
        assert torch.equal(torch.tensor(result["gathered_first"], dtype=torch.float64), first.detach())
        # float64 inputs: equal up to float64 rounding (tests/rounding.py)
        got = dict(zip(("first", "second"), result["grads"], strict=True))
        assert_equal_up_to_float64_rounding(got, {"first": first.grad[mine], "second": second.grad[mine]}, "gradients")


def test_processes_that_leave_the_group_exit_0_every_time() -> None:
    """tests/distributed_exit.py (DDP steps and collectives on gloo) under torchrun, ending through
    leave_process_group: 4 launches in a row all exit 0. Ending by a plain return instead, 18 of 30 launches aborted
    on 2 cores, so the 4 would all pass about once in 40 tries."""
    script = [str(REPO_ROOT / "tests" / "distributed_exit.py"), "leave"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(PROCESSES)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    for _ in range(4):
        launch = [*torchrun, "--master_port", str(free_port()), *script]
        codes, errors = wait_for([subprocess.Popen(launch, env=env, stderr=subprocess.PIPE, text=True)])
        assert codes == [0], errors


class Exited(Exception):
    """What the fake ``os._exit`` raises: the status it was called with."""


@pytest.fixture
def fake_group(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """An initialized process group whose backend the test sets (``distributed.dist.get_backend``), ``os._exit``
    raising :class:`Exited`, and the list of what happened, in order."""
    events: list[str] = []
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(distributed.dist, "destroy_process_group", lambda: events.append("destroyed"))
    monkeypatch.setattr(distributed.atexit, "_run_exitfuncs", lambda: events.append("atexit handlers"))

    def fake_exit(code: int) -> None:
        events.append(f"exit {code}")
        raise Exited(code)

    monkeypatch.setattr(distributed.os, "_exit", fake_exit)
    return events


def test_leaving_a_gloo_group_destroys_it_then_does_pythons_exit_work_and_exits(
    fake_group: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(distributed.dist, "get_backend", lambda: "gloo")
    release = threading.Event()
    upload = threading.Thread(target=lambda: (release.wait(), fake_group.append("upload finished")))
    upload.start()
    threading.Timer(0.2, release.set).start()  # a daemon-less thread still working when the command returns
    with pytest.raises(Exited):
        distributed.leave_process_group(3)
    assert fake_group == ["destroyed", "upload finished", "atexit handlers", "exit 3"]


def test_leaving_an_nccl_group_destroys_it_and_returns(fake_group: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(distributed.dist, "get_backend", lambda: "nccl")
    distributed.leave_process_group()
    assert fake_group == ["destroyed"]


def test_without_a_process_group_leaving_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: pytest.fail("atexit handlers run"))
    distributed.leave_process_group()
