"""MNTP, LLM2Vec's masked next-token prediction (issue 37, item 4), on tiny random decoders built in-process.

The loss against a row-by-row loop over the causal LM's own logits (value and gradients, float64, at derived
bounds); the masking recipe against transformers' ``DataCollatorForLanguageModeling`` (the collator LLM2Vec's
``run_mntp.py`` uses) under the same seed, its invariants and statistics; training runs whose LM head starts from the
checkpoint's and whose saved root is a plain ``AutoModel`` checkpoint; and the one-line refusals.
"""

from __future__ import annotations

import math
import shutil
import string
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import SENTENCES, WORDS, run_unsup, save_tiny_decoder, training_args, write_config, write_train_file
from datasets import Dataset
from host_sync_probe import counting
from peft import LoraConfig
from safetensors.torch import load_file
from torch import nn
from torch._dynamo.utils import counters
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer, DataCollatorForLanguageModeling

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
from hf_cse.errors import UsageError
from hf_cse.inputs import SENTENCES as SENTENCE_GROUP
from hf_cse.inputs import StepContext, TrainingSetup
from hf_cse.inputs.masked_next_tokens import CausalLMHead, MaskedNextTokens, MaskingRecipe, resolve_mask_token_id
from hf_cse.modeling.modeling_cse import TOKEN_HEAD_PREFIX
from hf_cse.modeling.tokenization import SentenceTokenizer
from hf_cse.objectives import StepInputs, build_objective
from hf_cse.objectives.mntp import IGNORE_INDEX, MNTP_LOGITS, MNTP_TARGETS, MNTPLoss
from hf_cse.registry import INPUT_PROVIDERS, OBJECTIVES

UNIT_ROUNDOFF = torch.finfo(torch.float64).eps / 2
"""float64's unit roundoff ``u = 2^-53``: a correctly rounded operation's relative error is at most ``u``."""


def gamma(n: int) -> float:
    """Higham's ``gamma_n = n u / (1 - n u)``: a float64 sum or dot product of ``n`` terms, in any order, is within
    ``gamma_n`` times the sum of the terms' magnitudes of its exact value (Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2nd ed., eq. 3.5); ``n`` roundings of relative error ``u`` compose to at most ``gamma_n``."""
    return n * UNIT_ROUNDOFF / (1 - n * UNIT_ROUNDOFF)


