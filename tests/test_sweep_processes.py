"""``python -m hf_cse.sweep`` as a real process with real children (issue 42 item 6):

- the runs die with the sweep, however the sweep ends: each way a process dies (:data:`DEATHS`: SIGKILL, SIGTERM,
  SIGINT, SIGHUP), with one run at a time (started from the main thread) and two (from worker threads);
- the first signal lets each run finish its save, however long it takes, and a second one kills the runs still
  saving; the last line names both;
- Ctrl-Z stops the runs with the sweep and fg continues them; a terminal closed while they are stopped has them
  continued, and each saves and ends;
- Ctrl-C in a terminal, which signals the whole foreground process group, leaves each running run a checkpoint to
  resume from: the runs get the sweep's SIGTERM, not the terminal's SIGINT (which stops a run without one);
- a ``--hub_token`` reaches the runs and nothing the sweep writes: every file under its folder (records, logs,
  argument files, the runs' own folders) and everything it prints is searched for it.

The children of the first three are a stand-in ``run_unsup.py`` (:data:`STAND_IN`: it parses as the real one, then
records its pid and waits), so that each case costs one sweep process; the others run the real one.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    HANG_GUARD_S,
    REPO_ROOT,
    SENTENCES,
    wait_until,
    write_senteval_dir,
    write_stsb_dev,
    write_train_file,
)

from hf_cse.training.saving.checkpoints import newest_verified_checkpoint

DEATHS = ("SIGKILL", "SIGTERM", "SIGINT", "SIGHUP")
"""How a sweep ends before its runs: killed outright (as by any signal it does not handle), or by a signal it handles
(SIGTERM, Ctrl-C, a closed terminal's SIGHUP)."""
CAUSES = {"SIGINT": "Ctrl-C", "SIGTERM": "SIGTERM", "SIGHUP": "SIGHUP"}
"""How the sweep's last line names each signal it handles."""
TOKEN = "hf_sweepSECRETtoken0123456789"
STAND_IN = f"""
import os, signal, sys, time
def save(signum, frame):  # SIGTERM: "saving" until the test lets it finish, then "saved", and exit as a stopped run
    saves = os.path.join(os.environ["SAVES_ON_SIGTERM"], "%s-" + str(os.getpid()))
    open(saves % "saving", "w").close()
    while not os.path.exists(saves % "release"):
        time.sleep(0.05)
    open(saves % "saved", "w").close()
    sys.exit(1)
if __name__ == "__main__":  # a run: record the pid, then train "forever"
    if "SAVES_ON_SIGTERM" in os.environ:
        signal.signal(signal.SIGTERM, save)
    with open(os.path.join(os.environ["CHILD_PIDS"], str(os.getpid())), "w") as record:
        record.write(" ".join(sys.argv))
    time.sleep(600)
    sys.exit(0)
sys.path.insert(0, {str(REPO_ROOT)!r})  # loaded by the sweep to check the runs' arguments: the real parser
from run_unsup import DataArguments, ModelArguments, parse_args  # noqa: F401
"""


def process_state(pid: int) -> str | None:
    """``pid``'s state in ``/proc/PID/stat`` (``R`` running, ``S`` sleeping, ``T`` stopped, ``Z`` zombie, ...), or
    ``None`` once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by whoever inherited it, does not)."""
    return process_state(pid) not in (None, "Z", "X")


def as_from_a_terminal(own_group: bool) -> Callable[[], None]:
    """A ``preexec_fn``: the sweep's SIGINT, SIGHUP and SIGTSTP as a terminal leaves them (default), whatever the test
    runner inherited (a runner started in the background, ``nohup`` or ``&`` without job control, ignores some, and
    its children would too); ``own_group``: in a process group of its own, as a shell's job."""

    def preexec() -> None:
        for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTSTP):
            signal.signal(signum, signal.SIG_DFL)
        if own_group:
            os.setpgid(0, 0)

    return preexec


def start_sweep(
    command: list[str], env: dict[str, str], own_group: bool = False, stderr: Any = subprocess.PIPE
) -> subprocess.Popen:
    """``command`` (a sweep) started from the repository root with its signals as a terminal leaves them, its stderr
    to ``stderr`` (default: piped); ``own_group``: as a terminal's foreground job, a process group of its own (in
    this session, so that its Ctrl-Z stops it) that Ctrl-C and Ctrl-Z signal as a whole."""
    return subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
                            preexec_fn=as_from_a_terminal(own_group))  # fmt: skip


