"""Secrets on command lines (issue 42 items 6 and 7): one redaction (``hf_cse.redaction``) for every argument list
hf_cse writes or prints, and every place in the code that obtains a command line goes through it.

The class is enumerated statically: every function of ``hf_cse`` and ``run_unsup.py`` that reads a command line
(``sys.argv``, ``sys.orig_argv``, a process's ``/proc/PID/cmdline``) or joins one into text (``shlex.join``) must call
the redaction, or be listed in :data:`READS_WITHOUT_WRITING` with the reason it writes nothing. The dynamic side is in
tests/test_sweep_processes.py (every file and line of a real sweep) and tests/test_preemption_phases.py (every file
and line of a run, and its "To resume" line).
"""

from __future__ import annotations

import ast
import shlex

import pytest
from conftest import REPO_ROOT

from hf_cse.commands.cli import run_command
from hf_cse.errors import UsageError
from hf_cse.redaction import RedactedArguments, command_line, redact_arguments, redact_text, secret_flag, secret_values
from hf_cse.training.saving.preemption import resume_command

TOKEN = "hf_cliSECRETtoken0123456789"
REDACTORS = {"command_line", "redact_arguments", "RedactedArguments", "secret_values", "redact_text"}
READS_WITHOUT_WRITING = {
    "run_unsup.py:main": "parses its arguments, writes none of them",
    "hf_cse/training/saving/preemption.py:launcher_command": "its only caller, resume_command, redacts",
}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--hub_token", TOKEN, "--seed", "1"], ["--hub_token", "<HUB_TOKEN>", "--seed", "1"]),
        ([f"--hub_token={TOKEN}"], ["--hub_token=<HUB_TOKEN>"]),
        (["--hub-token", TOKEN], ["--hub-token", "<HUB_TOKEN>"]),
        (["--hub_token", "a", "--hub_token", TOKEN], ["--hub_token", "<HUB_TOKEN>", "--hub_token", "<HUB_TOKEN>"]),
        (["--output_dir", "x", "--hub_strategy", "end"], ["--output_dir", "x", "--hub_strategy", "end"]),
        (["--average_tokens_across_devices", "true"], ["--average_tokens_across_devices", "true"]),
    ],
)
def test_every_spelling_of_a_secret_flag_is_redacted(argv: list[str], expected: list[str]) -> None:
    assert redact_arguments(argv) == expected
    assert TOKEN not in command_line(argv)


def test_a_secret_in_another_spelling_is_redacted_by_its_value() -> None:
    # An abbreviation argparse accepts (--hub_tok) is no secret flag by name; the value, known, is hidden anyway.
    assert secret_flag("--hub_tok") is None
    assert redact_arguments(["--hub_tok", TOKEN], hide=[TOKEN]) == ["--hub_tok", "<SECRET>"]
    assert redact_arguments([f"--hub_tok={TOKEN}"], hide=[TOKEN]) == ["--hub_tok=<SECRET>"]
    message = redact_text(f"unrecognized arguments: --hub_token {TOKEN}", secret_values(["--hub_token", TOKEN]))
    assert message == "unrecognized arguments: --hub_token <SECRET>"


def test_redacted_arguments_reveal_the_secret_only_in_the_command_they_run() -> None:
    arguments = RedactedArguments.of(["--seed", "1", "--hub_token", TOKEN, f"--hub-token={TOKEN}2"])
    assert TOKEN not in repr(arguments) and TOKEN not in " ".join(arguments.arguments)
    command = ["python", "run_unsup.py", *arguments.arguments, "--output_dir", "<HUB_TOKEN>"]
    assert arguments.reveal(command) == [
        "python", "run_unsup.py", "--seed", "1", "--hub_token", f"{TOKEN}2", f"--hub-token={TOKEN}2",
        "--output_dir", "<HUB_TOKEN>",  # only a secret flag's value is filled in
    ]  # fmt: skip


def test_the_resume_line_redacts_and_names_the_launcher() -> None:
    argv = ["run_unsup.py", "--config", "a b.yaml", "--hub_token", TOKEN, "--resume_from_checkpoint", "x"]
    own = resume_command(argv, launcher=[])
    assert own == "python run_unsup.py --config 'a b.yaml' --hub_token '<HUB_TOKEN>' --resume_from_checkpoint true"
    launched = resume_command(argv, launcher=["accelerate", "launch", "--num_processes", "2", *argv])
    assert launched == f"accelerate launch --num_processes 2 {own.removeprefix('python ')}"
    assert shlex.split(launched)[-2:] == ["--resume_from_checkpoint", "true"]


def _reads_or_joins_a_command_line(function: ast.AST) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in {("sys", "argv"), ("sys", "orig_argv"), ("shlex", "join")}:
                return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith("/cmdline"):
            return True
        if isinstance(node, ast.JoinedStr) and any(
            isinstance(part, ast.Constant) and str(part.value).endswith("/cmdline") for part in node.values
        ):
            return True
    return False


def _calls_a_redactor(function: ast.AST) -> bool:
    for node in ast.walk(function):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name in REDACTORS:
            return True
    return False


def test_every_function_that_reads_or_joins_a_command_line_redacts_it() -> None:
    sources = [REPO_ROOT / "run_unsup.py", *sorted((REPO_ROOT / "hf_cse").rglob("*.py"))]
    readers, unredacted = [], []
    for path in sources:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not _reads_or_joins_a_command_line(
                node
            ):
                continue
            where = f"{path.relative_to(REPO_ROOT)}:{node.name}"
            readers.append(where)
            if node.name not in REDACTORS and not _calls_a_redactor(node) and where not in READS_WITHOUT_WRITING:
                unredacted.append(where)
    assert unredacted == []
    # The enumeration sees what it must: the command handler, the sweep, the resume line, the redaction itself.
    assert {
        "hf_cse/commands/cli.py:run_command",
        "hf_cse/redaction.py:command_line",
        "hf_cse/commands/sweep.py:main",
        "hf_cse/training/saving/preemption.py:resume_command",
        *READS_WITHOUT_WRITING,
    } <= set(readers)


def test_an_error_message_that_repeats_a_secret_prints_its_placeholder(capsys: pytest.CaptureFixture) -> None:
    def main(argv: list[str]) -> None:  # as argparse repeats what it could not parse
        raise UsageError(f"unrecognized arguments: {' '.join(argv)}")

    with pytest.raises(SystemExit) as exit_info:
        run_command(main, "prog", ["--hub_tokn", "x", "--hub_token", TOKEN])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == "prog: error: unrecognized arguments: --hub_tokn x --hub_token <SECRET>\n"
