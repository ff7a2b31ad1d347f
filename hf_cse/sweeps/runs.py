"""Resumable batches of runs: each finished run leaves one result JSON, written atomically, and a rerun of the batch
does only the runs without one.

The pieces that ``python -m hf_cse.sweep`` and ``benchmarks/quality.py`` share:

- :func:`run_pending`: run every task whose result file is not finished yet, one after another or one per device
  slot at a time, writing each result as soon as it is done; a task that raises is reported and the batch goes on;
- :func:`run_child`: a training subprocess with its output in a log file, that dies with its parent however the
  parent ends (SIGTERM and Ctrl-C stop it with SIGTERM, which a training run answers with a checkpoint, and the
  parent waits for that however long it takes; a second signal kills it; on Linux, the kernel signals it when the
  parent is killed outright);
- :func:`install_signal_handlers`: a batch command's answer to SIGTERM, a closed terminal (SIGHUP) and Ctrl-Z;
- :func:`device_slots`: N slots per visible CUDA device (``CUDA_VISIBLE_DEVICES`` pinned per subprocess);
- :func:`read_json` (results are written with :func:`hf_cse.atomic_files.write_json_atomic`; a batch holds
  its folder with :class:`hf_cse.folder_lock.FolderLock`, as a training run does).

Nothing here imports torch: the batch logic is cheap to test and to import.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

from ..atomic_files import write_json_atomic
from ..errors import CSEError

logger = logging.getLogger(__name__)

Task = TypeVar("Task")

DONE, SKIPPED, FAILED = "done", "skipped", "failed"
"""The outcomes of a task in :func:`run_pending`: run now, finished by an earlier batch, or raised."""


@dataclass(frozen=True)
class DeviceSlot:
    """Where one run at a time goes.

    Attributes:
        index: the device's index among the devices this process sees (``cuda:INDEX`` here); ``None`` when runs are
            not pinned (CPU, or a single device: the child sees what this process sees).
        cuda_visible_devices: the ``CUDA_VISIBLE_DEVICES`` value of the subprocesses run in this slot.
        cpu_threads: the CPU threads of a run in this slot, when several runs share the CPU (``None``: torch's
            default, every core).
    """

    index: int | None = None
    cuda_visible_devices: str | None = None
    cpu_threads: int | None = None

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with ``CUDA_VISIBLE_DEVICES`` set for this slot, and
        ``OMP_NUM_THREADS`` (torch's CPU thread count) when it has :attr:`cpu_threads`."""
        env = dict(os.environ if base is None else base)
        if self.cuda_visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.cuda_visible_devices
        if self.cpu_threads is not None:
            env["OMP_NUM_THREADS"] = str(self.cpu_threads)
        return env

    @property
    def device(self) -> str | None:
        """The torch device of this slot as seen from this process (``None``: the default choice)."""
        return None if self.index is None else f"cuda:{self.index}"


