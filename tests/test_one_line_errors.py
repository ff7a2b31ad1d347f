"""Every command's user errors are one line (issue 38 item 4a): ``PROG: error: MESSAGE`` on stderr and exit status 2,
no argparse usage block before it, on every entry point there is: each module of ``hf_cse`` that runs as
``python -m`` (found by its ``if __name__ == "__main__":`` block, so a command added later is tested too) and
``run_unsup.py``. ``--help`` still prints the usage."""

from __future__ import annotations

import ast
import re
import runpy
import sys
import warnings
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from hf_cse.commands.cli import OneLineErrorParser
from hf_cse.errors import UsageError


def runs_as_main(path: Path) -> bool:
    """Whether ``path`` has a module-level ``if __name__ == "__main__":`` block."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) for node in tree.body)


ENTRY_POINTS = [
    *(
        ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
        for path in sorted((REPO_ROOT / "hf_cse").rglob("*.py"))
        if runs_as_main(path)
    ),
    "run_unsup.py",
]


def test_the_entry_points_found_are_the_commands() -> None:
    """The enumeration finds what it must: each command under its short name (``python -m hf_cse.NAME``; the
    modules of ``hf_cse.commands`` are not run directly) and the training script."""
    commands = ("download", "eval", "mine", "push", "report", "sweep", "transfer")
    assert set(ENTRY_POINTS) == {
        *(f"hf_cse.{name}" for name in commands),
        "run_unsup.py",
    }


def run_entry_point(
    entry_point: str, argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> tuple[int, str, str]:
    """``python -m ENTRY_POINT ARGV`` (or ``python run_unsup.py ARGV``) in this process, as its ``__main__`` runs:
    the exit status, stdout and stderr."""
    monkeypatch.delenv("HF_CSE_TRACEBACK", raising=False)
    monkeypatch.setattr(sys, "argv", [entry_point, *argv])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info, warnings.catch_warnings():
        # runpy warns that a module it runs as __main__ was imported before (by the other tests): expected here.
        warnings.simplefilter("ignore", RuntimeWarning)
        if entry_point.endswith(".py"):
            runpy.run_path(str(REPO_ROOT / entry_point), run_name="__main__")
        else:
            runpy.run_module(entry_point, run_name="__main__", alter_sys=True)
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def help_text(entry_point: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> str:
    code, out, err = run_entry_point(entry_point, ["--help"], monkeypatch, capsys)
    assert (code, err) == (0, "") and out.startswith("usage: "), out[:300]
    return out


def assert_one_line_usage_error(code: int, err: str, message: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1 and "usage:" not in err, err
    assert re.fullmatch(rf"(python -m hf_cse\.\w+|run_unsup\.py): error: {message}\n", err), err


def required_in_usage(help_text: str) -> list[list[str]]:
    """The arguments that the usage line of ``help_text`` does not put in brackets, each as it is written there:
    ``["--flag", "METAVAR"]`` or a positional's ``["METAVAR"]``."""
    usage = " ".join(help_text.split("\n\n")[0].split())
    optional = re.compile(r"\[[^\[\]]*\]")
    while optional.search(usage):
        usage = optional.sub("", usage)
    tokens = iter(usage.split()[4 if usage.startswith("usage: python -m ") else 2 :])
    return [[token, next(tokens)] if token.startswith("--") else [token] for token in tokens]


def with_required_values(help_text: str, argv: list[str]) -> list[str]:
    """``argv`` after a value for each required argument (``1``: a number or a name), so that argparse gets as far
    as ``argv``'s error."""
    return [*(arg for written in required_in_usage(help_text) for arg in [written[0], "1"][: len(written)]), *argv]


