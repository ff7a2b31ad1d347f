"""Every input a run reads enters the resume contract by its content (issue 55, item 2): a file edited in place (same
path, same size, same modification time) before ``--resume_from_checkpoint true`` makes the resume a one-line
refusal naming what changed, never a silent resume on other data.

The class is closed by observation, not by a list: :func:`test_every_file_a_run_reads_is_identified_by_content`
runs ``run_unsup.py`` with every kind of input at once (base model, corpus, paraphrase TSV, complementary model, STS
folder, scored pairs, a BEIR folder), records every file under its inputs folder that Python opens (an audit hook),
and edits each of them, and every file beside them (safetensors' and tokenizers' Rust code reads the weights and
``tokenizer.json`` unseen), in turn. A new input that the run reads without identifying it resumes silently and fails
the test; a new file-valued argument of the argument dataclasses, or a new input provider that names files or
models, fails :func:`test_the_walk_gives_every_file_valued_argument_and_provider` until the walk gives it. The walk
takes about a minute (slow); the audit's own case, OssCSE's TSV, runs in the default suite."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path

import pytest
from common.content_edits import edit_in_place, same_size_edits, write_in_place
from conftest import SENTENCES, run_unsup, write_stsb_dev

from hf_cse import CSETrainingArguments
from hf_cse.commands.cli import run_command
from hf_cse.inputs import InputSettings
from hf_cse.registry import INPUT_PROVIDERS
from hf_cse.run_files import RUN_SETTINGS_FILE
from hf_cse.training.arguments.model_data import DataArguments, ModelArguments

PATH_HELP = re.compile(r"\b(files?|folders?|paths?|director(y|ies))\b|\b[a-z]+:(FILE|FOLDER|PATH)\b", re.IGNORECASE)
"""How an argument's help says that its value names a file or folder."""

NOT_INPUTS = {
    "text_column": "a column of train_file: the corpus identity covers what it selects (corpus_reading, content)",
    "output_dir": "where the run writes; a checkpoint it resumes from is verified against its own manifest",
    "resume_from_checkpoint": "the checkpoint itself, verified against its manifest",
    "accelerator_config": "how processes and devices run (recorded as world_size, precision); not identified",
    "fsdp_config": "how processes shard the model (needs several GPUs); not identified",
    "deepspeed": "how processes shard the model (needs GPUs and DeepSpeed); not identified",
}
"""File-valued arguments that are no input of what is trained, or that the walk cannot run on a CPU, each with why."""

MAX_EDITS = 12
"""Same-size edits tried per file before the test gives up finding one the run accepts (a broken file is refused by
the reader, which says nothing of the resume contract)."""


def file_valued_arguments() -> set[str]:
    """Every field of ``run_unsup.py``'s argument dataclasses whose value may be a string that its help says names a
    file or folder."""
    classes = (ModelArguments, DataArguments, CSETrainingArguments)
    return {
        item.name
        for cls in classes
        for item in fields(cls)
        if "str" in str(item.type) and PATH_HELP.search(item.metadata.get("help", ""))
    }


def providers_naming_inputs() -> set[str]:
    """The registered input providers whose settings name something outside the run (a file, a model): those that
    check it before anything loads (:meth:`~hf_cse.inputs.InputSettings.check_inputs`)."""
    return {
        name
        for name, cls in INPUT_PROVIDERS.items()
        if cls.Settings.check_inputs is not InputSettings.check_inputs  # type: ignore[attr-defined]
    }


