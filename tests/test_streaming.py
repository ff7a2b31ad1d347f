"""Streaming corpora (``hf_cse.training.data.streaming``): reading, shuffling, workers, max_steps, exact resume, DCLR's
per-batch complementary similarities, and sharding over 2 processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import HANG_GUARD_S, REPO_ROOT, SENTENCES, free_port, run_unsup, training_args, write_config
from torch.utils.data import DataLoader
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, PoolingConfig
from hf_cse.errors import UsageError
from hf_cse.inputs import ComplementarySimilarities
from hf_cse.inputs.complementary import cosine_similarities
from hf_cse.modeling.encoder import SentenceEncoder
from hf_cse.run_files import STREAM_POSITION_FILE
from hf_cse.training.data.corpus import load_sentences
from hf_cse.training.data.streaming import (
    SentenceStream,
    StreamingCorpus,
    shuffled,
    stream_sentences,
)
from hf_cse.training.saving.manifest import write_manifest

CORPUS = [f"{word} sentence number {i}" for i, word in enumerate(("a man dog cat car park " * 4).split())]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("suffix", [".txt", ".csv", ".jsonl"])
def test_a_streamed_file_yields_the_sentences_the_in_memory_reader_keeps(tmp_path: Path, suffix: str) -> None:
    texts = ["first one", "", "  second one ", "third, with a comma"]
    if suffix == ".txt":
        path = write_lines(tmp_path / "c.txt", ["\ufefffirst one", "", "  second one ", "third, with a comma"])
    elif suffix == ".csv":
        path = write_lines(tmp_path / "c.csv", ["id,text", *[f'{i},"{t}"' for i, t in enumerate(texts)]])
    else:
        records = [{"id": i, "text": t} for i, t in enumerate(texts)] + [{"id": 9, "text": None}]
        path = write_lines(tmp_path / "c.jsonl", [json.dumps(r) for r in records])
    assert list(stream_sentences(str(path))) == load_sentences(str(path))["text"]
    assert list(stream_sentences(str(path))) == ["first one", "second one", "third, with a comma"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("c.json", "cannot be streamed; with streaming, write one object per line in a .jsonl file"),
        ("c.parquet", "unsupported extension; valid extensions are: .txt, .csv, .tsv, .jsonl"),
        ("folder", "is a folder"),
    ],
)
def test_an_unstreamable_source_is_a_one_line_error(tmp_path: Path, name: str, message: str) -> None:
    path = tmp_path / name
    path.mkdir() if name == "folder" else path.write_text('[{"text": "a"}]\n', encoding="utf-8")
    with pytest.raises(UsageError, match=message):
        stream_sentences(str(path))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        stream_sentences(str(tmp_path / "missing.txt"))


def test_the_shuffle_buffer_is_seeded_by_epoch_and_keeps_every_sentence(tmp_path: Path) -> None:
    corpus = StreamingCorpus(str(write_lines(tmp_path / "c.txt", CORPUS)), shuffle_buffer_size=8)
    stream = SentenceStream(corpus, batch_size=5, seed=3)
    epoch0, again, epoch1 = ([s for c in stream.chunks(e) for s in c] for e in (0, 0, 1))
    assert sorted(epoch0) == sorted(CORPUS) and epoch0 == again and epoch0 != epoch1 != CORPUS
    assert [len(c) for c in stream.chunks(0)] == [5, 5, 5, 5, 4]
    assert list(shuffled(iter(CORPUS), 1, None)) == CORPUS  # buffer 0 or 1: corpus order


def test_a_final_batch_of_one_sentence_is_dropped_and_drop_last_drops_an_incomplete_one(tmp_path: Path) -> None:
    corpus = StreamingCorpus(str(write_lines(tmp_path / "c.txt", CORPUS[:11])), shuffle_buffer_size=0)
    assert [len(c) for c in SentenceStream(corpus, batch_size=5).chunks(0)] == [5, 5]
    corpus.max_sentences = 9
    assert [len(c) for c in SentenceStream(corpus, batch_size=5).chunks(0)] == [5, 4]
    assert [len(c) for c in SentenceStream(corpus, batch_size=5, drop_last=True).chunks(0)] == [5]
    two_processes = list(SentenceStream(corpus, batch_size=3, num_processes=2).chunks(0))
    assert two_processes == [CORPUS[:6], CORPUS[6:9] + CORPUS[:3]]  # filled up with the epoch's first sentences


def test_dataloader_workers_give_the_batches_of_one_process_in_the_same_order(tmp_path: Path) -> None:
    corpus = StreamingCorpus(str(write_lines(tmp_path / "c.txt", CORPUS)), shuffle_buffer_size=6)
    stream = SentenceStream(corpus, batch_size=4, seed=1)
    stream.position = [1, 2]  # from the third batch of the second epoch on, then the third epoch

    def batches(workers: int) -> list[list[str]]:
        loader = DataLoader(stream, batch_size=4, num_workers=workers, collate_fn=lambda rows: rows)
        return [[row["text"] for row in batch] for batch in loader]

    alone = batches(0)
    assert batches(2) == alone
    assert alone == stream_batches(stream, 1)[2:]


def stream_batches(stream: SentenceStream, epoch: int) -> list[list[str]]:
    return list(stream.chunks(epoch))


def make_trainer(model_dir: Path, tmp_path: Path, corpus: StreamingCorpus, **overrides: Any) -> CSETrainer:
    torch.manual_seed(0)  # the MLP head is initialized before the Trainer seeds
    return CSETrainer(
        model=CSEModel.from_pretrained(model_dir, pooling=PoolingConfig(pooler="cls")),
        args=training_args(tmp_path, **overrides),
        train_dataset=corpus,
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )


def test_max_steps_comes_from_the_line_count_of_a_txt_file(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    corpus = stream_sentences(str(write_lines(tmp_path / "c.txt", CORPUS)))  # 24 sentences, batches of 4
    trainer = make_trainer(tiny_encoder_dir, tmp_path / "out", corpus, max_steps=-1, num_train_epochs=2)
    assert trainer.args.max_steps == 12


def test_a_jsonl_corpus_without_max_steps_is_a_one_line_error(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "c.jsonl", [json.dumps({"text": s}) for s in CORPUS])
    with pytest.raises(UsageError, match=r"streaming '.*c.jsonl' needs max_steps \(e.g. --max_steps 10000\)"):
        make_trainer(tiny_encoder_dir, tmp_path / "out", stream_sentences(str(path)), max_steps=-1)


class RecordingTrainer(CSETrainer):
    """Records the sentences of every training batch, and ``ignore_data_skip`` as the step saw it."""

    steps: list[list[str]]
    ignore_data_skip: list[bool]

    def compute_loss(self, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        self.steps.append(list(inputs["text"]))
        self.ignore_data_skip.append(self.args.ignore_data_skip)
        return super().compute_loss(model, inputs, *args, **kwargs)


def train_recording(model_dir: Path, output_dir: Path, train_file: Path, resume: str | None = None, **overrides: Any):
    torch.manual_seed(0)
    trainer = RecordingTrainer(
        model=CSEModel.from_pretrained(model_dir, pooling=PoolingConfig(pooler="cls")),
        args=training_args(output_dir, **{"max_steps": 9, "save_strategy": "steps", "save_steps": 3, **overrides}),
        train_dataset=stream_sentences(str(train_file), shuffle_buffer_size=8),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )
    trainer.steps, trainer.ignore_data_skip = [], []
    trainer.train(resume_from_checkpoint=resume)
    return trainer


@pytest.mark.parametrize("resume_step", [3, 6])
def test_a_resumed_run_trains_on_the_batches_and_ends_with_the_weights_of_a_straight_one(
    tiny_encoder_dir: Path, tmp_path: Path, resume_step: int
) -> None:
    # 22 sentences in batches of 4: epochs of 6 batches (the last of 2), so step 6 ends an epoch and the run wraps.
    train_file = write_lines(tmp_path / "c.txt", CORPUS[:22])
    straight = train_recording(tiny_encoder_dir, tmp_path / "straight", train_file)
    checkpoint = tmp_path / "straight" / f"checkpoint-{resume_step}"
    assert json.loads((checkpoint / STREAM_POSITION_FILE).read_text())["chunks"] == resume_step
    resumed = train_recording(tiny_encoder_dir, tmp_path / "straight", train_file, resume=str(checkpoint))
    assert len(straight.steps) == 9 and sorted(sum(straight.steps[:6], [])) == sorted(CORPUS[:22])
    assert resumed.steps == straight.steps[resume_step:]
    # The Trainer's own skip is a no-op for a stream (it starts after the checkpoint's batches): no training argument
    # is changed to turn it off.
    assert set(straight.ignore_data_skip + resumed.ignore_data_skip) == {False}
    # The resumed run overwrote checkpoint-9 of the straight run: compare against the straight run's weights in memory.
    for (name, expected), got in zip(straight.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(expected, got), name


def test_resuming_a_streaming_run_from_an_in_memory_checkpoint_is_an_error(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    train_file = write_lines(tmp_path / "c.txt", CORPUS)
    train_recording(tiny_encoder_dir, tmp_path / "run", train_file, max_steps=3)
    checkpoint = tmp_path / "run" / "checkpoint-3"
    (checkpoint / STREAM_POSITION_FILE).unlink()  # as an in-memory run's checkpoint, which verifies
    write_manifest(checkpoint)
    with pytest.raises(UsageError, match="has no stream_position.json: it is no streaming run's"):
        train_recording(
            tiny_encoder_dir,
            tmp_path / "run",
            train_file,
            resume=str(checkpoint),
            max_steps=6,
            allow_changed_settings=True,
        )


def test_streamed_dclr_similarities_equal_those_of_the_in_memory_path(tiny_encoder_dir: Path) -> None:
    """The streamed path encodes a batch's sentences; the in-memory uncached path looks them up by index and encodes
    them: the same values. The cached float32 table holds the same embeddings."""
    encoder = SentenceEncoder.from_pretrained(str(tiny_encoder_dir), max_seq_length=32)
    streamed = ComplementarySimilarities(encoder, None)
    index = torch.tensor([3, 0, 7, 5])
    batch = [SENTENCES[i] for i in index]
    expected = ComplementarySimilarities(encoder, SENTENCES, cache=False)(index)
    assert torch.equal(cosine_similarities(streamed.of_texts(batch)), expected)
    cached = ComplementarySimilarities(encoder, SENTENCES, cache_dtype="float32")(index)
    assert torch.allclose(cached, expected, atol=1e-6)


def test_dclr_trains_on_a_stream_encoding_each_batch(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    corpus = stream_sentences(str(write_lines(tmp_path / "c.txt", CORPUS)))
    trainer = make_trainer(
        tiny_encoder_dir, tmp_path / "out", corpus, objective="dclr", objective_kwargs={"phi_mode": "quantile"}
    )
    trainer.train()
    similarities = trainer.input_providers["complementary_similarities"].similarities
    assert similarities.cached is None and len(similarities) == 0  # nothing held per sentence
    assert any("masked_negative_share" in entry for entry in trainer.state.log_history)


def test_run_unsup_streams_a_txt_file_and_counts_its_steps(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    train_file = write_lines(tmp_path / "c.txt", CORPUS)
    config = write_config(tmp_path, tiny_encoder_dir, train_file, max_steps=-1, num_train_epochs=1)
    metrics = run_unsup.main(["--config", str(config), "--streaming", "true", "--shuffle_buffer_size", "5"])
    assert metrics["epoch"] > 0
    state = json.loads((tmp_path / "out" / "trainer_state.json").read_text())
    assert state["global_step"] == state["max_steps"] == 6


def launch_two_processes(model_dir: Path, train_file: Path, out_dir: Path, *resume: str) -> list[dict[str, Any]]:
    """``tests/streaming_shards.py`` (DCLR, 6 steps of 3 sentences per process, a checkpoint at step 3) on 2 CPU
    processes (gloo); returns each rank's record."""
    script = str(REPO_ROOT / "tests" / "streaming_shards.py")
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
    launch += ["--main_process_port", str(free_port())]
    command = [*launch, script, str(model_dir), str(train_file), str(out_dir), "dclr", *resume]
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.fixture(scope="module")
def two_process_run(tiny_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list]:
    """One straight 2-process run over an 8-sentence corpus: its corpus, its folder and each rank's record."""
    out_dir = tmp_path_factory.mktemp("two_processes")
    train_file = write_lines(out_dir / "c.txt", CORPUS[:8])
    return train_file, out_dir, launch_two_processes(tiny_encoder_dir, train_file, out_dir)


