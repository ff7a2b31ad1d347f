"""Labelled pairs streamed (issue 52, items 1 and 3): a stream of pairs or triplets yields the rows the in-memory
reader reads, checks each row as it reads it, feeds every anchor its own positive and hard negatives, resumes on the
same batches with the same weights, and trains from run_unsup.py with --streaming."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from common.triplets import TRIPLETS, write_triplets
from conftest import SENTENCES, run_unsup, training_args, write_config
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, PoolingConfig
from hf_cse.errors import UsageError
from hf_cse.inputs.labelled_pairs import POSITIVES, negative_column
from hf_cse.run_files import RUN_SETTINGS_FILE
from hf_cse.training.data.pairs import read_pairs
from hf_cse.training.data.streaming import SentenceStream, stream_sentences

SENTENCE_TRANSFORMERS_ROWS = [
    {"anchor": anchor, "positive": positive, "negative_1": negative, "negative_2": anchor[::-1]}
    for anchor, positive, negative in zip(*TRIPLETS.values(), strict=True)
]


def write_pairs(path: Path) -> Path:
    """Sentence-transformers' layout with two hard negatives, as JSON Lines (a blank line between records) or TSV."""
    if path.suffix == ".jsonl":
        path.write_text("\n\n".join(json.dumps(row) for row in SENTENCE_TRANSFORMERS_ROWS) + "\n", encoding="utf-8")
    else:
        lines = ["\t".join(row.values()) for row in SENTENCE_TRANSFORMERS_ROWS]
        path.write_text("\n".join(["\t".join(SENTENCE_TRANSFORMERS_ROWS[0]), *lines]) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["nli.csv", "pairs.tsv", "pairs.jsonl"])
def test_a_streamed_pairs_file_yields_the_rows_the_in_memory_reader_reads(tmp_path: Path, name: str) -> None:
    path = write_triplets(tmp_path / name) if name.endswith(".csv") else write_pairs(tmp_path / name)
    stream = stream_sentences(str(path))
    expected = read_pairs(str(path))
    assert stream.column_names == expected.column_names
    assert list(stream) == expected.to_list()
    stream.max_sentences = 3
    assert list(stream) == expected.to_list()[:3]


def test_a_hub_dataset_of_pairs_is_streamed_row_by_row(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"sent0": " a ", "sent1": "b", "label": 1}, {"sent0": "c", "sent1": 7, "label": 0}]
    monkeypatch.setattr("datasets.load_dataset", lambda name, config, split, streaming: iter(rows))
    stream = stream_sentences("user/pairs")
    assert stream.column_names == ["text", "positive"]
    assert list(stream) == [{"text": "a", "positive": "b"}, {"text": "c", "positive": "7"}]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"anchor": "a", "positive": "b"}\n{"anchor": "c", "positive": " "}\n', r"line 2: .* is empty"),
        ('{"anchor": "a", "positive": "b"}\n{"anchor": "c"}\n', r"line 2: column 'positive' is missing"),
        ('{"anchor": "a", "negative": "b"}\n', r"have negative without positive"),
    ],
)
def test_a_streamed_row_or_layout_that_cannot_train_is_a_one_line_error_naming_it(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UsageError, match=message):
        list(stream_sentences(str(path)))


def test_a_streamed_tsv_without_pairs_is_refused_as_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "texts.tsv"
    path.write_text("text\nfirst\nsecond\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"a \.tsv file is read as labelled pairs, and its columns are neither"):
        stream_sentences(str(path))


class RecordingTrainer(CSETrainer):
    """Records each training batch's anchors and the token ids of their positives and hard negatives."""

    batches: list[dict[str, Any]]

    def compute_loss(self, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        groups = [POSITIVES, *(negative_column(k) for k in range(1, (self.args.num_hard_negatives or 0) + 1))]
        recorded = {group: inputs[group]["input_ids"].clone() for group in groups}
        self.batches.append({"text": list(inputs["text"]), **recorded})
        return super().compute_loss(model, inputs, *args, **kwargs)


def train_on_stream(model_dir: Path, output_dir: Path, train_file: Path, resume: str | None = None) -> Any:
    torch.manual_seed(0)
    trainer = RecordingTrainer(
        model=CSEModel.from_pretrained(model_dir, pooling=PoolingConfig(pooler="cls")),
        args=training_args(output_dir, max_steps=6, save_strategy="steps", save_steps=3),
        train_dataset=stream_sentences(str(train_file), shuffle_buffer_size=8),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )
    trainer.batches = []
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def test_streamed_triplets_give_each_anchor_its_own_positive_and_hard_negative_and_resume_exactly(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    train_file = write_triplets(tmp_path / "nli.csv")
    straight = train_on_stream(tiny_encoder_dir, tmp_path / "run", train_file)
    assert straight.args.num_hard_negatives == 1 and isinstance(straight.train_dataset, SentenceStream)
    tokenizer = straight.sentence_tokenizer
    rows = {anchor: (positive, negative) for anchor, positive, negative in zip(*TRIPLETS.values(), strict=True)}
    for batch in straight.batches:
        for i, anchor in enumerate(batch["text"]):
            for group, text in zip((POSITIVES, negative_column(1)), rows[anchor], strict=True):
                ids = tokenizer([text])["input_ids"][0]
                assert batch[group][i, : len(ids)].tolist() == ids, (anchor, group)
    seen = [anchor for batch in straight.batches for anchor in batch["text"]]
    assert sorted(seen[: len(SENTENCES)]) == sorted(SENTENCES)  # an epoch: every row once
    checkpoint = tmp_path / "run" / "checkpoint-3"
    settings = json.loads((checkpoint / RUN_SETTINGS_FILE).read_text())["settings"]
    assert settings["num_hard_negatives"] == 1
    resumed = train_on_stream(tiny_encoder_dir, tmp_path / "run", train_file, resume=str(checkpoint))
    assert [batch["text"] for batch in resumed.batches] == [batch["text"] for batch in straight.batches[3:]]
    for (name, expected), got in zip(straight.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(expected, got), name


def test_run_unsup_streams_triplets_and_records_that_they_were_pairs(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        tiny_encoder_dir,
        write_triplets(tmp_path / "nli.csv"),
        streaming=True,
        objective_kwargs=json.dumps({"hard_negative_weight": 1.0}),
        max_steps=2,
    )
    run_unsup.main(["--config", str(config)])
    out = tmp_path / "out"
    assert json.loads((out / "training_args.json").read_text())["num_hard_negatives"] == 1
    losses = [entry["loss"] for entry in json.loads((out / "trainer_state.json").read_text())["log_history"][:-1]]
    assert len(losses) == 2 and all(torch.isfinite(torch.tensor(losses)))
    assert "labelled pairs, 1 hard negative a row (supervised)" in (out / "README.md").read_text()
