"""``python -m hf_cse.sweep``: settings x seeds of the tiny random BERT against a synthetic SentEval folder, the mean
and spread over seeds, resuming, the checkpoint chosen on STS-B dev, failed runs, bad arguments, device slots.

The runs' ``run_unsup.py`` goes through :func:`in_process` instead of a subprocess (a subprocess spends ~10 s of CPU
importing torch and transformers); the subprocess launcher itself is tested on a one-line Python child.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import signal
import statistics
import sys
import threading
from pathlib import Path
from typing import IO, Any

import pytest
import torch
from conftest import (
    HANG_GUARD_S,
    SENTENCES,
    hold_lock,
    run_unsup,
    wait_until,
    write_senteval_dir,
    write_stsb_dev,
    write_train_file,
)
from safetensors.torch import load_file

from hf_cse.commands import sweep
from hf_cse.commands.cli import run_command
from hf_cse.evaluation import STS_TASKS
from hf_cse.sweeps import runs, selection
from hf_cse.sweeps.arguments import RunUnsupArguments
from hf_cse.sweeps.grid import expand, parse_grid, split_values
from hf_cse.sweeps.runs import DeviceSlot, device_slots, run_child, run_pending

COLUMNS = (*STS_TASKS, "avg")
TOKEN = "hf_sweepSECRETtoken0123456789"


class InProcess:
    """A launcher that runs ``run_unsup.py``'s ``main`` in this process and records each command."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], log: IO[str], *, env: dict[str, str], cwd: Any) -> int:
        self.commands.append(command)
        assert Path(command[1]).name == "run_unsup.py" and command[0] == sys.executable
        try:
            run_command(run_unsup.main, "run_unsup.py", command[2:])
        except SystemExit as exit_info:  # what the subprocess would have exited with
            return exit_info.code
        return 0


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Any:
    """Train and evaluate the tiny model on one thread: on loaded shared cores, torch's thread pool made each
    in-process run several times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sweep_data")
    sts_dir = write_senteval_dir(root / "sts")
    write_stsb_dev(sts_dir)  # 24 dev pairs, some scored 5 (alignment needs pairs >= 4), over the 4 written above
    return {"sts": sts_dir, "train": write_train_file(root, SENTENCES * 2)}


def run_flags(tiny_encoder_dir: Path, train_file: Path | None) -> list[str]:
    """run_unsup.py flags after ``--``: 2 steps of batch 4, STS-B dev scored (and a checkpoint saved) every step."""
    flags = ["--model_name_or_path", str(tiny_encoder_dir), "--pooler", "cls", "--per_device_train_batch_size", "4"]
    flags += ["--max_steps", "2", "--eval_steps", "1", "--logging_steps", "1", "--use_cpu", "true"]
    flags += ["--report_to", "none", "--disable_tqdm", "true", "--per_device_eval_batch_size", "8"]
    return flags + ([] if train_file is None else ["--train_file", str(train_file)])


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


def test_sweep_runs_every_setting_and_seed_summarizes_and_resumes(
    tiny_encoder_dir: Path, data: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "sweep"
    argv = ["--seeds", "1", "2", "--grid", "learning_rate=1e-3,3e-4", "--sts_dir", str(data["sts"])]
    argv += ["--output_dir", str(out), "--keep_checkpoints", "--", *run_flags(tiny_encoder_dir, data["train"])]
    launcher = InProcess()
    result = sweep.main(argv, launch=launcher, slots=[DeviceSlot()])

    written = json.loads((out / "sweep.json").read_text())
    assert written["runs"] == result["runs"] and len(result["runs"]) == 4 and len(launcher.commands) == 4
    assert [(run["setting"], run["seed"]) for run in result["runs"]] == [
        ({"learning_rate": 1e-3}, 1), ({"learning_rate": 3e-4}, 1),
        ({"learning_rate": 1e-3}, 2), ({"learning_rate": 3e-4}, 2),
    ]  # fmt: skip
    for run in result["runs"]:
        run_dir = out / run["run_dir"]
        assert run["status"] == "done" and (out / run["log"]).is_file()
        state = json.loads((run_dir / "trainer_state.json").read_text())
        logged = [
            (entry["step"], entry["eval_stsb_spearman"])
            for entry in state["log_history"]
            if "eval_stsb_spearman" in entry
        ]
        assert [step for step, _ in logged] == [1, 2]
        best = max(score for _, score in logged)
        # The Trainer keeps the first of equal scores; the dev score reported is the selected checkpoint's.
        assert run["dev"]["step"] == next(step for step, score in logged if score == best)
        assert run["dev"]["stsb_spearman"] == best and run["dev"]["checkpoint"] == f"checkpoint-{run['dev']['step']}"
        selected = weights(run_dir / run["dev"]["checkpoint"])
        assert all(torch.equal(selected[name], tensor) for name, tensor in weights(run_dir).items())
        assert set(run["test"]) == set(COLUMNS)
        assert run["test"]["avg"] == pytest.approx(statistics.fmean(run["test"][task] for task in STS_TASKS))
        assert "--seed" in launcher.commands[result["runs"].index(run)]
        # How it was trained, as its card's record says: the setting swept, the seed, the flags after --.
        trained = json.loads((out / "results" / f"{run['name']}.json").read_text())["trained_with"]
        assert trained["training"]["learning_rate"] == run["setting"]["learning_rate"]
        assert (trained["training"]["seed"], trained["pooling"]["pooler"]) == (run["seed"], "cls")

    # Mean and sample std over the seeds, recomputed from the per-run numbers.
    assert [summary["name"] for summary in result["settings"]] == ["learning_rate=1e-3", "learning_rate=3e-4"]
    for summary in result["settings"]:
        mine = [run for run in result["runs"] if run["setting"] == summary["setting"]]
        assert summary["runs"] == 2 and summary["seeds"] == [1, 2] and summary["failed"] == []
        devs = [run["dev"]["stsb_spearman"] for run in mine]
        assert summary["dev"]["mean"] == pytest.approx(statistics.fmean(devs))
        assert summary["dev"]["std"] == pytest.approx(statistics.stdev(devs))
        for column in COLUMNS:
            values = [run["test"][column] for run in mine]
            assert summary["test"][column]["mean"] == pytest.approx(statistics.fmean(values))
            assert summary["test"][column]["std"] == pytest.approx(statistics.stdev(values))
    first = result["settings"][0]
    markdown = (out / "sweep.md").read_text()
    cell = f"{first['test']['avg']['mean']:.2f} ± {first['test']['avg']['std']:.2f}"
    assert "| `0.001` | 2 |" in markdown and cell in markdown.splitlines()[-2]

    # Resuming a finished sweep runs nothing and rewrites no result.
    results = sorted((out / "results").iterdir())
    stamps = [path.stat().st_mtime_ns for path in results]
    launcher.commands.clear()
    again = sweep.main(argv, launch=launcher, slots=[DeviceSlot()])
    assert launcher.commands == [] and [p.stat().st_mtime_ns for p in results] == stamps
    assert again["runs"] == result["runs"] and again["settings"] == result["settings"]

    # A run interrupted after its checkpoints (no result, no final model) resumes from the latest one; only it runs.
    interrupted = result["runs"][3]
    (out / "results" / f"{interrupted['name']}.json").unlink()
    for name in ("train_results.json", "model.safetensors"):
        (out / interrupted["run_dir"] / name).unlink()
    resumed = sweep.main(argv, launch=launcher, slots=[DeviceSlot()])
    assert len(launcher.commands) == 1 and launcher.commands[0][-2:] == ["--resume_from_checkpoint", "true"]
    assert f"--output_dir {out / interrupted['run_dir']}" in " ".join(launcher.commands[0])
    assert [p.stat().st_mtime_ns for p in results if p.stem != interrupted["name"]] == stamps[:3]
    assert resumed["runs"][3]["dev"] == interrupted["dev"] and resumed["runs"][3]["test"] == interrupted["test"]

    # A finished run of other arguments is neither reused nor overwritten.
    changed = [*argv, "--warmup_steps", "1"]
    with pytest.raises(sweep.UsageError, match="finished run of other run_unsup.py arguments"):
        sweep.main(changed, launch=launcher, slots=[DeviceSlot()])
    assert len(launcher.commands) == 1


PAPER_RESULTS = {"source": "Someone et al. 2024, Table 1", "method": "Method X", "avg": 70.0}
PAPER_RESULTS.update({task: 70.0 for task in STS_TASKS})


def test_a_paper_configs_run_is_scored_once_from_its_sts_results(
    tiny_encoder_dir: Path, data: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_unsup.py scores a paper config's selected model on the 7 test sets itself; the sweep reads those scores
    (encoding them again would fail here) and records them as the run's test scores."""
    config = tmp_path / "paper.yaml"
    config.write_text(json.dumps({"paper_results": PAPER_RESULTS}), encoding="utf-8")  # JSON is YAML
    out = tmp_path / "sweep"
    argv = ["--config", str(config), "--seeds", "1", "--sts_dir", str(data["sts"]), "--output_dir", str(out)]
    argv += ["--", *run_flags(tiny_encoder_dir, data["train"])]

    def scored_twice(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the sweep encoded the test sets a second time")

    monkeypatch.setattr(selection, "evaluate_test", scored_twice)
    result = sweep.main(argv, launch=InProcess(), slots=[DeviceSlot()])
    run = result["runs"][0]
    saved = json.loads((out / run["run_dir"] / "sts_results.json").read_text())
    assert run["status"] == "done" and run["test"] == {column: saved[column] for column in COLUMNS}


def test_saved_scores_are_used_only_when_they_are_the_sweeps_own(tmp_path: Path) -> None:
    """All 7 tasks, STS-B and SICK-R test, the sweep's STS folder, written after the final weights."""
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    details = {"stsb": {"split": "test"}, "sickr": {"split": "test"}, "settings": {"sts_dir": "sts"}}
    saved = {**{column: 70.0 for column in COLUMNS}, "details": details}

    def usable(**changes: Any) -> bool:
        (tmp_path / "sts_results.json").write_text(json.dumps({**saved, **changes}))
        return selection.scores_saved_by_the_run(tmp_path, "/data/sts") is not None

    assert usable()
    assert selection.scores_saved_by_the_run(tmp_path, "/data/sts")[0] == {column: 70.0 for column in COLUMNS}
    assert not usable(sickr=None)  # a task missing
    assert not usable(details={**details, "sickr": {"split": "all"}})
    assert not usable(details={**details, "settings": {"sts_dir": "sts_senteval_tok"}})
    usable()
    older = (tmp_path / "model.safetensors").stat().st_mtime_ns - 10**9
    os.utime(tmp_path / "sts_results.json", ns=(older, older))  # an earlier model's scores
    assert selection.scores_saved_by_the_run(tmp_path, "/data/sts") is None


def test_dev_selection_failed_runs_and_exit_status(
    tiny_encoder_dir: Path, data: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    # Scripted STS-B dev scores: the 1st of 2 evaluations is the best, so the last checkpoint must not be chosen.
    scripted = itertools.cycle([50.0, 30.0])
    monkeypatch.setattr(
        "hf_cse.evaluation.evaluators.sts.score_sts_dev", lambda encode, dev_sets: {"stsb_spearman": next(scripted)}
    )
    out = tmp_path / "sweep"
    missing = data["train"].with_name("missing.txt")
    argv = ["--seeds", "7", "--grid", f"train_file={data['train']},{missing}", "--sts_dir", str(data["sts"])]
    argv += ["--output_dir", str(out), "--keep_checkpoints", "--", *run_flags(tiny_encoder_dir, None)]
    argv += [
        "--save_total_limit",
        "2",
    ]  # the default, 1, deletes the last checkpoint at the end when it is not the best
    launcher = InProcess()
    with pytest.raises(SystemExit) as exit_info:
        run_command(
            functools.partial(sweep.main, launch=launcher, slots=[DeviceSlot()]), "python -m hf_cse.sweep", argv
        )
    assert exit_info.value.code == 1
    # The last line (before it: what the in-process runs printed, which a subprocess writes to its log).
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("python -m hf_cse.sweep: error: 1 of 2 runs failed (train_file=missing-seed7)")

    result = json.loads((out / "sweep.json").read_text())
    good, bad = result["runs"]
    assert good["status"] == "done" and good["dev"] == {"stsb_spearman": 50.0, "step": 1, "checkpoint": "checkpoint-1"}
    run_dir = out / good["run_dir"]
    assert all(torch.equal(weights(run_dir / "checkpoint-1")[k], v) for k, v in weights(run_dir).items())
    assert not all(torch.equal(weights(run_dir / "checkpoint-2")[k], v) for k, v in weights(run_dir).items())
    assert bad["status"] == "failed" and "status 2" in bad["error"] and (out / bad["log"]).is_file()
    assert bad["run_dir"] == "runs/train_file=missing-seed7"
    assert result["failed"] == [bad["name"]] and not (out / "results" / f"{bad['name']}.json").exists()
    assert [summary["runs"] for summary in result["settings"]] == [1, 0]
    assert result["settings"][0]["dev"] == {"mean": 50.0, "std": None}
    assert result["settings"][1]["failed"] == [7] and result["settings"][1]["test"]["avg"]["mean"] is None
    assert "Failed (rerun the same command to retry)" in (out / "sweep.md").read_text()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--grid", "learning_rate"], "--grid 'learning_rate': expected KEY=V1,V2,..."),
        (["--grid", "learning_rate=1e-5,"], "no empty value"),
        (
            ["--grid", "lerning_rate=1e-5,3e-5"],
            "unknown run_unsup.py flag 'lerning_rate'; did you mean learning_rate",
        ),
        (["--grid", "seed=1,2"], "--grid seed: give the seeds with the sweep's --seeds"),
        (["--grid", "pooler.size=1,2"], "objective_kwargs, view_augmentation_kwargs); pooler is no JSON flag"),
        (["--grid", "learning_rate=fast,3e-5"], "invalid float value: 'fast'"),
        (["--grid", "objective=simcse,simsce"], "simsce"),
        (["--", "--eval_strategy", "no"], "--eval_strategy after --: the sweep selects checkpoints on STS-B dev"),
        (["--", "--bogus", "1"], "unknown run_unsup.py flag 'bogus'"),
        (["--grid", "pooler=cls,avg", "--", "--pooler", "cls"], "--pooler after --: --grid pooler=... sets it"),
        (["--grid", "pooler=cls", "--grid", "pooler=avg"], "--grid pooler=... is given twice"),
        (["--grid", "learning-rate=1e-5", "--grid", "learning_rate=3e-5"], "--grid learning_rate=... is given twice"),
        (["--grid", "import_module=a,b"], "give --import_module after --"),
        (
            ["--grid", 'objective_kwargs={"tau_plus": 0.1, "x": 1},{}', "--grid", "objective_kwargs.tau_plus=0.1"],
            "--grid objective_kwargs and --grid objective_kwargs.tau_plus both set objective_kwargs",
        ),
        (["--", "--max_steps", "10", "--eval_steps", "20"], "max_steps 10 < eval_steps 20"),
        (["--grid", f"hub_token={TOKEN},{TOKEN}2"], "--grid hub_token: a secret is no setting to sweep"),
        (["--grid", f"hub-token={TOKEN},"], "--grid hub-token: a secret is no setting to sweep"),
        (["--hub_token", TOKEN], "unrecognized arguments: --hub_token <HUB_TOKEN>"),  # before --: argparse says so
    ],
)
def test_bad_arguments_are_one_line_with_exit_status_2(
    arguments: list[str], message: str, tmp_path: Path, capsys
) -> None:
    argv = ["--seeds", "1", "--output_dir", str(tmp_path / "sweep"), "--sts_dir", str(tmp_path)]
    if "--" not in arguments:
        arguments = [*arguments, "--"]
    argv += [*arguments, "--model_name_or_path", "m", "--train_file", "t.txt"]
    with pytest.raises(SystemExit) as exit_info:
        run_command(functools.partial(sweep.main, launch=InProcess()), "python -m hf_cse.sweep", argv)
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and error.count("\n") == 1 and message in error
    assert not (tmp_path / "sweep").exists() and TOKEN not in error


