"""Matryoshka embeddings: the wrapped loss against a naive weighted sum over truncations, for every objective, and
the training arguments, training run and evaluation around it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import SENTENCES, run_unsup, training_args, write_config, write_senteval_dir, write_train_file
from datasets import Dataset
from rounding import assert_equal_up_to_float64_rounding
from safetensors.torch import load_file
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, PoolingConfig, SentenceEncoder
from hf_cse.commands.eval import main as eval_main
from hf_cse.commands.push import load_training_summary
from hf_cse.errors import UsageError
from hf_cse.evaluation import evaluate_sts
from hf_cse.export.model_card import TRAINING_SUMMARY_FILE
from hf_cse.objectives import (
    MatryoshkaObjective,
    ObjectiveOutput,
    StepInputs,
    build_objective,
    check_matryoshka_dims,
    with_matryoshka,
)
from hf_cse.training.record.run_arguments import TRAINING_ARGS_FILE

DIM = 12
BATCH = 6


def run(objective: torch.nn.Module, z1: torch.Tensor, z2: torch.Tensor, **values: Any) -> ObjectiveOutput:
    """``objective`` on the views ``z1``, ``z2`` and ``values`` (``extra_positives``, ``complementary_sim``, ...)."""
    output = objective(StepInputs(z1, z2, **values))
    assert isinstance(output, ObjectiveOutput)
    return output


def views(seed: int, count: int = 2, dtype: torch.dtype = torch.float64) -> list[torch.Tensor]:
    """``count`` embeddings ``[BATCH, DIM]`` with gradients; the later views are noisy copies of the first, so
    positives are closer than negatives, as after dropout."""
    generator = torch.Generator().manual_seed(seed)
    base = torch.randn(BATCH, DIM, generator=generator, dtype=dtype)
    made = [base + 0.3 * torch.randn(BATCH, DIM, generator=generator, dtype=dtype) for _ in range(count)]
    return [view.requires_grad_(True) for view in made]


def complementary_sim(seed: int) -> torch.Tensor:
    """A frozen model's cosine similarities ``[BATCH, BATCH]``."""
    generator = torch.Generator().manual_seed(seed)
    z = torch.nn.functional.normalize(torch.randn(BATCH, 4, generator=generator, dtype=torch.float64), dim=-1)
    return z @ z.T


# name, objective hyper-parameters, number of views (1 + positives), whether it reads complementary similarities
CASES = {
    "simcse": ("simcse", {"temperature": 0.05}, 2, False),
    "dcl": ("dcl", {"temperature": 0.1, "tau_plus": 0.1}, 2, False),
    "dcl-3-positives": ("dcl", {"temperature": 0.1, "num_positive_views": 2}, 3, False),
    "focal_infonce": ("focal_infonce", {"temperature": 0.07, "hardness": 0.3}, 2, False),
    "dclr": ("dclr", {"temperature": 0.05, "k": 1.5, "ascent_steps": 3, "ascent_lr": 0.5, "phi": 0.3}, 2, True),
    "dclr-self+focal": ("dclr", {"weighting": "self", "phi": 0.5, "loss_form": "focal", "ascent_steps": 2}, 2, False),
    "osscse": ("osscse", {"temperature": 0.05}, 2, False),
}


def naive_matryoshka(
    objective: torch.nn.Module, dims: list[int], weights: list[float], z: list[torch.Tensor], **inputs: Any
) -> torch.Tensor:
    """``sum_d w_d * objective(z1[:, :d], z2[:, :d], extra positives[:, :d], **inputs)``, one plain call per ``d``."""
    total = 0.0
    for dim, weight in zip(dims, weights, strict=True):
        truncated = [view[:, :dim] for view in z]
        extra = {"extra_positives": truncated[2:]} if len(truncated) > 2 else {}
        total = total + weight * run(objective, truncated[0], truncated[1], **extra, **inputs).loss
    return total