def write_inputs(inputs: Path, encoder_dir: Path) -> dict[str, object]:
    """Every kind of input under ``inputs``, one folder each, and the ``run_unsup.py`` flags that name them."""
    shutil.copytree(encoder_dir, inputs / "model")
    shutil.copytree(encoder_dir, inputs / "complementary")
    (inputs / "corpus").mkdir()
    (inputs / "corpus" / "train.txt").write_text("\n".join(SENTENCES * 2) + "\n", encoding="utf-8")
    (inputs / "paraphrases").mkdir()
    rows = "".join(f"{sentence}\t{sentence} indeed\n" for sentence in SENTENCES)
    (inputs / "paraphrases" / "paraphrases.tsv").write_text(rows, encoding="utf-8")
    write_stsb_dev(inputs / "sts")
    (inputs / "pairs").mkdir()
    pairs = "".join(f"{a}\t{b}\t{i % 5}\n" for i, (a, b) in enumerate(zip(SENTENCES, SENTENCES[1:], strict=False)))
    (inputs / "pairs" / "pairs.tsv").write_text("sentence1\tsentence2\tscore\n" + pairs, encoding="utf-8")
    beir = inputs / "beir"
    (beir / "qrels").mkdir(parents=True)
    documents = [{"_id": f"d{i}", "title": "", "text": text} for i, text in enumerate(SENTENCES)]
    (beir / "corpus.jsonl").write_text("".join(json.dumps(doc) + "\n" for doc in documents), encoding="utf-8")
    queries = [{"_id": f"q{i}", "text": text} for i, text in enumerate(SENTENCES[:4])]
    (beir / "queries.jsonl").write_text("".join(json.dumps(query) + "\n" for query in queries), encoding="utf-8")
    qrels = "".join(f"q{i}\td{i}\t1\n" for i in range(4))
    (beir / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels, encoding="utf-8")
    provider_inputs = {
        "negations_and_paraphrases": {
            "paraphrase_source": f"tsv:{inputs / 'paraphrases' / 'paraphrases.tsv'}",
            "negation_backend": "rules",
        },
        "complementary_similarities": {"model_name_or_path": str(inputs / "complementary")},
    }
    return {
        "model_name_or_path": inputs / "model",
        "train_file": inputs / "corpus" / "train.txt",
        "sts_dir": inputs / "sts",
        "evaluators": None,  # several values: see walk_argv
        "objective": "dclr",
        "auxiliary_losses": json.dumps({"margin": {"weight": 1.0}}),  # OssCSE's term beside DCLR: both providers
        "input_kwargs": json.dumps(provider_inputs),
    }


def walk_argv(inputs: Path, work: Path, flags: dict[str, object]) -> list[str]:
    """``run_unsup.py`` flags of the walk's run: one step, evaluated and saved, on every input ``flags`` names."""
    given = {key: value for key, value in flags.items() if value is not None}
    values = {
        **given,
        "output_dir": work / "out",
        "per_device_train_batch_size": 4,
        "max_steps": 1,
        "save_steps": 1,
        "eval_strategy": "steps",
        "eval_steps": 1,
        "report_to": "none",
        "use_cpu": "true",
        "disable_tqdm": "true",
        "seed": 0,
    }
    evaluators = ["sts", f"pairs:{inputs / 'pairs' / 'pairs.tsv'}", f"ir:{inputs / 'beir' / 'qrels' / 'dev.tsv'}"]
    return [*(f"--{key}={value}" for key, value in values.items()), "--evaluators", *evaluators]


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, argv: list[str]) -> tuple[int, str]:
    """``run_unsup.py ARGV`` in this process as its ``__main__`` runs it: the exit status (0: it returned) and the
    last line of stderr, after checking that no traceback was printed; an exception it lets through: ``(1, the
    exception)``."""
    monkeypatch.delenv("HF_CSE_TRACEBACK", raising=False)
    try:
        run_command(run_unsup.main, "run_unsup.py", argv)
        status = 0
    except SystemExit as exit_info:
        status = exit_info.code
    except Exception as err:  # an edit that broke a file a library reads raw (another issue than the contract's)
        capsys.readouterr()
        return 1, f"{type(err).__name__}: {err}"
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return status, (err.splitlines() or [""])[-1]


_OPENED: list[set[Path]] = []
"""Where the audit hook records the files opened, while :func:`files_opened` is active (a hook cannot be removed)."""


def _record_open(event: str, args: tuple) -> None:
    if event == "open" and _OPENED and isinstance(args[0], str | bytes | os.PathLike):
        _OPENED[-1].add(Path(os.fsdecode(args[0])).absolute())


@contextmanager
def files_opened() -> Iterator[set[Path]]:
    """The files Python opens (``open``, ``os.open``, ``io.open``) while the block runs."""
    if not getattr(sys, "_hf_cse_open_hook", False):
        sys.addaudithook(_record_open)
        sys._hf_cse_open_hook = True  # type: ignore[attr-defined]
    opened: set[Path] = set()
    _OPENED.append(opened)
    try:
        yield opened
    finally:
        _OPENED.remove(opened)