@pytest.fixture(scope="module")
def decoders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny random causal LMs saved with their tokenizers (tests/conftest.py's save_tiny_decoder: hidden 32, 2 layers,
    2 query heads over 1 key/value head, head_dim 16, intermediate 64, a word-level tokenizer over the test words,
    eos ``<|endoftext|>`` for Qwen3): Qwen3 with its LM head untied (Qwen3's default) and tied, and a bidirectional
    Gemma 3 text model (tied, a ``<mask>`` token of its own, logits soft-capped)."""
    root = tmp_path_factory.mktemp("mntp_decoders")
    return {
        "qwen3-untied": save_tiny_decoder(root / "qwen3-untied", "qwen3", tie_word_embeddings=False),
        "qwen3-tied": save_tiny_decoder(root / "qwen3-tied", "qwen3", tie_word_embeddings=True),
        "gemma3-bidirectional": save_tiny_decoder(
            root / "gemma3", "gemma3_text", use_bidirectional_attention=True, final_logit_softcapping=3.0
        ),
    }


def build_provider(
    model_dir: Path, tmp_path: Path, objective: MNTPLoss | None = None, pooler: str = "avg", **args: Any
) -> tuple[CSEModel, SentenceTokenizer, MaskedNextTokens, MNTPLoss]:
    """The model, its sentence tokenizer and the ``masked_next_tokens`` provider as a run builds them."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = CSEModel.from_pretrained(model_dir, pooling=PoolingConfig(pooler=pooler))
    objective = objective or MNTPLoss()
    run_args = training_args(tmp_path / "out", objective="mntp", **args)
    sentence_tokenizer = SentenceTokenizer(tokenizer, model.pooling, run_args.max_seq_length)
    provider = MaskedNextTokens(TrainingSetup(run_args, model, tokenizer, sentence_tokenizer, objective))
    return model, sentence_tokenizer, provider, objective


def labels_of(shape: torch.Size, token_positions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``[B, L]`` labels as transformers' collators write them: the original token at each masked position (the one
    after the position whose state predicts it), ``IGNORE_INDEX`` elsewhere."""
    labels = torch.full(shape, IGNORE_INDEX, dtype=torch.long)
    masked = targets != IGNORE_INDEX
    labels[token_positions[masked, 0], token_positions[masked, 1] + 1] = targets[masked]
    return labels


def loop_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The naive reference: for every masked token ``(r, i)``, ``logsumexp(logits[r, i-1]) - logits[r, i-1, x]``,
    one row and one position at a time, averaged over the masked tokens."""
    total, count = logits.new_zeros(()), 0
    for row in range(labels.shape[0]):
        for position in range(1, labels.shape[1]):
            target = int(labels[row, position])
            if target != IGNORE_INDEX:
                predicting = logits[row, position - 1]
                total = total + torch.logsumexp(predicting, dim=0) - predicting[target]
                count += 1
    assert count > 0
    return total / count


def loss_bound(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, softcap: float | None) -> float:
    """How far two float64 computations of the MNTP loss from the same ``hidden`` ``[N, H]`` (the states before the
    drawn tokens) and head ``weight`` ``[V, H]`` may differ when they sum in different orders (a matrix product
    against one row at a time, a batched cross-entropy against a loop). Each side is within this bound's half of the
    exact loss:

    - a logit ``y = w . h`` is within ``gamma_H sum_k |w_k h_k|`` of exact; soft-capping ``c tanh(y / c)`` is
      1-Lipschitz in ``y`` and adds a division, a tanh and a product (``gamma_4 (|y| + |z|)``): ``e`` per token is
      the largest logit error;
    - ``logsumexp = m + log sum exp(z - m)`` is 1-Lipschitz in the logits (``e``), and its own roundings (a
      subtraction and an exp per term, a sum of ``V`` terms, a log, an addition) move it by at most
      ``gamma_{V+2} + gamma_3 (|lse| + |m|)``;
    - a token's loss ``lse - z_t`` adds ``e`` and one subtraction; the mean of the ``N`` losses ``gamma_{N+1}`` of
      their magnitudes.
    """
    valid = targets != IGNORE_INDEX
    h, t = hidden[valid].detach(), targets[valid]
    y = h @ weight.detach().T
    z = y if softcap is None else softcap * torch.tanh(y / softcap)
    error = (gamma(h.shape[1]) * (h.abs() @ weight.detach().abs().T) + gamma(4) * (y.abs() + z.abs())).amax(dim=1)
    lse, top = torch.logsumexp(z, dim=1), z.amax(dim=1)
    lse_error = error + gamma(z.shape[1] + 2) + gamma(3) * (lse.abs() + top.abs())
    losses = lse - z[torch.arange(len(t)), t]
    one_side = (lse_error + error + UNIT_ROUNDOFF * losses.abs()).mean() + gamma(
        len(targets) + 1
    ) * losses.abs().mean()
    return 2 * one_side.item()


GRADIENT_AGREEMENT = math.sqrt(torch.finfo(torch.float64).eps)
"""How far the gradients of every weight of the model may differ, relative to the largest of them, between hf_cse's
MNTP step and the loop over transformers' causal LM: ``sqrt(eps) = 1.5e-8``. Both run the same encoder on the same
inputs (its states agree bit for bit, asserted below) and differ only in the order of the head's and the
cross-entropy's sums, which the bounds of the objective-level test below hold to ~1e-14 of their scale; the backward
through the 2-layer encoder adds sums of at most a few hundred terms (~1e-13). A wrong position, head, target or
normalization changes the gradients by at least one token's share of them, ~1e-2 of their scale here. sqrt(eps) sits
more than 10^4 from both."""


@pytest.mark.parametrize("name", ["qwen3-untied", "qwen3-tied", "gemma3-bidirectional"])
def test_the_loss_and_its_gradients_are_a_loop_over_the_causal_lms_own_logits(
    name: str, decoders: dict[str, Path], tmp_path: Path
) -> None:
    """hf_cse's step (masking, one forward with the token head, the objective) against transformers' own
    ``*ForCausalLM`` of the same checkpoint on the same masked input, whose logits at ``i - 1`` a loop scores against
    token ``i``: the LM head untied (the checkpoint's ``lm_head.weight``), tied, and Gemma's soft-capped and
    bidirectional."""
    model, sentence_tokenizer, provider, objective = build_provider(
        decoders[name], tmp_path, MNTPLoss(mask_probability=0.5)
    )
    model.double().eval()
    batch = sentence_tokenizer.batch(SENTENCES[:8])
    torch.manual_seed(0)
    stacked = provider.stack_views({SENTENCE_GROUP: batch}, 1)
    outputs = model(**stacked)
    provided = provider.provide(StepContext(model, {SENTENCE_GROUP: batch}, outputs.embeddings, None, outputs))
    loss = objective(StepInputs(outputs.embeddings, None, **provided.objective)).loss

    reference = AutoModelForCausalLM.from_pretrained(decoders[name]).double().eval()  # converted as `model` is
    attention_mask = batch["attention_mask"]
    inputs = {
        "input_ids": stacked["input_ids"],
        "attention_mask": attention_mask,
        "position_ids": (attention_mask.cumsum(dim=1) - 1).clamp(min=0),  # as CSEModel numbers a row's tokens
    }
    assert torch.equal(outputs.last_hidden_state, reference.model(**inputs).last_hidden_state)
    targets, token_positions = provided.objective[MNTP_TARGETS], stacked["token_positions"]
    expected = loop_loss(reference(**inputs).logits, labels_of(attention_mask.shape, token_positions, targets))
    hidden = outputs.last_hidden_state[token_positions[:, 0], token_positions[:, 1]]
    weight = reference.lm_head.weight
    assert abs(loss.item() - expected.item()) <= loss_bound(
        hidden, weight, targets, getattr(model.config, "final_logit_softcapping", None)
    )

    def gradients(module: nn.Module, value: torch.Tensor) -> dict[str, torch.Tensor]:
        names, parameters = zip(*module.named_parameters(), strict=True)
        return dict(zip(names, torch.autograd.grad(value, parameters), strict=True))

    ours, theirs = gradients(model, loss), gradients(reference, expected)
    if not model.config.tie_word_embeddings:
        ours["lm_head.weight"] = ours.pop(f"{TOKEN_HEAD_PREFIX}weight")
    assert ours.keys() == theirs.keys()
    scale = max(gradient.abs().max().item() for gradient in theirs.values())
    for parameter, gradient in theirs.items():
        assert (ours[parameter] - gradient).abs().max().item() <= GRADIENT_AGREEMENT * scale, parameter


def test_the_objective_and_head_are_a_row_by_row_loop_with_its_gradients() -> None:
    """The objective over the head's logits of the states before the drawn positions, against a loop over positions:
    the loss and its gradients with respect to every state and to the head's weight, each within the derived bound of
    two float64 computations (:func:`loss_bound`, and for the gradients the bounds written out below)."""
    generator = torch.Generator().manual_seed(0)
    rows, length, hidden_size, vocab = 5, 9, 16, 50
    attention_mask = (torch.arange(length) < torch.tensor([[9], [7], [5], [8], [3]])).long()
    input_ids = torch.randint(3, vocab, (rows, length), generator=generator).masked_fill(attention_mask == 0, 0)
    recipe = MaskingRecipe(0.5, False, mask_token_id=1, vocab_size=vocab, special_ids=[0, 2])
    torch.manual_seed(1)
    draw = recipe.draw((rows, length))
    masked = recipe.apply(input_ids, attention_mask, draw.positions, draw.replacement)
    states = torch.randn(rows, length, hidden_size, generator=generator, dtype=torch.float64, requires_grad=True)
    weight = 0.5 * torch.randn(vocab, hidden_size, generator=generator, dtype=torch.float64)
    head = CausalLMHead(weight, nn.Embedding(vocab, hidden_size))
    positions, targets = masked.token_positions, masked.targets
    logits = head(states[positions[:, 0], positions[:, 1]])  # CSEModel.forward's gather
    loss = MNTPLoss()(StepInputs(states[:, 0], None, **{MNTP_LOGITS: logits, MNTP_TARGETS: targets})).loss
    d_states, d_weight = torch.autograd.grad(loss, (states, head.weight))

    reference_weight = weight.clone().requires_grad_(True)
    labels = labels_of(attention_mask.shape, positions, targets)
    all_logits = torch.stack([torch.stack([reference_weight @ state for state in row]) for row in states])
    expected = loop_loss(all_logits, labels)
    reference_states, reference_weight_gradient = torch.autograd.grad(expected, (states, reference_weight))

    hidden = states[positions[:, 0], positions[:, 1]]
    assert abs(loss.item() - expected.item()) <= loss_bound(hidden, weight, targets, None)
    # Gradients: g = (softmax(z) - onehot(t)) / M for each masked token. Each side's softmax entry exp(z - lse) is off
    # by the logit's and logsumexp's errors (loss_bound's e and lse error) and the exp's and the scalings' roundings:
    # |dg| <= (expm1(e + lse_error + u |z - lse|) + gamma_4) p / M + gamma_4 |g|. Then dW = g^T h sums N terms,
    # dh = g W sums V: each within gamma_n of its terms' magnitudes, plus |dg| carried through |h| or |W|.
    valid = targets != IGNORE_INDEX
    h, t, count = hidden[valid].detach(), targets[valid], int(valid.sum())
    z = h @ weight.T
    lse = torch.logsumexp(z, dim=1, keepdim=True)
    probabilities = (z - lse).exp()
    g = (probabilities - nn.functional.one_hot(t, vocab)) / count
    error = gamma(hidden_size) * (h.abs() @ weight.abs().T).amax(dim=1, keepdim=True)
    lse_error = error + gamma(vocab + 2) + gamma(3) * (lse.abs() + z.amax(dim=1, keepdim=True).abs())
    drift = torch.expm1(error + lse_error + UNIT_ROUNDOFF * (z - lse).abs().amax(dim=1, keepdim=True)) + gamma(4)
    dg = drift * probabilities / count + gamma(4) * g.abs()
    weight_bound = 2 * (dg.T @ h.abs() + gamma(len(targets) + 1) * (g.abs().T @ h.abs()))
    state_bound = torch.zeros_like(states)
    at = positions[valid]
    state_bound[at[:, 0], at[:, 1]] = 2 * (dg @ weight.abs() + gamma(vocab) * (g.abs() @ weight.abs()))
    assert ((d_weight - reference_weight_gradient).abs() <= weight_bound).all()
    assert ((d_states - reference_states).abs() <= state_bound).all()
    assert d_states.abs().sum() > 0 and (d_states[state_bound == 0] == 0).all()  # no gradient off the masked tokens


@pytest.mark.parametrize("all_mask", [False, True], ids=["80-10-10", "all-mask"])
def test_the_masking_is_transformers_collators_under_the_same_seed(all_mask: bool, decoders: dict[str, Path]) -> None:
    """LLM2Vec's ``run_mntp.py`` masks with transformers' ``DataCollatorForLanguageModeling`` (80/10/10, its
    ``default`` collator type) or its all-mask variant, with ``tokenizer.mask_token = "_"`` for a tokenizer without
    one (``mask_token_type: blank``). Told which tokens may not be masked (padding, special tokens, each row's first
    token), the collator masks a batch exactly as hf_cse does under the same seed: the same inputs and labels."""
    tokenizer = AutoTokenizer.from_pretrained(decoders["qwen3-untied"])
    sentence_tokenizer = SentenceTokenizer(tokenizer, PoolingConfig(pooler="avg"))  # pads with eos
    batch = sentence_tokenizer.batch(SENTENCES * 4)
    input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
    not_maskable = (attention_mask == 0) | torch.isin(input_ids, torch.tensor(tokenizer.all_special_ids))
    not_maskable[:, 0] = True  # right-padded rows: column 0 is each row's first token
    recipe = MaskingRecipe(
        0.3, all_mask, resolve_mask_token_id(tokenizer, "blank"), len(tokenizer), tokenizer.all_special_ids
    )
    torch.manual_seed(7)
    draw = recipe.draw(tuple(input_ids.shape))
    masked = recipe.apply(input_ids, attention_mask, draw.positions, draw.replacement)

    tokenizer.mask_token = "_"  # run_mntp.py, mask_token_type "blank"
    collator = DataCollatorForLanguageModeling(
        tokenizer,
        mlm_probability=0.3,
        mask_replace_prob=1.0 if all_mask else 0.8,
        random_replace_prob=0.0 if all_mask else 0.1,
    )
    torch.manual_seed(7)
    expected_ids, expected_labels = collator.torch_mask_tokens(input_ids.clone(), special_tokens_mask=not_maskable)
    labels = labels_of(input_ids.shape, masked.token_positions, masked.targets)
    assert torch.equal(masked.input_ids, expected_ids) and torch.equal(labels, expected_labels)
    assert (labels != IGNORE_INDEX).sum() > 10


def test_the_masking_never_touches_padding_special_or_first_tokens_and_has_the_recipes_shares(
    decoders: dict[str, Path],
) -> None:
    """On Gemma's tokenizer (a BOS before every row, a pad token, its own ``<mask>``): a masked token is never
    padding, a special token or a row's first; every other token keeps its id and has no label; the shares are the
    recipe's, each within 6 binomial standard deviations (a correct recipe leaves that range with probability below
    1e-8 whatever the seed, the test is seeded; 100% mask tokens instead of 80%, say, is ~30 deviations away here);
    and the same seed masks the same way."""
    tokenizer = AutoTokenizer.from_pretrained(decoders["gemma3-bidirectional"])
    batch = SentenceTokenizer(tokenizer, PoolingConfig(pooler="avg")).batch(SENTENCES * 100)
    input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
    mask_token_id = resolve_mask_token_id(tokenizer, "blank")
    assert mask_token_id == tokenizer.mask_token_id  # the tokenizer's own mask token, as LLM2Vec keeps it
    recipe = MaskingRecipe(0.2, False, mask_token_id, len(tokenizer), tokenizer.all_special_ids)

    def masking(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(seed)
        draw = recipe.draw(tuple(input_ids.shape))
        masked = recipe.apply(input_ids, attention_mask, draw.positions, draw.replacement)
        return masked.input_ids, labels_of(input_ids.shape, masked.token_positions, masked.targets)

    masked_ids, labels = masking(3)
    special = torch.isin(input_ids, torch.tensor(tokenizer.all_special_ids))
    first = torch.zeros_like(special)
    first[:, 0] = True  # the BOS of a right-padded row
    maskable = attention_mask.bool() & ~special & ~first
    assert special[:, 0].all() and (input_ids[:, 1] != tokenizer.bos_token_id).all()
    is_masked = labels != IGNORE_INDEX
    assert not (is_masked & ~maskable).any()
    assert torch.equal(labels[is_masked], input_ids[is_masked])
    assert torch.equal(masked_ids[~is_masked], input_ids[~is_masked])

    def assert_share(count: int, total: int, probability: float) -> None:
        assert abs(count - probability * total) <= 6 * math.sqrt(total * probability * (1 - probability))

    eligible, chosen = int(maskable.sum()), int(is_masked.sum())
    assert_share(chosen, eligible, 0.2)
    replaced_by = masked_ids[is_masked]
    vocab = len(tokenizer)  # a random replacement is any token of it, the mask token or the original included
    assert_share(int((replaced_by == mask_token_id).sum()), chosen, 0.8 + 0.1 / vocab)
    assert_share(int((replaced_by == input_ids[is_masked]).sum()), chosen, 0.1 + 0.1 / vocab)
    again_ids, again_labels = masking(3)
    other_ids, other_labels = masking(4)
    assert torch.equal(again_ids, masked_ids) and torch.equal(again_labels, labels)
    assert not torch.equal(other_labels, labels)


def test_all_mask_replaces_every_masked_token_by_the_mask_token(decoders: dict[str, Path]) -> None:
    tokenizer = AutoTokenizer.from_pretrained(decoders["qwen3-tied"])
    batch = SentenceTokenizer(tokenizer, PoolingConfig(pooler="avg")).batch(SENTENCES * 10)
    recipe = MaskingRecipe(0.8, True, resolve_mask_token_id(tokenizer, "blank"), len(tokenizer), [])
    torch.manual_seed(0)
    draw = recipe.draw(tuple(batch["input_ids"].shape))
    masked = recipe.apply(batch["input_ids"], batch["attention_mask"], draw.positions, draw.replacement)
    labels = labels_of(batch["input_ids"].shape, masked.token_positions, masked.targets)
    is_masked = labels != IGNORE_INDEX
    assert is_masked.sum() > 20 and (masked.input_ids[is_masked] == tokenizer.convert_tokens_to_ids("_")).all()


def word_level_tokenizer(words: list[str]) -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = ["<|endoftext|>", "<unk>", *words]
    backend = Tokenizer(models.WordLevel({token: i for i, token in enumerate(vocab)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|endoftext|>")


def test_the_mask_token_is_the_tokenizers_own_else_llm2vecs_blank_or_eos(decoders: dict[str, Path]) -> None:
    qwen = AutoTokenizer.from_pretrained(decoders["qwen3-untied"])
    assert qwen.mask_token is None
    assert resolve_mask_token_id(qwen, "blank") == qwen.convert_tokens_to_ids("_") != qwen.unk_token_id
    assert resolve_mask_token_id(qwen, "eos") == qwen.eos_token_id
    gemma = AutoTokenizer.from_pretrained(decoders["gemma3-bidirectional"])
    assert resolve_mask_token_id(gemma, "eos") == gemma.mask_token_id
    without_blank = word_level_tokenizer(list(WORDS) + list(string.ascii_lowercase))
    with pytest.raises(
        UsageError, match=r"^mask_token_type 'blank': '_' is no token of .*; use mask_token_type 'eos'\.$"
    ):
        resolve_mask_token_id(without_blank, "blank")
    assert resolve_mask_token_id(without_blank, "eos") == without_blank.eos_token_id


def loaded_root(out: Path) -> dict[str, torch.Tensor]:
    """The saved root as ``AutoModel`` loads it, after checking it finds exactly the saved weights: none missing,
    none unexpected (no token head), none mismatched."""
    model, loading = AutoModel.from_pretrained(out, output_loading_info=True)
    assert {key: value for key, value in loading.items() if value} == {}
    saved = load_file(out / "model.safetensors")
    assert not [key for key in saved if key.startswith(TOKEN_HEAD_PREFIX)]
    return model.state_dict()


@pytest.mark.parametrize("name", ["qwen3-untied", "qwen3-tied"])
def test_two_steps_train_the_encoder_and_the_checkpoints_own_head_and_save_a_plain_automodel_root(
    name: str, decoders: dict[str, Path], tmp_path: Path
) -> None:
    """The LM head starts as the checkpoint's: its ``lm_head.weight`` when untied (then trained), the input
    embeddings when tied (no weight of its own). Two steps change the encoder; the root is a plain ``Qwen3Model``
    checkpoint of the trained weights and ``checkpoint-2`` keeps the trained untied head, to resume."""
    checkpoint = load_file(decoders[name] / "model.safetensors")
    model = CSEModel.from_pretrained(decoders[name], pooling=PoolingConfig(pooler="avg"))
    initial = {key: value.clone() for key, value in model.encoder_model.state_dict().items()}
    trainer = CSETrainer(
        model=model,
        args=training_args(
            tmp_path / "out",
            objective="mntp",
            objective_kwargs={"mask_probability": 0.5},
            max_steps=2,
            save_strategy="steps",
            save_steps=2,
        ),
        train_dataset=Dataset.from_dict({"text": SENTENCES}),
        processing_class=AutoTokenizer.from_pretrained(decoders[name]),
    )
    head = model.token_head
    embeddings = model.encoder_model.get_input_embeddings().weight
    untied = name == "qwen3-untied"
    if untied:
        assert torch.equal(head.weight, checkpoint["lm_head.weight"]) and head.weight.requires_grad
        assert not torch.equal(head.weight, embeddings)
        initial_head = head.weight.detach().clone()
    else:
        assert "lm_head.weight" not in checkpoint and list(head.parameters()) == []
        hidden = torch.randn(3, model.config.hidden_size)
        assert torch.equal(head(hidden), hidden @ embeddings.T)
    trainer.train()
    steps = [entry for entry in trainer.state.log_history if "loss_mntp" in entry]
    assert len(steps) == 2 and all(math.isfinite(e["loss_mntp"]) and e["masked_tokens"] > 0 for e in steps)
    trained = model.encoder_model.state_dict()
    assert any(not torch.equal(initial[key], trained[key]) for key in initial)
    if untied:
        assert not torch.equal(head.weight, initial_head)
        kept = load_file(tmp_path / "out" / "checkpoint-2" / "model.safetensors")[f"{TOKEN_HEAD_PREFIX}weight"]
        assert torch.equal(kept, head.weight)
    trainer.save_model()
    root = loaded_root(tmp_path / "out")
    assert root.keys() == trained.keys() and all(torch.equal(root[key], trained[key]) for key in root)


def test_a_resumed_run_equals_a_straight_one(decoders: dict[str, Path], tmp_path: Path) -> None:
    """The trained head is resumed from ``checkpoint-1`` and the masks from the saved random state: the encoder and
    the head after step 2 are those of the run that did not stop."""

    def run(output_dir: Path, resume: bool = False) -> CSEModel:
        model = CSEModel.from_pretrained(decoders["qwen3-untied"], pooling=PoolingConfig(pooler="avg"))
        trainer = CSETrainer(
            model=model,
            args=training_args(output_dir, objective="mntp", max_steps=2, save_strategy="steps", save_steps=1),
            train_dataset=Dataset.from_dict({"text": SENTENCES}),
            processing_class=AutoTokenizer.from_pretrained(decoders["qwen3-untied"]),
        )
        trainer.train(resume_from_checkpoint=str(output_dir / "checkpoint-1") if resume else None)
        return model

    straight = run(tmp_path / "straight")
    shutil.copytree(tmp_path / "straight" / "checkpoint-1", tmp_path / "resumed" / "checkpoint-1")
    resumed = run(tmp_path / "resumed", resume=True)
    expected = straight.state_dict()
    assert all(torch.equal(value, expected[key]) for key, value in resumed.state_dict().items())
    assert f"{TOKEN_HEAD_PREFIX}weight" in expected


def test_lora_freezes_an_untied_head_and_saves_a_plain_merged_root(decoders: dict[str, Path], tmp_path: Path) -> None:
    """In a LoRA run the untied head stays the checkpoint's (as a tied one stays the frozen embeddings), the adapters
    train, and the merged root holds no head."""
    model = CSEModel.from_pretrained(decoders["qwen3-untied"], pooling=PoolingConfig(pooler="avg"))
    trainer = CSETrainer(
        model=model,
        args=training_args(
            tmp_path / "out", objective="mntp", objective_kwargs={"mask_probability": 0.5}, max_steps=2
        ),
        train_dataset=Dataset.from_dict({"text": SENTENCES}),
        processing_class=AutoTokenizer.from_pretrained(decoders["qwen3-untied"]),
        peft_config=LoraConfig(r=4, lora_alpha=8),
    )
    head = model.token_head
    assert not head.weight.requires_grad
    adapters = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_B" in n}
    trainer.train()
    checkpoint = load_file(decoders["qwen3-untied"] / "model.safetensors")
    assert torch.equal(head.weight, checkpoint["lm_head.weight"])
    assert any(not torch.equal(p, adapters[n]) for n, p in trainer.model.named_parameters() if n in adapters)
    trainer.save_model()
    loaded_root(tmp_path / "out")
    assert (tmp_path / "out" / "adapter").is_dir()


def test_an_mntp_step_reads_the_device_back_nowhere_a_simcse_step_does_not(
    decoders: dict[str, Path], tmp_path: Path
) -> None:
    """``--objective mntp`` from run_unsup.py, its host synchronizations counted as in
    tests/every_part/test_host_sync.py: the masked positions are drawn on the host (their number, a shape, is known
    there), so MNTP adds none. A causal decoder's step has transformers' own (its causal mask asks whether the batch
    has padding), which a SimCSE step on the same model has too: the two runs' counts are the same."""
    counted = {}
    for objective, settings in (("mntp", {}), ("simcse", {"dropout": 0.1})):
        (tmp_path / objective).mkdir()
        config = write_config(
            tmp_path / objective,
            decoders["qwen3-untied"],
            write_train_file(tmp_path, SENTENCES * 2),
            objective=objective,
            pooler="last_token",
            max_steps=4,
            logging_steps=100,
            save_strategy="no",
            eval_strategy="no",
            **settings,
        )
        with counting(CSETrainer) as counts:
            metrics = run_unsup.main(["--config", str(config)])
        assert math.isfinite(metrics["train_loss"])
        counted[objective] = dict(counts)
    assert counted["mntp"] == counted["simcse"]
    assert all("masking_utils.py" in where for where in counted["mntp"])


def test_the_masking_half_on_the_device_compiles_whole_and_matches_eager() -> None:
    """:meth:`MaskingRecipe.apply` (all a step does on the device before the forward) captured in one graph; the host's
    draw is not traced (its number of positions is data)."""
    recipe = MaskingRecipe(0.5, False, mask_token_id=1, vocab_size=30, special_ids=[0, 2])
    input_ids = torch.randint(3, 30, (4, 7), generator=torch.Generator().manual_seed(0))
    attention_mask = (torch.arange(7) < torch.tensor([[7], [5], [6], [2]])).long()
    torch.manual_seed(0)
    draw = recipe.draw((4, 7))
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(recipe.apply, fullgraph=True, backend="eager")
    got = compiled(input_ids, attention_mask, draw.positions, draw.replacement)
    assert counters["stats"]["unique_graphs"] == 1
    expected = recipe.apply(input_ids, attention_mask, draw.positions, draw.replacement)
    for field in ("input_ids", "token_positions", "targets"):
        assert torch.equal(getattr(got, field), getattr(expected, field)), field
    torch._dynamo.reset()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_loss_is_float32_and_finite_from_low_precision_logits(dtype: torch.dtype) -> None:
    logits = (8 * torch.randn(12, 40)).to(dtype).requires_grad_(True)
    targets = torch.tensor([3, IGNORE_INDEX, 5, 7, IGNORE_INDEX, 0, 1, 2, 39, 4, IGNORE_INDEX, 6])
    with torch.autocast(device_type="cpu", dtype=dtype):
        output = MNTPLoss()(StepInputs(torch.zeros(2, 4), None, **{MNTP_LOGITS: logits, MNTP_TARGETS: targets}))
    assert output.loss.dtype == torch.float32 and math.isfinite(output.loss.item())
    (gradient,) = torch.autograd.grad(output.loss, logits)
    assert torch.isfinite(gradient).all() and (gradient[targets == IGNORE_INDEX] == 0).all()
    assert output.logs["masked_tokens"].item() == 9


def test_mntp_declares_its_contract_and_reports_its_settings() -> None:
    """Registered as ``mntp``; one view (no positive), the provider that masks it, LLM2Vec's citation, its own
    settings; a step without the provider's values names what is missing; no masked token is a loss of 0."""
    arguments = CSETrainingArguments("/tmp/unused", objective="mntp", objective_kwargs={"mask_probability": 0.8})
    assert arguments.objective_hparams() == {"mask_probability": 0.8}  # the run's default temperature: none passed
    objective = build_objective("mntp", mask_probability=0.8, all_mask=True)
    assert OBJECTIVES["mntp"] is MNTPLoss and objective.name == "mntp" and objective.num_positive_views == 0
    assert set(objective.required_inputs) <= set(INPUT_PROVIDERS) and objective.required_pooler is None
    assert objective.citations == (objective.citation,) and "2404.05961" in objective.citation
    assert objective.get_config_dict() == {"mask_probability": 0.8, "all_mask": True, "mask_token_type": "blank"}
    with pytest.raises(KeyError, match="No step input 'mntp_logits'"):
        objective(StepInputs(torch.randn(4, 8), None))
    logits = torch.randn(3, 10, requires_grad=True)
    nothing = torch.full((3,), IGNORE_INDEX)
    output = objective(StepInputs(torch.randn(4, 8), None, **{MNTP_LOGITS: logits, MNTP_TARGETS: nothing}))
    assert output.loss.item() == 0.0 and output.logs["masked_tokens"].item() == 0


def test_a_run_temperature_other_than_the_default_is_refused_as_mntp_has_none() -> None:
    """Every run has a temperature; MNTP, like any objective whose constructor takes none, gets none passed, and a
    run that sets one is told, in one line, that it has no effect."""
    with pytest.raises(
        UsageError, match=r"^Objective 'mntp' has no temperature; got temperature 0\.1: leave"
    ) as error:
        CSETrainingArguments("/tmp/unused", objective="mntp", temperature=0.1).objective_hparams()
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mask_probability": 0}, r"mask_probability must be a probability in \(0, 1\], got 0\."),
        ({"mask_probability": 1.5}, r"mask_probability must be a probability in \(0, 1\], got 1\.5\."),
        ({"mask_probability": "high"}, r"mask_probability must be a probability in \(0, 1\], got 'high'\."),
        ({"all_mask": "yes"}, r"all_mask must be true or false, got 'yes'\."),
        ({"mask_token_type": "mask"}, r"mask_token_type 'mask' is not one of: blank, eos\."),
        ({"momentum_queue_size": 8}, r"Objective 'mntp' has no negatives: it cannot take a momentum queue"),
    ],
)
def test_bad_settings_are_one_line_errors_naming_the_value(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=f"^{message}") as error:
        build_objective("mntp", **kwargs)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"gradient_cache_chunk_size": 2},
            r"cannot be combined with gradient caching \(gradient_cache_chunk_size\)\.$",
        ),
        ({"matryoshka_dims": [16, 32]}, r"cannot be combined with Matryoshka \(matryoshka_dims\)\.$"),
        ({"mask_duplicates": True}, r"cannot be combined with mask_duplicates\.$"),
        ({"auxiliary_losses": {"recall": {"weight": 1.0}}}, r"cannot be combined with auxiliary_losses\.$"),
        ({"view_augmentation": "token_cutoff"}, r"cannot be combined with view_augmentation='token_cutoff'\.$"),
        ({"pooler": "prompt_last_token"}, r"pooler='prompt_last_token' wraps them in a prompt template\. Train MNTP"),
    ],
)
def test_what_mntp_has_no_use_for_is_refused_in_one_line(
    settings: dict[str, Any], message: str, decoders: dict[str, Path], tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match=message) as error:
        build_provider(decoders["qwen3-tied"], tmp_path, **settings)
    assert "\n" not in str(error.value)


def test_a_model_without_a_causal_lm_head_is_refused_in_one_line(
    tiny_encoder_dir: Path, decoders: dict[str, Path], tmp_path: Path
) -> None:
    """BERT's causal LM predicts through ``cls.predictions``, no plain ``lm_head``; an exported Qwen3 encoder (no
    ``lm_head.weight``) has lost the untied head MNTP must start from."""
    with pytest.raises(UsageError, match=r"model type 'bert' has none \(its causal LM class: BertLMHeadModel\)"):
        build_provider(tiny_encoder_dir, tmp_path)
    encoder_only = tmp_path / "encoder"
    AutoModel.from_pretrained(decoders["qwen3-untied"]).save_pretrained(encoder_only)
    AutoTokenizer.from_pretrained(decoders["qwen3-untied"]).save_pretrained(encoder_only)
    with pytest.raises(UsageError, match=r"its weights hold no lm_head\.weight: start from the causal LM's") as error:
        build_provider(encoder_only, tmp_path)
    assert "\n" not in str(error.value)
