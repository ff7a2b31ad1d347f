"""Every number and path a run is given is checked before anything loads (issue 42, item 9): one line naming the
value and what is valid, exit status 2; a corpus line is bounded before it is tokenized; ``--overwrite_output_dir``
never sets aside the run's own inputs.

The numeric class is enumerated from the argument dataclasses themselves: a field added to them (by hf_cse or by a
transformers upgrade) without an entry in :data:`VALID` here and a range in ``hf_cse.training.arguments.checks``
fails :func:`test_every_numeric_argument_has_a_range_and_an_expectation`. The numeric flags of the ``python -m
hf_cse.*`` commands are enumerated from their parsers (the reference generator's list of commands): one that is not a
bounded :class:`~hf_cse.training.arguments.checks.NumberFlag` fails
:func:`test_every_numeric_flag_of_every_command_is_bounded`."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import math
import os
import re
import socket
import threading
import tracemalloc
import typing
from dataclasses import fields
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from common.commands import refuse_to_load, run_unsup_in_process
from conftest import HANG_GUARD_S, REPO_ROOT, SENTENCES, run_unsup, write_config, write_train_file

from hf_cse import CSEModel, CSETrainingArguments, SentenceEncoder
from hf_cse.commands.cli import run_command
from hf_cse.errors import UsageError, echo
from hf_cse.number_ranges import NumberFlag, NumberRange
from hf_cse.registry import AUXILIARY_LOSSES, INPUT_PROVIDERS, LOSS_FORMS, OBJECTIVES, VIEW_AUGMENTATIONS
from hf_cse.training.arguments.checks import DATA_NUMBERS, MODEL_NUMBERS, TRAINING_NUMBERS
from hf_cse.training.arguments.model_data import DataArguments, ModelArguments
from hf_cse.training.data.corpus import MAX_LINE_BYTES, load_sentences
from hf_cse.training.data.streaming import stream_sentences
from hf_cse.training.saving.output_dir import PREVIOUS_RUN_PREFIX, check_output_dir_reuse, run_inputs

NAN, INF = math.nan, math.inf
PROBES = (None, NAN, INF, -INF, -1, 0, 0.5, 1, 2)
"""Each numeric argument is given each of these; :data:`VALID` says which it takes."""

VALID: dict[str, set[Any]] = {
    # CSETrainingArguments: hf_cse's own
    "temperature": {0.5, 1, 2},
    "gradient_cache_chunk_size": {None, 1, 2},
    "num_hard_negatives": {None, 0, 1, 2},  # set from the data: unset for sentences, 0 for pairs alone
    "max_seq_length": {2},
    "pad_to_multiple_of": {None, 1, 2},
    # the Trainer's (with max_steps -1, num_train_epochs sets the length)
    "max_steps": {-1, 1, 2},
    "num_train_epochs": {0.5, 1, 2},
    "per_device_train_batch_size": {2},  # 1 leaves a sentence without an in-batch negative
    "per_device_eval_batch_size": {1, 2},
    "gradient_accumulation_steps": {1, 2},
    "learning_rate": {0.5, 1, 2},
    "warmup_steps": {0, 0.5, 1, 2},
    "weight_decay": {0, 0.5, 1, 2},
    "adam_beta1": {0, 0.5},
    "adam_beta2": {0, 0.5},
    "adam_epsilon": {0.5, 1},
    "max_grad_norm": {0, 0.5, 1, 2},
    "label_smoothing_factor": {0},
    "neftune_noise_alpha": {None, 0.5, 1, 2},
    "logging_steps": {0.5, 1, 2},
    "eval_steps": {None, 0.5, 1, 2},
    "eval_delay": {0, 0.5, 1, 2},
    "eval_accumulation_steps": {None, 1, 2},
    "save_steps": {0.5, 1, 2},
    "save_total_limit": {None, 1, 2},
    "torch_empty_cache_steps": {None, 1, 2},
    "seed": {0, 1, 2},
    "data_seed": {None, 0, 1, 2},
    "dataloader_num_workers": {0, 1, 2},
    "dataloader_prefetch_factor": {None, 1, 2},
    "ddp_bucket_cap_mb": {None, 1, 2},
    "ddp_timeout": {1, 2},
    "local_rank": {-1},  # >= 0 would join a process group: only the refused values and -1 are given
    # run_unsup.py's ModelArguments
    "inference_max_seq_length": {None, 2},
    "dropout": {None, 0, 0.5},
    "lora_r": {None, 1, 2},
    "lora_alpha": {1, 2},
    "lora_dropout": {0, 0.5},
    # run_unsup.py's DataArguments
    "max_train_samples": {None, 1, 2},
    "shuffle_buffer_size": {0, 1, 2},
}
"""Which of :data:`PROBES` each numeric argument takes, written here from what each setting means, not read from the
code's ranges."""

