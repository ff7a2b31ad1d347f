"""The upload list (:mod:`hf_cse.export.upload_list`) on its own: which paths of a run or checkpoint folder are
uploaded (those its manifest lists, still matching, of an uploadable kind), which stay quietly, and that its
``allow_patterns`` select through huggingface_hub exactly the list. No model, no network: folders of placeholder
files, listed in a manifest as hf_cse's writers list them (:mod:`hf_cse.atomic_files`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub.utils import filter_repo_objects

from hf_cse.atomic_files import MANIFEST_FILE, manifest_entry, read_manifest, write_manifest_file
from hf_cse.errors import UsageError
from hf_cse.export import upload_list
from hf_cse.export.upload_list import UploadList, build_upload_list

# A LoRA run with sharded weights as hf_cse saves it: the merged model, its adapter, sentence-transformers files with
# a Dense module, the card, its record and results.
RUN_FILES = [
    "1_Pooling/config.json",
    "2_Dense/config.json",
    "2_Dense/model.safetensors",
    "README.md",
    "adapter/README.md",
    "adapter/adapter_config.json",
    "adapter/adapter_model.safetensors",
    "adapter/tokenizer.json",
    "all_results.json",
    "config.json",
    "hf_cse_training.json",
    "matryoshka_sts.json",
    "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors",
    "model.safetensors.index.json",
    "modules.json",
    "paper_comparison.json",
    "sentence_bert_config.json",
    "sts_results.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "train_results.json",
    "trainer_state.json",
    "vocab.txt",
]
# What hf_cse writes there and keeps local, as build_upload_list names it (a folder once, ending in /).
KEPT_LOCAL = [
    ".checkpoint-2.old-1a2b3c4d/",
    ".checkpoint-3.partial/",
    ".hf_cse-staging-0a1b2c/",
    ".sts_results.json.x7k2p9.tmp",
    "1_Pooling/.config.json.q8w3e1.tmp",
    "_hf_cse.lock",
    "_previous-run-20250101-000000/",
    "adapter/.hf_cse-staging-3d4e5f/",
    "adapter/training_args.bin",
    "adapter/training_args.json",
    "checkpoint-1/",
    "report/",
    "training_args.bin",
    "training_args.json",
]
# The training state of a checkpoint, uploaded by a checkpoint push only.
CHECKPOINT_STATE = [
    "hf_cse_manifest.json",
    "hf_cse_run_settings.json",
    "optimizer.pt",
    "rng_state_0.pth",
    "rng_state_1.pth",
    "scaler.pt",
    "scheduler.pt",
    "stream_position.json",
    "trainer_state.json",
    "training_args.bin",
    "training_args.json",
]


def write_files(folder: Path, names: list[str], listed: bool = True) -> None:
    """Placeholder files; with ``listed``, added to ``folder``'s manifest as hf_cse's writers add what they write."""
    files = read_manifest(folder) or {}
    for name in names:
        path = folder / (f"{name}placeholder" if name.endswith("/") else name)  # a folder: one file inside
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"x {name}", encoding="utf-8")
        if listed and name != MANIFEST_FILE:
            files[path.relative_to(folder).as_posix()] = manifest_entry(path)
    write_manifest_file(folder, files)


def test_a_run_uploads_its_model_card_and_results_and_keeps_its_own_local_files_quietly(tmp_path: Path) -> None:
    write_files(tmp_path, RUN_FILES + KEPT_LOCAL)
    upload = build_upload_list(tmp_path)
    assert upload.files == RUN_FILES
    assert upload.kept_local == sorted([*KEPT_LOCAL, MANIFEST_FILE])
    assert upload.foreign == upload.symlinks == upload.changed == [] and upload.left_out_message() is None


def test_a_checkpoint_push_adds_the_training_state_and_a_run_push_keeps_it_quietly(tmp_path: Path) -> None:
    model = ["1_Pooling/config.json", "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    write_files(tmp_path, model + CHECKPOINT_STATE)
    assert build_upload_list(tmp_path, checkpoint=True).files == sorted(model + CHECKPOINT_STATE)
    as_run = build_upload_list(tmp_path)  # python -m hf_cse.push of a checkpoint folder: its state stays quietly
    assert as_run.files == sorted([*model, "trainer_state.json"])
    assert as_run.kept_local == sorted(set(CHECKPOINT_STATE) - {"trainer_state.json"})
    assert as_run.changed == []
    assert as_run.foreign == [] and as_run.left_out_message() is None


def test_a_checkpoint_push_sends_every_file_its_manifest_lists_and_a_run_push_keeps_them_quietly(
    tmp_path: Path,
) -> None:
    """State an input provider saves under a name of its own (the momentum queue's ``momentum_queue.pt``, or any
    other) is the checkpoint writer's, listed in the checkpoint's manifest: a checkpoint push sends it, a run push of
    the same folder keeps it quietly, and the same names unlisted are foreign either way."""
    model = ["config.json", "model.safetensors", "tokenizer.json"]
    provider_state = ["momentum_queue.pt", "provider_state/queue.safetensors"]
    write_files(tmp_path, model + CHECKPOINT_STATE + provider_state)
    assert build_upload_list(tmp_path, checkpoint=True).files == sorted(model + CHECKPOINT_STATE + provider_state)
    as_run = build_upload_list(tmp_path)
    assert set(provider_state) <= set(as_run.kept_local) and as_run.left_out_message() is None
    unlisted = tmp_path / "unlisted"
    write_files(unlisted, model + CHECKPOINT_STATE)
    write_files(unlisted, provider_state, listed=False)
    for checkpoint in (True, False):
        pushed = build_upload_list(unlisted, checkpoint=checkpoint)
        assert pushed.foreign == sorted(provider_state) and not set(provider_state) & set(pushed.files)


def test_symbolic_links_are_left_out_with_what_they_hold(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write_files(outside, ["config.json", "dense/config.json", "dense/model.safetensors"])
    run = tmp_path / "run"
    write_files(run, ["config.json", "model.safetensors"])
    (run / "tokenizer.json").symlink_to(outside / "config.json")  # an allowlisted name
    (run / "2_Dense").symlink_to(outside / "dense", target_is_directory=True)  # a folder of allowlisted names
    (run / "adapter").mkdir()
    (run / "adapter" / "adapter_config.json").symlink_to(outside / "config.json")
    upload = build_upload_list(run)
    assert upload.files == ["config.json", "model.safetensors"]
    assert upload.symlinks == ["2_Dense/", "adapter/adapter_config.json", "tokenizer.json"]
    assert upload.left_out_message() == (
        f"Not uploading from {run} 3 symbolic links (a link's target may lie outside the run): 2_Dense/, "
        "adapter/adapter_config.json, tokenizer.json"
    )


def test_the_warning_names_a_folder_of_foreign_files_once(tmp_path: Path) -> None:
    write_files(tmp_path, ["config.json", "1_Pooling/config.json"])
    planted = ["1_Pooling/notes.txt", ".git/HEAD", ".git/config", ".git/refs/heads/main", "runs/events.out", "id_rsa"]
    write_files(tmp_path, planted, listed=False)
    upload = build_upload_list(tmp_path)
    assert upload.files == ["1_Pooling/config.json", "config.json"]
    assert upload.foreign == [
        ".git/HEAD",
        ".git/config",
        ".git/refs/heads/main",
        "1_Pooling/notes.txt",  # beside an uploaded file: named
        "id_rsa",
        "runs/events.out",  # alone in its folder: named
    ]
    assert upload.left_out_message() == (
        f"Not uploading 6 files of {tmp_path} that hf_cse did not write: .git/ (3 files), 1_Pooling/notes.txt, "
        "id_rsa, runs/events.out"
    )


def test_allow_patterns_select_exactly_the_list_through_huggingface_hub(tmp_path: Path) -> None:
    """Glob characters in a name match themselves only: ``model[1]`` is no character class, ``*`` and ``?`` no
    wildcards (huggingface_hub's ``*`` would also cross ``/``)."""
    files = ["a*b.json", "model[1].safetensors", "q?.txt", "sub/[x]/y.json"]
    upload = UploadList(tmp_path, files, kept_local=[], foreign=[], symlinks=[])
    neighbours = ["a/b.json", "ab.json", "axb.json", "model1.safetensors", "q1.txt", "sub/x/y.json"]
    selected = filter_repo_objects(sorted(files + neighbours), allow_patterns=upload.allow_patterns)
    assert list(selected) == files


# --- what the run wrote, and nothing else ------------------------------------------------------------------------

PLANTED = ["pytorch_model.bin", "added_tokens.json", "merges.txt", "2_Dense/model.safetensors"]
"""The audit's files planted in a finished run: each an uploadable name, none written by the run."""


@pytest.mark.parametrize("checkpoint", [False, True], ids=["run", "checkpoint"])
def test_a_file_the_manifest_does_not_list_is_never_uploaded_whatever_its_name(
    tmp_path: Path, checkpoint: bool
) -> None:
    """The class: every uploadable name (each of :data:`RUN_FILES`, the audit's, and a checkpoint's state), planted
    beside a run that wrote a model, or written by hf_cse and then changed (same size, or another size)."""
    names = sorted({*RUN_FILES, *PLANTED, *(CHECKPOINT_STATE if checkpoint else [])} - {MANIFEST_FILE})
    allowed = upload_list.CHECKPOINT_FILES if checkpoint else upload_list.RUN_FILES
    assert all(allowed.fullmatch(name) for name in names)  # each one is uploadable by its name alone
    for name in names:
        run = tmp_path / f"planted-{len(list(tmp_path.iterdir()))}"
        write_files(run, ["config.json", "model.safetensors"] if name != "config.json" else ["model.safetensors"])
        write_files(run, [name], listed=False)
        upload = build_upload_list(run, checkpoint=checkpoint)
        assert name not in upload.files and name in upload.foreign, name
        assert f"that hf_cse did not write: {name}" in (upload.left_out_message() or ""), name
    for change in ("same size", "another size"):
        run = tmp_path / f"changed-{change}"
        write_files(run, names)
        for name in names:
            path = run / name
            data = path.read_bytes()
            path.write_bytes(data[:-1] + b"!" if change == "same size" else data + b" and more")
        upload = build_upload_list(run, checkpoint=checkpoint)
        assert upload.files == ([MANIFEST_FILE] if checkpoint else []) and upload.changed == names, change
        assert "changed since hf_cse wrote them (the manifest's size or SHA-256 differs)" in upload.left_out_message()


def test_a_listed_file_that_became_a_symbolic_link_is_left_out(tmp_path: Path) -> None:
    write_files(tmp_path, ["config.json", "model.safetensors"])
    (tmp_path / "outside").write_text("x model.safetensors", encoding="utf-8")  # the listed size and hash
    (tmp_path / "model.safetensors").unlink()
    (tmp_path / "model.safetensors").symlink_to(tmp_path / "outside")
    upload = build_upload_list(tmp_path)
    assert upload.files == ["config.json"] and upload.symlinks == ["model.safetensors"]


@pytest.mark.parametrize("manifest", ["none", "not JSON", "no files"])
def test_a_folder_without_a_readable_manifest_uploads_nothing_in_one_line(tmp_path: Path, manifest: str) -> None:
    write_files(tmp_path, ["config.json", "model.safetensors"])
    if manifest == "none":
        (tmp_path / MANIFEST_FILE).unlink()
    else:
        (tmp_path / MANIFEST_FILE).write_text("{" if manifest == "not JSON" else '{"format": 1}', encoding="utf-8")
    with pytest.raises(UsageError, match=f"has no readable {MANIFEST_FILE}, .* so nothing is uploaded") as raised:
        build_upload_list(tmp_path)
    assert "\n" not in str(raised.value)
