"""What identifies an input by its content (:mod:`hf_cse.content_identity`): a model by the files a loader reads, a
folder by its files' names and bytes, parsed rows unambiguously; the same content spelled otherwise is the same."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from common.content_edits import edit_in_place
from huggingface_hub.errors import OfflineModeIsEnabled

from hf_cse import content_identity
from hf_cse.content_identity import model_sha256, path_sha256, rows_sha256
from hf_cse.training.data.streaming import stream_sentences
from hf_cse.training.record.run_settings import corpus_identity, setting_changes


def test_a_model_is_its_config_weights_and_tokenizer_files(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(tiny_encoder_dir, tmp_path / "copy"))
    first = model_sha256(str(copy))
    assert first == model_sha256(tiny_encoder_dir)  # where the folder lies, and how it is named, is no content
    # A run's other files in the folder change nothing the loader reads.
    (copy / "checkpoint-2").mkdir()
    (copy / "checkpoint-2" / "model.safetensors").write_bytes(b"other weights")
    (copy / "optimizer.pt").write_bytes(b"state")
    (copy / "README.md").write_text("a card\n", encoding="utf-8")
    assert model_sha256(copy) == first
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        original = (copy / name).read_bytes()
        edit_in_place(copy / name)
        assert model_sha256(copy) != first, name
        (copy / name).write_bytes(original)
    assert model_sha256(copy) == first


def test_a_sentence_transformers_model_includes_its_module_folders(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(tiny_encoder_dir, tmp_path / "st"))
    (copy / "modules.json").write_text(json.dumps([{"idx": 1, "path": "1_Pooling"}]), encoding="utf-8")
    (copy / "1_Pooling").mkdir()
    (copy / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}\n', encoding="utf-8")
    before = model_sha256(copy)
    (copy / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": fals}\n', encoding="utf-8")
    assert model_sha256(copy) != before


def test_a_model_without_a_local_copy_has_no_content_identity(tmp_path: Path) -> None:
    # A model built in memory (no name: not the working folder), a folder that is not there, a Hub id not cached.
    assert model_sha256("") is None and model_sha256(None) is None
    assert model_sha256(str(tmp_path / "absent")) is None
    assert model_sha256("hf-cse-tests/no-such-model") is None


def test_a_folder_is_its_files_names_and_bytes(tmp_path: Path) -> None:
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "a"}\n', encoding="utf-8")
    (folder / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    first = path_sha256(folder)
    (folder / ".cache").mkdir()
    (folder / ".cache" / "index").write_bytes(b"a tool's own")
    assert path_sha256(folder) == first  # hidden entries are no data
    edit_in_place(folder / "qrels" / "dev.tsv")
    edited = path_sha256(folder)
    assert edited != first
    (folder / "qrels" / "dev.tsv").rename(folder / "qrels" / "test.tsv")
    assert path_sha256(folder) not in {first, edited}
    assert path_sha256(folder / "corpus.jsonl") != path_sha256(folder)


def test_rows_are_hashed_unambiguously() -> None:
    assert rows_sha256([["a\tb"]]) != rows_sha256([["a", "b"]])
    assert rows_sha256([["a"], ["b"]]) != rows_sha256([["a\nb"]])
    assert rows_sha256([["a", None]]) != rows_sha256([["a", "None"]])
    assert rows_sha256(iter([("a", 1)])) == rows_sha256([["a", 1]])


def test_a_streamed_hub_dataset_is_identified_by_the_commit_the_hub_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Hub dataset read as a stream is not read twice to be hashed: the commit the Hub serves names its content, so
    a dataset updated between a run and its resume is another corpus; offline, the run knows its name alone."""
    served = iter(["1f0c2e", "9d4b7a"])
    monkeypatch.setattr(content_identity, "HfApi", lambda: SimpleNamespace(dataset_info=lambda name: info(name)))

    def info(name: str) -> SimpleNamespace:
        assert name == "user/corpus"
        return SimpleNamespace(sha=next(served))

    first, second = (corpus_identity(stream_sentences("user/corpus")) for _ in range(2))
    assert (first["corpus_revision"], second["corpus_revision"]) == ("1f0c2e", "9d4b7a")
    assert [change["setting"] for change in setting_changes(first, second)] == ["corpus_revision"]

    def offline(name: str) -> None:
        raise OfflineModeIsEnabled("offline")

    monkeypatch.setattr(content_identity, "HfApi", lambda: SimpleNamespace(dataset_info=offline))
    assert "corpus_revision" not in corpus_identity(stream_sentences("user/corpus"))
    assert "corpus_revision" not in corpus_identity(stream_sentences("gensim:lee"))  # no Hub dataset