def start_stand_in_sweep(
    tmp_path: Path, runs_at_once: int, own_group: bool = False, stderr: Any = subprocess.PIPE, **env: str
) -> tuple[subprocess.Popen, Path]:
    """A sweep of two runs of :data:`STAND_IN`, ``runs_at_once`` at a time (``own_group``, ``stderr``: as
    :func:`start_sweep`); returns it and the folder of the runs' pid files."""
    stand_in = tmp_path / "run_unsup.py"
    stand_in.write_text(STAND_IN, encoding="utf-8")
    pids_dir = tmp_path / "pids"
    pids_dir.mkdir()
    command = [sys.executable, "-m", "hf_cse.sweep", "--seeds", "1", "2", "--output_dir", str(tmp_path / "sweep")]
    command += ["--sts_dir", str(tmp_path), "--run_unsup", str(stand_in), "--runs_per_device", str(runs_at_once)]
    command += ["--", "--model_name_or_path", "m", "--train_file", "t.txt", "--max_steps", "10", "--eval_steps", "5"]
    env = {**os.environ, "CHILD_PIDS": str(pids_dir), "CUDA_VISIBLE_DEVICES": "", **env}
    return start_sweep(command, env, own_group, stderr), pids_dir


def kill_all(sweep: subprocess.Popen, pids_dir: Path) -> None:
    """Whatever went wrong, neither the sweep nor a stand-in run outlives the test (SIGKILL ends stopped ones too)."""
    sweep.kill()
    for path in pids_dir.iterdir():
        if alive(int(path.name)):
            os.kill(int(path.name), signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
@pytest.mark.parametrize("runs_at_once", [1, 2])
@pytest.mark.parametrize("death", DEATHS)
def test_the_runs_die_with_the_sweep_however_it_ends(tmp_path: Path, death: str, runs_at_once: int) -> None:
    sweep, pids_dir = start_stand_in_sweep(tmp_path, runs_at_once)
    try:
        try:
            wait_until(lambda: len(list(pids_dir.iterdir())) == runs_at_once, f"{runs_at_once} runs to start")
        except AssertionError as err:
            sweep.kill()
            raise AssertionError(f"{err}; the sweep said: {sweep.communicate()[1].decode()[-3000:]}") from None
        children = [int(path.name) for path in pids_dir.iterdir()]
        assert all(alive(pid) for pid in children)
        sweep.send_signal(getattr(signal, death))
        err = sweep.communicate(timeout=HANG_GUARD_S)[1].decode()
        wait_until(lambda: not any(alive(pid) for pid in children), f"the runs {children} to end after {death}")
    finally:
        kill_all(sweep, pids_dir)
    assert sweep.returncode == (-9 if death == "SIGKILL" else 1), err
    if death in CAUSES:  # the signals the sweep handles: one line, what to do next
        assert (
            err.strip()
            .splitlines()[-1]
            .startswith(f"python -m hf_cse.sweep: error: Stopped by {CAUSES[death]} with 0 of 2 runs done")
        ), err[-2000:]
        assert "Traceback" not in err
    assert len(list(pids_dir.iterdir())) == runs_at_once  # no run started after the signal


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
@pytest.mark.parametrize(("first", "second"), [("SIGTERM", "SIGINT"), ("SIGINT", "SIGTERM")])
def test_the_first_signal_waits_for_every_save_and_a_second_kills_those_still_saving(
    tmp_path: Path, first: str, second: str
) -> None:
    """After the first signal the sweep waits for its runs with no deadline (a large model on a slow disk saves for
    minutes): a run's save ends when the test lets it, and the sweep is still waiting then. A second signal kills
    the run still saving, and the last line names both signals."""
    saves = tmp_path / "saves"
    saves.mkdir()
    err_path = tmp_path / "sweep.err"
    with open(err_path, "wb") as stderr:
        sweep, pids_dir = start_stand_in_sweep(tmp_path, 2, stderr=stderr, SAVES_ON_SIGTERM=str(saves))
    children: list[int] = []
    try:
        wait_until(lambda: len(list(pids_dir.iterdir())) == 2, "2 runs to start")
        released, saving = children = sorted(int(path.name) for path in pids_dir.iterdir())
        sweep.send_signal(getattr(signal, first))
        wait_until(lambda: "Waiting for 2 run(s) to save a checkpoint" in err_path.read_text(), "the waiting line")
        wait_until(lambda: all((saves / f"saving-{pid}").exists() for pid in children), "both runs to save")
        (saves / f"release-{released}").touch()
        # Gone from /proc: ended and reaped by the sweep, which knows it ended.
        wait_until(lambda: process_state(released) is None, "the released run to finish its save and end")
        assert sweep.poll() is None and alive(saving), err_path.read_text()[-2000:]  # the other is waited for still
        sweep.send_signal(getattr(signal, second))
        sweep.wait(timeout=HANG_GUARD_S)
        wait_until(lambda: not alive(saving), f"the run {saving} still saving to be killed")
    finally:
        kill_all(sweep, pids_dir)
    err = err_path.read_text()
    assert (saves / f"saved-{released}").exists() and not (saves / f"saved-{saving}").exists()
    assert sweep.returncode == 1, err[-2000:]
    assert "a second Ctrl-C or SIGTERM kills them at once" in err
    assert "Killed 1 run(s) still saving; each resumes from its last complete checkpoint." in err
    last_line = err.strip().splitlines()[-1]
    stopped = f"Stopped by {CAUSES[first]}, then {CAUSES[second]} with 0 of 2 runs done"
    assert last_line.startswith(f"python -m hf_cse.sweep: error: {stopped}"), err[-2000:]
    assert "Traceback" not in err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the runs leave the terminal's job on Linux only")
def test_ctrl_z_stops_the_runs_with_the_sweep_and_fg_continues_them(tmp_path: Path) -> None:
    """The runs, in sessions of their own, do not get the terminal's Ctrl-Z: the sweep stops them (state ``T``) and
    itself, and continues them when continued. A terminal closed while they are stopped (a shell sends its stopped
    jobs SIGHUP, then SIGCONT) has them continued and stopped as SIGTERM does: each saves, rather than staying
    stopped for good."""
    saves = tmp_path / "saves"
    saves.mkdir()
    sweep, pids_dir = start_stand_in_sweep(tmp_path, 2, own_group=True, SAVES_ON_SIGTERM=str(saves))
    try:
        wait_until(lambda: len(list(pids_dir.iterdir())) == 2, "2 runs to start")
        processes = [sweep.pid, *(int(path.name) for path in pids_dir.iterdir())]
        for pid in processes[1:]:  # their saves, once asked for, end at once
            (saves / f"release-{pid}").touch()

        def states() -> list[str | None]:
            return [process_state(pid) for pid in processes]

        for _ in range(2):  # each Ctrl-Z stops them all, each fg continues them all
            os.killpg(sweep.pid, signal.SIGTSTP)  # Ctrl-Z: the terminal signals its foreground job
            wait_until(lambda: states() == ["T"] * 3, f"the sweep and its runs {processes} to stop")
            os.killpg(sweep.pid, signal.SIGCONT)  # fg
            wait_until(lambda: all(state in ("R", "S") for state in states()), "them all to continue")
        os.killpg(sweep.pid, signal.SIGTSTP)
        wait_until(lambda: states() == ["T"] * 3, "them all to stop again")
        os.killpg(sweep.pid, signal.SIGHUP)  # the terminal is closed: the shell hangs up its stopped job
        os.killpg(sweep.pid, signal.SIGCONT)
        err = sweep.communicate(timeout=HANG_GUARD_S)[1].decode()
        wait_until(lambda: not any(alive(pid) for pid in processes[1:]), "the runs to end")
    finally:
        kill_all(sweep, pids_dir)
    assert all((saves / f"saved-{pid}").exists() for pid in processes[1:])
    assert sweep.returncode == 1, err[-2000:]
    last_line = err.strip().splitlines()[-1]
    assert last_line.startswith("python -m hf_cse.sweep: error: Stopped by SIGHUP with 0 of 2 runs done"), err[-2000:]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the runs leave the terminal's group on Linux only")
def test_ctrl_c_in_a_terminal_leaves_each_running_run_a_checkpoint(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    sts_dir = write_stsb_dev(tmp_path / "sts")
    train = write_train_file(tmp_path, SENTENCES * 20)
    out = tmp_path / "sweep"
    command = [sys.executable, "-m", "hf_cse.sweep", "--seeds", "1", "2", "--output_dir", str(out)]
    command += ["--sts_dir", str(sts_dir), "--runs_per_device", "2", "--"]
    command += ["--model_name_or_path", str(tiny_encoder_dir), "--train_file", str(train)]
    # Far from the end and from the first evaluation's checkpoint: a checkpoint is there only if the signal saved it.
    command += ["--max_steps", "100000", "--eval_steps", "50000", "--per_device_train_batch_size", "4"]
    command += ["--logging_steps", "1", "--use_cpu", "true", "--report_to", "none", "--disable_tqdm", "true"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    sweep = start_sweep(command, env, own_group=True)
    logs = [out / "logs" / f"base-seed{seed}.log" for seed in (1, 2)]
    try:
        try:
            wait_until(lambda: all(log.exists() and "'loss'" in log.read_text() for log in logs), "2 runs to train")
        except AssertionError as err:
            sweep.kill()
            raise AssertionError(f"{err}; the sweep said: {sweep.communicate()[1].decode()[-3000:]}") from None
        os.killpg(sweep.pid, signal.SIGINT)
        err = sweep.communicate(timeout=HANG_GUARD_S)[1].decode()
    finally:
        sweep.kill()  # the runs still training die with it (the parent-death signal)
    assert sweep.returncode == 1, err[-3000:]
    last_line = err.strip().splitlines()[-1]
    assert last_line.startswith("python -m hf_cse.sweep: error: Stopped by Ctrl-C with 0 of 2 runs done"), err[-2000:]
    for log in logs:
        text = log.read_text(encoding="utf-8")
        assert "interrupted (Ctrl-C)" not in text, text[-2000:]
        stopped = re.search(r"run_unsup\.py: error: Stopped by SIGTERM after step (\d+) of 100000; saved ", text)
        assert stopped is not None, text[-2000:]
        run_dir = out / "runs" / log.stem
        assert newest_verified_checkpoint(run_dir) == run_dir / f"checkpoint-{stopped[1]}"  # what a rerun resumes


def test_the_token_reaches_the_runs_and_nothing_the_sweep_writes(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """One run that trains and is scored, one that fails (its corpus is missing): every file and every line."""
    sts_dir = write_senteval_dir(tmp_path / "sts")
    write_stsb_dev(sts_dir)
    train = write_train_file(tmp_path, SENTENCES * 2)
    out = tmp_path / "sweep"
    command = [sys.executable, "-m", "hf_cse.sweep", "--seeds", "1", "--output_dir", str(out)]
    command += ["--sts_dir", str(sts_dir), "--grid", f"train_file={train},{train.with_name('missing.txt')}", "--"]
    command += ["--model_name_or_path", str(tiny_encoder_dir), "--per_device_train_batch_size", "4"]
    command += ["--max_steps", "2"]
    command += ["--eval_steps", "1", "--use_cpu", "true", "--report_to", "none", "--disable_tqdm", "true"]
    command += ["--per_device_eval_batch_size", "8", "--hub_token", TOKEN]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 1, done.stderr[-3000:]  # the run without a corpus failed; the other is done
    summary = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    assert [run["status"] for run in summary["runs"]] == ["done", "failed"]
    written = sorted(p for p in out.rglob("*") if p.is_file())
    holding = [str(p.relative_to(out)) for p in written if TOKEN.encode() in p.read_bytes()]
    assert holding == [] and TOKEN not in done.stdout + done.stderr
    # Each kind of record names the flag with its placeholder: the token was there, and was replaced.
    for record in (out / "sweep.json", out / "sweep.md", *out.glob("logs/*.log"), *out.glob("runs/*.arguments.json")):
        assert "--hub_token" in record.read_text(encoding="utf-8") and "<HUB_TOKEN>" in record.read_text(), record
    result = json.loads(next(out.glob("results/*.json")).read_text(encoding="utf-8"))
    assert result["arguments"][result["arguments"].index("--hub_token") + 1] == "<HUB_TOKEN>"
