"""Positive-view augmentations: view 1 is the plain input, views 2.. are perturbed only where they may be."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import SENTENCES
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from hf_cse import CSEModel, PoolingConfig
from hf_cse.augment.views import (
    DEFAULT_FEATURE_CUTOFF_RATE,
    DEFAULT_SPAN_CUTOFF_RATE,
    DEFAULT_TOKEN_CUTOFF_RATE,
    VIEW_AUGMENTATIONS,
    build_view_augmentation,
)
from hf_cse.modeling.tokenization import SentenceTokenizer

EMBEDDING_AUGMENTATIONS = ["shuffle", "token_cutoff", "span_cutoff", "feature_cutoff"]
CUTOFFS = ["token_cutoff", "span_cutoff", "feature_cutoff"]


def load(tiny_encoder_dir: Path, **pooling: object) -> tuple[CSEModel, SentenceTokenizer]:
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(**pooling)).eval()
    tokenizer = SentenceTokenizer(AutoTokenizer.from_pretrained(tiny_encoder_dir), model.pooling)
    return model, tokenizer


@pytest.fixture(scope="module")
def cls_model(tiny_encoder_dir: Path) -> tuple[CSEModel, SentenceTokenizer]:
    return load(tiny_encoder_dir, pooler="cls_before_pooler")


def random_batch(tokenizer: PreTrainedTokenizerBase, rows: int = 400, seed: int = 0) -> dict[str, torch.Tensor]:
    """``rows`` sentences of 3..16 random word ids framed by [CLS]/[SEP] and right-padded, like the collator's."""
    generator = torch.Generator().manual_seed(seed)
    first_word = max(tokenizer.all_special_ids) + 1
    lengths = torch.randint(3, 17, (rows,), generator=generator)
    width = int(lengths.max()) + 2
    input_ids = torch.full((rows, width), tokenizer.pad_token_id)
    attention_mask = torch.zeros(rows, width, dtype=torch.long)
    for row, n in enumerate(lengths.tolist()):
        words = torch.randint(first_word, tokenizer.vocab_size, (n,), generator=generator)
        frame = torch.tensor([tokenizer.cls_token_id]), torch.tensor([tokenizer.sep_token_id])
        input_ids[row, : n + 2] = torch.cat([frame[0], words, frame[1]])
        attention_mask[row, : n + 2] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": torch.zeros_like(input_ids)}