@pytest.mark.parametrize("case", list(CASES))
def test_matryoshka_equals_the_weighted_sum_over_truncations_with_gradients(case: str) -> None:
    name, hparams, num_views, complementary = CASES[case]
    dims, weights = [DIM, 8, 3], [1.0, 0.5, 2.0]
    z = views(seed=len(case))
    z += views(seed=99, count=num_views - 2)
    inputs = {"complementary_sim": complementary_sim(1)} if complementary else {}
    matryoshka = MatryoshkaObjective(build_objective(name, **hparams), dims, weights)
    extra = {"extra_positives": z[2:]} if num_views > 2 else {}

    torch.manual_seed(7)  # DCLR draws its noise: the same seed gives both sides the same draws, in the same order
    output = run(matryoshka, z[0], z[1], **extra, **inputs)
    got = output.loss
    got_grads = torch.autograd.grad(got, z)
    torch.manual_seed(7)
    expected = naive_matryoshka(build_objective(name, **hparams), dims, weights, z, **inputs)
    expected_grads = torch.autograd.grad(expected, z)

    assert got.dtype == torch.float64 and torch.allclose(got, expected, rtol=1e-10, atol=1e-12)
    for got_grad, expected_grad in zip(got_grads, expected_grads, strict=True):
        assert got_grad.abs().sum() > 0 and torch.allclose(got_grad, expected_grad, rtol=1e-10, atol=1e-12)
    # Each truncation's own loss is logged, unweighted.
    torch.manual_seed(7)
    for dim in dims:
        plain = build_objective(name, **hparams)
        truncated = [view[:, :dim] for view in z]
        extra_truncated = {"extra_positives": truncated[2:]} if num_views > 2 else {}
        value = run(plain, truncated[0], truncated[1], **extra_truncated, **inputs).loss
        assert output.logs[f"loss_{name}_dim{dim}"].item() == pytest.approx(value.item(), rel=1e-10)


def test_dclr_noise_negatives_take_the_truncated_dimension() -> None:
    objective = build_objective("dclr", weighting="none", k=1.0, ascent_steps=1)
    shapes = []
    objective.extra_negatives.register_forward_hook(
        lambda module, args, output: shapes.append(tuple(output.negatives.shape))
    )
    z1, z2 = views(seed=3)
    run(MatryoshkaObjective(objective, [DIM, 5]), z1, z2)
    assert shapes == [(BATCH, DIM), (BATCH, 5)]


def test_float32_loss_under_half_precision_inputs() -> None:
    z1, z2 = (view.detach().to(torch.bfloat16) for view in views(seed=4))
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        loss = run(MatryoshkaObjective(build_objective("simcse"), [DIM, 4]), z1, z2).loss
    assert loss.dtype == torch.float32 and math.isfinite(loss.item())


@pytest.mark.parametrize("case", ["simcse", "dclr"])
def test_one_dimension_of_the_full_size_is_exactly_the_plain_objective(case: str) -> None:
    name, hparams, _, complementary = CASES[case]
    z1, z2 = views(seed=5, dtype=torch.float32)
    inputs = {"complementary_sim": complementary_sim(2)} if complementary else {}
    matryoshka = MatryoshkaObjective(build_objective(name, **hparams), [DIM])
    plain = build_objective(name, **hparams)
    torch.manual_seed(3)
    got = run(matryoshka, z1, z2, **inputs)
    got_grads = torch.autograd.grad(got.loss, (z1, z2))
    torch.manual_seed(3)
    expected = run(plain, z1, z2, **inputs)
    expected_grads = torch.autograd.grad(expected.loss, (z1, z2))
    assert torch.equal(got.loss, expected.loss)
    assert all(torch.equal(a, b) for a, b in zip(got_grads, expected_grads, strict=True))
    # The plain run's diagnostics under their own names, plus the one dimension's loss.
    assert set(got.logs) == {*expected.logs, f"loss_{name}_dim{DIM}"}
    assert all(torch.equal(got.logs[key], value) for key, value in expected.logs.items())


def test_diagnostics_of_smaller_dimensions_are_suffixed() -> None:
    objective = MatryoshkaObjective(build_objective("dclr", weighting="self", k=0), [DIM, 4])
    logs = run(objective, *views(seed=6)).logs
    assert set(logs) == {
        "loss_dclr_dim12",
        "loss_dclr_dim4",
        "masked_negative_share",
        "masked_negative_share_dim4",
    }


