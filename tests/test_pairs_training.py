"""Training on labelled pairs (issue 52): run_unsup.py on SimCSE's triplets, gradient caching equal to none, every
objective either trains on pairs or refuses them in one line, and the run's record says the data were pairs.
(Two processes equal one process over the global batch of triplets: tests/test_training_objectives.py.)"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from common.commands import run_unsup_in_process
from common.examples import run_example
from common.triplets import TRIPLETS, write_triplets
from conftest import SENTENCES, run_unsup, training_args, write_config
from datasets import Dataset
from rounding import assert_equal_up_to_float64_rounding
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, PoolingConfig, StepInputs
from hf_cse.errors import UsageError
from hf_cse.inputs.run_providers import PAIR_OBJECTIVES, run_input_providers
from hf_cse.objectives import OBJECTIVES, build_objective, build_weighted_auxiliary_losses
from hf_cse.objectives.matryoshka import with_matryoshka
from hf_cse.run_files import RUN_SETTINGS_FILE
from hf_cse.training.data.pairs import pairs_dataset
from hf_cse.training.record.run_settings import corpus_identity


def test_run_unsup_trains_on_simcses_triplets_and_records_that_they_were_pairs(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path,
        tiny_encoder_dir,
        write_triplets(tmp_path / "nli.csv"),
        objective_kwargs=json.dumps({"hard_negative_weight": 1.0}),
        max_steps=3,
        save_strategy="steps",
        save_steps=3,
    )
    before = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls")).state_dict()
    run_unsup.main(["--config", str(config)])
    out = tmp_path / "out"
    assert json.loads((out / "training_args.json").read_text())["num_hard_negatives"] == 1
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    losses = [entry["loss"] for entry in history if "loss" in entry]
    assert len(losses) == 3 and all(torch.isfinite(torch.tensor(losses)))
    after = CSEModel.from_pretrained(out).state_dict()
    assert any(not torch.equal(before[name], after[name]) for name in before if name in after)
    settings = json.loads((out / "checkpoint-3" / RUN_SETTINGS_FILE).read_text())["settings"]
    assert settings["num_hard_negatives"] == 1 and settings["hard_negative_weight"] == 1.0
    assert "labelled pairs, 1 hard negative a row (supervised)" in (out / "README.md").read_text()


def pair_objective_outcome(name: str) -> str | None:
    """``None`` when a run of objective ``name`` (its default auxiliary terms on) on labelled pairs with a hard
    negative is built; else its one-line refusal."""
    objective = build_objective(name)
    terms = build_weighted_auxiliary_losses(objective.default_auxiliary_losses, {})
    try:
        run_input_providers(objective, terms, {"num_hard_negatives": 1})
    except UsageError as error:
        return str(error)
    return None


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_every_objective_trains_on_pairs_or_refuses_them_in_one_line_saying_why(name: str) -> None:
    outcome = pair_objective_outcome(name)
    if outcome is None:
        assert f"{name}" in PAIR_OBJECTIVES.replace(" or ", ", ").split(" (")[0].split(", ")
    else:
        assert "\n" not in outcome and name not in PAIR_OBJECTIVES.split(" (")[0]
        assert "cannot train on labelled pairs" in outcome or "not for labelled pairs" in outcome, outcome
        assert outcome.endswith(f"or the pairs with {PAIR_OBJECTIVES}.")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"num_hard_negatives": None}, "the training data are one sentence a row: drop hard_negative_weight"),
        ({"num_hard_negatives": 0}, "the training data are pairs without hard negatives: drop hard_negative_weight"),
    ],
    ids=["sentences", "pairs-alone"],
)
def test_a_hard_negative_weight_without_hard_negatives_is_refused(arguments: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        run_input_providers(build_objective("simcse", hard_negative_weight=1.0), {}, arguments)


def test_a_hard_negative_weight_under_matryoshka_is_refused_without_hard_negatives() -> None:
    """The Matryoshka wrapper answers for the objective it wraps: its weight is not hidden from the check."""
    wrapped = with_matryoshka(build_objective("simcse", hard_negative_weight=1.0), [8, 16], None, embedding_size=32)
    with pytest.raises(UsageError, match="the training data are one sentence a row: drop hard_negative_weight"):
        run_input_providers(wrapped, {}, {})
    assert run_input_providers(wrapped, {}, {"num_hard_negatives": 1}).view_maker == "labelled_pairs"


def test_a_view_augmentation_several_positive_views_or_a_momentum_queue_on_pairs_are_refused() -> None:
    with pytest.raises(UsageError, match=r"^view_augmentation='shuffle' makes a positive view of each sentence, and"):
        run_input_providers(build_objective("simcse"), {}, {"num_hard_negatives": 0, "view_augmentation": "shuffle"})
    with pytest.raises(UsageError, match=r"^Objective 'dcl' takes 2 positive views per anchor, and labelled pairs"):
        run_input_providers(build_objective("dcl", num_positive_views=2), {}, {"num_hard_negatives": 0})
    queued = build_objective("simcse", momentum_queue_size=8)
    with pytest.raises(UsageError, match=r"^The input provider 'momentum_queue' .* not for labelled pairs"):
        run_input_providers(queued, {}, {"num_hard_negatives": 0})


def test_run_unsup_refuses_a_hard_negative_weight_on_sentences_before_loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    config = write_config(
        tmp_path, tmp_path / "no-model-here", sentences, objective_kwargs=json.dumps({"hard_negative_weight": 1.0})
    )
    status, line = run_unsup_in_process(monkeypatch, capsys, ["--config", str(config)])
    assert status == 2 and "the training data are one sentence a row: drop hard_negative_weight" in line


def test_gradient_cache_on_triplets_gives_the_gradients_of_the_uncached_chunks(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """Positives and hard negatives are views of the one forward pass, so chunks carry them too: the cached step's
    gradients equal those of the same chunks encoded with their graphs (dropout on, replayed)."""
    torch.manual_seed(0)
    trainer = CSETrainer(
        # float64: the chunks of 3 sum in another order than the batch of 8 (tests/rounding.py)
        model=CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls")).double(),
        args=training_args(tmp_path, objective_kwargs={"hard_negative_weight": 0.5}, gradient_cache_chunk_size=3),
        train_dataset=Dataset.from_dict(TRIPLETS),
        processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
    )
    assert trainer.args.num_hard_negatives == 1
    model = trainer.model.train()
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(8)])
    torch.manual_seed(1)
    trainer.compute_loss(model, batch).backward()
    trained = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    cached = {name: p.grad.clone() for name, p in trained}
    model.zero_grad()

    torch.manual_seed(1)  # the same chunks encoded with their graphs kept
    per_chunk = []
    for ids in torch.arange(8).split(3):
        rows = {group: {k: v[ids] for k, v in tokens.items()} for group, tokens in batch.items()}
        per_chunk.append(model(**trainer.stack_views(rows, 3)).embeddings.split(len(ids)))
    views = [torch.cat([chunk[v] for chunk in per_chunk]) for v in range(3)]
    trainer.objective(StepInputs(views[0], views[1], hard_negatives=views[2:])).loss.backward()
    assert_equal_up_to_float64_rounding(cached, {name: p.grad for name, p in trained}, "gradients")
    assert any(p.grad.abs().sum() > 0 for _, p in trained)


def test_duplicate_masking_on_triplets_logs_the_positives_copies(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """--mask_duplicates on triplets: every row's hard negative is another row's anchor, never a positive's text, and
    two rows given the same positive are each other's duplicate: the logged share counts exactly those."""
    data = {key: list(values[:4]) for key, values in TRIPLETS.items()}
    data["sent1"][3] = data["sent1"][0]
    trainer = CSETrainer(
        model=CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls")),
        args=training_args(tmp_path, mask_duplicates=True),
        train_dataset=Dataset.from_dict(data),
        processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
    )
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(4)])
    trainer.compute_loss(trainer.model.train(), batch)
    (share,) = trainer._step_logs["duplicate_negative_share"]
    assert share.item() == pytest.approx(2 / (4 * 3 + 4 * 4), abs=1e-7)