def eligible_mask(tokenizer: PreTrainedTokenizerBase, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    special = torch.isin(batch["input_ids"], torch.tensor(tokenizer.all_special_ids))
    return batch["attention_mask"].bool() & ~special


def erased_tokens(model: CSEModel, batch: dict[str, torch.Tensor], stacked: dict[str, torch.Tensor]) -> torch.Tensor:
    """``[R, L, H]`` bool: which word-embedding entries of views 2.. were zeroed."""
    with torch.no_grad():
        plain = model.encoder_model.get_input_embeddings()(batch["input_ids"])
    views = stacked["inputs_embeds"].shape[0] // plain.shape[0]
    augmented = stacked["inputs_embeds"][plain.shape[0] :].detach()
    reference = plain.repeat(views - 1, 1, 1)
    if not bool((plain[batch["attention_mask"].bool()] != 0).all()):  # [PAD]'s vector is zero (padding_idx)
        raise AssertionError("the random word embeddings of real tokens should have no exact zeros")
    changed = augmented != reference
    if not bool((augmented[changed] == 0).all()):
        raise AssertionError("a cutoff may only zero entries, never change them otherwise")
    return changed


def test_registry_names_and_defaults() -> None:
    assert set(VIEW_AUGMENTATIONS) == {
        "dropout", "shuffle", "token_cutoff", "span_cutoff", "feature_cutoff", "word_repetition"
    }  # fmt: skip
    assert build_view_augmentation().name == "dropout"
    assert build_view_augmentation("token_cutoff").rate == DEFAULT_TOKEN_CUTOFF_RATE
    assert build_view_augmentation("span_cutoff").rate == DEFAULT_SPAN_CUTOFF_RATE
    assert build_view_augmentation("feature_cutoff").rate == DEFAULT_FEATURE_CUTOFF_RATE
    assert repr(build_view_augmentation("feature_cutoff", rate=0.3)) == "FeatureCutoff(rate=0.3)"


def test_dropout_stacking_equals_cat(cls_model: tuple[CSEModel, SentenceTokenizer]) -> None:
    model, tokenizer = cls_model
    batch = tokenizer.batch(SENTENCES[:5])
    stacked = build_view_augmentation("dropout").stack(model, batch, num_views=3)
    assert stacked.keys() == batch.keys()
    for key, value in batch.items():
        assert torch.equal(stacked[key], torch.cat([value, value, value]))


@pytest.mark.parametrize("name", EMBEDDING_AUGMENTATIONS)
def test_view_one_is_the_plain_input_and_other_views_differ(
    cls_model: tuple[CSEModel, SentenceTokenizer], name: str
) -> None:
    model, tokenizer = cls_model
    batch = tokenizer.batch(SENTENCES)
    hparams = {"rate": 0.5} if name in CUTOFFS else {}  # every sentence has >= 3 eligible tokens: all rows change
    torch.manual_seed(0)
    stacked = build_view_augmentation(name, **hparams).stack(model, batch, num_views=3)
    rows = len(SENTENCES)
    assert all(value.shape[0] == 3 * rows for value in stacked.values())
    assert ("position_ids" in stacked) == (name == "shuffle")
    with torch.no_grad():  # eval mode: no dropout, so only the augmentation can make views differ
        got = model(**stacked).embeddings
        plain = model(**batch).embeddings
    torch.testing.assert_close(got[:rows], plain, rtol=0, atol=1e-6)
    for view in (1, 2):
        differs = (got[view * rows : (view + 1) * rows] - plain).abs().amax(dim=1) > 1e-4
        if name == "shuffle":  # a permutation may happen to be the identity; most rows must still change
            assert int(differs.sum()) >= rows - 2
        else:
            assert bool(differs.all())
    # The two augmented views are drawn independently.
    assert not torch.allclose(got[rows : 2 * rows], got[2 * rows :])


@pytest.mark.parametrize("name", EMBEDDING_AUGMENTATIONS)
def test_mask_pooler_reads_input_ids_next_to_inputs_embeds(tiny_encoder_dir: Path, name: str) -> None:
    model, tokenizer = load(tiny_encoder_dir, pooler="mask")
    batch = tokenizer.batch(SENTENCES[:6])
    stacked = build_view_augmentation(name).stack(model, batch)
    with torch.no_grad():
        got = model(**stacked).embeddings
        plain = model(**batch).embeddings
    torch.testing.assert_close(got[:6], plain, rtol=0, atol=1e-6)
    # The mask token is special: never erased, never moved.
    is_mask = stacked["input_ids"] == model.pooling.mask_token_id
    if "position_ids" in stacked:
        slots = torch.arange(stacked["input_ids"].shape[1]).expand_as(is_mask)
        assert torch.equal(stacked["position_ids"][is_mask], slots[is_mask])
    word = model.encoder_model.get_input_embeddings()(stacked["input_ids"])
    assert torch.equal(stacked["inputs_embeds"][is_mask], word[is_mask])
    without_ids = {key: value for key, value in stacked.items() if key != "input_ids"}
    with pytest.raises(ValueError, match="pass input_ids alongside inputs_embeds"):
        model(**without_ids)


def test_shuffle_permutes_only_positions_of_real_non_special_tokens(
    cls_model: tuple[CSEModel, SentenceTokenizer],
) -> None:
    model, tokenizer = cls_model
    batch = random_batch(tokenizer.tokenizer)
    rows, width = batch["input_ids"].shape
    stacked = build_view_augmentation("shuffle").stack(model, batch, num_views=3)
    natural = torch.arange(width).expand(rows, width)
    assert torch.equal(stacked["position_ids"][:rows], natural)
    # The tokens themselves do not move: every view looks up the same word embeddings.
    assert torch.equal(stacked["inputs_embeds"][rows:], stacked["inputs_embeds"][:rows].repeat(2, 1, 1))
    eligible = eligible_mask(tokenizer.tokenizer, batch)
    moved = 0
    for view in (1, 2):
        positions = stacked["position_ids"][view * rows : (view + 1) * rows]
        assert torch.equal(positions[~eligible], natural[~eligible])  # [CLS], [SEP], padding
        for row in range(rows):
            got, before = positions[row][eligible[row]], natural[row][eligible[row]]
            assert torch.equal(got.sort().values, before)  # a permutation of the same positions
            moved += int((got != before).sum())
    assert moved > 0.7 * 2 * int(eligible.sum())


def test_token_cutoff_erases_whole_eligible_tokens_at_the_rate(cls_model: tuple[CSEModel, SentenceTokenizer]) -> None:
    model, tokenizer = cls_model
    batch = random_batch(tokenizer.tokenizer)
    stacked = build_view_augmentation("token_cutoff", rate=0.3).stack(model, batch, num_views=3)
    changed = erased_tokens(model, batch, stacked)
    erased = changed.all(dim=-1)
    assert torch.equal(changed.any(dim=-1), erased)  # whole word vectors, never single features
    eligible = eligible_mask(tokenizer.tokenizer, batch).repeat(2, 1)
    assert not bool((erased & ~eligible).any())  # specials and padding untouched
    per_row, n = erased.sum(dim=1).float(), eligible.sum(dim=1).float()
    assert bool(((per_row == (0.3 * n).floor()) | (per_row == (0.3 * n).ceil())).all())
    assert abs(erased.sum().item() / eligible.sum().item() - 0.3) < 0.02
    assert torch.equal(stacked["attention_mask"], batch["attention_mask"].repeat(3, 1))  # erased tokens stay


def test_span_cutoff_erases_one_contiguous_span(cls_model: tuple[CSEModel, SentenceTokenizer]) -> None:
    model, tokenizer = cls_model
    batch = random_batch(tokenizer.tokenizer)
    stacked = build_view_augmentation("span_cutoff", rate=0.3).stack(model, batch, num_views=3)
    erased = erased_tokens(model, batch, stacked).all(dim=-1)
    eligible = eligible_mask(tokenizer.tokenizer, batch).repeat(2, 1)
    assert not bool((erased & ~eligible).any())
    starts = []
    for row in range(erased.shape[0]):
        slots = erased[row].nonzero().flatten()
        n = int(eligible[row].sum())
        assert len(slots) in (int(0.3 * n), int(0.3 * n) + 1)
        if len(slots):
            assert torch.equal(slots, torch.arange(int(slots[0]), int(slots[0]) + len(slots)))
            starts.append(int(slots[0]))
    assert len(set(starts)) > 5  # the span moves around
    assert abs(erased.sum().item() / eligible.sum().item() - 0.3) < 0.02


def test_feature_cutoff_zeroes_the_same_dims_across_the_sentence(
    cls_model: tuple[CSEModel, SentenceTokenizer],
) -> None:
    model, tokenizer = cls_model
    batch = random_batch(tokenizer.tokenizer)
    stacked = build_view_augmentation("feature_cutoff", rate=0.25).stack(model, batch, num_views=3)
    changed = erased_tokens(model, batch, stacked)  # [R, L, H]
    eligible = eligible_mask(tokenizer.tokenizer, batch).repeat(2, 1)
    assert not bool(changed[~eligible].any())
    hidden = changed.shape[-1]
    dims = changed.any(dim=1)  # [R, H]
    # Every eligible token of a row loses exactly the row's dims.
    assert torch.equal(changed, eligible.unsqueeze(-1) & dims.unsqueeze(1))
    per_row = dims.sum(dim=1)
    assert bool(((per_row == int(0.25 * hidden)) | (per_row == int(0.25 * hidden) + 1)).all())
    assert abs(per_row.float().mean().item() / hidden - 0.25) < 0.02
    assert len({tuple(row.tolist()) for row in dims}) > 100  # drawn anew for each row


def test_explicit_special_token_ids_are_never_touched(cls_model: tuple[CSEModel, SentenceTokenizer]) -> None:
    model, tokenizer = cls_model
    batch = random_batch(tokenizer.tokenizer, rows=64)
    protected = int(batch["input_ids"][0, 1])  # a word id that occurs in the batch
    special_ids = [*tokenizer.tokenizer.all_special_ids, protected]
    stacked = build_view_augmentation("token_cutoff", rate=0.9, special_token_ids=special_ids).stack(model, batch)
    erased = erased_tokens(model, batch, stacked).all(dim=-1)
    assert not bool(erased[batch["input_ids"] == protected].any())
    assert bool(erased.any())


@pytest.mark.parametrize("name", EMBEDDING_AUGMENTATIONS)
def test_gradients_reach_the_word_embeddings_through_augmented_views(
    cls_model: tuple[CSEModel, SentenceTokenizer], name: str
) -> None:
    model, tokenizer = cls_model
    batch = tokenizer.batch(SENTENCES[:4])
    model.zero_grad()
    stacked = build_view_augmentation(name).stack(model, batch)
    model(**stacked).embeddings[4:].pow(2).sum().backward()  # the augmented view only
    grad = model.encoder_model.get_input_embeddings().weight.grad
    assert grad is not None
    # Every real token of view 2 not erased whole passes gradient to its row of the embedding matrix.
    kept = batch["attention_mask"].bool() & (stacked["inputs_embeds"][4:] != 0).any(dim=-1)
    assert bool((grad[batch["input_ids"][kept].unique()].abs().sum(dim=1) > 0).all())
    model.zero_grad()


def test_randomness_follows_the_global_torch_seed(cls_model: tuple[CSEModel, SentenceTokenizer]) -> None:
    model, tokenizer = cls_model
    batch = tokenizer.batch(SENTENCES)
    augmentation = build_view_augmentation("token_cutoff", rate=0.5)

    def draw(seed: int) -> torch.Tensor:
        torch.manual_seed(seed)
        return augmentation.stack(model, batch)["inputs_embeds"].detach()

    assert torch.equal(draw(1), draw(1))
    assert not torch.equal(draw(1), draw(2))


def test_bad_names_hyperparameters_and_inputs_are_explained(cls_model: tuple[CSEModel, SentenceTokenizer]) -> None:
    with pytest.raises(ValueError, match="valid view augmentations are: dropout, feature_cutoff, shuffle"):
        build_view_augmentation("cutout")
    for rate in (1.0, -0.1, 1.5, float("nan"), "0.1", True):
        with pytest.raises(ValueError, match=r"token_cutoff rate must be a number in \[0, 1\), got"):
            build_view_augmentation("token_cutoff", rate=rate)
    with pytest.raises(ValueError, match=r"unknown hyper-parameters \['rate'\]; it accepts: \['special_token_ids'\]"):
        build_view_augmentation("shuffle", rate=0.1)
    model, tokenizer = cls_model
    batch = tokenizer.batch(SENTENCES[:2])
    for name in ("dropout", "feature_cutoff"):
        with pytest.raises(ValueError, match="num_views must be an integer >= 1, got 0"):
            build_view_augmentation(name).stack(model, batch, num_views=0)
    with pytest.raises(ValueError, match="needs inputs\\['input_ids'\\]"):
        build_view_augmentation("shuffle").stack(model, {"attention_mask": batch["attention_mask"]})
    with pytest.raises(ValueError, match="needs input_ids or inputs_embeds"):
        model(attention_mask=batch["attention_mask"])
