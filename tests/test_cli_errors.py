"""The command lines: user errors as one line on stderr with argparse's exit codes, the traceback on request; and
that every console script and ``python -m hf_cse.*`` command starts."""

from __future__ import annotations

import configparser
import importlib
import json
import logging
from pathlib import Path

import datasets
import pytest
import torch
from common.commands import refuse_to_load, run_script, run_unsup_in_process
from conftest import REPO_ROOT, SENTENCES, free_port, run_unsup, write_config, write_train_file

from hf_cse.commands.cli import run_command
from hf_cse.errors import (
    MESSAGE_LIMIT,
    DiskFullError,
    OutputDirLockedError,
    TrainingDivergedError,
    UsageError,
    echo,
    shorten,
)
from hf_cse.evaluation import load_sts_task


def raising(error: BaseException):
    def main(argv: list[str]) -> None:
        raise error

    return main


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (UsageError("bad value"), 2),
        (ValueError("bad value"), 2),
        (FileNotFoundError("no such file"), 2),
        (PermissionError("read-only folder"), 2),
        (TrainingDivergedError("loss is nan"), 1),
        (DiskFullError("disk full"), 1),
        (OutputDirLockedError("locked"), 1),
    ],
)
def test_user_errors_are_one_line_with_argparse_exit_codes(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, error: Exception, code: int
) -> None:
    monkeypatch.delenv("HF_CSE_TRACEBACK", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        run_command(raising(error), "prog", [])
    assert exit_info.value.code == code
    assert capsys.readouterr().err == f"prog: error: {error}\n"


def test_other_exceptions_and_the_traceback_switch_let_the_exception_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HF_CSE_TRACEBACK", raising=False)
    with pytest.raises(RuntimeError, match="a bug"):
        run_command(raising(RuntimeError("a bug")), "prog", [])
    with pytest.raises(UsageError, match="bad value"):
        run_command(raising(UsageError("bad value")), "prog", ["--traceback"])
    monkeypatch.setenv("HF_CSE_TRACEBACK", "1")
    with pytest.raises(UsageError, match="bad value"):
        run_command(raising(UsageError("bad value")), "prog", [])


def test_ctrl_c_is_one_line_with_what_to_do_next_and_exit_status_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Ctrl-C printed a ~45-line KeyboardInterrupt traceback through the optimizer; run_unsup.py's line says how the
    run goes on (a kill mid-save loses nothing: tests/test_crash_consistency.py)."""
    monkeypatch.delenv("HF_CSE_TRACEBACK", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        run_command(raising(KeyboardInterrupt()), "prog", [], interrupted_hint="resume with --resume_from_checkpoint")
    assert exit_info.value.code == 130
    assert capsys.readouterr().err == "prog: interrupted (Ctrl-C); resume with --resume_from_checkpoint.\n"
    with pytest.raises(KeyboardInterrupt):
        run_command(raising(KeyboardInterrupt()), "prog", ["--traceback"])


def test_the_traceback_flag_is_not_passed_on(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    run_command(seen.extend, "prog", ["--traceback", "--batch_size", "4"])
    assert seen == ["--batch_size", "4"]


def test_a_command_leaves_its_process_group_last_with_its_exit_status(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the work (or the error line), every command leaves the process group of a multi-process run, which on
    gloo ends the process with the status it passes (hf_cse.distributed.leave_process_group)."""
    monkeypatch.delenv("HF_CSE_TRACEBACK", raising=False)
    events = []
    monkeypatch.setattr("hf_cse.commands.cli.leave_process_group", lambda code=0: events.append(f"left with {code}"))
    run_command(lambda argv: events.append("worked"), "prog", [])
    with pytest.raises(SystemExit):
        run_command(raising(UsageError("bad value")), "prog", [])
    events.append(capsys.readouterr().err)
    assert events == ["worked", "left with 0", "left with 2", "prog: error: bad value\n"]


def test_only_rank_zero_prints_and_every_rank_tells_torchrun(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("HF_CSE_TRACEBACK", raising=False)
    for rank in ("0", "1"):
        error_file = tmp_path / f"error{rank}.json"
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(error_file))
        with pytest.raises(SystemExit) as exit_info:
            run_command(raising(UsageError("pass --use_cpu true.")), "run_unsup.py", [])
        assert exit_info.value.code == 2
        assert capsys.readouterr().err == ("run_unsup.py: error: pass --use_cpu true.\n" if rank == "0" else "")
        details = json.loads(error_file.read_text())["message"]
        assert (
            details["message"] == details["extraInfo"]["py_callstack"] == "run_unsup.py: error: pass --use_cpu true."
        )


def test_run_unsup_prints_a_bad_value_as_one_line(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), pooler="mean")
    done = run_script(["run_unsup.py", "--config", str(config)])
    assert (done.returncode, done.stderr) == (
        2,
        "run_unsup.py: error: Unknown pooler 'mean' (sentence-transformers' name: hf_cse's is avg); valid poolers "
        "are: cls, cls_before_pooler, avg, avg_first_last, avg_top2, weighted_mean, mask, last_token, "
        "prompt_last_token, echo.\n",
    )