def cuda_device_count() -> int:
    """The number of CUDA devices this process sees (0 without CUDA). Imports torch, lazily."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def device_slots(
    count: int | None = None, visible: str | None = None, runs_per_device: int = 1, cpu_count: int | None = None
) -> list[DeviceSlot]:
    """``runs_per_device`` slots per visible CUDA device when there are several, else ``runs_per_device`` unpinned
    slots; one device's slots are spread out (device 0, 1, ..., 0, 1, ...), so that the first runs start on
    different devices.

    A run of a small model uses a fraction of a large GPU: several at once fill it. Without CUDA, runs sharing the
    CPU get ``cpu_count // runs_per_device`` threads each instead of every core each.

    Args:
        count: the number of devices (default: :func:`cuda_device_count`).
        visible: this process's ``CUDA_VISIBLE_DEVICES`` (default: read from the environment); slot ``i`` pins its
            subprocesses to the ``i``-th entry, so ids and UUIDs both work and ``cuda:i`` here is the same device.
        runs_per_device: runs at once on each device (default: 1; ``>= 1``, checked by the command).
        cpu_count: the CPU cores (default: ``os.cpu_count()``).
    """
    count = cuda_device_count() if count is None else count
    if count == 0 and runs_per_device > 1:
        threads = max(1, (cpu_count or os.cpu_count() or 1) // runs_per_device)
        return [DeviceSlot(cpu_threads=threads)] * runs_per_device
    if count <= 1:
        return [DeviceSlot()] * runs_per_device
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    ids = [entry.strip() for entry in visible.split(",") if entry.strip()] if visible else []
    ids = ids[:count] if len(ids) >= count else [str(index) for index in range(count)]
    return [DeviceSlot(index, device_id) for _ in range(runs_per_device) for index, device_id in enumerate(ids)]


@dataclass
class Outcome(Generic[Task]):
    """What became of one task in :func:`run_pending`.

    Attributes:
        task: the task.
        status: :data:`DONE`, :data:`SKIPPED` or :data:`FAILED`.
        record: the result written (``None`` when skipped or failed).
        error: why it failed, one line.
    """

    task: Task
    status: str
    record: dict[str, Any] | None = None
    error: str | None = None


def run_pending(
    tasks: Sequence[Task],
    *,
    name: Callable[[Task], str],
    result_path: Callable[[Task], Path],
    is_finished: Callable[[Task, Path], bool],
    run: Callable[[Task, DeviceSlot], dict[str, Any]],
    slots: Sequence[DeviceSlot] = (DeviceSlot(),),
    on_outcome: Callable[[Outcome[Task]], None] | None = None,
) -> list[Outcome[Task]]:
    """Run every task whose result file is not finished yet, and write each result atomically once it is done.

    ``is_finished`` is asked for every task before any work, so that it can refuse a result of other settings
    (by raising) now rather than hours into the batch. A task whose ``run`` raises an ``Exception`` is logged and
    reported as failed, without a result file (a rerun retries it); the other tasks go on. ``KeyboardInterrupt``
    (Ctrl-C, or SIGTERM turned into one) stops the batch: running subprocesses are stopped (:func:`run_child`) and
    the interrupted task has no result.

    Args:
        tasks: the runs, in the order to start them.
        name: a task's name, for the log.
        result_path: where a task's result goes.
        is_finished: whether the file holds a finished result of the task; may raise to stop the batch.
        run: does the work on a device slot and returns the record to write (JSON-serializable).
        slots: with more than one, that many tasks run at once, each on its own slot (threads, each waiting on its
            subprocess); with one, the tasks run one after another in this thread.
        on_outcome: called (from this thread) after each task, e.g. to rewrite a summary.

    Returns:
        The outcome of every task, in the order of ``tasks``.
    """
    finished = [is_finished(task, result_path(task)) for task in tasks]
    _stopping.clear()
    outcomes: dict[int, Outcome[Task]] = {}
    total = len(tasks)

    def attempt(position: int, slot: DeviceSlot) -> Outcome[Task]:
        task = tasks[position]
        label = f"[{position + 1}/{total}] {name(task)}"
        where = "" if slot.index is None else f" on CUDA device {slot.cuda_visible_devices}"
        logger.info("%s: starting%s.", label, where)
        started = time.perf_counter()
        try:
            record = run(task, slot)
            path = write_json_atomic(result_path(task), record)
        except Exception as err:
            error = f"{type(err).__name__}: {err}".splitlines()[0]
            if _stopping.is_set():  # its training was stopped with the batch (Ctrl-C, SIGTERM): no failure of its own
                logger.info("%s: stopped with the batch; rerun to resume it.", label)
            elif isinstance(err, CSEError):  # a failure hf_cse explains in one line (a run's exit status, a lock)
                logger.error("%s failed; no result written. Rerun to retry it. %s", label, error)
            else:
                logger.exception("%s failed; no result written. Rerun to retry it.", label)
            return Outcome(task, FAILED, error=error)
        logger.info("%s: done in %.0f s, wrote %s.", label, time.perf_counter() - started, path)
        return Outcome(task, DONE, record=record)

    def report(position: int, outcome: Outcome[Task]) -> None:
        outcomes[position] = outcome
        if on_outcome is not None:
            on_outcome(outcome)

    pending = []
    for position, task in enumerate(tasks):
        if finished[position]:
            logger.info("[%d/%d] %s: finished already, skipped.", position + 1, total, name(task))
            report(position, Outcome(task, SKIPPED))
        else:
            pending.append(position)

    if len(slots) <= 1:
        slot = slots[0] if slots else DeviceSlot()
        for position in pending:
            report(position, attempt(position, slot))
    else:
        _run_on_slots(pending, slots, attempt, report)
    return [outcomes[position] for position in range(total)]


def _run_on_slots(
    pending: Sequence[int],
    slots: Sequence[DeviceSlot],
    attempt: Callable[[int, DeviceSlot], Outcome[Task]],
    report: Callable[[int, Outcome[Task]], None],
) -> None:
    """Run ``attempt`` for each position, as many at once as there are slots, each holding a slot while it runs."""
    free: queue.Queue[DeviceSlot] = queue.Queue()
    for slot in slots:
        free.put(slot)

    def on_a_free_slot(position: int) -> Outcome[Task]:
        slot = free.get()  # as many workers as slots: one is always free when a worker starts a task
        try:
            return attempt(position, slot)
        finally:
            free.put(slot)

    executor = ThreadPoolExecutor(max_workers=len(slots), thread_name_prefix="sweep-slot")
    futures = {executor.submit(on_a_free_slot, position): position for position in pending}
    remaining = set(futures)
    try:
        while remaining:
            done, remaining = wait(remaining, timeout=1.0, return_when="FIRST_COMPLETED")
            for future in sorted(done, key=futures.__getitem__):
                report(futures[future], future.result())
    except BaseException:
        # Ctrl-C lands in this thread: stop the running subprocesses, whose workers then fail, and the queued tasks
        # (even when a second Ctrl-C cuts the wait for the subprocesses short). The workers are waited for (Python's
        # exit would wait for them anyway): their last lines come before the batch's.
        try:
            stop_children()
        finally:
            executor.shutdown(wait=True, cancel_futures=True)
        raise
    executor.shutdown(wait=True)


# ---------------------------------------------------------------------------------------------------------------------
# Subprocesses

_children: set[subprocess.Popen] = set()
_children_lock = threading.RLock()
"""Held while a child is started and added to :data:`_children`, and while they are signalled. Reentrant: the Ctrl-Z
handler (:func:`_stop_with_children`) takes it in the main thread, which may be holding it already when the signal
comes (starting a child, or stopping them)."""
_stopping = threading.Event()
"""Set by :func:`stop_children`: a worker thread between its checks must not start a child after the others stopped."""


def run_child(
    command: Sequence[str], log: IO[str], *, env: Mapping[str, str] | None = None, cwd: str | Path | None = None
) -> int:
    """Run ``command`` with its output (stdout and stderr) to ``log``; returns its exit status.

    The child never trains on as an orphan, however this process ends:

    - this thread interrupted (Ctrl-C, or SIGTERM turned into ``KeyboardInterrupt``): the child is stopped (SIGTERM,
      which a training run answers with a checkpoint, waited for however long it takes; a second interruption kills
      it); :func:`stop_children` stops the children of other threads;
    - this process killed outright (``kill -9``, an out-of-memory kill, a signal without a handler): on Linux, the
      kernel sends the child SIGTERM (``PR_SET_PDEATHSIG``, set in the child before it runs ``command``; it fires when
      the thread that started the child ends, and this thread waits for the child).

    On Linux the child runs in a session of its own, out of the terminal's foreground process group: Ctrl-C in a
    terminal reaches this process alone, which stops the child with SIGTERM as above (a training run answers SIGINT
    by stopping at once, without a checkpoint), and Ctrl-Z stops it only through this process's handler
    (:func:`install_signal_handlers`). Elsewhere, without the parent-death signal, the child stays in this process's
    group, so that a closed terminal's SIGHUP still ends it; Ctrl-C and Ctrl-Z there reach it directly.
    """
    log.flush()  # what the caller wrote (the command line) comes before the child's output
    dies_with_this_process = _dies_with_this_process()
    with _children_lock:
        if _stopping.is_set():
            raise RuntimeError("The batch is stopping: no new run is started.")
        # Its own session only where the kernel stops it if this process dies: a closed terminal's SIGHUP no longer
        # reaches it either.
        process = subprocess.Popen(list(command), cwd=cwd, env=None if env is None else dict(env), stdout=log,
                                   stderr=subprocess.STDOUT, preexec_fn=dies_with_this_process,
                                   start_new_session=dies_with_this_process is not None)  # fmt: skip
        _children.add(process)
    try:
        return process.wait()
    except BaseException:
        _stop([process])
        raise
    finally:
        with _children_lock:
            _children.discard(process)


def stop_children() -> None:
    """Stop every subprocess that :func:`run_child` is waiting on (SIGTERM to all, then wait for them however long
    their checkpoints take; SIGKILL to all on a second Ctrl-C or SIGTERM), and start no new one until the next
    :func:`run_pending`."""
    with _children_lock:
        _stopping.set()
        children = list(_children)
    _stop(children)


def _stop(processes: Sequence[subprocess.Popen]) -> None:
    """SIGTERM to each of ``processes`` still running, then wait for them with no deadline: a large model on a slow
    disk may take minutes to save, and a run killed mid-save loses its work since its last checkpoint. When the wait
    is interrupted (a second Ctrl-C or SIGTERM), SIGKILL to them all, and the interruption is raised on."""
    running = [process for process in processes if process.poll() is None]
    if not running:
        return
    try:
        # Every one signalled before any wait, so that a second Ctrl-C during the wait leaves none unsignalled (one
        # that comes while they are signalled kills them all, below). One stopped by Ctrl-Z is continued, to save.
        for process in running:
            process.terminate()
            if hasattr(signal, "SIGCONT"):  # not on Windows, which has no Ctrl-Z handler either
                _signal_group(process, signal.SIGCONT)
        logger.warning(
            "Waiting for %d run(s) to save a checkpoint and exit, however long that takes; a second Ctrl-C or SIGTERM "
            "kills them at once.", len(running),
        )  # fmt: skip
        for process in running:
            process.wait()
    except BaseException:
        saving = [process for process in running if process.poll() is None]
        for process in running:
            process.kill()  # a no-op for one that ended
        if saving:  # each checkpoint is written whole or not at all: the last complete one is what a rerun resumes
            logger.warning(
                "Killed %d run(s) still saving; each resumes from its last complete checkpoint.", len(saving)
            )
        raise


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _dies_with_this_process() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel send the child SIGTERM when this process dies (Linux; ``None``
    elsewhere, or when libc's ``prctl`` cannot be found)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def set_parent_death_signal() -> None:  # in the child, between fork and exec: no allocation-heavy work
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # this process died before the call: nothing will signal the child
            os._exit(128 + int(signal.SIGTERM))

    return set_parent_death_signal


class Terminated(KeyboardInterrupt):
    """A termination signal (SIGTERM) turned into ``KeyboardInterrupt`` by :func:`raise_keyboard_interrupt`: the
    batch stops as on Ctrl-C, its training subprocesses included.

    Attributes:
        signum: the signal.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