@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
def test_a_bad_flag_is_one_line_and_help_still_prints_the_usage(
    entry_point: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    argv = with_required_values(help_text(entry_point, monkeypatch, capsys), ["--no_such_flag"])
    code, _, err = run_entry_point(entry_point, argv, monkeypatch, capsys)
    assert_one_line_usage_error(code, err, "unrecognized arguments: --no_such_flag")


@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
def test_an_abbreviated_flag_is_refused_in_one_line_as_a_misspelled_config_key_is(
    entry_point: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """argparse took ``--max_step 5`` for ``--max_steps``; flags are now taken as spelt (a script's abbreviation would
    break the day a new flag shares its prefix). run_unsup.py names the flags meant."""
    text = help_text(entry_point, monkeypatch, capsys)
    flags = set(re.findall(r"--\w+", text))
    # The longest flag whose name less its last letter abbreviates it alone.
    flag = max((f for f in flags if sum(g.startswith(f[:-1]) for g in flags) == 1), key=len)
    argv = with_required_values(text, [f"{flag[:-1]}=1"])
    code, _, err = run_entry_point(entry_point, argv, monkeypatch, capsys)
    hint = f"; did you mean {flag}.*" if entry_point == "run_unsup.py" else ""
    assert_one_line_usage_error(code, err, f"unrecognized arguments: {flag[:-1]}=1{hint}")


@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
def test_a_flag_without_its_value_is_one_line(
    entry_point: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    text = help_text(entry_point, monkeypatch, capsys)
    # The first option that --help lists with a value (`--flag VALUE`), given last, without its value.
    flag = re.search(r"^\s+(--\w+) [A-Z]", text, re.MULTILINE).group(1)
    code, _, err = run_entry_point(entry_point, with_required_values(text, [flag]), monkeypatch, capsys)
    assert_one_line_usage_error(code, err, f"argument {re.escape(flag)}\\S*: expected one argument")


@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
def test_a_missing_required_argument_is_one_line(
    entry_point: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    required = {written[0] for written in required_in_usage(help_text(entry_point, monkeypatch, capsys))}
    if entry_point == "run_unsup.py":  # required as a flag or in the --config file: checked once both are read
        assert required == set()
        message = re.escape("model_name_or_path and train_file are required (as flags or in the --config file).")
    elif not required:
        pytest.skip(f"{entry_point} requires no argument")
    else:
        message = "the following arguments are required: .+"
    code, _, err = run_entry_point(entry_point, [], monkeypatch, capsys)
    assert_one_line_usage_error(code, err, message)
    if required:  # argparse names those it requires (the sweep checks --seeds after parsing)
        assert set(err.rstrip("\n").rsplit("required: ", 1)[1].split(", ")) <= required


@pytest.mark.parametrize("entry_point", ["hf_cse.eval", "hf_cse.report", "hf_cse.push"])
def test_a_missing_sts_dir_is_one_line_saying_how_to_get_the_data(
    entry_point: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    missing = str(tmp_path / "SentEval" / "data" / "downstream" / "STS")
    argv = with_required_values(help_text(entry_point, monkeypatch, capsys), ["--sts_dir", missing])
    code, _, err = run_entry_point(entry_point, argv, monkeypatch, capsys)
    message = (
        f"--sts_dir {missing!r} does not exist or is not a directory; `python -m hf_cse.download senteval` fetches "
        "SentEval's STS data (once, over the network) into SentEval/data/downstream/STS; any folder in SentEval's "
        "layout will do."
    )
    assert_one_line_usage_error(code, err, re.escape(message))


def test_the_parser_raises_what_run_command_prints_and_help_exits_0(capsys: pytest.CaptureFixture) -> None:
    parser = OneLineErrorParser(prog="prog")
    parser.add_argument("--count", type=int, required=True)
    with pytest.raises(UsageError, match=r"^argument --count: invalid int value: 'x'$"):
        parser.parse_args(["--count", "x"])
    with pytest.raises(UsageError, match=r"^the following arguments are required: --count$"):
        parser.parse_args([])
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--help"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith("usage: prog [-h] --count COUNT")


def test_the_report_without_matplotlib_is_one_line_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    """Issue 38 item 4c: it was a traceback after the model had loaded and the STS sets were scored."""
    for module in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, module, None)  # what an environment without matplotlib imports
    # No run folder there: the report stops before reading anything.
    code, _, err = run_entry_point("hf_cse.report", [str(tmp_path / "no_run")], monkeypatch, capsys)
    install = 'pip install "hf_cse[analysis]" (in a clone of hf_cse: pip install -e ".[analysis]").'
    message = r"the report draws its plots with matplotlib, which does not import \(import of matplotlib\S* halted; "
    assert_one_line_usage_error(code, err, rf"{message}None in sys\.modules\): {re.escape(install)}")