# The traceback switch in a real process (~10 s of imports each): slow. The default run covers it in-process in
# test_other_exceptions_and_the_traceback_switch_let_the_exception_through, and the one-line tests above show that
# these commands go through run_command.
@pytest.mark.slow
def test_run_unsup_prints_the_traceback_on_request(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), pooler="mean")
    done = run_script(["run_unsup.py", "--config", str(config), "--traceback"])
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr
    assert done.stderr.endswith(
        "ValueError: Unknown pooler 'mean' (sentence-transformers' name: hf_cse's is avg); valid poolers are: cls, "
        "cls_before_pooler, avg, avg_first_last, avg_top2, weighted_mean, mask, last_token, prompt_last_token, echo.\n"
    )


def test_eval_prints_a_missing_file_as_one_line(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    command = ["-m", "hf_cse.eval", "--model_name_or_path", str(tiny_encoder_dir), "--sts_dir", str(tmp_path)]
    done = run_script([*command, "--alignment_uniformity"])
    assert done.returncode == 2
    assert done.stderr.startswith("python -m hf_cse.eval: error: STS file not found: ")
    assert done.stderr.count("\n") == 1


@pytest.mark.slow  # see test_run_unsup_prints_the_traceback_on_request
def test_eval_prints_the_traceback_with_hf_cse_traceback_set(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    command = ["-m", "hf_cse.eval", "--model_name_or_path", str(tiny_encoder_dir), "--sts_dir", str(tmp_path)]
    done = run_script([*command, "--alignment_uniformity"], HF_CSE_TRACEBACK="1")
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr


def console_scripts() -> list[tuple[str, str]]:
    """``(name, "module:function")`` of each console script that setup.cfg declares."""
    config = configparser.ConfigParser(interpolation=None)  # the extras use %(...)s, which is not configparser's
    config.read(REPO_ROOT / "setup.cfg", encoding="utf-8")
    lines = config["options.entry_points"]["console_scripts"].strip().splitlines()
    return [(name.strip(), target.strip()) for name, target in (line.split("=") for line in lines)]


@pytest.mark.parametrize(("script", "target"), console_scripts(), ids=lambda value: value.split(":")[0])
def test_console_scripts_and_their_python_m_modules_start(script: str, target: str) -> None:
    module, function = target.split(":")
    assert callable(getattr(importlib.import_module(module), function))
    # hf-cse-NAME is also python -m hf_cse.NAME, through the short module kept for that name.
    command = "hf_cse." + script.removeprefix("hf-cse-")
    done = run_script(["-m", command, "--help"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m {command} ")


def test_every_command_has_a_console_script() -> None:
    # A command module added without its setup.cfg line would escape the test above.
    commands = {
        f"hf_cse.commands.{path.stem}"
        for path in (REPO_ROOT / "hf_cse" / "commands").glob("*.py")
        if "\ndef console_main(" in path.read_text(encoding="utf-8")
    }
    assert {target.split(":")[0] for _, target in console_scripts()} == commands


REQUIRED_ARGUMENTS = "model_name_or_path: m\ntrain_file: t.txt\noutput_dir: out\n"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("c.yaml", "learning_rate: [1, 2]\n", "learning_rate must be a number, got [1, 2] (a list)."),
        ("c.yaml", "max_steps: five\n", "max_steps must be an integer, got 'five' (a string)."),
        ("c.yaml", "max_steps: 2.5\n", "max_steps must be an integer, got 2.5 (a number)."),
        ("c.yaml", "use_cpu: maybe\n", "use_cpu must be true or false, got 'maybe' (a string)."),
        ("c.yaml", "pooler: 5\n", "pooler must be a string, got 5 (an integer)."),
        ("c.yaml", "eval_sts_tasks: [[stsb]]\n", "eval_sts_tasks must be a list of strings, got [['stsb']] (a list)."),
        (
            "c.yaml",
            "objective_kwargs: [1]\n",
            "objective_kwargs must be a mapping or a string or null, got [1] (a list).",
        ),
        (
            "c.yaml",
            "pooler: [cls\nmax_steps: 3\n",
            "not valid YAML: line 2, column 10: expected ',' or ']', but got ':' (while parsing a flow sequence from "
            "line 1, column 9).",
        ),
        (
            "c.json",
            '{"max_steps": 3,}',
            "not valid JSON: line 1, column 17: Expecting property name enclosed in double quotes.",
        ),
        (
            "c.yaml",
            "steps: &steps 3\nmax_steps: *steps\n",
            "not valid YAML: line 2, column 12: found the alias *steps; aliases are not allowed in a config file: "
            "write the value out.",
        ),
    ],
)
def test_bad_config_files_name_the_file_the_key_or_line_and_what_is_expected(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    config = tmp_path / name
    config.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as error:
        run_unsup.parse_args(["--config", str(config)])
    assert str(error.value) == f"{config}: {message}"


def test_config_strings_convert_as_on_the_command_line(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(REQUIRED_ARGUMENTS + "temperature: 5e-2\nmax_steps: '7'\nbf16: 'no'\neval_sts_tasks: sickr\n")
    _, _, args = run_unsup.parse_args(["--config", str(config)])
    assert (args.temperature, args.max_steps, args.bf16, args.eval_sts_tasks) == (0.05, 7, False, ["sickr"])


def test_a_folder_as_config_is_named_a_folder(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=f"--config '{tmp_path}' is a folder; expected a YAML or JSON file"):
        run_unsup.parse_args(["--config", str(tmp_path)])


@pytest.mark.skipif(torch.cuda.is_available(), reason="with GPUs the Trainer joins the launched process group")
def test_torchrun_on_the_cpu_without_use_cpu_prints_the_fix_once_and_as_the_root_cause(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), use_cpu=False)
    # A free port, not torchrun's fixed 29500: another run on this machine (or test worker) may hold that one.
    torchrun = ["-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port())]
    done = run_script([*torchrun, "run_unsup.py", "--config", str(config)])
    message = (
        "run_unsup.py: error: Launched as 2 processes, but without GPUs the Trainer runs them as one unless told to "
        "use the CPU: pass --use_cpu true."
    )
    assert done.returncode == 1  # torchrun's status when a process fails
    # Printed by rank 0 only; the root cause repeats it after "traceback : " once per process. Counted in the text,
    # not as whole lines: the processes share one pipe, and another's unfinished line (a warning, a progress bar) can
    # come before it on the same line.
    assert done.stderr.count(message) - done.stderr.count(f"traceback : {message}") == 1
    root_cause = done.stderr.split("Root Cause (first observed failure):")[1]
    assert f"traceback : {message}\n" in root_cause
    assert "exitcode  : 2 " in root_cause
    assert 'run_unsup.py", line' not in done.stderr  # no traceback of the script


def help_lines(capsys: pytest.CaptureFixture, flag: str) -> list[str]:
    """The lines ``run_unsup.py FLAG`` prints (it exits with 0)."""
    with pytest.raises(SystemExit) as done:
        run_unsup.parse_args([flag])
    assert done.value.code == 0
    return capsys.readouterr().out.splitlines()


def test_run_unsup_help_shows_config_and_hf_cse_flags_first(capsys: pytest.CaptureFixture) -> None:
    lines = help_lines(capsys, "--help")
    assert help_lines(capsys, "-h") == lines
    usage = "usage: run_unsup.py [-h] [--help_all] [--config FILE] [--import_module MODULE] [--FLAG VALUE ...]"
    assert lines[0] == usage

    def line_of(flag: str) -> int:
        return next(i for i, line in enumerate(lines) if line.lstrip().startswith(f"{flag} "))

    assert line_of("--config") < line_of("--model_name_or_path") < 25  # on the first screen
    hf_cse_flags = [line_of(flag) for flag in ("--pooler", "--train_file", "--objective", "--temperature")]
    trainer_flags = [line_of(flag) for flag in ("--output_dir", "--learning_rate", "--max_steps", "--bf16")]
    assert max(hf_cse_flags) < min(trainer_flags)
    assert line_of("--max_seq_length") < line_of("--learning_rate")  # hf_cse's own training flags, in hf_cse's group
    # a rarely used Trainer flag, listed by --help_all only (hf_cse's --pad_to_multiple_of help may name it)
    assert not any(line.lstrip().startswith("--torch_compile") for line in lines)


def test_run_unsup_help_all_lists_every_trainer_flag_and_each_one_parses(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    from dataclasses import fields

    from transformers import TrainingArguments

    text = "\n".join(help_lines(capsys, "--help_all"))
    missing = [f.name for f in fields(TrainingArguments) if f.init and f"--{f.name} " not in text]
    assert missing == []
    assert text.index("--temperature ") < text.index("--learning_rate ")
    config = tmp_path / "c.yaml"
    config.write_text(REQUIRED_ARGUMENTS)
    _, _, args = run_unsup.parse_args(["--config", str(config), "--adam_beta1", "0.8"])  # not in --help, accepted
    assert args.adam_beta1 == 0.8


# --- issue 27: faults that trained silently or ended in a traceback, now one line and exit status 2 ---------------


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--max_steps", "-5"],
            "max_steps -5 is no number of steps: give a positive number of optimizer steps, or -1 (the default: "
            "unset) to train num_train_epochs epochs.",
        ),
        (
            ["--max_steps", "0"],
            "max_steps 0 is no number of steps: give a positive number of optimizer steps, or -1 (the default: "
            "unset) to train num_train_epochs epochs.",
        ),
        (
            ["--max_steps", "-1", "--num_train_epochs", "0"],
            "num_train_epochs 0 trains no step: give a number of epochs above 0 (a fraction trains part of one), or "
            "a positive max_steps, which overrides it.",
        ),
        (
            ["--max_steps", "5", "--dataloader_drop_last", "true", "--per_device_train_batch_size", "16"],
            "its 12 sentences fill no batch of 16 (per_device_train_batch_size 16 x world size 1) and "
            "dataloader_drop_last drops an incomplete one, so no step would train: set per_device_train_batch_size "
            "to at most 12, or dataloader_drop_last false.",
        ),
    ],
    ids=["max_steps_negative", "max_steps_0", "no_epochs", "no_full_batch"],
)
def test_a_run_of_no_step_or_a_negative_max_steps_is_one_line_before_the_model_loads(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    tiny_encoder_dir: Path,
    tmp_path: Path,
    flags: list[str],
    message: str,
) -> None:
    refuse_to_load(monkeypatch, "resolve_model_path")
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES))
    code, line = run_unsup_in_process(monkeypatch, capsys, ["--config", str(config), *flags])
    assert code == 2
    assert line.startswith("run_unsup.py: error: ") and line.endswith(message)
    assert not (tmp_path / "out" / "config.json").exists()