def test_the_wrapper_keeps_the_objective_contract() -> None:
    osscse = build_objective("osscse")
    wrapped = MatryoshkaObjective(osscse, [DIM, 4], [2.0, 1.0])
    assert (wrapped.name, wrapped.required_pooler) == ("osscse", "mask")
    assert wrapped.default_auxiliary_losses == osscse.default_auxiliary_losses
    assert wrapped.required_inputs == ("prompt_template_views",)
    assert wrapped.num_positive_views == 1
    assert wrapped.citations[:-1] == osscse.citations and "kusupati2022matryoshka" in wrapped.citations[-1]
    config = wrapped.get_config_dict()
    assert config["second_prompt_template"] == osscse.second_prompt_template
    assert (config["matryoshka_dims"], config["matryoshka_weights"]) == ([DIM, 4], [2.0, 1.0])
    assert build_objective("dclr").needs_complementary_similarities
    assert MatryoshkaObjective(build_objective("dclr"), [4]).required_inputs == ("complementary_similarities",)


@pytest.mark.parametrize(
    ("dims", "weights", "size", "match"),
    [
        ([], None, 32, "matryoshka_dims is empty"),
        ([32, 0], None, 32, r"matryoshka_dims: 0 is not a valid dimension; each must be an integer in \[1, 32\]"),
        ([-4], None, None, r"-4 is not a valid dimension; each must be an integer in \[1, inf\)"),
        ([64, 32], None, 32, r"64 is not a valid dimension; each must be an integer in \[1, 32\] \(the embedding"),
        ([16.5], None, 32, r"16.5 is not a valid dimension"),
        ([32, 16, 32], None, 32, "matryoshka_dims lists 32 twice"),
        ([32, 16], [1.0], 32, "matryoshka_weights has 1 values for 2 matryoshka_dims"),
        ([32, 16], [1.0, 0.0], 32, r"matryoshka_weights: 0.0 is not a valid weight; each must be a number in \(0, "),
        ([32], [math.nan], 32, "matryoshka_weights: nan is not a valid weight"),
    ],
)
def test_bad_dims_and_weights_are_one_line_errors(
    dims: list, weights: list | None, size: int | None, match: str
) -> None:
    with pytest.raises(UsageError, match=match) as err:
        check_matryoshka_dims(dims, weights, size)
    assert "\n" not in str(err.value)


def test_dimensions_above_the_embedding_size_fail_at_the_first_call() -> None:
    objective = MatryoshkaObjective(build_objective("simcse"), [64, 8])
    with pytest.raises(UsageError, match=r"64 is not a valid dimension; each must be an integer in \[1, 12\]"):
        run(objective, *views(seed=7))


def test_wrapping_twice_is_an_error() -> None:
    with pytest.raises(UsageError, match="already a MatryoshkaObjective"):
        MatryoshkaObjective(MatryoshkaObjective(build_objective("simcse"), [4]), [4])


def test_with_matryoshka_is_the_one_wrapping_rule() -> None:
    """The trainer and the summary rebuilt by hf_cse.push both wrap through with_matryoshka: no dims (older records
    lack the key) leaves the objective as it is, dims wrap it once, a wrapper for the same dims is kept, and one
    for other dims or weights is an error rather than a silent choice."""
    plain = build_objective("simcse")
    assert with_matryoshka(plain, None) is plain and with_matryoshka(plain, []) is plain
    wrapped = with_matryoshka(plain, [8, 4], [1.0, 0.5], embedding_size=12)
    assert isinstance(wrapped, MatryoshkaObjective) and wrapped.objective is plain
    assert (wrapped.dims, wrapped.weights) == ((8, 4), (1.0, 0.5))
    assert with_matryoshka(wrapped, [8, 4], [1, 0.5]) is wrapped
    assert with_matryoshka(wrapped, None) is wrapped
    with pytest.raises(UsageError, match=r"MatryoshkaObjective for dims \[8, 4\] .* matryoshka_dims \[8, 2\]"):
        with_matryoshka(wrapped, [8, 2])
    with pytest.raises(UsageError, match=r"matryoshka_weights \[1.0, 1.0\]"):
        with_matryoshka(wrapped, [8, 4])
    with pytest.raises(UsageError, match=r"16 is not a valid dimension; each must be an integer in \[1, 12\]"):
        with_matryoshka(plain, [16, 4], embedding_size=12)