def test_two_processes_see_different_sentences_that_together_cover_the_stream(two_process_run) -> None:
    """3 sentences per process and step, 6 steps over an 8-sentence corpus: every step's 6 sentences are distinct,
    each epoch's steps cover the corpus, and DCLR's similarities span the gathered batch of 6."""
    train_file, _, ranks = two_process_run
    lines = train_file.read_text().splitlines()
    steps = [a + b for a, b in zip(ranks[0]["steps"], ranks[1]["steps"], strict=True)]
    assert len(steps) == 6 and all(len(set(step)) == 6 for step in steps)
    assert sorted(steps[0] + steps[1][:2]) == sorted(lines)  # epoch 0: 6 + 2 sentences (the last step filled up)
    assert sorted(steps[2] + steps[3][:2]) == sorted(lines) and steps[2] != steps[0]  # epoch 1, shuffled anew
    assert ranks[0]["complementary_sim_shape"] == [6, 6]


def test_two_processes_resume_each_shard_where_it_stopped(
    tiny_encoder_dir: Path, tmp_path: Path, two_process_run
) -> None:
    """Resumed at step 3 (inside the second epoch), each process trains on the sentences it would have had in the
    straight run, and the run ends with the straight run's weights."""
    train_file, straight_dir, straight = two_process_run
    checkpoint = straight_dir / "run" / "checkpoint-3"
    assert json.loads((checkpoint / STREAM_POSITION_FILE).read_text())["chunks"] == 1  # epoch 1, one chunk in
    resumed = launch_two_processes(tiny_encoder_dir, train_file, tmp_path, str(checkpoint))
    for rank in range(2):
        assert resumed[rank]["steps"] == straight[rank]["steps"][3:], rank
    expected = torch.load(straight_dir / "weights.pt")
    for name, got in torch.load(tmp_path / "weights.pt").items():
        assert torch.equal(expected[name], got), name