def test_a_stream_that_gives_no_batch_is_one_line_and_saves_no_model(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """A stream is not read before training: the run stops after a training of no step, before saving."""
    train_file = write_train_file(tmp_path, SENTENCES)
    config = write_config(tmp_path, tiny_encoder_dir, train_file, max_steps=-1, streaming=True)
    flags = ["--dataloader_drop_last", "true", "--per_device_train_batch_size", "16"]
    code, line = run_unsup_in_process(monkeypatch, capsys, ["--config", str(config), *flags])
    assert (code, line) == (
        2,
        f"run_unsup.py: error: No training step was taken: train_file '{train_file}' gave no batch "
        "(per_device_train_batch_size 16, dataloader_drop_last True); nothing was saved. Give it more sentences, or "
        "lower the batch size.",
    )
    assert not list((tmp_path / "out").glob("*.safetensors"))


OFFLINE = "Couldn't reach 'mteb/stsbenchmark-sts' on the Hub (OfflineModeIsEnabled)"


@pytest.mark.parametrize(
    "flags",
    [
        ["--eval_strategy", "steps", "--eval_steps", "1"],
        ["--eval_on_start", "true"],
        ["--eval_strategy", "steps", "--save_strategy", "steps", "--load_best_model_at_end", "true"],
    ],
    ids=["eval_steps", "eval_on_start", "load_best_model_at_end"],
)
def test_evaluating_without_sts_dir_with_the_hub_out_of_reach_is_one_line_before_the_corpus_loads(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    tiny_encoder_dir: Path,
    tmp_path: Path,
    flags: list[str],
) -> None:
    def offline(*args: object, **kwargs: object) -> None:
        raise ConnectionError(OFFLINE)  # what datasets raises offline or without a network

    monkeypatch.setattr(datasets, "load_dataset", offline)
    refuse_to_load(monkeypatch, "read_pairs", "resolve_model_path")
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES))
    code, line = run_unsup_in_process(monkeypatch, capsys, ["--config", str(config), *flags])
    assert (code, line) == (
        2,
        "run_unsup.py: error: Cannot read STS task 'stsb' from the Hugging Face Hub (mteb/stsbenchmark-sts; "
        f"ConnectionError: {OFFLINE}): pass --sts_dir with SentEval's STS data (`python -m hf_cse.download senteval` "
        "fetches it into SentEval/data/downstream/STS), or run with the Hub reachable.",
    )