def test_the_pairs_example_trains_on_triplets_and_encodes(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """examples/python/train_on_pairs.py, shown on the Pairs page, on the tiny model and a triplets file."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    namespace = run_example(
        "train_on_pairs.py",
        {
            '"bert-base-uncased"': repr(str(tiny_encoder_dir)),
            '"data/nli_for_simcse.csv"': repr(str(write_triplets(tmp_path / "nli.csv"))),
            '"outputs/sup-simcse-python"': repr(str(out)),
            "per_device_train_batch_size=128": "per_device_train_batch_size=4",
            "max_steps=1000": "max_steps=2",
        },
    )
    assert namespace["trainer"].state.global_step == 2 and namespace["args"].num_hard_negatives == 1
    assert "labelled pairs, 1 hard negative a row" in (out / "README.md").read_text(encoding="utf-8")
    assert namespace["embeddings"].shape == (2, namespace["model"].config.hidden_size)


def test_every_cell_of_the_pairs_identifies_the_corpus_for_a_resume() -> None:
    """The resume contract hashes a pairs corpus by its rows whole: an edited positive or hard negative is another
    corpus (a one-sentence corpus keeps its text-only hash, which earlier checkpoints recorded)."""
    base = pairs_dataset(Dataset.from_dict(TRIPLETS))
    edited_positive = pairs_dataset(Dataset.from_dict({**TRIPLETS, "sent1": TRIPLETS["sent1"][::-1]}))
    edited_negative = pairs_dataset(Dataset.from_dict({**TRIPLETS, "hard_neg": TRIPLETS["hard_neg"][::-1]}))
    hashes = {corpus_identity(table)["corpus_content_sha256"] for table in (base, edited_positive, edited_negative)}
    assert len(hashes) == 3
    assert (
        corpus_identity(Dataset.from_dict({"text": SENTENCES}))["corpus_content_sha256"]
        == hashlib.sha256(("\n".join(SENTENCES) + "\n").encode("utf-8")).hexdigest()
    )
