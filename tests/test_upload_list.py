"""The upload allowlist (:mod:`hf_cse.export.upload_list`) on its own: which paths of a run or checkpoint folder are
uploaded, which stay quietly, and that its ``allow_patterns`` select through huggingface_hub exactly the list.
No model, no network: folders of placeholder files."""

from __future__ import annotations

from pathlib import Path

from huggingface_hub.utils import filter_repo_objects

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


def write_files(folder: Path, names: list[str]) -> None:
    for name in names:
        path = folder / (f"{name}placeholder" if name.endswith("/") else name)  # a folder: one file inside
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x", encoding="utf-8")


def test_a_run_uploads_its_model_card_and_results_and_keeps_its_own_local_files_quietly(tmp_path: Path) -> None:
    write_files(tmp_path, RUN_FILES + KEPT_LOCAL)
    upload = build_upload_list(tmp_path)
    assert upload.files == RUN_FILES
    assert upload.kept_local == KEPT_LOCAL
    assert upload.foreign == upload.symlinks == [] and upload.left_out_message() is None


def test_a_checkpoint_push_adds_the_training_state_and_a_run_push_keeps_it_quietly(tmp_path: Path) -> None:
    model = ["1_Pooling/config.json", "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    write_files(tmp_path, model + CHECKPOINT_STATE)
    assert build_upload_list(tmp_path, checkpoint=True).files == sorted(model + CHECKPOINT_STATE)
    as_run = build_upload_list(tmp_path)  # python -m hf_cse.push of a checkpoint folder: its state stays quietly
    assert as_run.files == sorted([*model, "trainer_state.json"])
    assert as_run.kept_local == sorted(set(CHECKPOINT_STATE) - {"trainer_state.json"})
    assert as_run.foreign == [] and as_run.left_out_message() is None


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
    write_files(tmp_path, ["config.json", "1_Pooling/config.json", "1_Pooling/notes.txt", ".git/HEAD", ".git/config"])
    write_files(tmp_path, [".git/refs/heads/main", "runs/events.out", "id_rsa"])
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