def test_a_hub_dataset_is_read_with_datasets_streaming(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake_load_dataset(name: str, config: str | None, split: str, streaming: bool) -> list[dict[str, Any]]:
        calls.append((name, config, split, streaming))
        return [{"id": 1, "sentence": " one "}, {"id": 2, "sentence": None}, {"id": 3, "sentence": 7}]

    monkeypatch.setattr("datasets.load_dataset", fake_load_dataset)
    assert list(stream_sentences("user/corpus", dataset_config_name="en")) == ["one", "7"]
    # Opened twice on the first pass: its first row tells whether it holds labelled pairs (test_pairs_streaming.py).
    assert set(calls) == {("user/corpus", "en", "train", True)}


def test_an_input_provider_that_prepares_the_whole_corpus_cannot_stream() -> None:
    from hf_cse.inputs import InputProvider
    from hf_cse.training.data.streaming import streaming_token_groups

    class WholeCorpus(InputProvider):
        name = "negations_and_paraphrases"

        def prepare(self, dataset: Any) -> Any:
            return dataset

    with pytest.raises(
        UsageError, match="cannot serve the 'negations_and_paraphrases' inputs, computed over the whole"
    ):
        streaming_token_groups([WholeCorpus(None)])


def test_persistent_dataloader_workers_are_refused(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    corpus = stream_sentences(str(write_lines(tmp_path / "c.txt", CORPUS)))
    with pytest.raises(UsageError, match="streaming needs dataloader_persistent_workers false"):
        make_trainer(
            tiny_encoder_dir, tmp_path / "out", corpus, dataloader_num_workers=1, dataloader_persistent_workers=True
        )