SKIPPED_PROBES = {"local_rank": {0, 0.5, 1, 2}}
"""Probes not given: a local rank >= 0 makes the arguments join a process group."""

OTHER_ARGUMENTS = {"dataloader_prefetch_factor": {"dataloader_num_workers": 1}}
"""Arguments a probe needs beside it: a prefetch factor only applies with workers."""


def numeric_fields(cls: type) -> list[str]:
    """The init fields of ``cls`` typed ``int`` or ``float`` (optionally ``None``), booleans aside."""
    hints = typing.get_type_hints(cls)
    names = []
    for item in fields(cls):
        members = set(typing.get_args(hints[item.name])) or {hints[item.name]}
        if item.init and members - {type(None)} and members - {type(None)} <= {int, float}:
            names.append(item.name)
    return names


ARGUMENT_CLASSES = {
    "CSETrainingArguments": CSETrainingArguments,
    "ModelArguments": ModelArguments,
    "DataArguments": DataArguments,
}
CASES = [(cls, name) for cls, dataclass in ARGUMENT_CLASSES.items() for name in numeric_fields(dataclass)]


def test_every_numeric_argument_has_a_range_and_an_expectation() -> None:
    names = [name for _, name in CASES]
    assert len(names) >= 39 and len(set(names)) == len(names)  # 39 with transformers 5.24
    assert set(VALID) == set(names), "classify each numeric argument in VALID (and give it a range in the code)"
    assert set(TRAINING_NUMBERS) == set(numeric_fields(CSETrainingArguments))
    assert set(MODEL_NUMBERS) == set(numeric_fields(ModelArguments))
    assert set(DATA_NUMBERS) == set(numeric_fields(DataArguments))


def make(cls: str, name: str, value: Any, tmp_path: Path) -> Any:
    values = {name: value, **OTHER_ARGUMENTS.get(name, {})}
    if cls == "CSETrainingArguments":
        return CSETrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", **values)
    return ARGUMENT_CLASSES[cls](**values)


@pytest.mark.parametrize(("cls", "name"), CASES, ids=[name for _, name in CASES])
def test_each_numeric_argument_takes_its_range_and_refuses_the_rest_in_one_line(
    cls: str, name: str, tmp_path: Path
) -> None:
    for value in PROBES:
        if value in SKIPPED_PROBES.get(name, set()):
            continue
        if value in VALID[name]:
            make(cls, name, value, tmp_path)  # accepted
            continue
        with pytest.raises(ValueError) as error:
            make(cls, name, value, tmp_path)
        message = str(error.value)
        assert "\n" not in message and name in message, message
        assert repr(value) in message or f"{value:g}" in message, f"{name}={value!r}: {message}"


HUGE = (2**50, 1e30)
"""Values far past every bound: an integer and a float (an 8 PB tensor, were either sized into one)."""
RANGES = {**TRAINING_NUMBERS, **MODEL_NUMBERS, **DATA_NUMBERS}


def upper_bound(valid: NumberRange) -> str:
    """How the one-line error writes ``valid``'s upper bound."""
    assert valid.high is not None
    return str(int(valid.high)) if float(valid.high).is_integer() else f"{valid.high:g}"


def test_every_numeric_argument_is_bounded_above() -> None:
    # Issue 55 item 4: --pad_to_multiple_of 1099511627776 was a traceback (an 8 TB tensor in the check against the
    # model's positions). Every range has an upper bound, so a new numeric field fails here until it has one.
    assert sorted(name for name, valid in RANGES.items() if valid.high is None) == []


@pytest.mark.parametrize(("cls", "name"), CASES, ids=[name for _, name in CASES])
def test_a_huge_value_is_refused_in_one_line_naming_the_bound(cls: str, name: str, tmp_path: Path) -> None:
    for value in HUGE:
        if isinstance(value, float) and RANGES[name].integer:
            value = int(value)
        with pytest.raises(ValueError) as error:
            make(cls, name, value, tmp_path)
        message = str(error.value)
        assert "\n" not in message and name in message and upper_bound(RANGES[name]) in message, message