def test_a_second_sweep_in_the_same_folder_is_one_line_with_exit_status_1(
    tiny_encoder_dir: Path, data: dict[str, Path], tmp_path: Path, capsys
) -> None:
    out = tmp_path / "sweep"
    holder = hold_lock(out, "python -m hf_cse.sweep")
    launcher = InProcess()
    argv = ["--seeds", "1", "--output_dir", str(out), "--sts_dir", str(data["sts"])]
    argv += ["--", *run_flags(tiny_encoder_dir, data["train"])]
    try:
        with pytest.raises(SystemExit) as exit_info:
            run_command(
                functools.partial(sweep.main, launch=launcher, slots=[DeviceSlot()]), "python -m hf_cse.sweep", argv
            )
    finally:
        holder.kill()
        holder.wait()
    error = capsys.readouterr().err
    assert exit_info.value.code == 1 and error.count("\n") == 1 and launcher.commands == []
    assert f"is in use by another python -m hf_cse.sweep (pid {holder.pid} on " in error


def test_a_run_folder_is_emptied_only_under_its_lock_and_only_the_launch_holds_the_token(
    tiny_encoder_dir: Path, data: dict[str, Path], tmp_path: Path
) -> None:
    """Issue 42 item 6: a run still alive in its folder (the child of a sweep killed a moment ago holds its lock) is
    neither deleted nor joined by a second trainer: that run fails in one line, the next invocation retries it."""
    out = tmp_path / "sweep"
    run_dir = out / "runs" / "base-seed1"
    run_dir.mkdir(parents=True)
    (run_dir / "live.txt").write_text("written by the live run", encoding="utf-8")
    argv = ["--seeds", "1", "--output_dir", str(out), "--sts_dir", str(data["sts"])]
    argv += ["--", *run_flags(tiny_encoder_dir, data["train"]), "--hub_token", TOKEN]
    launcher = InProcess()
    holder = hold_lock(run_dir, "training run")
    try:
        with pytest.raises(sweep.SweepRunsFailedError, match="1 of 1 runs failed"):
            sweep.main(argv, launch=launcher, slots=[DeviceSlot()])
    finally:
        holder.kill()
        holder.wait()
    failed = json.loads((out / "sweep.json").read_text())["runs"][0]
    assert launcher.commands == [] and (run_dir / "live.txt").is_file()
    assert failed["status"] == "failed"
    assert f"is in use by another training run (pid {holder.pid} on " in failed["error"]

    # The live run has ended: the rerun starts the run anew (no checkpoint of these arguments) and trains it.
    result = sweep.main(argv, launch=launcher, slots=[DeviceSlot()])
    assert result["runs"][0]["status"] == "done" and not (run_dir / "live.txt").exists()
    (launched,) = launcher.commands
    assert launched[launched.index("--hub_token") + 1] == TOKEN  # the run gets the token; the records do not
    log = (out / "logs" / "base-seed1.log").read_text(encoding="utf-8")
    assert "--hub_token '<HUB_TOKEN>'" in log and TOKEN not in log
    assert [p.name for p in out.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()] == []

    # A result an older version wrote with the token in clear is still this run's: skipped, not refused.
    path = out / "results" / "base-seed1.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    record["arguments"] = [TOKEN if arg == "<HUB_TOKEN>" else arg for arg in record["arguments"]]
    path.write_text(json.dumps(record), encoding="utf-8")
    sweep.main([*argv[:-1], "hf_anotherTOKEN"], launch=launcher, slots=[DeviceSlot()])  # another token: same run
    assert len(launcher.commands) == 1


