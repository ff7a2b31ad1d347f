"""Settings loaded from a model folder are checked, not trusted (issue 42, item 5): every hf_cse setting of a
``config.json``, every value of a ``training_args.json`` and every field of ``hf_cse_training.json`` of the wrong JSON
type is one line naming it (a pooler given as a JSON object was a TypeError traceback), and no model's own Python code
(``auto_map``) ever runs or is asked about: every ``Auto*`` load in hf_cse pins ``trust_remote_code=False``."""

from __future__ import annotations

import ast
import builtins
import json
import shutil
import types
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from common.commands import run_script
from conftest import REPO_ROOT, write_stsb_dev

from hf_cse import CSEModel, CSETrainingArguments, PoolingConfig, SentenceEncoder
from hf_cse.commands import eval as eval_command
from hf_cse.commands.cli import run_command
from hf_cse.errors import UsageError
from hf_cse.export.model_card.summary import TRAINING_SUMMARY_FILE, TrainingSummary
from hf_cse.json_types import json_matches
from hf_cse.training.record.run_arguments import TRAINING_ARGS_FILE, read_training_arguments, write_training_arguments

JSON_VALUES: dict[str, Any] = {
    "a string": "cls",
    "an integer": 7,
    "a fraction": 0.5,
    "a boolean": True,
    "an object": {"name": "cls"},
    "an array": ["cls"],
    "null": None,
}
"""One value of each JSON type; each setting is given each one its type refuses."""
JSON_TYPE_NAMES = {
    "a string": "string",
    "an integer": "number",
    "a fraction": "number",
    "a boolean": "boolean",
    "an object": "object",
    "an array": "array",
    "null": "null",
}