def test_trainer_keeps_a_given_wrapper_of_the_same_dims_and_refuses_other_dims(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    def trainer(objective: torch.nn.Module, dims: list[int]) -> CSETrainer:
        return CSETrainer(
            model=CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls")),
            args=training_args(tmp_path, matryoshka_dims=dims),
            processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
            objective=objective,
        )

    given = MatryoshkaObjective(build_objective("simcse"), [32, 8])
    assert trainer(given, [32, 8]).objective is given
    with pytest.raises(UsageError, match="give the dimensions once"):
        trainer(given, [32, 16])


# --- Training arguments and the trainer --------------------------------------------------------------------------


def test_training_arguments_check_dims_and_weights(tmp_path: Path) -> None:
    args = training_args(tmp_path, matryoshka_dims=[32, 8])
    assert (args.matryoshka_dims, args.matryoshka_weights) == ([32, 8], [1.0, 1.0])
    with pytest.raises(UsageError, match="matryoshka_dims lists 8 twice"):
        training_args(tmp_path, matryoshka_dims=[8, 8])
    with pytest.raises(UsageError, match="matryoshka_weights has 3 values for 2"):
        training_args(tmp_path, matryoshka_dims=[32, 8], matryoshka_weights=[1, 1, 1])
    with pytest.raises(UsageError, match="matryoshka_weights needs matryoshka_dims"):
        training_args(tmp_path, matryoshka_weights=[1.0])


def test_trainer_checks_dims_against_the_embedding_size(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"48 is not a valid dimension; each must be an integer in \[1, 32\]"):
        CSETrainer(
            model=CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls")),
            args=training_args(tmp_path, matryoshka_dims=[48, 16]),
            processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
        )


@pytest.mark.parametrize(("objective", "kwargs"), [("simcse", {}), ("dcl", {"num_positive_views": 2})])
def test_gradient_cache_with_matryoshka_gives_the_loss_and_gradients_without_it(
    tiny_encoder_dir: Path, tmp_path: Path, objective: str, kwargs: dict
) -> None:
    """Gradient caching encodes in chunks and back-propagates each chunk's embedding gradient; the Matryoshka sum
    only changes that gradient, so the loss, each dimension's logged loss and every parameter's gradient equal
    those of one uncached pass (dropout off: chunked and whole-batch encodings then agree), and equal the naive
    weighted sum of the plain objective over truncations."""
    torch.manual_seed(0)  # the MLP head's initialization
    model = CSEModel.from_pretrained(
        tiny_encoder_dir,
        pooling=PoolingConfig(pooler="cls"),
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    ).double()  # float64: chunks of 3 rows round differently from batches of 8, and the 2-dim prefix amplifies it
    model.train()
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    dims, weights = [32, 8, 2], [1.0, 0.5, 2.0]
    settings = {"objective": objective, "objective_kwargs": kwargs, "matryoshka_dims": dims}
    settings["matryoshka_weights"] = weights
    trained = [(name, p) for name, p in model.named_parameters() if p.requires_grad]

    def step(chunk_size: int | None) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        trainer = CSETrainer(
            model=model,
            args=training_args(tmp_path, gradient_cache_chunk_size=chunk_size, **settings),
            train_dataset=Dataset.from_dict({"text": SENTENCES}),
            processing_class=tokenizer,
        )
        trainer.stop_on_identical_views = False  # dropout is off on purpose (above): the views are equal
        batch = trainer.data_collator([trainer.train_dataset[i] for i in range(8)])
        model.zero_grad()
        loss = trainer.compute_loss(model, batch)
        loss.backward()
        grads = {name: p.grad.clone() for name, p in trained}
        return loss.detach(), {name: values[-1] for name, values in trainer._step_logs.items()}, grads

    cached_loss, cached_logs, cached_grads = step(3)
    loss, logs, grads = step(None)
    # float64 throughout: equal up to float64 rounding (tests/rounding.py), a wrong or missing dimension's term
    # changes them by its weight (0.5 to 2 here).
    assert cached_loss.dtype == torch.float64
    assert_equal_up_to_float64_rounding({"loss": cached_loss}, {"loss": loss}, "losses")
    assert {f"loss_{objective}_dim{dim}" for dim in dims} <= set(logs)
    assert_equal_up_to_float64_rounding(cached_logs, logs, "logged losses")
    assert_equal_up_to_float64_rounding(cached_grads, grads, "gradients")
    assert any(grad.abs().sum() > 0 for grad in grads.values())

    # The same step by hand: the plain objective on each truncation of one uncached encoding.
    args = training_args(tmp_path, **settings)
    plain = build_objective(objective, **args.objective_hparams())
    trainer = CSETrainer(
        model=model, args=args, train_dataset=Dataset.from_dict({"text": SENTENCES}), processing_class=tokenizer
    )
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(8)])
    encoded = model(**trainer.stack_views(batch, 1 + plain.num_positive_views)).embeddings.split(8)
    model.zero_grad()
    expected = naive_matryoshka(plain, dims, weights, list(encoded))
    expected.backward()
    assert_equal_up_to_float64_rounding({"loss": loss}, {"loss": expected.detach()}, "losses")
    assert_equal_up_to_float64_rounding({name: p.grad for name, p in trained}, grads, "gradients")


