"""hf_cse's objectives as sentence-transformers losses (issue 30, item 3): ``CSELoss`` against
``MultipleNegativesRankingLoss`` and ``MatryoshkaLoss``, in ``SentenceTransformerTrainer``, on its model card, and its
one-line refusals. A tiny random BERT (tests/conftest.py) in a two-module SentenceTransformer, on CPU, offline."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import REPO_ROOT, SENTENCES, launch_two_process_runs
from rounding import assert_equal_up_to_float64_rounding

sentence_transformers = pytest.importorskip("sentence_transformers")

from common.tiny_sentence_transformer import HIDDEN, features, tiny_st  # noqa: E402
from datasets import Dataset  # noqa: E402
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer  # noqa: E402
from sentence_transformers import losses as st_losses  # noqa: E402
from sentence_transformers.training_args import SentenceTransformerTrainingArguments  # noqa: E402

from hf_cse.errors import UsageError  # noqa: E402
from hf_cse.integrations import CSELoss, supported_objectives  # noqa: E402
from hf_cse.objectives import MatryoshkaObjective, ObjectiveOutput, StepInputs, build_objective  # noqa: E402


def loss_and_gradients(
    model: SentenceTransformer, loss: torch.nn.Module, columns: list[list[str]], seed: int = 0
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``loss`` on a batch of ``columns`` (fresh token dicts, RNG seeded: the same dropout masks for every loss)
    and the gradient of every trainable weight; the gradients are cleared before and after."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    value = loss([features(model, texts) for texts in columns], None)
    value.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return value.detach(), grads


def assert_gradients_close(ours: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor]) -> None:
    """Every weight's gradient equal up to float32 rounding, relative to that gradient's largest entry (the two
    sides sum the same terms in different orders: differences of ~1e-6 of the largest entry)."""
    assert ours.keys() == theirs.keys() and len(ours) > 10
    for name, grad in theirs.items():
        scale = grad.abs().max().item()
        torch.testing.assert_close(ours[name], grad, rtol=1e-4, atol=1e-5 * scale + 1e-9, msg=name)


ANCHORS, POSITIVES = SENTENCES[:6], SENTENCES[6:]


def test_simcse_equals_multiple_negatives_ranking_loss_on_pairs(tiny_encoder_dir: Path) -> None:
    """Value and gradients, with dropout on: both losses see the same embeddings under the same seed."""
    model = tiny_st(tiny_encoder_dir).train()
    ours, our_grads = loss_and_gradients(model, CSELoss(model, "simcse", temperature=0.05), [ANCHORS, POSITIVES])
    theirs, their_grads = loss_and_gradients(
        model, st_losses.MultipleNegativesRankingLoss(model, scale=20), [ANCHORS, POSITIVES]
    )
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert_gradients_close(our_grads, their_grads)


def test_single_sentences_are_their_own_dropout_positives(tiny_encoder_dir: Path) -> None:
    """One column: the sentence encoded twice with fresh dropout, i.e. MNRL on (x, x) pairs under the same seed;
    in eval mode (no dropout) the two views are equal, so the loss is lower."""
    model = tiny_st(tiny_encoder_dir).train()
    loss = CSELoss(model, "simcse", temperature=0.05)
    ours, our_grads = loss_and_gradients(model, loss, [ANCHORS])
    theirs, their_grads = loss_and_gradients(
        model, st_losses.MultipleNegativesRankingLoss(model, scale=20), [ANCHORS, ANCHORS]
    )
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert_gradients_close(our_grads, their_grads)
    model.eval()
    with torch.no_grad():
        without_dropout = loss([features(model, ANCHORS)], None)
    assert without_dropout < ours - 1e-3


def test_matryoshka_loss_around_cse_loss_equals_hf_cse_matryoshka(tiny_encoder_dir: Path) -> None:
    """``MatryoshkaLoss(CSELoss(...))`` is hf_cse's ``MatryoshkaObjective`` on the same embeddings (single
    sentences, dropout on, seeded), value and gradients; both sides truncate then normalize."""
    model = tiny_st(tiny_encoder_dir).train()
    dims = [HIDDEN, 16, 8]
    wrapped = st_losses.MatryoshkaLoss(model, CSELoss(model, "focal_infonce", temperature=0.1), dims, [1.0, 0.5, 2])
    ours, our_grads = loss_and_gradients(model, wrapped, [ANCHORS], seed=3)

    reference = MatryoshkaObjective(build_objective("focal_infonce", temperature=0.1), dims, [1.0, 0.5, 2])

    def hf_cse_matryoshka(columns: list[dict[str, torch.Tensor]], labels: None) -> torch.Tensor:
        z1 = model(dict(columns[0]))["sentence_embedding"]
        z2 = model(dict(columns[0]))["sentence_embedding"]
        return reference(StepInputs(z1, z2)).loss

    theirs, their_grads = loss_and_gradients(model, hf_cse_matryoshka, [ANCHORS], seed=3)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert_gradients_close(our_grads, their_grads)


def test_dclr_complementary_similarities_per_batch(tiny_encoder_dir: Path) -> None:
    """DCLR uncached: the frozen model's [B, B] similarities are computed per batch (first column against the last),
    once per batch even under MatryoshkaLoss, and its weighting masks negatives (logged in last_logs)."""
    model = tiny_st(tiny_encoder_dir).train()
    complementary = tiny_st(tiny_encoder_dir)
    loss = CSELoss(model, "dclr", complementary_model=complementary, phi=0.5, phi_mode="quantile", k=0)
    assert not any(p.requires_grad for p in complementary.parameters()) and not complementary.training
    calls = []
    complementary.register_forward_hook(lambda *_: calls.append(1))
    columns = [features(model, ANCHORS), features(model, POSITIVES)]
    st_losses.MatryoshkaLoss(model, loss, [HIDDEN, 16])(columns, None)
    assert len(calls) == 2  # one forward per column, shared by both dimensions
    with torch.no_grad():
        expected = torch.nn.functional.normalize(complementary.encode(ANCHORS, convert_to_tensor=True), dim=-1)
        expected_positives = complementary.encode(POSITIVES, convert_to_tensor=True)
        expected = expected @ torch.nn.functional.normalize(expected_positives, dim=-1).T
    torch.testing.assert_close(loss.complementary_similarities(columns), expected, rtol=1e-5, atol=1e-6)
    # phi = 0.5 as a quantile masks the top half of the 30 off-diagonal similarities
    assert loss.last_logs["masked_negative_share"].item() == pytest.approx(15 / 30, abs=1 / 30)
    loss.train()
    assert not complementary.training


def test_complementary_model_with_its_own_tokenization_reads_the_decoded_sentences(tiny_encoder_dir: Path) -> None:
    """A complementary model reading fewer tokens than the trained model gets the batch's sentences decoded and
    tokenized its own way (the trained model's ids would pass its limit): its similarities are those of its own
    encode()."""
    model = tiny_st(tiny_encoder_dir)
    complementary = tiny_st(tiny_encoder_dir)
    complementary.max_seq_length = 4
    loss = CSELoss(model, "dclr", complementary_model=complementary, k=0)
    assert loss.retokenize and not CSELoss(model, "dclr", complementary_model=tiny_st(tiny_encoder_dir)).retokenize
    with torch.no_grad():
        embeddings = torch.nn.functional.normalize(complementary.encode(SENTENCES, convert_to_tensor=True), dim=-1)
    similarities = loss.complementary_similarities([features(model, SENTENCES)])
    torch.testing.assert_close(similarities, embeddings @ embeddings.T, rtol=1e-5, atol=1e-6)
    # 4 tokens ([CLS] + 2 words + [SEP]) cannot tell "a man is playing ..." from "a man eats ...": the same start
    assert similarities[0, 8] == pytest.approx(1.0, abs=1e-5)


def train_three_steps(model: SentenceTransformer, loss: torch.nn.Module, dataset: Dataset, output_dir: Path) -> None:
    args = SentenceTransformerTrainingArguments(
        output_dir=str(output_dir),
        per_device_train_batch_size=4,
        max_steps=3,
        learning_rate=1e-3,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_steps=1,
        dataloader_drop_last=True,
        seed=0,
    )
    SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=loss).train()


@pytest.mark.parametrize(
    ("objective", "title"),
    [
        ("dclr", "Debiased Contrastive Learning of Unsupervised Sentence Representations"),
        ("focal_infonce", "Improving Contrastive Learning of Sentence Embeddings with Focal"),
    ],
)
def test_sentence_transformer_trainer_trains_saves_and_cards(
    tiny_encoder_dir: Path, tmp_path: Path, objective: str, title: str
) -> None:
    """Three steps (DCLR uncached with a complementary model on single sentences; Focal-InfoNCE on pairs) change
    every weight; the saved folder reloads in sentence-transformers with the trained weights; its model card names
    CSELoss with the objective's config and BibTeX."""
    model = tiny_st(tiny_encoder_dir)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    if objective == "dclr":
        loss = CSELoss(model, "dclr", complementary_model=tiny_st(tiny_encoder_dir), phi=0.5, phi_mode="quantile")
        dataset = Dataset.from_dict({"text": SENTENCES})
    else:
        loss = CSELoss(model, "focal_infonce", temperature=0.1)
        dataset = Dataset.from_dict({"anchor": ANCHORS * 2, "positive": POSITIVES * 2})
    train_three_steps(model, loss, dataset, tmp_path / "run")

    unchanged = [name for name, p in model.named_parameters() if torch.equal(p.detach(), before[name])]
    # BERT's pooler head is not in the mean-pooled embedding, so it gets no gradient
    assert [name for name in unchanged if ".pooler." not in name] == []
    if objective == "dclr":  # the objective's diagnostics of the last step
        assert {"masked_negative_share", "uniformity_loss_before", "uniformity_loss_after"} <= set(loss.last_logs)

    saved = tmp_path / "saved"
    model.save(str(saved))
    reloaded = SentenceTransformer(str(saved), device="cpu")
    torch.testing.assert_close(
        reloaded.encode(SENTENCES, convert_to_tensor=True), model.encode(SENTENCES, convert_to_tensor=True)
    )
    card = (saved / "README.md").read_text(encoding="utf-8")
    assert "hf_cse.integrations.sentence_transformers.CSELoss" in card
    assert f'"objective": "{objective}"' in card
    assert "#### CSELoss" in card and title in card
    if objective == "dclr":
        assert '"phi_mode": "quantile"' in card and '"complementary_model": "SentenceTransformer' in card
        assert "loss_form" in card
    else:
        assert '"hardness": 0.3' in card


def test_the_readme_example_trains_and_cards(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docs' "In sentence-transformers" example (examples/python/st_cse_loss.py), run as printed on the tiny
    model (its name, dimensions and output folder swapped in), in a scratch folder: the trainer writes into the
    example's output folder, not a ``tmp_trainer/`` of the working directory (issue 56 item 9: one was left in the
    repository root)."""
    block = (REPO_ROOT / "examples" / "python" / "st_cse_loss.py").read_text(encoding="utf-8")
    tiny_st(tiny_encoder_dir).save(str(tmp_path / "tiny"))
    swaps = {
        '"sentence-transformers/all-MiniLM-L6-v2"': repr(str(tmp_path / "tiny")),
        "[384, 128, 64]": f"[{HIDDEN}, 16, 8]",
        '"outputs/dclr-st"': repr(str(tmp_path / "saved")),
    }
    for old, new in swaps.items():
        assert old in block
        block = block.replace(old, new)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(block, "st_cse_loss.py", "exec"), namespace)
    card = (tmp_path / "saved" / "README.md").read_text(encoding="utf-8")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["saved", "tiny"]
    # the card's loss is the wrapper, naming CSELoss; the citations are both losses'
    assert '"loss": "CSELoss"' in card and '"matryoshka_dims": [' in card
    assert "#### CSELoss" in card and "zhou2022debiased" in card and "#### MatryoshkaLoss" in card
    assert namespace["loss"].loss.last_logs["masked_negative_share"] >= 0


def test_citation_and_config_dict(tiny_encoder_dir: Path) -> None:
    """The objective's BibTeX (and its loss form's), its name and hyper-parameters; an objective instance too."""
    model = tiny_st(tiny_encoder_dir)
    dclr = CSELoss(model, "dclr", weighting="self", loss_form="focal", phi=0.8)
    assert dclr.citation == "\n\n".join(build_objective("dclr", loss_form="focal").citations)
    assert "zhou2022debiased" in dclr.citation and "hou2023focal" in dclr.citation
    config = dclr.get_config_dict()
    assert config["objective"] == "dclr" and config["phi"] == 0.8 and config["loss_form"] == "focal"
    assert config["hardness"] == 0.3 and "complementary_model" not in config
    wrapped = CSELoss(model, MatryoshkaObjective(build_objective("simcse", temperature=0.1), [HIDDEN, 8]))
    assert "gao2021simcse" in wrapped.citation and "kusupati2022matryoshka" in wrapped.citation
    assert wrapped.get_config_dict() == {
        "objective": "simcse",
        "temperature": 0.1,
        "matryoshka_dims": [HIDDEN, 8],
        "matryoshka_weights": [1.0, 1.0],
    }


class MeanCosineDistance(torch.nn.Module):
    """A user's objective, never registered: ``1 - mean_i cos(z1_i, z2_i)``, with its alignment as a diagnostic."""

    def forward(self, inputs: StepInputs) -> ObjectiveOutput:
        cosine = torch.nn.functional.cosine_similarity(inputs.anchors, inputs.positives).mean()
        return ObjectiveOutput(1 - cosine, {"alignment": cosine.detach()})