def walked_files(opened: set[Path], inputs: Path) -> list[Path]:
    """The files under ``inputs`` the run opened, and every file beside each of them (what Rust code reads unseen)."""
    read = {path for path in opened if inputs in path.parents and path.is_file()}
    beside = {path for folder in {path.parent for path in read} for path in folder.iterdir() if path.is_file()}
    return sorted(read | beside)


def test_the_walk_gives_every_file_valued_argument_and_provider(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    flags = write_inputs(tmp_path / "inputs", tiny_encoder_dir)
    walked = {*flags, "evaluators"}
    arguments = file_valued_arguments()
    assert {"model_name_or_path", "train_file", "sts_dir", "evaluators"} <= arguments  # the pattern finds them
    assert arguments - walked == set(NOT_INPUTS), "a file-valued argument neither walked nor said to be no input"
    given = json.loads(str(flags["input_kwargs"]))
    assert providers_naming_inputs() == set(given) == {"negations_and_paraphrases", "complementary_similarities"}


@pytest.mark.slow
def test_every_file_a_run_reads_is_identified_by_content(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    inputs = tmp_path / "inputs"
    argv = walk_argv(inputs, tmp_path, write_inputs(inputs, tiny_encoder_dir))
    with files_opened() as opened:
        status, last = run(monkeypatch, capsys, argv)
    assert status == 0, last
    settings = json.loads((tmp_path / "out" / "checkpoint-1" / RUN_SETTINGS_FILE).read_text(encoding="utf-8"))
    # Both providers that name inputs were built: their identities are recorded.
    assert settings["settings"]["complementary_model_content_sha256"] is not None
    assert settings["settings"]["paraphrase_source_content_sha256"] is not None
    files = walked_files(opened, inputs)
    folders = {path.relative_to(inputs).parts[0] for path in files}
    assert folders == {"model", "complementary", "corpus", "paraphrases", "sts", "pairs", "beir"}
    assert inputs / "model" / "model.safetensors" in files and inputs / "complementary" / "tokenizer.json" in files

    resume = [*argv, "--resume_from_checkpoint=true"]
    unidentified = []
    for path in files:
        original = path.read_bytes()
        outcomes = []
        for content in list(same_size_edits(path))[:MAX_EDITS]:
            write_in_place(path, content)
            status, last = run(monkeypatch, capsys, resume)
            outcomes.append((status, last))
            if "was trained with other settings" in last or status == 0:
                break  # refused by the contract, or resumed silently; else the edit broke the file: next one
        write_in_place(path, original)
        status, last = outcomes[-1]
        if "was trained with other settings" not in last:
            unidentified.append(f"{path.relative_to(inputs)}: {last}")
            continue
        assert status == 2 and last.startswith("run_unsup.py: error: ")
        assert re.search(r"\b\w+_content_sha256: ", last), last  # names the identity that changed
    assert unidentified == []


def test_an_osscse_resume_after_its_paraphrase_tsv_was_edited_is_refused(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The audit's case: OssCSE's paraphrase TSV edited in place (same size, another paraphrase) before
    ``--resume_from_checkpoint true`` resumed silently, the run recording ``tsv:PATH`` alone."""
    inputs = tmp_path / "inputs"
    write_inputs(inputs, tiny_encoder_dir)
    tsv = inputs / "paraphrases" / "paraphrases.tsv"
    argv = [
        f"--model_name_or_path={inputs / 'model'}",
        f"--train_file={inputs / 'corpus' / 'train.txt'}",
        f"--output_dir={tmp_path / 'out'}",
        "--objective=osscse",
        "--pooler=mask",
        '--prompt_template=This sentence : "{sentence}" means [MASK] .',
        "--input_kwargs="
        + json.dumps({"negations_and_paraphrases": {"paraphrase_source": f"tsv:{tsv}", "negation_backend": "rules"}}),
        "--per_device_train_batch_size=4",
        "--max_steps=1",
        "--report_to=none",
        "--use_cpu=true",
        "--disable_tqdm=true",
    ]
    assert run(monkeypatch, capsys, argv)[0] == 0
    edit_in_place(tsv)
    status, last = run(monkeypatch, capsys, [*argv, "--resume_from_checkpoint=true"])
    assert status == 2 and "was trained with other settings: paraphrase_source_content_sha256: '" in last
    assert "Resume with the settings and inputs it was trained with" in last