def test_osscse_composition_truncates_the_objective_and_keeps_auxiliary_terms_on_the_full_embedding(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    paraphrases = tmp_path / "paraphrases.tsv"
    paraphrases.write_text(
        "a man is playing a guitar\ta man plays the guitar\nthe dog runs in the park\tin the park the dog runs\n",
        encoding="utf-8",
    )
    dims, weights = [32, 8], [1.0, 0.5]
    trainer = CSETrainer(
        model=CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="mask")),
        args=training_args(
            tmp_path,
            objective="osscse",
            max_seq_length=24,
            input_kwargs={
                "negations_and_paraphrases": {"negation_backend": "rules", "paraphrase_source": f"tsv:{paraphrases}"}
            },
            per_device_train_batch_size=12,
            matryoshka_dims=dims,
            matryoshka_weights=weights,
        ),
        train_dataset=Dataset.from_dict({"text": SENTENCES}),
        processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
    )
    assert isinstance(trainer.objective, MatryoshkaObjective) and set(trainer.auxiliary_losses) == {"margin", "recall"}
    seen: dict[str, Any] = {}
    trainer.objective.register_forward_pre_hook(lambda module, args: seen.update(views=args))
    for name, (term, _) in trainer.auxiliary_losses.items():
        term.register_forward_pre_hook(lambda module, args, name=name: seen.update({name: args[0]}))
    trainer.model.eval()  # no dropout: the hooks' inputs reproduce the step
    batch = next(iter(trainer.get_train_dataloader()))
    loss = trainer.compute_loss(trainer.model, batch)

    (objective_inputs,) = seen["views"]  # the forward's one argument: the objective's StepInputs
    z1, z2 = objective_inputs.anchors, objective_inputs.positives
    plain = build_objective("osscse")
    expected = naive_matryoshka(plain, dims, weights, [z1, z2])
    for name, (term, weight) in trainer.auxiliary_losses.items():
        inputs = seen[name]
        assert torch.equal(inputs.anchors, z1) and inputs.anchors.shape[1] == 32  # the full embedding
        expected = expected + weight * term(inputs).loss
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert {"loss_osscse_dim32", "loss_osscse_dim8", "loss_margin", "loss_recall"} <= set(trainer._step_logs)