def raise_keyboard_interrupt(signum: int, frame: object) -> None:
    """A SIGTERM handler: ``kill PID`` stops a batch as Ctrl-C does (:class:`Terminated`), its training
    subprocesses included."""
    raise Terminated(signum)


def install_signal_handlers() -> None:
    """How a batch command answers signals; call it from the main thread (``console_main``).

    - SIGTERM (``kill PID``, a scheduler) and SIGHUP (a closed terminal) stop the batch as Ctrl-C does
      (:func:`raise_keyboard_interrupt`): the running subprocesses save a checkpoint first. SIGHUP matters most
      while the batch is stopped by Ctrl-Z (a terminal closed then sends SIGHUP and SIGCONT): unhandled, it would end
      this process at once and leave its subprocesses stopped for good, the kernel's SIGTERM pending in each;
    - Ctrl-Z (SIGTSTP) stops the running subprocesses with this process, and continuing it (``fg``, ``bg``, SIGCONT)
      continues them (:func:`_stop_with_children`).

    A signal this process ignores stays ignored (SIGHUP under ``nohup``); one the platform lacks (Windows has SIGTERM
    alone of these) is left out.
    """
    handlers = (("SIGTERM", raise_keyboard_interrupt), ("SIGHUP", raise_keyboard_interrupt))
    for name, handler in (*handlers, ("SIGTSTP", _stop_with_children)):
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, handler)