@pytest.mark.parametrize("name", ["pad_to_multiple_of", "max_seq_length", "per_device_train_batch_size"])
def test_a_huge_number_on_the_command_line_is_one_line_before_anything_loads(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    refuse_to_load(monkeypatch)
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES))
    code, line = run_unsup_in_process(monkeypatch, capsys, ["--config", str(config), f"--{name}", "1099511627776"])
    assert code == 2 and line.startswith(f"run_unsup.py: error: {name} 1099511627776 is not valid: "), line
    assert upper_bound(RANGES[name]) in line and not (tmp_path / "out").exists()


def numeric_parameters(cls: type) -> list[str]:
    """The parameters of ``cls``'s constructor that take a number (an ``int``/``float`` default or annotation)."""
    hints = typing.get_type_hints(cls.__init__)
    names = []
    for parameter in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        members = set(typing.get_args(hints.get(parameter.name))) or {hints.get(parameter.name)}
        default = parameter.default
        numeric_default = isinstance(default, int | float) and not isinstance(default, bool)
        if numeric_default or (members - {type(None)} and members - {type(None)} <= {int, float}):
            names.append(parameter.name)
    return names


REGISTRIES = {
    "objective": OBJECTIVES,
    "auxiliary loss": AUXILIARY_LOSSES,
    "loss form": LOSS_FORMS,
    "view augmentation": VIEW_AUGMENTATIONS,
}
KWARGS = [
    (kind, name, parameter)
    for kind, registry in REGISTRIES.items()
    for name, cls in registry.items()
    for parameter in numeric_parameters(cls)
]
FORM_OF = {("objective", "dclr", "hardness"): "focal", ("objective", "dclr", "tau_plus"): "debiased"}
"""DCLR's settings of one loss form: checked with that form (with another one they are refused, as unused)."""


@pytest.mark.parametrize(("kind", "name", "parameter"), KWARGS, ids=[":".join(case[1:]) for case in KWARGS])
def test_every_numeric_hyper_parameter_of_every_registered_part_is_bounded(
    kind: str, name: str, parameter: str
) -> None:
    # objective_kwargs, auxiliary_losses, view_augmentation_kwargs: each number is checked (check_setting, in the
    # part's constructor, when the arguments are made) against a range whose upper bound the one line names.
    form = {"loss_form": FORM_OF[kind, name, parameter]} if (kind, name, parameter) in FORM_OF else {}
    for value in HUGE:
        with pytest.raises(ValueError) as error:
            REGISTRIES[kind][name](**{parameter: value}, **form)
        message = str(error.value)
        assert "\n" not in message and parameter in message and re.search(r"\d\]|\d\)", message), message


@pytest.mark.parametrize(("case", "form"), FORM_OF.items(), ids=[case[2] for case in FORM_OF])
def test_a_setting_of_another_loss_form_is_refused_not_ignored(case: tuple[str, str, str], form: str) -> None:
    kind, name, parameter = case
    REGISTRIES[kind][name](**{parameter: 0.05, "loss_form": form})
    with pytest.raises(ValueError) as error:
        REGISTRIES[kind][name](**{parameter: 0.05})  # the default form, infonce, has no such setting
    assert str(error.value) == (
        f"{parameter} is a setting of loss_form {form!r}, and loss_form is 'infonce', which would ignore it: drop "
        f"{parameter}, or set loss_form."
    )


def test_the_walk_of_registered_parts_sees_their_numbers() -> None:
    assert len(KWARGS) >= 40 and ("objective", "esimcse", "momentum_queue_size") in KWARGS
    # No input provider takes a number: one that does needs a bounded check and a place in this walk.
    numeric = [
        f"{name}.{item.name}"
        for name, cls in INPUT_PROVIDERS.items()
        for item in fields(cls.Settings)
        if set(typing.get_args(typing.get_type_hints(cls.Settings)[item.name])) & {int, float}
        or typing.get_type_hints(cls.Settings)[item.name] in (int, float)
    ]
    assert numeric == []


# --- the numeric flags of the python -m hf_cse.* commands -----------------------------------------------------------


