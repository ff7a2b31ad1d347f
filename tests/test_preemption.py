"""Preemption: SIGTERM / SIGUSR1 finish the step, save a checkpoint through the one save path and stop with one line
saying how to resume; the resumed run equals a straight one bit for bit; a second signal stops at once."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from common.preemption import SignalAt
from common.training_checks import add_to_every_trainer
from conftest import HANG_GUARD_S, REPO_ROOT, SENTENCES, free_port, make_tiny_trainer

from hf_cse import CSETrainer
from hf_cse.commands.cli import run_command
from hf_cse.errors import PreemptedError
from hf_cse.training.saving import verification_problem
from hf_cse.training.saving.preemption import REPEAT_WINDOW_S, resume_command

sys.path.insert(0, str(REPO_ROOT))
import run_unsup  # noqa: E402

MAX_STEPS = 6
TOKEN = "hf_preemptionSECRET0123456789"


def make_trainer(encoder_dir: Path, output_dir: Path) -> CSETrainer:
    """The tiny trainer of a 6-step run that saves only when preempted."""
    return make_tiny_trainer(encoder_dir, output_dir, max_steps=MAX_STEPS, save_strategy="no")


@pytest.fixture(scope="module")
def straight_weights(tiny_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[torch.Tensor]:
    trainer = make_trainer(tiny_encoder_dir, tmp_path_factory.mktemp("straight"))
    trainer.train()
    return [p.detach().clone() for p in trainer.model.parameters()]


@pytest.mark.parametrize(
    ("step", "signum"),
    [*((step, signal.SIGTERM) for step in range(1, MAX_STEPS)), (3, signal.SIGUSR1)],
)
def test_a_signal_saves_a_checkpoint_and_the_resumed_run_equals_a_straight_one(
    tiny_encoder_dir: Path, tmp_path: Path, straight_weights: list[torch.Tensor], step: int, signum: int
) -> None:
    trainer = make_trainer(tiny_encoder_dir, tmp_path)
    trainer.add_callback(SignalAt(step, signum))
    before = signal.getsignal(signum)
    with pytest.raises(PreemptedError) as stopped:
        trainer.train()
    checkpoint = tmp_path / f"checkpoint-{step}"
    name = signal.Signals(signum).name
    assert str(stopped.value).startswith(f"Stopped by {name} after step {step} of {MAX_STEPS}; saved {checkpoint}.")
    assert "--resume_from_checkpoint true" in str(stopped.value) and "\n" not in str(stopped.value)
    assert trainer.state.global_step == step and verification_problem(checkpoint) is None
    assert signal.getsignal(signum) is before  # the handlers are put back

    resumed = make_trainer(tiny_encoder_dir, tmp_path)
    resumed.train(resume_from_checkpoint="true")
    assert resumed.state.global_step == MAX_STEPS
    for a, b in zip(straight_weights, resumed.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_run_unsup_stops_with_one_line_and_exit_1(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    train_file = tmp_path / "train.txt"
    train_file.write_text("\n".join(SENTENCES * 2) + "\n", encoding="utf-8")
    argv = [
        f"--model_name_or_path={tiny_encoder_dir}",
        f"--train_file={train_file}",
        f"--output_dir={tmp_path / 'out'}",
        "--per_device_train_batch_size=4",
        f"--max_steps={MAX_STEPS}",
        "--report_to=none",
        "--use_cpu=true",
    ]
    add_to_every_trainer(monkeypatch, SignalAt(2))
    monkeypatch.setattr(sys, "argv", ["run_unsup.py", *argv])
    with pytest.raises(SystemExit) as exit_info:
        run_command(run_unsup.main, "run_unsup.py", argv)
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"run_unsup.py: error: Stopped by SIGTERM after step 2 of {MAX_STEPS}; saved ")
    assert err.endswith(f"To resume: {resume_command(['run_unsup.py', *argv], launcher=[])}")
    assert not (tmp_path / "out" / "model.safetensors").exists()  # no final model from a stopped run


def test_the_resume_command_replaces_an_earlier_resume_flag() -> None:
    assert resume_command(["run_unsup.py", "--config", "a b.yaml", "--resume_from_checkpoint", "x"], launcher=[]) == (
        "python run_unsup.py --config 'a b.yaml' --resume_from_checkpoint true"
    )
    assert resume_command(["prog", "--resume_from_checkpoint=x"], launcher=[]) == "prog --resume_from_checkpoint true"


def signalled_twice(encoder_dir: Path, output_dir: Path, window_s: float) -> subprocess.CompletedProcess:
    """A subprocess run that gets SIGTERM twice at once during step 2, with ``REPEAT_WINDOW_S = window_s``."""
    script = textwrap.dedent(
        f"""
        import signal, sys
        sys.path.insert(0, {str(REPO_ROOT / "tests")!r})
        from pathlib import Path
        from test_preemption import SignalAt, make_trainer
        from hf_cse.training.saving import preemption
        preemption.REPEAT_WINDOW_S = {window_s!r}
        trainer = make_trainer(Path({str(encoder_dir)!r}), Path({str(output_dir)!r}))
        trainer.add_callback(SignalAt(2, times=2))
        trainer.train()
        """
    )
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG_GUARD_S)


def test_a_second_signal_stops_at_once(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    done = signalled_twice(tiny_encoder_dir, tmp_path / "out", 0.0)  # no window: the second is a second request
    assert done.returncode == -signal.SIGTERM, done.stderr[-2000:]
    assert not list((tmp_path / "out").glob("checkpoint-*"))


def test_the_same_signal_repeated_at_once_is_one_request(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """SLURM signals every process of a job step, and a launcher's agent sends it on to its workers: a worker gets it
    twice within milliseconds, and must still save its checkpoint."""
    done = signalled_twice(tiny_encoder_dir, tmp_path / "out", REPEAT_WINDOW_S)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "PreemptedError: Stopped by SIGTERM after step 2 of 6;" in done.stderr
    assert verification_problem(tmp_path / "out" / "checkpoint-2") is None


def test_on_two_processes_a_signal_to_one_stops_both_after_the_same_step(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """tests/preemption_processes.py: rank 1 alone gets SIGTERM during step 3; both stop after step 3, one
    checkpoint-3 verifies, and each process raised the one-line error (rank 0 naming the other process's signal),
    whose "To resume" line is the launcher's command, its token redacted."""
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
    launch += ["--main_process_port", str(free_port())]
    script = [str(REPO_ROOT / "tests" / "preemption_processes.py"), str(tiny_encoder_dir), str(tmp_path)]
    command = [*launch, *script, "--hub_token", TOKEN]
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT / "tests")}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text(encoding="utf-8")) for rank in range(2)]
    assert [rank["global_step"] for rank in ranks] == [3, 3]
    assert ranks[1]["error"].startswith("Stopped by SIGTERM after step 3 of 6;")
    assert ranks[0]["error"].startswith("Stopped by a signal on another process after step 3 of 6;")
    resume = ["python", *launch[1:], *script, "--hub_token", "<HUB_TOKEN>", "--resume_from_checkpoint", "true"]
    for rank in ranks:
        assert rank["error"].endswith(f"To resume: {shlex.join(resume)}") and TOKEN not in rank["error"]