def wrong_values(annotation: Any) -> dict[str, Any]:
    """The values of :data:`JSON_VALUES` that a setting of type ``annotation`` refuses, by kind; a check of the test
    itself, written from the annotation's members rather than by :func:`json_matches`."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    members = set(typing.get_args(annotation)) if union else {annotation}
    takes = {
        "a string": str in members,
        "an integer": int in members or float in members,
        "a fraction": float in members,
        "a boolean": bool in members,
        "an object": any((typing.get_origin(member) or member) is dict for member in members),
        "an array": any((typing.get_origin(member) or member) in (list, tuple) for member in members),
        "null": type(None) in members,
    }
    return {kind: value for kind, value in JSON_VALUES.items() if not takes[kind]}


def model_folder(encoder_dir: Path, tmp_path: Path, name: str = "model") -> Path:
    folder = tmp_path / name
    shutil.copytree(encoder_dir, folder)
    return folder


def edit_json(path: Path, **values: Any) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(values)
    path.write_text(json.dumps(data), encoding="utf-8")


POOLING_CASES = [
    (item.name, kind, value)
    for item in fields(PoolingConfig)
    for kind, value in wrong_values(typing.get_type_hints(PoolingConfig)[item.name]).items()
]


def test_every_pooling_setting_is_given_each_wrong_type() -> None:
    names = {name for name, _, _ in POOLING_CASES}
    assert names == {item.name for item in fields(PoolingConfig)}
    assert len(POOLING_CASES) >= 4 * len(names)


@pytest.mark.parametrize(("key", "kind", "value"), POOLING_CASES, ids=[f"{k}-{t}" for k, t, _ in POOLING_CASES])
def test_a_pooling_setting_of_the_wrong_type_in_config_json_is_one_line(
    key: str, kind: str, value: Any, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    folder = model_folder(tiny_encoder_dir, tmp_path)
    edit_json(folder / "config.json", hf_cse={**PoolingConfig().to_dict(), key: value})
    with pytest.raises(UsageError) as error:
        SentenceEncoder.from_pretrained(folder, device="cpu")
    message = str(error.value)
    assert message.startswith(f"The hf_cse setting {key!r} of the config.json of ") and "\n" not in message
    assert f"(a JSON {JSON_TYPE_NAMES[kind]}); it must be " in message


@pytest.mark.parametrize("block", ["cls", 3, ["cls"], True])
def test_a_pooling_block_that_is_no_object_is_one_line(block: Any, tiny_encoder_dir: Path, tmp_path: Path) -> None:
    folder = model_folder(tiny_encoder_dir, tmp_path)
    edit_json(folder / "config.json", hf_cse=block)
    with pytest.raises(UsageError, match=r"^The hf_cse settings of the config.json of .* not an object of settings"):
        SentenceEncoder.from_pretrained(folder, device="cpu")


def test_hf_cse_eval_of_a_pooler_given_as_an_object_is_one_line_exit_2(
    tiny_encoder_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case: it was a TypeError traceback."""
    monkeypatch.delenv("HF_CSE_TRACEBACK", raising=False)
    folder = model_folder(tiny_encoder_dir, tmp_path)
    edit_json(folder / "config.json", hf_cse={"pooler": {"name": "cls"}})
    argv = ["--model_name_or_path", str(folder), "--sts_dir", str(write_stsb_dev(tmp_path / "sts"))]
    with pytest.raises(SystemExit) as exit_info:
        run_command(eval_command.main, "python -m hf_cse.eval", [*argv, "--tasks", "stsb", "--stsb_split", "dev"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m hf_cse.eval: error: The hf_cse setting 'pooler' of the config.json of '{folder}' is "
        "{'name': 'cls'} (a JSON object); it must be a string."
    )


# --- training_args.json --------------------------------------------------------------------------------------------


def recorded_arguments(tmp_path: Path) -> dict[str, Any]:
    args = CSETrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none")
    return json.loads(write_training_arguments(args, tmp_path).read_text(encoding="utf-8"))


def test_every_value_of_training_args_json_is_type_checked(tmp_path: Path) -> None:
    """Each value of a real record replaced by each JSON value its field's type refuses: one line naming the file
    and the key. Fields whose type JSON cannot refuse (``Any``) are the only ones left out, and few."""
    record = recorded_arguments(tmp_path)
    hints = {**typing.get_type_hints(CSETrainingArguments), "world_size": int, "mixed_precision": str | None}
    assert read_training_arguments(tmp_path) == record  # the record as written passes
    unchecked = []
    for key in record:
        wrong = {kind: value for kind, value in JSON_VALUES.items() if not json_matches(value, hints[key])}
        if not wrong:
            unchecked.append(key)
        for value in wrong.values():
            (tmp_path / TRAINING_ARGS_FILE).write_text(json.dumps({**record, key: value}), encoding="utf-8")
            with pytest.raises(UsageError, match=f"^{tmp_path / TRAINING_ARGS_FILE}: {key} is ") as error:
                read_training_arguments(tmp_path)
            assert "\n" not in str(error.value)
    assert len(unchecked) <= len(record) // 10, unchecked


@pytest.mark.parametrize(
    "content", ["[]", '"text"', "{not json", b"\xff\xfe"], ids=["array", "string", "bad", "bytes"]
)
def test_a_training_args_json_that_is_no_object_is_one_line(content: str | bytes, tmp_path: Path) -> None:
    path = tmp_path / TRAINING_ARGS_FILE
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(UsageError, match=f"^{path} ") as error:
        read_training_arguments(tmp_path)
    assert "\n" not in str(error.value)


# --- a model's own code: never run, never asked about ----------------------------------------------------------------

CODE = """from pathlib import Path
Path(__file__).with_name("CODE_RAN").write_text("{name}")
from transformers import BertConfig, BertModel, BertTokenizer
class EvilConfig(BertConfig):
    model_type = "evil"
class EvilModel(BertModel):
    config_class = EvilConfig
class EvilTokenizer(BertTokenizer):
    pass
"""


def folder_with_code(encoder_dir: Path, tmp_path: Path, model_type: str, tokenizer_class: str | None) -> Path:
    """The tiny encoder with Python files of its own that leave ``CODE_RAN`` when imported, mapped in by ``auto_map``
    in config.json (``model_type``) and, with ``tokenizer_class``, in tokenizer_config.json."""
    folder = model_folder(encoder_dir, tmp_path)
    for name in ("configuration_evil", "modeling_evil", "tokenization_evil"):
        (folder / f"{name}.py").write_text(CODE.format(name=name), encoding="utf-8")
    auto_map = {"AutoConfig": "configuration_evil.EvilConfig", "AutoModel": "modeling_evil.EvilModel"}
    edit_json(folder / "config.json", model_type=model_type, auto_map=auto_map)
    if tokenizer_class is not None:
        edit_json(
            folder / "tokenizer_config.json",
            tokenizer_class=tokenizer_class,
            auto_map={"AutoTokenizer": ["tokenization_evil.EvilTokenizer", None]},
        )
    return folder


@pytest.fixture
def never_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers asks on stdin before it runs a model's code when ``trust_remote_code`` is unset: fail instead."""
    monkeypatch.setattr(builtins, "input", lambda *args: pytest.fail(f"asked: {args}"))


LOADERS = {
    "SentenceEncoder": lambda folder: SentenceEncoder.from_pretrained(folder, device="cpu"),
    "CSEModel": lambda folder: CSEModel.from_pretrained(folder),
    "run_unsup": "run_unsup",
}


@pytest.mark.parametrize("loader", list(LOADERS))
@pytest.mark.parametrize(
    ("model_type", "tokenizer_class"),
    [("bert", None), ("bert", "BertTokenizer"), ("evil", None), ("bert", "EvilTokenizer")],
)
def test_a_folder_with_code_of_its_own_loads_without_it_or_is_refused_and_never_asks(
    loader: str,
    model_type: str,
    tokenizer_class: str | None,
    tiny_encoder_dir: Path,
    tmp_path: Path,
    never_asked: None,
) -> None:
    folder = folder_with_code(tiny_encoder_dir, tmp_path, model_type, tokenizer_class)
    shipped = model_type == "bert" and tokenizer_class != "EvilTokenizer"
    if loader == "run_unsup":
        from conftest import SENTENCES, run_unsup, write_config, write_train_file

        config = write_config(tmp_path, folder, write_train_file(tmp_path, SENTENCES), max_steps=1)
        load = lambda folder: run_unsup.main(["--config", str(config)])  # noqa: E731
    else:
        load = LOADERS[loader]
    if shipped:
        load(folder)  # transformers' own classes
    elif loader == "CSEModel" and model_type == "bert":
        load(folder)  # the model alone: its tokenizer is not read
    else:
        with pytest.raises(ValueError) as error:
            load(folder)
        if loader != "CSEModel":  # a library call gets transformers' own (multi-line) message
            assert "needs Python code of its own to load" in str(error.value) and "\n" not in str(error.value)
    assert not (folder / "CODE_RAN").exists()


def test_hf_cse_eval_of_a_folder_that_needs_its_code_is_one_line_and_runs_none_of_it(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """The command line, as the issue ran it (where transformers' prompt could be answered 'y'): one line, exit 2."""
    folder = folder_with_code(tiny_encoder_dir, tmp_path, "evil", None)
    command = ["-m", "hf_cse.eval", "--model_name_or_path", str(folder), "--sts_dir", str(write_stsb_dev(tmp_path))]
    done = run_script([*command, "--tasks", "stsb", "--stsb_split", "dev", "--device", "cpu"])
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"python -m hf_cse.eval: error: Model '{folder}' needs Python code of its own")
    assert not (folder / "CODE_RAN").exists()


def auto_loads(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, call, pins trust_remote_code=False)`` of every ``Auto*.from_pretrained/from_config`` call in
    ``path``."""
    calls = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver = node.func.value
        name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
        if node.func.attr in ("from_pretrained", "from_config"):
            if name.startswith("Auto"):
                pinned = any(
                    keyword.arg == "trust_remote_code"
                    and isinstance(keyword.value, ast.Constant)
                    and keyword.value.value is False
                    for keyword in node.keywords
                )
                calls.append((node.lineno, f"{name}.{node.func.attr}", pinned))
    return calls


def test_every_auto_load_in_hf_cse_pins_trust_remote_code_false() -> None:
    sources = [*sorted((REPO_ROOT / "hf_cse").rglob("*.py")), REPO_ROOT / "run_unsup.py"]
    loads = {
        f"{path.relative_to(REPO_ROOT)}:{line} {call}": pinned
        for path in sources
        for line, call, pinned in auto_loads(path)
    }
    assert len(loads) >= 8, loads  # run_unsup (2), encoder (2), modeling_cse (2), push, back-translation (2)
    assert [where for where, pinned in loads.items() if not pinned] == []


# --- hf_cse_training.json (the card record: hf_cse.push and hf_cse.eval read it) -------------------------------------

SUMMARY = TrainingSummary(
    base_model="bert-base-uncased", train_data="wiki.txt", objective="simcse", objective_config={}
)
SUMMARY_CASES = [
    (item.name, kind, value)
    for item in fields(TrainingSummary)
    for kind, value in wrong_values(typing.get_type_hints(TrainingSummary)[item.name]).items()
]


@pytest.mark.parametrize(("key", "kind", "value"), SUMMARY_CASES, ids=[f"{k}-{t}" for k, t, _ in SUMMARY_CASES])
def test_a_card_record_field_of_the_wrong_type_is_one_line(key: str, kind: str, value: Any, tmp_path: Path) -> None:
    path = tmp_path / TRAINING_SUMMARY_FILE
    path.write_text(json.dumps({**SUMMARY.to_dict(), key: value}), encoding="utf-8")
    with pytest.raises(UsageError, match=f"^{path}: {key} is .* \\(a JSON {JSON_TYPE_NAMES[kind]}\\); it must be "):
        TrainingSummary.from_json_file(path)


def test_a_card_record_without_a_required_field_or_no_object_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / TRAINING_SUMMARY_FILE
    assert TrainingSummary.from_dict(SUMMARY.to_dict()) == SUMMARY
    for content, message in [
        (json.dumps({**SUMMARY.to_dict(), "objective": None}), "objective is None"),
        (json.dumps({k: v for k, v in SUMMARY.to_dict().items() if k != "objective"}), "has no 'objective'"),
        ("[]", "holds a JSON array, not an object"),
        ("{oops", "is not valid JSON"),
    ]:
        path.write_text(content, encoding="utf-8")
        with pytest.raises(UsageError, match=f"^{path}:? {message}"):
            TrainingSummary.from_json_file(path)


@pytest.mark.parametrize("base_model", [3, ["bert"], {"name": "bert"}, True])
def test_hf_cse_eval_reads_the_base_model_of_the_card_record_typed(
    base_model: Any, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    folder = model_folder(tiny_encoder_dir, tmp_path)
    (folder / TRAINING_SUMMARY_FILE).write_text(json.dumps({"base_model": base_model}), encoding="utf-8")
    with pytest.raises(UsageError, match="base_model must be a string or null"):
        eval_command.trained_from(str(folder))
    (folder / TRAINING_SUMMARY_FILE).write_text(json.dumps({"base_model": "bert-base"}), encoding="utf-8")
    assert eval_command.trained_from(str(folder)) == "bert-base"