def _stop_with_children(signum: int, frame: object) -> None:
    """The SIGTSTP (Ctrl-Z) handler: stop the running subprocesses' process groups (SIGSTOP, which a process cannot
    ignore, nor its dataloader workers), then this process as SIGTSTP would have; once continued, continue them.

    On Linux each subprocess leads a session of its own, which the terminal's Ctrl-Z does not reach: without this,
    the batch would pause while its runs trained on, unsupervised. Elsewhere a subprocess is in this process's group,
    which the terminal stops whole; no group bears its pid, and signalling one is a no-op.
    """
    with _children_lock:  # a worker thread starting a child has added it before this looks
        stopped = [process for process in _children if process.returncode is None]
        for process in stopped:
            _signal_group(process, signal.SIGSTOP)
    signal.signal(signum, signal.SIG_DFL)
    try:
        # This process stops here until continued (where the kernel discards the signal, in a process group with no
        # shell to continue it, nothing stops: the runs are continued at once, as if nothing happened).
        os.kill(os.getpid(), signum)
    finally:
        # The signal that ends a stopped job (`kill %1`: SIGTERM, then SIGCONT) may interrupt this block: the batch
        # then stops, and _stop continues every run it signals.
        signal.signal(signum, _stop_with_children)
        for process in stopped:
            _signal_group(process, signal.SIGCONT)


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    """Send ``signum`` to the process group that ``process`` leads: on Linux, it and its dataloader workers (its
    session's one group). A no-op where it leads none (elsewhere it is in this process's group) or it has ended."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)


def stop_cause(err: KeyboardInterrupt) -> str:
    """What stopped a batch, for its one-line message: each signal's name (``SIGTERM`` for :class:`Terminated`, else
    ``Ctrl-C``), first to last (``SIGTERM, then Ctrl-C``). A second signal, which came while the batch stopped after
    the first (and killed the runs still saving, :func:`stop_children`), is raised with the first as its context."""
    names = []
    cause: BaseException | None = err
    while isinstance(cause, KeyboardInterrupt):
        names.append(signal.Signals(cause.signum).name if isinstance(cause, Terminated) else "Ctrl-C")
        cause = cause.__context__
    return ", then ".join(reversed(names))


# ---------------------------------------------------------------------------------------------------------------------
# Files


def read_json(path: str | os.PathLike) -> Any:
    """The JSON in ``path``, or ``None`` when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