def load_reference_generator() -> ModuleType:
    """``docs/reference_generator.py``: its ``COMMANDS`` and ``documented_actions`` enumerate every flag of every
    command for the reference, and this walk with them."""
    spec = importlib.util.spec_from_file_location("reference_generator", REPO_ROOT / "docs" / "reference_generator.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REFERENCE = load_reference_generator()
COMMAND_MODULES = {name: importlib.import_module(f"hf_cse.commands.{name}") for name in REFERENCE.COMMANDS}


def takes_numbers(action: argparse.Action) -> bool:
    """A flag whose type makes numbers: a :class:`NumberFlag`, ``int``, ``float`` or any other type that makes a
    number of ``"1"`` or ``"2"``."""
    if isinstance(action.type, NumberFlag):
        return True
    if action.type is None or action.nargs == 0:
        return False
    for text in ("1", "2"):
        try:
            value = action.type(text)
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            return True
    return False


COMMAND_FLAGS = [
    (name, action)
    for name, module in COMMAND_MODULES.items()
    for action in REFERENCE.documented_actions(module.build_parser())
    if takes_numbers(action)
]
FLAG_IDS = [f"{name}:{REFERENCE.canonical_option(action)}" for name, action in COMMAND_FLAGS]


def test_the_walk_of_the_commands_sees_their_numeric_flags() -> None:
    # Issue 55 item 4: the commands' numbers were parsed as plain int/float, unbounded above.
    assert len(COMMAND_FLAGS) >= 20
    for expected in ("eval:--batch_size", "eval:--truncate_dim", "transfer:--kfold", "report:--median_score_range",
                     "push:--batch_size", "sweep:--seeds", "mine:--num_negatives", "mine:--margin"):  # fmt: skip
        assert expected in FLAG_IDS


@pytest.mark.parametrize(("command", "action"), COMMAND_FLAGS, ids=FLAG_IDS)
def test_every_numeric_flag_of_every_command_is_bounded(command: str, action: argparse.Action) -> None:
    # A flag typed plain int or float takes any number: its type is a NumberFlag, whose range has an upper bound.
    assert isinstance(action.type, NumberFlag), f"give {action.option_strings[0]} type=NumberFlag(NumberRange(...))"
    valid = action.type.valid
    assert valid.high is not None and not valid.high_open
    highest = int(valid.high) if valid.integer else valid.high
    assert action.type(str(highest)) == highest
    with pytest.raises(
        argparse.ArgumentTypeError, match=f"^{highest + 1} is not valid: it takes .*{upper_bound(valid)}"
    ):
        action.type(str(highest + 1))
    defaults = action.default if isinstance(action.default, list) else [action.default]
    assert all(default is None or valid.accepts(default) for default in defaults), action.default


@pytest.mark.parametrize(("command", "action"), COMMAND_FLAGS, ids=FLAG_IDS)
def test_a_huge_number_given_to_a_command_is_one_line_and_exit_2_before_anything_loads(
    command: str, action: argparse.Action, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    for cls in (SentenceEncoder, CSEModel):
        monkeypatch.setattr(cls, "from_pretrained", lambda *args, **kwargs: pytest.fail("a model loaded"))
    flag, huge = REFERENCE.canonical_option(action), "1099511627776" if action.type.valid.integer else "1e30"
    values = [huge] * (action.nargs if isinstance(action.nargs, int) else 1)
    prog = COMMAND_MODULES[command].build_parser().prog
    with pytest.raises(SystemExit) as exit_info:
        run_command(COMMAND_MODULES[command].main, prog, [flag, *values])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"{prog}: error: argument {flag}: {huge} is not valid: it takes "), err
    assert upper_bound(action.type.valid) in err, err


def invalid_flag_value(name: str) -> str:
    """A value of ``--name`` that the command line can give and the argument refuses."""
    for value in (NAN, INF, -1, 0, 0.5):
        if value not in VALID[name] and value not in SKIPPED_PROBES.get(name, set()):
            return str(value)
    raise AssertionError(name)


@pytest.mark.parametrize("name", [name for _, name in CASES])
def test_a_bad_number_on_the_command_line_is_one_line_and_exit_2_before_anything_loads(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    refuse_to_load(monkeypatch)
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES))
    value = invalid_flag_value(name)
    code, line = run_unsup_in_process(monkeypatch, capsys, ["--config", str(config), f"--{name}", value])
    assert code == 2 and line.startswith("run_unsup.py: error: ") and name in line and value in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--gradient_accumulation_steps", "0"], "gradient_accumulation_steps 0 is not valid: "),
        (
            ["--learning_rate", "inf"],
            "learning_rate inf is not valid: learning_rate takes a finite number in (0, 1000000].",
        ),
        (["--max_grad_norm", "nan"], "max_grad_norm nan is not valid: "),
        (["--num_train_epochs", "nan"], "num_train_epochs nan is not valid: "),
    ],
    ids=["accumulation_0", "learning_rate_inf", "max_grad_norm_nan", "epochs_nan"],
)
def test_the_issue_s_cases_name_the_flag(
    flags: list[str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("model_name_or_path: m\ntrain_file: t.txt\noutput_dir: out\n", encoding="utf-8")
    code, line = run_unsup_in_process(monkeypatch, capsys, ["--config", str(config), *flags])
    assert (code, line[: len("run_unsup.py: error: ") + len(message)]) == (2, f"run_unsup.py: error: {message}")


# --- paths -----------------------------------------------------------------------------------------------------------


def special_file(kind: str, path: Path) -> Path:
    """A path that is no regular file (nor folder) at ``path``: a FIFO, a socket, a device (a link to /dev/null) or
    a broken symbolic link."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    elif kind == "device":
        path.symlink_to("/dev/null")
    elif kind == "file":
        path.write_text("a file\n", encoding="utf-8")
    else:
        path.symlink_to(path.parent / "nowhere")
    return path


@pytest.mark.parametrize(
    ("kind", "inside", "what"),
    [
        ("file", False, "is a file"),
        ("fifo", False, "is a FIFO"),
        ("socket", False, "is a socket"),
        ("device", False, "is a device"),
        ("broken_link", False, "is a broken symbolic link"),
        ("file", True, "which is a file"),
    ],
)
def test_an_output_dir_that_cannot_be_a_folder_is_one_line_before_anything_loads(
    kind: str,
    inside: bool,
    what: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    tiny_encoder_dir: Path,
    tmp_path: Path,
) -> None:
    refuse_to_load(monkeypatch, "read_pairs", "resolve_model_path")
    target = special_file(kind, tmp_path / "target")
    output_dir = target / "run" if inside else target
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES))
    code, line = run_unsup_in_process(monkeypatch, capsys, ["--config", str(config), "--output_dir", str(output_dir)])
    assert code == 2 and line.startswith(f"run_unsup.py: error: output_dir {echo(str(output_dir))} ")
    assert f"{what}, not a folder" in line


def feed_fifo(path: Path, text: str) -> threading.Thread:
    """Write ``text`` into the FIFO ``path`` from a thread (opening it blocks until a reader opens it)."""

    def write() -> None:
        with path.open("w", encoding="utf-8") as handle:
            handle.write(text)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("kind", ["fifo", "socket", "device", "broken_link"])
@pytest.mark.parametrize("streaming", [False, True], ids=["in_memory", "streaming"])
def test_a_corpus_that_is_no_regular_file_is_named_for_what_it_is(kind: str, streaming: bool, tmp_path: Path) -> None:
    """A FIFO was reported as "does not exist". Read into memory it is read once, as a pipe can be; a stream is read
    to be hashed, then every epoch: refused. Anything else that is not a file is refused in both."""
    path = special_file(kind, tmp_path / "corpus.txt")
    if kind == "fifo" and not streaming:
        writer = feed_fifo(path, "\n".join(SENTENCES) + "\n")
        assert load_sentences(str(path))["text"] == SENTENCES
        writer.join(timeout=HANG_GUARD_S)
        return
    expected = {
        "fifo": "is a FIFO, which gives its content once",
        "socket": "is a socket, not a file",
        "device": "is a device, not a file",
        "broken_link": r"does not exist \(a broken symbolic link\)",
    }[kind]
    with pytest.raises((UsageError, FileNotFoundError), match=f"^train_file '{path}' {expected}"):
        stream_sentences(str(path)) if streaming else load_sentences(str(path))


LONG = "word " * (MAX_LINE_BYTES // 5 + 100)
"""One text longer than a corpus line may be."""


def long_corpus(tmp_path: Path, suffix: str) -> Path:
    """A corpus whose third record holds :data:`LONG`, in the format of ``suffix``."""
    texts = [SENTENCES[0], SENTENCES[1], LONG, SENTENCES[2]]
    path = tmp_path / f"corpus{suffix}"
    if suffix == ".txt":
        path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    elif suffix == ".csv":
        path.write_text("text\n" + "\n".join(texts) + "\n", encoding="utf-8")
    elif suffix == ".jsonl":
        path.write_text("".join(f'{{"text": "{text}"}}\n' for text in texts), encoding="utf-8")
    else:  # a .json array, on one line as json.dump writes it
        path.write_text("[" + ", ".join(f'{{"text": "{text}"}}' for text in texts) + "]", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("suffix", "streaming"),
    [(".txt", False), (".csv", False), (".jsonl", False), (".json", False), (".txt", True), (".csv", True),
     (".jsonl", True)],
)  # fmt: skip
def test_a_line_or_text_past_the_limit_is_one_line_before_anything_is_tokenized(
    suffix: str, streaming: bool, tmp_path: Path
) -> None:
    path = long_corpus(tmp_path, suffix)
    where = {".txt": "line 3", ".csv": "line 4", ".jsonl": "line 3", ".json": "item 2 of the array"}[suffix]
    expected = "is longer than 1,048,576 bytes" if suffix != ".json" else f"has {len(LONG):,} characters, more than"
    with pytest.raises(UsageError, match=f"^{path}: {where}(: the text)? {expected}") as error:
        list(stream_sentences(str(path))) if streaming else load_sentences(str(path))
    assert "\n" not in str(error.value)


def test_a_corpus_on_one_line_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """A 32 MB corpus without a line break: read no further than the limit (it was read whole, then tokenized)."""
    path = tmp_path / "one_line.txt"
    path.write_text("a sentence without end " * ((32 << 20) // 23), encoding="utf-8")
    tracemalloc.start()
    with pytest.raises(UsageError, match="line 1 is longer than"):
        load_sentences(str(path))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 4 * MAX_LINE_BYTES, f"{peak / 2**20:.1f} MiB held to refuse a 32 MiB line"


def test_a_json_array_on_one_long_line_of_short_texts_is_read(tmp_path: Path) -> None:
    """json.dump writes an array on one line: past the line limit, but every text is short."""
    path = tmp_path / "corpus.json"
    texts = [f"{SENTENCES[i % len(SENTENCES)]} {i}" for i in range(60_000)]
    path.write_text("[" + ", ".join(f'{{"text": "{text}"}}' for text in texts) + "]", encoding="utf-8")
    assert path.stat().st_size > MAX_LINE_BYTES
    assert load_sentences(str(path))["text"] == texts


# --- --overwrite_output_dir and the run's own inputs ----------------------------------------------------------------

INPUT_FLAGS = {
    "train_file": lambda folder, encoder: ["--train_file", str(write_train_file(folder, SENTENCES))],
    "model_name_or_path": lambda folder, encoder: ["--model_name_or_path", str(folder)],
    "sts_dir": lambda folder, encoder: ["--sts_dir", str(folder / "sts")],
    "input_kwargs complementary_similarities.model_name_or_path": lambda folder, encoder: [
        "--input_kwargs",
        json.dumps({"complementary_similarities": {"model_name_or_path": str(folder / "complementary")}}),
    ],
    "input_kwargs negations_and_paraphrases.paraphrase_source": lambda folder, encoder: [
        "--input_kwargs",
        json.dumps({"negations_and_paraphrases": {"paraphrase_source": f"tsv:{folder / 'paraphrases.tsv'}"}}),
    ],
    "evaluators pairs": lambda folder, encoder: ["--evaluators", f"pairs:{folder / 'pairs.tsv'}"],
    "config": lambda folder, encoder: [],
}
"""Per input argument of a run: the flags that put it inside the output folder (``folder``)."""


@pytest.mark.parametrize("name", list(INPUT_FLAGS))
def test_overwrite_never_sets_aside_an_output_dir_that_holds_the_run_s_own_inputs(
    name: str, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """Each input of a run (the corpus, the base model, the STS folder, ...) inside the output folder of an earlier
    run: the new run is refused in one line and nothing is moved (the corpus was moved aside, then "does not
    exist")."""
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    (output_dir / "checkpoint-2").mkdir()  # the earlier run
    for folder in ("sts", "complementary"):
        (output_dir / folder).mkdir()
    for file in ("paraphrases.tsv", "pairs.tsv"):
        (output_dir / file).write_text("a\tb\t1\n", encoding="utf-8")
    config_folder = output_dir if name == "config" else tmp_path
    config = write_config(config_folder, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), output_dir="x")
    argv = ["--config", str(config), "--output_dir", str(output_dir), *INPUT_FLAGS[name](output_dir, tiny_encoder_dir)]
    model_args, data_args, training_args = run_unsup.parse_args(argv)
    inputs = run_inputs(model_args, data_args, training_args, config=str(config))
    before = sorted(path.name for path in output_dir.iterdir())
    with pytest.raises(UsageError, match=f"holds this run's own input \\({name} ") as error:
        check_output_dir_reuse(output_dir, None, True, inputs)
    assert "\n" not in str(error.value)
    assert sorted(path.name for path in output_dir.iterdir()) == before


def test_overwrite_still_sets_aside_a_run_whose_folder_holds_none_of_the_inputs(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    output_dir = tmp_path / "out"
    (output_dir / "checkpoint-2").mkdir(parents=True)
    inputs = {"train_file": str(write_train_file(tmp_path, SENTENCES)), "model_name_or_path": str(tiny_encoder_dir)}
    check_output_dir_reuse(output_dir, None, True, inputs)
    [aside] = [path for path in output_dir.iterdir() if path.name.startswith(PREVIOUS_RUN_PREFIX)]
    assert [path.name for path in aside.iterdir()] == ["checkpoint-2"]


def test_run_unsup_refuses_to_set_aside_the_folder_of_its_corpus(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    output_dir = tmp_path / "out"
    (output_dir / "checkpoint-2").mkdir(parents=True)
    train_file = write_train_file(output_dir, SENTENCES)
    refuse_to_load(monkeypatch, "read_pairs", "resolve_model_path")
    config = write_config(tmp_path, tiny_encoder_dir, train_file, output_dir=str(output_dir))
    code, line = run_unsup_in_process(monkeypatch, capsys, ["--config", str(config), "--overwrite_output_dir", "true"])
    assert code == 2 and line.startswith(
        f"run_unsup.py: error: output_dir '{output_dir}' holds this run's own input (train_file '{train_file}')"
    )
    assert train_file.is_file() and (output_dir / "checkpoint-2").is_dir()


@pytest.mark.parametrize(
    ("name", "value"), [("eval_sts_tasks", "sickr"), ("evaluators", "sts"), ("matryoshka_dims", 16)]
)
def test_a_list_argument_given_one_value_in_python_is_one_line(name: str, value: object, tmp_path: Path) -> None:
    """A string was read letter by letter ("Unknown eval_sts_tasks ['c', 'i', 'k', 'r', 's']", "Unknown evaluator
    's'"), a number was "'int' object is not iterable"."""
    with pytest.raises(UsageError) as error:
        CSETrainingArguments(output_dir=str(tmp_path), use_cpu=True, **{name: value})
    assert str(error.value) == f"{name} takes a list, got {value!r}: write [{value!r}] for one item."


def test_with_pinned_memory_batches_go_to_the_device_without_the_host_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an accelerator, batches come from pinned memory and accelerate copies them without waiting
    (``non_blocking``): its default made each step's copy wait for every kernel of the step before it (measured on an
    H200: an eager BERT-base step is host-bound, 4% MFU). A setting given is kept; without an accelerator, nothing
    changes."""
    from hf_cse.training import training_args as module

    monkeypatch.setattr(module, "accelerator_available", lambda: True)
    args = CSETrainingArguments(str(tmp_path))
    assert args.dataloader_pin_memory and args.accelerator_config.non_blocking is True
    kept = CSETrainingArguments(str(tmp_path), accelerator_config={"non_blocking": False, "split_batches": False})
    assert kept.accelerator_config.non_blocking is False
    flag = CSETrainingArguments(str(tmp_path), accelerator_config='{"split_batches": false}')  # as a flag gives it
    assert flag.accelerator_config.non_blocking is True
    for unpinned in ({"dataloader_pin_memory": False}, {"use_cpu": True}):  # use_cpu: the Trainer unpins
        assert CSETrainingArguments(str(tmp_path), **unpinned).accelerator_config.non_blocking is False
    monkeypatch.setattr(module, "accelerator_available", lambda: False)
    assert CSETrainingArguments(str(tmp_path)).accelerator_config.non_blocking is False