def test_a_users_unregistered_objective_runs(tiny_encoder_dir: Path) -> None:
    """Any module of the contract runs, named by its class; one returning a bare tensor is a one-line error."""
    model = tiny_st(tiny_encoder_dir).eval()
    loss = CSELoss(model, MeanCosineDistance())
    columns = [features(model, ANCHORS), features(model, POSITIVES)]
    value = loss(columns, None)
    with torch.no_grad():
        z1, z2 = (model.encode(texts, convert_to_tensor=True) for texts in (ANCHORS, POSITIVES))
    expected = 1 - torch.nn.functional.cosine_similarity(z1, z2).mean()
    torch.testing.assert_close(value.detach(), expected, rtol=1e-5, atol=1e-6)
    assert loss.last_logs["alignment"] == pytest.approx(1 - expected.item(), abs=1e-5)
    assert loss.get_config_dict() == {"objective": "MeanCosineDistance"} and loss.citation == ""

    class ReturnsATensor(torch.nn.Module):
        def forward(self, inputs: StepInputs) -> torch.Tensor:
            return inputs.anchors.sum()

    assert "forward must return ObjectiveOutput" in one_line_error(CSELoss(model, ReturnsATensor()), columns, None)


def one_line_error(call: object, *args: object, **kwargs: object) -> str:
    with pytest.raises(UsageError) as info:
        call(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_unsupported_objectives_and_inputs_are_one_line(tiny_encoder_dir: Path) -> None:
    model = tiny_st(tiny_encoder_dir)
    supported = set(supported_objectives())
    assert {"dcl", "dclr", "focal_infonce", "simcse"} <= supported and "osscse" not in supported
    message = one_line_error(CSELoss, model, "osscse")
    assert "'mask' pooler" in message and "simcse" in message and "run_unsup.py --objective osscse" in message
    # every objective listed as running builds with its defaults and passes (DCLR: with a complementary model)
    for name in supported:
        needs = "complementary_similarities" in build_objective(name).required_inputs
        CSELoss(model, name, complementary_model=tiny_st(tiny_encoder_dir) if needs else None)
    message = one_line_error(CSELoss, model, "dclr")
    assert "complementary_model=SentenceTransformer" in message and "weighting='self'" in message
    assert "is the model being trained" in one_line_error(CSELoss, model, "dclr", complementary_model=model)
    assert "leave complementary_model out" in one_line_error(
        CSELoss, model, "simcse", complementary_model=tiny_st(tiny_encoder_dir)
    )
    assert "hyper-parameters ['temperature']" in one_line_error(
        CSELoss, model, build_objective("simcse"), temperature=0.1
    )
    assert "valid objectives are" in one_line_error(CSELoss, model, "simcsee")
    # A path where the model belongs was taken, and failed at the first step ('str' object is not callable).
    assert one_line_error(CSELoss, str(tiny_encoder_dir), "simcse") == (
        f"CSELoss's model is a SentenceTransformer, got str '{tiny_encoder_dir}': load it first "
        f"(SentenceTransformer('{tiny_encoder_dir}'))."
    )
    assert "CSELoss's complementary_model is a SentenceTransformer, got str" in one_line_error(
        CSELoss, model, "dclr", complementary_model=str(tiny_encoder_dir)
    )
    assert "unknown hyper-parameters ['scale']" in one_line_error(CSELoss, model, "simcse", scale=20)
    # A momentum queue's provider is built by the run, not declared in required_inputs: it failed at the first step.
    assert "momentum queue of past embeddings, which only hf_cse's trainer keeps" in one_line_error(
        CSELoss, model, "simcse", momentum_queue_size=16
    )
    loss = CSELoss(model, "simcse")
    columns = [features(model, ANCHORS) for _ in range(3)]
    assert "has 3 text columns" in one_line_error(loss, columns, None)


def test_gathered_across_two_processes_equals_one_process_over_the_global_batch(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """``gather_across_devices=True`` on 2 processes (gloo), 4 pairs each: the loss averaged over the processes and
    the DDP-averaged gradients equal one process's over the 8 pairs, for SimCSE and for DCLR (noise negatives and
    complementary weighting over the global batch)."""
    import distributed_st_loss

    runs = {name: [name] for name in distributed_st_loss.OBJECTIVES}
    results, _ = launch_two_process_runs("distributed_st_loss.py", tiny_encoder_dir, tmp_path, runs)
    for name in runs:
        single = distributed_st_loss.loss_and_gradients(str(tiny_encoder_dir), name)
        assert single["world_size"] == 1 and single["dtype"] == results[name]["dtype"] == "torch.float64"
        # float64 runs: equal up to float64 rounding (tests/rounding.py)
        assert_equal_up_to_float64_rounding({"loss": [results[name]["loss"]]}, {"loss": [single["loss"]]}, name)
        assert len(single["gradients"]) > 10
        assert_equal_up_to_float64_rounding(results[name]["gradients"], single["gradients"], f"{name} gradients")


@pytest.mark.parametrize("attention_dropout", [0.0, 0.1])
def test_one_column_on_a_decoder_without_dropout_stops_at_the_first_step_naming_the_fix(
    attention_dropout: float, tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """Qwen3 ships attention_dropout 0.0 and no other dropout: one column's two views are equal and SimCSE learns
    nothing. CSETrainer stopped such a run; CSELoss trained it without a word. Now the same one line at the first
    step, with the remedy for a SentenceTransformer; with dropout the run trains."""
    from sentence_transformers import models

    transformer = models.Transformer(
        str(tiny_decoder_dirs["qwen3"]), max_seq_length=32, config_kwargs={"attention_dropout": attention_dropout}
    )
    transformer.tokenizer.pad_token = transformer.tokenizer.eos_token
    pooling = models.Pooling(transformer.get_embedding_dimension(), pooling_mode="lasttoken")
    model = SentenceTransformer(modules=[transformer, pooling], device="cpu")
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, max_steps=2, report_to="none", use_cpu=True
    )
    trainer = SentenceTransformerTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict({"text": SENTENCES[:8]}),
        loss=CSELoss(model, "simcse"),
    )
    if attention_dropout:
        assert trainer.train().training_loss > 0
        return
    with pytest.raises(UsageError) as error:
        trainer.train()
    assert str(error.value) == (
        "The two views of the first batch are identical, so objective 'simcse' has nothing to learn: the qwen3 "
        "model's dropout is off (attention_dropout=0) and the view augmentation changed nothing. Load the model with "
        "dropout "
        '(SentenceTransformer(..., config_kwargs={"attention_dropout": 0.1}); LLM2Vec uses 0.3 on decoders), or give '
        "CSELoss two columns, (anchor, positive)."
    )