def test_on_two_processes_sigterm_to_every_process_of_the_job_saves_a_checkpoint(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """As SLURM signals a job step: the launcher's agent, rank 0 and rank 1 during step 3; the agent sends it on to
    each worker (a repeat within milliseconds). Both ranks still stop after step 3 with one checkpoint."""
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
    launch += ["--main_process_port", str(free_port())]
    command = [*launch, str(REPO_ROOT / "tests" / "preemption_processes.py"), str(tiny_encoder_dir), str(tmp_path)]
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT / "tests")}
    env["SIGNAL_EVERY_PROCESS"] = "1"
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    records = [tmp_path / f"rank{rank}.json" for rank in range(2)]
    assert all(record.is_file() for record in records), done.stderr[-3000:]
    ranks = [json.loads(record.read_text(encoding="utf-8")) for record in records]
    assert [rank["global_step"] for rank in ranks] == [3, 3]
    assert all(rank["error"].startswith("Stopped by SIGTERM after step 3 of 6;") for rank in ranks)
    assert [path.name for path in (tmp_path / "run").glob("checkpoint-*")] == ["checkpoint-3"]
    assert verification_problem(tmp_path / "run" / "checkpoint-3") is None
    assert [path.name for path in (tmp_path / "run").glob("checkpoint-*")] == ["checkpoint-3"]
    assert verification_problem(tmp_path / "run" / "checkpoint-3") is None
