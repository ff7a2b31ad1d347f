"""CSETrainer and run_unsup.py end to end on a tiny random BERT, including bad input."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import HANG_GUARD_S, REPO_ROOT, SENTENCES, run_unsup, training_args, write_config, write_train_file
from datasets import Dataset
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer

from hf_cse import OBJECTIVES, CSEModel, CSETrainer, PoolingConfig, SentenceEncoder
from hf_cse.evaluation import STSDevSets, STSSubset


@pytest.mark.parametrize("pooler", ["cls", "avg", "mask"])
def test_a_few_steps_change_every_trainable_parameter(tiny_encoder_dir: Path, tmp_path: Path, pooler: str) -> None:
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler=pooler))
    before = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
    trainer = CSETrainer(
        model=model,
        args=training_args(tmp_path, max_seq_length=24),
        train_dataset=Dataset.from_dict({"text": SENTENCES}),
        processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
    )
    trainer.train()
    unchanged = [name for name, p in model.named_parameters() if p.requires_grad and torch.equal(p, before[name])]
    # Position embeddings beyond the longest batch never get a gradient; every other parameter must move.
    assert [name for name in unchanged if "position_embeddings" not in name] == []
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    parts = [entry["loss_simcse"] for entry in trainer.state.log_history if "loss_simcse" in entry]
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    assert parts == pytest.approx(losses, rel=1e-4)


def test_training_lowers_the_loss_on_a_fixed_batch(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls"))
    trainer = CSETrainer(
        model=model,
        args=training_args(tmp_path, max_steps=12, per_device_train_batch_size=8, learning_rate=3e-3),
        train_dataset=Dataset.from_dict({"text": SENTENCES[:8]}),
        processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert sum(losses[-3:]) < sum(losses[:3])


def test_evaluate_without_positive_stsb_pairs_scores_and_warns(
    tiny_encoder_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A custom STS-B dev set whose gold scores all stay below 4 has no positive pair, so alignment is undefined:
    # evaluation still reports the Spearman score instead of raising in the middle of training.
    pairs = STSSubset("stsb", "dev", SENTENCES[:6], SENTENCES[6:12], [0.5, 1.0, 1.5, 2.0, 2.5, 3.5])
    trainer = CSETrainer(
        model=CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls")),
        args=training_args(tmp_path, max_steps=1),
        train_dataset=Dataset.from_dict({"text": SENTENCES[:8]}),
        processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
    )
    with caplog.at_level(logging.WARNING, logger="hf_cse"):
        metrics = trainer.evaluate(STSDevSets({"stsb": [pairs]}))
    assert "eval_stsb_spearman" in metrics and "eval_alignment" not in metrics and "eval_uniformity" not in metrics
    assert "no pair with a gold score >= 4" in caplog.text

    pairs.scores[0] = 4.0  # one positive pair is enough
    assert {"eval_alignment", "eval_uniformity"} <= set(trainer.evaluate(STSDevSets({"stsb": [pairs]})))


def test_run_unsup_with_eval_keeps_the_best_checkpoint_and_reloads_everywhere(
    tiny_encoder_dir: Path, tmp_path: Path, tiny_sts_dir: Path
) -> None:
    config = write_config(
        tmp_path,
        tiny_encoder_dir,
        write_train_file(tmp_path, SENTENCES * 2),
        max_steps=4,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="steps",
        save_steps=2,
        load_best_model_at_end=True,
        sts_dir=str(tiny_sts_dir),
    )
    run_unsup.main(["--config", str(config), "--learning_rate", "1e-3"])  # flags override the file
    out = tmp_path / "out"
    state = json.loads((out / "trainer_state.json").read_text())
    evals = [entry for entry in state["log_history"] if "eval_stsb_spearman" in entry]
    assert len(evals) == 2 and all(-100 <= e["eval_stsb_spearman"] <= 100 for e in evals)
    assert all(0 <= e["eval_alignment"] <= 4 and e["eval_uniformity"] <= 0 for e in evals)
    assert state["best_model_checkpoint"].endswith(f"checkpoint-{state['best_global_step']}")
    assert state["log_history"][0]["learning_rate"] > 1e-4  # the flag's 1e-3 (decaying), not the default 3e-5

    encoder = SentenceEncoder.from_pretrained(out, device="cpu")
    best = SentenceEncoder.from_pretrained(state["best_model_checkpoint"], device="cpu")
    assert torch.allclose(encoder.encode(SENTENCES), best.encode(SENTENCES))  # the best was reloaded and saved
    plain = AutoModel.from_pretrained(out)
    assert type(plain).__name__ == "BertModel"
    card = (out / "README.md").read_text()
    assert "simcse" in card and "eval_stsb_spearman" in card and "@inproceedings{gao2021simcse" in card
    st = pytest.importorskip("sentence_transformers").SentenceTransformer(str(out), device="cpu")
    assert torch.allclose(torch.as_tensor(st.encode(SENTENCES)), encoder.encode(SENTENCES), atol=1e-5)


def test_run_unsup_reads_csv_and_jsonl(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """A CSV's text column (beside an ``id`` column, listed first) and a JSONL file's ``text`` field are the
    sentences of a .txt file, in its order: the three runs train to the same weights, bit for bit."""
    csv_file = tmp_path / "train.csv"
    csv_file.write_text("id,sentence\n" + "\n".join(f"{i},{s}" for i, s in enumerate(SENTENCES)) + "\n")
    jsonl_file = tmp_path / "train.jsonl"
    jsonl_file.write_text("\n".join(json.dumps({"text": s}) for s in SENTENCES) + "\n")
    train_files = {"txt": write_train_file(tmp_path, SENTENCES), "csv": csv_file, "jsonl": jsonl_file}
    weights = {}
    for name, train_file in train_files.items():
        config = write_config(tmp_path, tiny_encoder_dir, train_file, output_dir=str(tmp_path / name))
        run_unsup.main(["--config", str(config)])
        weights[name] = load_file(tmp_path / name / "model.safetensors")
    for name in ("csv", "jsonl"):
        assert weights[name].keys() == weights["txt"].keys()
        assert all(torch.equal(weights[name][key], value) for key, value in weights["txt"].items()), name


def test_empty_lines_are_skipped_and_counted(
    tiny_encoder_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    train = write_train_file(tmp_path, [SENTENCES[0], "", "   ", *SENTENCES[1:8], ""])
    with caplog.at_level(logging.WARNING, logger="hf_cse.training.data.corpus"):
        run_unsup.main(["--config", str(write_config(tmp_path, tiny_encoder_dir, train))])
    assert "skipped 3 empty lines of 11" in caplog.text


def test_final_batch_of_one_sentence_is_dropped_with_a_warning(
    tiny_encoder_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    train = write_train_file(tmp_path, SENTENCES[:5])  # batch 4: the second batch would hold 1 sentence
    with caplog.at_level(logging.WARNING, logger="hf_cse.training.data.corpus"):
        metrics = run_unsup.main(
            ["--config", str(write_config(tmp_path, tiny_encoder_dir, train, max_steps=-1, num_train_epochs=2))]
        )
    assert "final batch of 1 sentence" in caplog.text
    assert math.isfinite(metrics["train_loss"])


@pytest.mark.parametrize(
    ("lines_or_bytes", "error", "match"),
    [
        (None, FileNotFoundError, "does not exist"),
        (b"\n\n  \n", ValueError, "contains no sentences"),
        (b"a man is playing\nthe caf\xe9 is open\n", ValueError, "line 2 is not valid UTF-8"),
        (b"a single sentence\n", ValueError, "has 1 sentence; contrastive training needs 2 or more"),
    ],
    ids=["missing", "empty", "not-utf8", "one-sentence"],
)
def test_bad_train_files_are_clear_errors(
    tiny_encoder_dir: Path, tmp_path: Path, lines_or_bytes: bytes | None, error: type, match: str
) -> None:
    train = tmp_path / "train.txt"
    if lines_or_bytes is not None:
        train.write_bytes(lines_or_bytes)
    with pytest.raises(error, match=match):
        run_unsup.main(["--config", str(write_config(tmp_path, tiny_encoder_dir, train))])
    assert not (tmp_path / "out").exists()  # nothing half-written


@pytest.mark.parametrize(
    ("flag", "value", "match"),
    [
        ("--pooler", "mean", "valid poolers are: cls, cls_before_pooler, avg, avg_first_last, avg_top2, weighted"),
        ("--objective", "simclr", f"valid objectives are: {', '.join(sorted(OBJECTIVES))}\\."),
        ("--eval_sts_tasks", "sts12", "valid tasks are: stsb, sickr"),
        ("--per_device_train_batch_size", "1", "per_device_train_batch_size=1 gives each sentence no in-batch"),
    ],
)
def test_unknown_names_list_the_valid_ones(
    tiny_encoder_dir: Path, tmp_path: Path, flag: str, value: str, match: str
) -> None:
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES))
    with pytest.raises(ValueError, match=match):
        run_unsup.main(["--config", str(config), flag, value])
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_unknown_config_keys_are_an_error(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), poler="avg")
    with pytest.raises(ValueError, match=r"Unknown keys \['poler'\]"):
        run_unsup.main(["--config", str(config)])


def test_run_unsup_command_line_in_a_subprocess(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), pooler="avg")
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run_unsup.py"), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((tmp_path / "out" / "config.json").read_text())["hf_cse"]["pooler"] == "avg"


@pytest.mark.parametrize("config", sorted((REPO_ROOT / "examples" / "configs").rglob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_config_parses(config: Path) -> None:
    # The decoder configs train in bf16 on a GPU; without one, transformers refuses bf16 unless told to use the CPU.
    gpu_only = yaml.safe_load(config.read_text(encoding="utf-8")).get("bf16") and not torch.cuda.is_available()
    argv = ["--config", str(config), *(["--use_cpu", "true"] if gpu_only else [])]
    model_args, data_args, args = run_unsup.parse_args(argv)
    assert model_args.model_name_or_path and data_args.train_file and args.output_dir
    assert args.objective in OBJECTIVES


def test_config_file_in_either_flag_form_with_flags_overriding_it(tmp_path: Path) -> None:
    config = REPO_ROOT / "examples" / "configs" / "simcse_minilm_wiki1m.yaml"
    for argv in (["--config", str(config)], [f"--config={config}"]):
        _, data_args, args = run_unsup.parse_args([*argv, "--learning_rate", "1e-4"])
        assert data_args.train_file == "data/wiki1m_for_simcse.txt" and args.objective == "simcse"
        assert args.learning_rate == 1e-4
    with pytest.raises(FileNotFoundError, match="--config file 'missing.yaml' does not exist"):
        run_unsup.parse_args(["--config=missing.yaml"])


def test_bf16_training_for_50_steps_stays_finite(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls"))
    trainer = CSETrainer(
        model=model,
        args=training_args(tmp_path, bf16=True, max_steps=50, per_device_train_batch_size=6, learning_rate=1e-3),
        train_dataset=Dataset.from_dict({"text": SENTENCES * 3}),
        processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 50 and all(math.isfinite(x) for x in losses)


def test_resuming_from_a_checkpoint_equals_training_straight_through(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    def run(output_dir: Path, resume: str | None = None) -> CSETrainer:
        torch.manual_seed(0)  # the MLP head is initialized before the Trainer seeds
        trainer = CSETrainer(
            model=CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls")),
            args=training_args(output_dir, max_steps=6, save_strategy="steps", save_steps=3, learning_rate=1e-3),
            train_dataset=Dataset.from_dict({"text": SENTENCES * 2}),
            processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
        )
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    straight = run(tmp_path / "straight")
    resumed = run(tmp_path / "resumed", resume=str(tmp_path / "straight" / "checkpoint-3"))
    losses = [[e["loss"] for e in t.state.log_history if "loss" in e and e["step"] > 3] for t in (straight, resumed)]
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    for (name, a), b in zip(straight.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6), name


@pytest.mark.parametrize(
    ("disable_tqdm", "main_process", "shown"), [(False, True, True), (True, True, False), (False, False, False)]
)
def test_evaluation_shows_a_progress_bar_on_the_main_process_unless_disable_tqdm(
    tiny_encoder_dir: Path,
    tmp_path: Path,
    tiny_sts_dir: Path,
    capsys: pytest.CaptureFixture,
    disable_tqdm: bool,
    main_process: bool,
    shown: bool,
) -> None:
    trainer = CSETrainer(
        model=CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls")),
        args=training_args(tmp_path, sts_dir=str(tiny_sts_dir), disable_tqdm=disable_tqdm, eval_strategy="steps"),
        processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
    )
    trainer.is_world_process_zero = lambda: main_process  # type: ignore[method-assign]
    capsys.readouterr()
    metrics = trainer.evaluate()
    assert "eval_stsb_spearman" in metrics
    assert ("Encoding: 100%" in capsys.readouterr().err) is shown
