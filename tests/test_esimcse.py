"""ESimCSE, and the momentum queue any objective takes: the loss against a row-by-row reference written from the
paper's equation, word repetition and the queue checked by hand, and short trainings (by name, resumed, with any
objective)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from common.commands import train_from_a_config
from common.training_checks import changed_parameters
from conftest import SENTENCES, make_tiny_trainer
from safetensors.torch import load_file
from transformers import AutoTokenizer

from hf_cse import CSEModel, PoolingConfig
from hf_cse.augment.views import WordRepetition, build_view_augmentation
from hf_cse.errors import UsageError
from hf_cse.export.upload_list import build_upload_list
from hf_cse.inputs.duplicates import text_hashes
from hf_cse.inputs.momentum_queue import MOMENTUM_QUEUE_FILE, MomentumEncoder
from hf_cse.objectives import MomentumQueueSettings, StepInputs, build_objective
from hf_cse.objectives.base import MOMENTUM_NEGATIVES


def naive_infonce_with_queue(z1, z2, queue, t):
    """ESimCSE Eq. (5), one anchor at a time."""
    losses = []
    for i in range(len(z1)):
        pos = math.exp(torch.cosine_similarity(z1[i], z2[i], dim=0).item() / t)
        den = sum(math.exp(torch.cosine_similarity(z1[i], z2[j], dim=0).item() / t) for j in range(len(z2)))
        den += sum(math.exp(torch.cosine_similarity(z1[i], q, dim=0).item() / t) for q in queue)
        losses.append(-math.log(pos / den))
    return sum(losses) / len(losses)


@pytest.mark.parametrize("name", ["esimcse", "simcse", "focal_infonce"])
def test_the_queue_is_a_negative_of_every_anchor_as_in_the_equation(name: str) -> None:
    torch.manual_seed(0)
    z1, z2, queue = torch.randn(5, 8, dtype=torch.float64), torch.randn(5, 8, dtype=torch.float64), torch.randn(7, 8)
    objective = build_objective(name, temperature=0.5, momentum_queue_size=7)
    inputs = StepInputs(z1, z2, embeddings=[MOMENTUM_NEGATIVES], **{MOMENTUM_NEGATIVES: queue.double()})
    if name == "focal_infonce":  # the focal form with the queue: the same columns, its own logits
        plain = build_objective(name, temperature=0.5)(StepInputs(z1, torch.cat([z2, queue.double()])[:5]))
        assert objective(inputs).loss.item() != pytest.approx(plain.loss.item())
        return
    assert objective(inputs).loss.item() == pytest.approx(naive_infonce_with_queue(z1, z2, queue.double(), 0.5))
    # Gradients in float64 through the queue's columns.
    z1.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a: objective(inputs.replace(anchors=a)).loss, (z1,))


def test_an_empty_queue_is_plain_infonce_and_the_config_records_the_queue() -> None:
    torch.manual_seed(1)
    z1, z2 = torch.randn(4, 6), torch.randn(4, 6)
    objective = build_objective("simcse", momentum_queue_size=3, momentum=0.9)
    empty = StepInputs(z1, z2, **{MOMENTUM_NEGATIVES: torch.zeros(0, 6)})
    assert objective(empty).loss.item() == pytest.approx(build_objective("simcse")(StepInputs(z1, z2)).loss.item())
    assert objective.get_config_dict() == {"temperature": 0.05, "momentum_queue_size": 3, "momentum": 0.9}
    assert build_objective("dclr", weighting="none", momentum_queue_size=3).get_config_dict()["momentum_queue_size"]
    with pytest.raises(ValueError, match="momentum must be a number in \\[0, 1\\)"):
        build_objective("simcse", momentum_queue_size=3, momentum=1.0)
    with pytest.raises(UsageError, match="momentum needs momentum_queue_size"):
        build_objective("simcse", momentum=0.9)


def test_word_repetition_repeats_drawn_tokens_in_place(tiny_encoder_dir: Path) -> None:
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls"))
    ids = torch.tensor([[101, 11, 12, 13, 14, 15, 16, 17, 18, 19, 102], [101, 21, 22, 102, 0, 0, 0, 0, 0, 0, 0]])
    mask = (ids != 0).long()
    augmentation = WordRepetition(dup_rate=0.32)
    torch.manual_seed(3)
    counts = augmentation.repeat_counts(model, ids, mask)
    # Row 0: N = 11 tokens, n = int(0.32 * 11) = 3, so 0 to 2 repeats, never [CLS]/[SEP]; row 1: n = 1, no repeat.
    assert counts[0, 0] == 1 and counts[0, 10] == 1 and int((counts[0] - 1).sum()) <= 2
    assert torch.equal(counts[1], torch.ones(11, dtype=torch.long))
    torch.manual_seed(3)
    stacked = augmentation.stack(model, {"input_ids": ids, "attention_mask": mask}, 2)
    expected = ids[0].repeat_interleave(counts[0])
    assert torch.equal(stacked["input_ids"][2, : len(expected)], expected)
    assert torch.equal(stacked["input_ids"][0, :11], ids[0]) and stacked["input_ids"].shape[0] == 4
    assert int(stacked["attention_mask"][2].sum()) == len(expected)
    assert build_view_augmentation("word_repetition", dup_rate=0.5).dup_rate == 0.5
    # Over many draws the repeat count is uniform over {0, 1, 2}, as randrange(3) in ESimCSE's code.
    torch.manual_seed(4)
    draws = [int((augmentation.repeat_counts(model, ids, mask)[0] - 1).sum()) for _ in range(600)]
    assert {0, 1, 2} == set(draws) and all(150 < draws.count(k) < 250 for k in range(3))


def test_the_queue_is_fifo_and_the_momentum_encoder_an_ema_by_hand(tiny_encoder_dir: Path) -> None:
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls"))
    state = MomentumEncoder(model, MomentumQueueSettings(size=5, momentum=0.9))
    before = {name: p.detach().clone() for name, p in state.model.named_parameters()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    state.update(model)
    # BERT's own pooler is frozen (never trained, so never averaged): it stays as copied, the others move.
    assert any(not p.requires_grad for p in model.parameters())
    for name, p in state.model.named_parameters():
        live = dict(model.named_parameters())[name]
        expected = 0.9 * before[name] + 0.1 * live if live.requires_grad else before[name]
        assert torch.allclose(p, expected), name
    assert not any(p.requires_grad for p in state.model.parameters())
    assert state.negatives(torch.zeros(1, 3)).shape == (0, 3)
    for batch in range(3):
        state.enqueue(torch.full((2, 3), float(batch)))
    # 6 rows entered a queue of 5: the oldest row of batch 0 left; the newest is last.
    assert state.queue[:, 0].tolist() == [0.0, 1.0, 1.0, 2.0, 2.0]


@pytest.mark.parametrize("objective", ["esimcse", "simcse", "dclr", "focal_infonce"])
def test_the_queue_trains_with_any_objective_and_stays_out_of_the_saved_model(
    tiny_encoder_dir: Path, tmp_path: Path, objective: str
) -> None:
    kwargs = {"momentum_queue_size": 6} if objective != "esimcse" else {"momentum_queue_size": 6, "momentum": 0.9}
    if objective == "dclr":
        kwargs["weighting"] = "none"
    trainer = make_tiny_trainer(
        tiny_encoder_dir, tmp_path, objective=objective, objective_kwargs=kwargs, max_steps=3, save_strategy="no"
    )
    changed, total = changed_parameters(trainer)
    assert changed >= total - 1
    queue = trainer.input_providers["momentum_queue"].state
    assert queue.queue.shape == (6, trainer.model.config.hidden_size)  # 3 steps of 4, the newest 6 kept
    trainer.save_model(str(tmp_path / "final"))
    keys = set(load_file(tmp_path / "final" / "model.safetensors"))
    assert len(keys) == len(trainer.model.inference_state_dict())  # no momentum-encoder weight at the root
    assert not any(path.name == MOMENTUM_QUEUE_FILE for path in (tmp_path / "final").rglob("*"))


@pytest.mark.parametrize("mask_duplicates", [False, True])
def test_an_esimcse_run_resumed_from_a_checkpoint_ends_as_a_straight_one(
    tiny_encoder_dir: Path, tmp_path: Path, mask_duplicates: bool
) -> None:
    """The queue, its EMA weights and (--mask_duplicates) its text hashes resume exactly. The 6 steps of 4 see every
    sentence twice, so the queue (ESimCSE's 160 rows) holds copies of later anchors, which --mask_duplicates drops."""
    settings = {"objective": "esimcse", "mask_duplicates": mask_duplicates}
    straight = make_tiny_trainer(tiny_encoder_dir, tmp_path / "a", **settings)
    straight.train()
    checkpoint = tmp_path / "a" / "checkpoint-4"
    manifest = (checkpoint / "hf_cse_manifest.json").read_text()
    assert MOMENTUM_QUEUE_FILE in manifest
    # A checkpoint push (hub_strategy checkpoint) sends the queue with the state it resumes.
    assert MOMENTUM_QUEUE_FILE in build_upload_list(checkpoint, checkpoint=True).files
    resumed = make_tiny_trainer(tiny_encoder_dir, tmp_path / "b", **settings)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    for (name, expected), got in zip(straight.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(expected, got), name
    a, b = (t.input_providers["momentum_queue"].state for t in (straight, resumed))
    assert torch.equal(a.queue, b.queue)
    for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(p, q)
    if not mask_duplicates:
        assert a.text_hashes is None
        return
    assert torch.equal(a.text_hashes, b.text_hashes)
    # One hash per queued row, each a training sentence's; the 24 rows are the 12 sentences twice.
    tokens = AutoTokenizer.from_pretrained(tiny_encoder_dir)(SENTENCES, padding=True, return_tensors="pt")
    assert a.text_hashes.shape == (a.queue.shape[0],) == (24,)
    corpus_hashes = text_hashes(tokens["input_ids"], tokens["attention_mask"]).tolist()
    assert sorted(a.text_hashes.tolist()) == sorted(corpus_hashes * 2)
    shares = [entry["duplicate_negative_share"] for entry in straight.state.log_history if "loss" in entry]
    assert shares[0] == 0 and max(shares) > 0  # no copies in the first batch; the queue's copies later


def test_esimcse_trains_by_name_from_the_cli_and_the_card_cites_the_paper(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    card = train_from_a_config(
        tiny_encoder_dir, tmp_path, objective="esimcse", objective_kwargs='{"momentum_queue_size": 8}'
    )
    assert "@inproceedings{wu2022esimcse" in card
    assert "momentum_queue_size" in card  # the card's objective settings hold the queue's