def test_no_seeds_is_a_usage_error(capsys) -> None:
    for argv in (["--output_dir", "x"], ["--seeds", "--output_dir", "x"]):
        with pytest.raises(SystemExit) as exit_info:
            run_command(sweep.main, "python -m hf_cse.sweep", argv)
        assert exit_info.value.code == 2
        assert (
            capsys.readouterr().err
            == "python -m hf_cse.sweep: error: --seeds: give at least one seed, e.g. --seeds 42 43 44.\n"
        )


def child_visible_devices(slot: DeviceSlot, log_path: Path) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` a subprocess started in ``slot`` sees."""
    with open(log_path, "w+") as log:
        code = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"
        assert run_child([sys.executable, "-c", code], log, env=slot.environment()) == 0
        log.seek(0)
        return log.read().strip()


def test_one_slot_per_cuda_device_pinned_in_the_child(tmp_path: Path) -> None:
    assert device_slots(count=0) == device_slots(count=1) == [DeviceSlot()]
    assert device_slots(count=3, visible="") == [DeviceSlot(0, "0"), DeviceSlot(1, "1"), DeviceSlot(2, "2")]
    assert device_slots(count=2, visible="4,GPU-ab") == [DeviceSlot(0, "4"), DeviceSlot(1, "GPU-ab")]
    assert DeviceSlot(1, "GPU-ab").device == "cuda:1" and DeviceSlot().device is None

    # Two slots: two tasks at once (the barrier needs both), each child seeing only its slot's device.
    both_running = threading.Barrier(2, timeout=HANG_GUARD_S)

    def run(task: int, slot: DeviceSlot) -> dict[str, Any]:
        both_running.wait()
        visible = child_visible_devices(slot, tmp_path / f"{task}.log")
        return {"task": task, "visible": visible, "slot": slot.cuda_visible_devices}

    outcomes = run_pending(
        [0, 1, 2],
        name=str,
        result_path=lambda task: tmp_path / f"{task}.json",
        is_finished=lambda task, path: task == 2,
        run=run,
        slots=device_slots(count=2, visible="4,5"),
    )
    assert [outcome.status for outcome in outcomes] == ["done", "done", "skipped"]
    records = [json.loads((tmp_path / f"{task}.json").read_text()) for task in (0, 1)]
    assert sorted(record["visible"] for record in records) == ["4", "5"]
    assert all(record["visible"] == record["slot"] for record in records)


def test_runs_per_device_fills_each_device_with_several_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Issue 31 item 5: --runs_per_device N runs N at once per device (a small run leaves most of a big GPU idle)."""
    assert device_slots(count=2, visible="4,5", runs_per_device=2) == [
        DeviceSlot(0, "4"), DeviceSlot(1, "5"), DeviceSlot(0, "4"), DeviceSlot(1, "5")  # the first runs spread out
    ]  # fmt: skip
    assert device_slots(count=1, runs_per_device=3) == [DeviceSlot()] * 3
    assert device_slots(count=0, runs_per_device=1) == [DeviceSlot()]  # one run: every core, as before
    cpu = device_slots(count=0, runs_per_device=3, cpu_count=8)
    assert cpu == [DeviceSlot(cpu_threads=2)] * 3 and cpu[0].environment({})["OMP_NUM_THREADS"] == "2"

    # Four tasks at once on two faked devices (the barrier needs all four), two children seeing each device.
    all_running = threading.Barrier(4, timeout=HANG_GUARD_S)

    def run(task: int, slot: DeviceSlot) -> dict[str, Any]:
        all_running.wait()
        return {"visible": child_visible_devices(slot, tmp_path / f"{task}.log")}

    outcomes = run_pending(
        [0, 1, 2, 3],
        name=str,
        result_path=lambda task: tmp_path / f"{task}.json",
        is_finished=lambda task, path: False,
        run=run,
        slots=device_slots(count=2, visible="4,5", runs_per_device=2),
    )
    assert sorted(outcome.record["visible"] for outcome in outcomes) == ["4", "4", "5", "5"]

    # The command hands the flag to device_slots, and refuses N < 1 in one line.
    used: dict[str, Any] = {}
    monkeypatch.setattr(sweep, "run_pending", lambda runs, **kwargs: used.update(kwargs) or [])
    monkeypatch.setattr("hf_cse.sweeps.runs.cuda_device_count", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    argv = ["--seeds", "1", "--sts_dir", str(tmp_path), "--output_dir", str(tmp_path / "sweep")]
    argv += ["--runs_per_device", "2", "--"]
    sweep.main([*argv, "--model_name_or_path", "m", "--train_file", "t.txt"])
    assert used["slots"] == device_slots(count=2, visible="4,5", runs_per_device=2)
    with pytest.raises(SystemExit) as exit_info:
        run_command(sweep.main, "python -m hf_cse.sweep", [*argv[:-2], "0", "--"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: argument --runs_per_device: 0 is not valid: it takes an integer in [1, 1024].\n"
    )


def test_grid_values_names_and_json_keys(tmp_path: Path) -> None:
    assert split_values('{"a": 1, "b": [1, 2]}, x ,"y,z"') == ['{"a": 1, "b": [1, 2]}', "x", '"y,z"']
    settings = expand([parse_grid("config=a/simcse.yaml,b/simcse.yaml"), parse_grid("pooler=cls,avg")])
    names = [setting.name for setting in settings]
    assert len(set(names)) == 4 and all(name.startswith("config=simcse") for name in names)
    assert names[2] == "config=simcse_pooler=cls"  # the second of two that read the same keeps the plain name
    assert names[0].startswith("config=simcse_pooler=cls-") and len(names[0]) == len(names[2]) + 9
    assert [setting.name for setting in expand([])] == ["base"]

    # FLAG.KEY values are JSON, merged over the flag's mapping from the flags after -- (or the config file).
    script = RunUnsupArguments(Path(run_unsup.__file__))
    (setting,) = expand([parse_grid("objective_kwargs.tau_plus=0.05"), parse_grid("auxiliary_losses.recall.weight=1")])
    passthrough = ["--model_name_or_path", "m", "--train_file", "t.txt", "--objective", "dcl"]
    passthrough += ["--objective_kwargs", '{"tau_plus": 0.1, "other": true}', "--max_steps", "250"]
    command = script.setting_command(
        setting, config=None, passthrough=passthrough, sts_dir=str(tmp_path), placeholder_dir=tmp_path
    )
    flags = list(command.arguments)
    last = len(flags) - 1 - flags[::-1].index("--objective_kwargs")  # the last one given is the one parsed
    assert json.loads(flags[last + 1]) == {"tau_plus": 0.05, "other": True}
    assert json.loads(flags[flags.index("--auxiliary_losses") + 1]) == {"recall": {"weight": 1}}
    assert command.values == {"objective_kwargs.tau_plus": 0.05, "auxiliary_losses.recall.weight": 1}
    assert command.eval_steps == 125 and flags[flags.index("--save_steps") + 1] == "125"


def test_stopping_the_batch_stops_running_children_and_starts_no_new_one(tmp_path: Path) -> None:
    codes: list[int] = []
    with open(tmp_path / "child.log", "w") as log:
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
        waiting = threading.Thread(target=lambda: codes.append(run_child(sleeper, log)))
        waiting.start()
        wait_until(lambda: bool(runs._children), "the child to start")
        runs.stop_children()  # what Ctrl-C does while worker threads wait on their children
        waiting.join(timeout=HANG_GUARD_S)
        assert codes and codes[0] != 0 and not runs._children
        with pytest.raises(RuntimeError, match="no new run is started"):
            run_child([sys.executable, "-c", "pass"], log)

    def run(task: int, slot: DeviceSlot) -> dict[str, int]:
        with open(tmp_path / "next.log", "w") as log:
            return {"code": run_child([sys.executable, "-c", "pass"], log)}

    # The next batch starts children again.
    outcomes = run_pending(
        [0], name=str, result_path=lambda task: tmp_path / "0.json", is_finished=lambda t, p: False, run=run
    )
    assert outcomes[0].status == "done" and json.loads((tmp_path / "0.json").read_text()) == {"code": 0}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child leads a process group of its own on Linux")
def test_stopping_the_batch_continues_a_child_left_stopped(tmp_path: Path) -> None:
    """A child stopped by Ctrl-Z (left stopped when the signal that ends a stopped sweep, ``kill %1``, interrupts the
    handler before it continues them) gets SIGCONT after SIGTERM: it answers the SIGTERM, and the wait for it ends."""
    ready = tmp_path / "ready"
    code = "import pathlib, signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(3)); "
    code += f"pathlib.Path({str(ready)!r}).touch(); time.sleep(60)"
    codes: list[int] = []
    stopper = threading.Thread(target=runs.stop_children)
    with open(tmp_path / "child.log", "w") as log:
        waiting = threading.Thread(target=lambda: codes.append(run_child([sys.executable, "-c", code], log)))
        waiting.start()
        try:
            wait_until(ready.exists, "the child to handle SIGTERM")
            (child,) = runs._children
            os.killpg(child.pid, signal.SIGSTOP)
            stopper.start()
            stopper.join(timeout=HANG_GUARD_S)
            waiting.join(timeout=HANG_GUARD_S)
        finally:
            for process in list(runs._children):  # whatever went wrong, the child does not outlive the test
                process.kill()
            runs._stopping.clear()  # the next test's children start
    assert not stopper.is_alive() and codes == [3]


def test_setting_command_reads_the_config_file(tmp_path: Path) -> None:
    """The config's JSON flag under the grid's key, its eval_steps and save_total_limit kept, its hash recorded."""
    script = RunUnsupArguments(Path(run_unsup.__file__))
    config = tmp_path / "dcl.yaml"
    config.write_text(
        "objective: dcl\nobjective_kwargs: '{\"tau_plus\": 0.01}'\neval_steps: 25\nsave_total_limit: 2\n"
    )
    (setting,) = expand([parse_grid("objective_kwargs.tau_plus=0.1")])
    passthrough = ["--model_name_or_path", "m", "--train_file", "t.txt"]
    command = script.setting_command(
        setting, config=str(config), passthrough=passthrough, sts_dir=str(tmp_path), placeholder_dir=tmp_path
    )
    flags = list(command.arguments)
    assert flags[:2] == ["--config", str(config)] and "--save_total_limit" not in flags
    assert json.loads(flags[flags.index("--objective_kwargs") + 1]) == {"tau_plus": 0.1}
    assert command.eval_steps == 25 and flags[flags.index("--save_steps") + 1] == "25"
    assert command.config_sha256 == hashlib.sha256(config.read_bytes()).hexdigest()