def test_run_unsup_with_matryoshka_dims_logs_each_dimension_and_trains(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), max_steps=3)
    metrics = run_unsup.main(
        ["--config", str(config), "--matryoshka_dims", "32", "16", "4", "--matryoshka_weights", "1", "0.5", "0.25"]
    )
    assert math.isfinite(metrics["train_loss"])
    out = tmp_path / "out"
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    logged = [entry for entry in history if "loss" in entry]
    assert len(logged) == 3
    for entry in logged:
        parts = [entry[f"loss_simcse_dim{dim}"] for dim in (32, 16, 4)]
        assert all(math.isfinite(part) for part in parts)
        assert entry["loss_simcse"] == pytest.approx(parts[0] + 0.5 * parts[1] + 0.25 * parts[2], rel=1e-4)
        assert entry["loss"] == pytest.approx(entry["loss_simcse"], rel=1e-4)
    before = load_file(str(tiny_encoder_dir / "model.safetensors"))
    after = {name.removeprefix("bert."): value for name, value in load_file(str(out / "model.safetensors")).items()}
    compared = [name for name in before if "encoder.layer" in name and name in after]
    assert compared and all(not torch.equal(before[name], after[name]) for name in compared)
    # The card and a summary rebuilt from training_args.json (python -m hf_cse.push) both tell the dimensions.
    card = (out / "README.md").read_text(encoding="utf-8")
    assert '"matryoshka_dims": [' in card and "@inproceedings{kusupati2022matryoshka" in card
    assert (out / TRAINING_ARGS_FILE).is_file()
    (out / TRAINING_SUMMARY_FILE).unlink()
    rebuilt = load_training_summary(out)
    assert rebuilt.objective_config["matryoshka_dims"] == [32, 16, 4]
    assert rebuilt.objective_config["matryoshka_weights"] == [1.0, 0.5, 0.25]
    # The saved sentence-transformers files load with truncate_dim: the prefix of hf_cse's own embedding.
    sentence_transformers = pytest.importorskip("sentence_transformers")
    st = sentence_transformers.SentenceTransformer(str(out), device="cpu", truncate_dim=16)
    embeddings = torch.as_tensor(st.encode(SENTENCES))
    full = SentenceEncoder.from_pretrained(out, device="cpu").encode(SENTENCES)
    assert embeddings.shape == (len(SENTENCES), 16) and torch.allclose(embeddings, full[:, :16], atol=1e-5)


# --- Evaluation of truncated embeddings ---------------------------------------------------------------------------


def test_eval_truncate_dim_scores_the_manually_truncated_embeddings(
    tiny_encoder_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    sts_dir = write_senteval_dir(tmp_path / "sts")
    tasks = ["sts12", "stsb", "sickr"]
    output_json = tmp_path / "sts.json"
    common = ["--model_name_or_path", str(tiny_encoder_dir), "--pooler", "avg", "--sts_dir", str(sts_dir)]
    output = eval_main(
        [
            *common,
            "--tasks",
            *tasks,
            "--truncate_dim",
            "8",
            "32",
            "2",
            "--device",
            "cpu",
            "--output_json",
            str(output_json),
        ]
    )
    encoder = SentenceEncoder.from_pretrained(tiny_encoder_dir, pooler="avg", device="cpu")
    expected = {
        dim: evaluate_sts(lambda sentences, dim=dim: encoder.encode(sentences)[:, :dim], tasks, str(sts_dir)).summary()
        for dim in (8, 32, 2)
    }
    assert expected[2] != expected[32]  # the truncation changes the scores, so equality below checks it
    assert output["truncate_dim"] == {str(dim): pytest.approx(summary) for dim, summary in expected.items()}
    assert {task: output[task] for task in [*tasks, "avg"]} == pytest.approx(expected[8])  # the first listed
    assert output["details"]["settings"]["truncate_dim"] == 8
    assert json.loads(output_json.read_text())["truncate_dim"]["2"] == pytest.approx(expected[2])
    printed = capsys.readouterr().out
    assert "First 8 dimensions:" in printed and "First 2 dimensions:" in printed
    # The table of each task's score by dimension, after the per-dimension tables.
    header = [line.split() for line in printed.splitlines() if line.startswith("dim ")]
    assert header == [["dim", *tasks, "avg"]]


@pytest.mark.parametrize(
    ("dims", "match"),
    [
        (["0"], r"^argument --truncate_dim: 0 is not valid: it takes an integer in \[1, 65536\]"),
        (["4", "4"], "--truncate_dim lists 4 twice"),
    ],
)
def test_eval_rejects_bad_truncate_dims_before_loading_the_model(tmp_path: Path, dims: list[str], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        eval_main(["--model_name_or_path", str(tmp_path / "no_model"), "--truncate_dim", *dims])


def test_eval_rejects_a_truncate_dim_above_the_embedding_size(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    sts_dir = write_senteval_dir(tmp_path / "sts")
    with pytest.raises(
        UsageError, match=r"--truncate_dim: 64 is not a valid dimension; each must be an integer in \[1, 32\]"
    ):
        eval_main(["--model_name_or_path", str(tiny_encoder_dir), "--sts_dir", str(sts_dir), "--truncate_dim", "64"])