@pytest.mark.skipif(not datasets.config.HF_HUB_OFFLINE, reason="needs HF_HUB_OFFLINE=1 (conftest sets it)")
def test_the_hub_copy_offline_says_to_pass_sts_dir(tmp_path: Path) -> None:
    with pytest.raises(
        UsageError, match=r"from the Hugging Face Hub \(mteb/stsbenchmark-sts; ConnectionError: .*--sts_dir"
    ):
        load_sts_task("stsb", None, "dev", cache_dir=str(tmp_path))  # an empty cache: nothing to fall back on


def test_a_missing_sts_folder_says_how_to_get_the_data(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as error:
        load_sts_task("stsb", tmp_path / "STS", "test")
    assert str(error.value) == (
        f"STS data directory {str(tmp_path / 'STS')!r} does not exist or is not a directory; `python -m "
        "hf_cse.download senteval` fetches SentEval's STS data (once, over the network) into "
        "SentEval/data/downstream/STS; any folder in SentEval's layout will do."
    )


def test_eval_without_sts_dir_offline_is_one_line(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    # An empty HF_HOME: no cached Hub copy to fall back on.
    command = ["-m", "hf_cse.eval", "--model_name_or_path", str(tiny_encoder_dir), "--device", "cpu"]
    done = run_script(command, HF_HOME=str(tmp_path / "hf_home"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(
        "python -m hf_cse.eval: error: Cannot read STS task 'sts12' from the Hugging Face Hub (mteb/sts12-sts; "
    )
    assert "--sts_dir" in done.stderr and "python -m hf_cse.download senteval" in done.stderr


def test_the_hub_retry_warnings_are_not_logged_before_the_one_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    http_logger = logging.getLogger("huggingface_hub.utils._http")

    def unreachable(*args: object, **kwargs: object) -> None:
        # What huggingface_hub logs per attempt with no network, before datasets gives up.
        http_logger.warning("Retrying in 1s [Retry 1/5].")
        raise ConnectionError("Couldn't reach 'mteb/stsbenchmark-sts' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    with caplog.at_level(logging.WARNING), pytest.raises(UsageError, match="--sts_dir"):
        load_sts_task("stsb", None, "test")
    assert caplog.records == []
    http_logger.warning("a warning after the Hub load")
    assert [record.getMessage() for record in caplog.records] == ["a warning after the Hub load"]


def test_a_control_character_in_the_corpus_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    train_file = write_train_file(tmp_path, [*SENTENCES[:3], "a man\x00 is here", *SENTENCES[3:]])
    refuse_to_load(monkeypatch, "resolve_model_path")
    config = write_config(tmp_path, tiny_encoder_dir, train_file)
    code, line = run_unsup_in_process(monkeypatch, capsys, ["--config", str(config)])
    assert code == 2
    assert line.startswith(f"run_unsup.py: error: {train_file}: line 4 holds the control character U+0000 ")


@pytest.mark.parametrize(
    ("train_file", "message"),
    [
        (
            "nope.txt",
            "train_file 'nope.txt' does not exist; expected a file (.txt, .csv, .json, .jsonl), gensim:lee or a Hub "
            "id.",
        ),
        ("gensim:leee", "Unknown built-in corpus 'gensim:leee'; valid names are: gensim:lee."),
        (
            "data/wiki1m_for_simcse.txt",  # the paper configs' corpus, before `python -m hf_cse.download`
            "train_file 'data/wiki1m_for_simcse.txt' does not exist; `python -m hf_cse.download wiki1m` fetches it "
            "(over the network) into data/wiki1m_for_simcse.txt under the current folder. Any text file of one "
            "sentence a line serves as train_file.",
        ),
    ],
    ids=["missing-file", "unknown-gensim-name", "wiki1m-not-downloaded"],
)
def test_a_missing_train_file_or_unknown_builtin_corpus_is_one_line_before_the_model_loads(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    tiny_encoder_dir: Path,
    tmp_path: Path,
    train_file: str,
    message: str,
) -> None:
    refuse_to_load(monkeypatch, "resolve_model_path")
    monkeypatch.chdir(tmp_path)
    config = write_config(tmp_path, tiny_encoder_dir, train_file)
    code, line = run_unsup_in_process(monkeypatch, capsys, ["--config", str(config)])
    assert (code, line) == (2, f"run_unsup.py: error: {message}")


@pytest.mark.parametrize("missing", ["folder", "task file"])
def test_missing_transfer_data_says_where_it_comes_from(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tmp_path: Path, missing: str
) -> None:
    from hf_cse.commands import transfer

    data_dir = tmp_path / "downstream"
    if missing == "task file":
        data_dir.mkdir()
    with pytest.raises(SystemExit) as exited:
        run_command(
            transfer.main,
            "python -m hf_cse.transfer",
            ["--model_name_or_path", "unused", "--data_dir", str(data_dir), "--tasks", "mr"],
        )
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and str(data_dir) in err
    assert err.rstrip().endswith(transfer.TRANSFER_DATA_HINT) and "get_transfer_data.bash" in err


def test_echo_and_shorten_cut_long_values_and_keep_short_ones() -> None:
    assert echo("cls") == "'cls'" and echo(["a", 1]) == "['a', 1]" and shorten("abc") == "abc"
    assert echo("x" * 5000) == f"'{'x' * 132}...{'x' * 66}' (5002 characters)"
    nested = ["lol"] * 9
    for _ in range(30):  # a YAML alias bomb's shape: repr() would never finish
        nested = [nested] * 9
    assert len(echo(nested)) <= 200 and echo(nested).startswith("[[[...], [...],")


def test_long_config_and_flag_values_are_cut_in_the_message(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"learning_rate: {'x' * 5000}\n", encoding="utf-8")
    with pytest.raises(UsageError) as error:
        run_unsup.parse_args(["--config", str(config)])
    assert (
        str(error.value).endswith("' (5002 characters) (a string).") and len(str(error.value)) < len(str(config)) + 300
    )
    with pytest.raises(SystemExit) as exit_info:
        run_command(run_unsup.parse_args, "run_unsup.py", ["--max_steps", "9" * 300 + "x"])
    assert exit_info.value.code == 2
    line = capsys.readouterr().err.splitlines()[-1]
    assert line.startswith("run_unsup.py: error: argument --max_steps/--max-steps: invalid int value: '999")
    assert line.endswith("9x' (303 characters)") and len(line) < 300


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    config = tmp_path / "bomb.yaml"
    config.write_text("\n".join([*lines, "max_steps: *a8"]) + "\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"line 2, column 10: found the alias \*a0; aliases are not allowed"):
        run_unsup.parse_args(["--config", str(config)])


def test_a_long_message_from_elsewhere_is_cut_to_the_message_limit(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_CSE_TRACEBACK", raising=False)
    with pytest.raises(SystemExit):
        run_command(raising(ValueError(f"unused arguments: {'--x ' * 2000}(valid: --y)")), "prog", [])
    line = capsys.readouterr().err
    assert line.startswith("prog: error: unused arguments: --x --x") and line.endswith(
        "(valid: --y) (8030 characters)\n"
    )
    assert len(line) == len("prog: error: ") + MESSAGE_LIMIT + len("... (8030 characters)\n")
