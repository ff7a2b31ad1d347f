"""The whole step compiles (issue 31, item 2): every registered objective, loss form, auxiliary term, view
augmentation, input provider and pooler runs under ``torch.compile(fullgraph=True)`` - a graph break is an error - and
the compiled call gives the eager call's values and gradients.

The registries are iterated (:mod:`hf_cse.registry`), so a part added later is covered: an input provider with no
stand-in values below fails :func:`test_every_input_provider_has_stand_in_values`. ``backend="eager"`` runs dynamo's
capture (where graph breaks happen) without a compiler, which keeps each check to a second or two on a CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import SENTENCES, training_args
from datasets import Dataset
from torch._dynamo.utils import counters
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, PoolingConfig
from hf_cse.inputs import StepContext
from hf_cse.modeling.tokenization import SentenceTokenizer
from hf_cse.objectives import NoiseNegatives, ObjectiveOutput, StepInputs, build_objective, with_matryoshka
from hf_cse.objectives.base import MOMENTUM_NEGATIVES, MOMENTUM_TEXT_HASH, TEXT_HASH, normalized
from hf_cse.objectives.mntp import IGNORE_INDEX, MNTP_LOGITS, MNTP_TARGETS
from hf_cse.objectives.simcsepp import OFF_DROPOUT
from hf_cse.registry import AUXILIARY_LOSSES, INPUT_PROVIDERS, LOSS_FORMS, OBJECTIVES, POOLERS, VIEW_AUGMENTATIONS

BATCH, DIM, QUEUE = 6, 8, 5


def stand_in_values(generator: torch.Generator) -> dict[str, dict[str, torch.Tensor]]:
    """Random values of each input provider's step inputs, by provider name, over ``BATCH`` sentences."""

    def embeddings() -> torch.Tensor:
        return torch.randn(BATCH, DIM, generator=generator, dtype=torch.float64, requires_grad=True)

    def flags() -> torch.Tensor:
        return torch.tensor([True, False, True, True, False, True])

    similarities = torch.rand(BATCH, BATCH, generator=generator, dtype=torch.float64).fill_diagonal_(1.0)
    return {
        "complementary_similarities": {"complementary_sim": similarities},
        "negations_and_paraphrases": {"negations": embeddings(), "paraphrases": embeddings(), "has_pair": flags()},
        "negations": {"negations": embeddings(), "has_negation": flags()},
        "prompt_template_views": {},  # makes the views: nothing beyond them
        "word_repetition_views": {},
        "augmented_views": {},  # makes the views with the run's view augmentation
        "labelled_pairs": {},  # makes the views of labelled pairs; its hard negatives are StepInputs.hard_negatives
        "duplicate_texts": {TEXT_HASH: torch.tensor([3, 1, 3, 2, 1, 5])},  # rows 0 and 2, 1 and 4 are copies
        "momentum_queue": {  # queued copies of rows 0 and 2, 1 and 4, 3; one row queued without a hash (-1)
            MOMENTUM_NEGATIVES: torch.randn(QUEUE, DIM, generator=generator, dtype=torch.float64),
            MOMENTUM_TEXT_HASH: torch.tensor([3, 7, -1, 1, 2]),
        },
        "off_dropout_embeddings": {OFF_DROPOUT: embeddings()},
        "masked_next_tokens": {  # LM-head logits of 7 drawn tokens over a vocabulary of 11; 2 drawn but not masked
            MNTP_LOGITS: torch.randn(7, 11, generator=generator, dtype=torch.float64, requires_grad=True),
            MNTP_TARGETS: torch.tensor([3, IGNORE_INDEX, 0, 10, 5, IGNORE_INDEX, 3]),
        },
    }


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    """Each test compiles from scratch: the parts share code objects (``ContrastiveObjective.forward``), and
    dynamo's recompile limit would otherwise fall back to eager after 8 of them."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiled(function: Callable[..., Any]) -> Callable[..., Any]:
    return torch.compile(function, fullgraph=True, backend="eager")


def step_inputs(required: tuple[str, ...], seed: int = 0, **fields: Any) -> StepInputs:
    """Two float64 views ``[BATCH, DIM]`` (leaves) and the stand-in values of the ``required`` providers."""
    generator = torch.Generator().manual_seed(seed)
    views = [torch.randn(BATCH, DIM, generator=generator, dtype=torch.float64, requires_grad=True) for _ in "ab"]
    stand_ins = stand_in_values(generator)
    values: dict[str, Any] = {}
    embeddings: set[str] = set()
    for provider in required:
        values.update(stand_ins[provider])
        embeddings.update(INPUT_PROVIDERS[provider].embeddings)
    return StepInputs(*views, embeddings=embeddings, **{**values, **fields})


def leaves(inputs: StepInputs) -> list[torch.Tensor]:
    tensors = [inputs.anchors, inputs.positives, *inputs.extra_positives, *inputs.values.values()]
    return [t for t in tensors if isinstance(t, torch.Tensor) and t.requires_grad]


def assert_same_output(
    call: Callable[[StepInputs], Any], inputs: StepInputs, seed: int = 0, model: torch.nn.Module | None = None
) -> None:
    """``call(inputs)`` compiled with ``fullgraph=True`` (any graph break raises) and eagerly, from the same RNG
    state: the same loss, diagnostics and gradients of every leaf input (and of ``model``'s parameters)."""
    outputs, gradients = [], []
    counters.clear()
    for function in (compiled(call), call):
        torch.manual_seed(seed)
        output = function(inputs)
        wrt = leaves(inputs) + ([] if model is None else [p for p in model.parameters() if p.requires_grad])
        outputs.append(output)
        gradients.append(torch.autograd.grad(output.loss, wrt, allow_unused=True) if wrt else ())
    assert counters["stats"]["unique_graphs"] == 1  # dynamo captured the call, in one graph
    (got, expected), (got_grads, expected_grads) = outputs, gradients
    torch.testing.assert_close(got.loss, expected.loss)
    assert got.logs.keys() == expected.logs.keys()
    for key in expected.logs:
        torch.testing.assert_close(got.logs[key], expected.logs[key], msg=key)
    for g, e in zip(got_grads, expected_grads, strict=True):
        torch.testing.assert_close(g, e)


def objective_cases() -> dict[str, tuple[Callable[[], torch.nn.Module], dict[str, Any]]]:
    """Every registered objective with its defaults, and the pipeline's other paths."""
    cases: dict[str, tuple[Callable[[], torch.nn.Module], dict[str, Any]]] = {
        name: (lambda name=name: build_objective(name), {}) for name in sorted(OBJECTIVES)
    }
    extra_views = [torch.randn(BATCH, DIM, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    cases |= {
        "dcl-3-views": (lambda: build_objective("dcl", num_positive_views=3), {"extra_positives": extra_views}),
        "simcse-queue": (lambda: build_objective("simcse", momentum_queue_size=QUEUE), {}),
        "dclr-quantile-self": (lambda: build_objective("dclr", phi_mode="quantile", weighting="self"), {}),
        "dclr-gathered": (lambda: build_objective("dclr"), {"anchor_rows": torch.arange(3)}),
        "focal_infonce-duplicates": (lambda: build_objective("focal_infonce"), {"duplicates": True}),
        "esimcse-duplicates": (lambda: build_objective("esimcse", momentum_queue_size=QUEUE), {"duplicates": True}),
        "dclr-matryoshka": (lambda: with_matryoshka(build_objective("dclr"), [4, 8]), {}),
    }
    return cases


OBJECTIVE_CASES = objective_cases()


@pytest.mark.parametrize("case", list(OBJECTIVE_CASES))
def test_every_objective_compiles_whole_and_matches_eager(case: str) -> None:
    build, fields = OBJECTIVE_CASES[case]
    objective = build()
    required = tuple(objective.required_inputs)
    if getattr(objective, "momentum_queue", None) is not None:
        required += ("momentum_queue",)
    if fields.pop("duplicates", False):
        required += ("duplicate_texts",)
    assert_same_output(objective, step_inputs(required, **fields))


@pytest.mark.parametrize("name", sorted(LOSS_FORMS))
def test_every_loss_form_compiles_whole_and_matches_eager(name: str) -> None:
    form = LOSS_FORMS.build(name, temperature=0.1)
    generator = torch.Generator().manual_seed(1)
    views = 3 if form.supports_multiple_positives else 1
    positive = torch.rand(BATCH, views, generator=generator, dtype=torch.float64, requires_grad=True)
    negative = (torch.rand(BATCH, 9, generator=generator, dtype=torch.float64) * 2 - 1).requires_grad_()
    keep = torch.rand(BATCH, 9, generator=generator) < 0.7
    keep[0] = False  # a row with no negative left

    def call(inputs: StepInputs) -> Any:
        output = form(inputs.anchors, inputs.positives, inputs["keep"])
        return ObjectiveOutput(output.losses.sum(), output.logs)

    assert_same_output(call, StepInputs(positive, negative, keep=keep))


@pytest.mark.parametrize("name", sorted(AUXILIARY_LOSSES))
def test_every_auxiliary_term_compiles_whole_and_matches_eager(name: str) -> None:
    term = AUXILIARY_LOSSES.build(name)
    model = torch.nn.Sequential(torch.nn.Linear(DIM, DIM), torch.nn.Linear(DIM, 2)).double()
    term.bind(model)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1)  # away from the recorded initial weights
    inputs = step_inputs(term.required_inputs).replace(model=model)
    assert_same_output(term, inputs, model=model)


def test_the_noise_ascents_closed_form_gradient_is_autograds() -> None:
    """DCLR's gradient of the non-uniformity loss by the noise, in closed form (float64) against autograd, and one
    ascent step against the step autograd's gradient gives."""
    generator = torch.Generator().manual_seed(0)
    anchors, positives = (normalized(torch.randn(7, DIM, generator=generator, dtype=torch.float64)) for _ in "ab")
    noise = torch.randn(9, DIM, generator=generator, dtype=torch.float64) * 3
    module = NoiseNegatives(k=9 / 7, ascent_steps=1, ascent_lr=0.05, tau_u=0.1)
    loss, gradient = module.uniformity_gradient(anchors, positives, noise)
    leaf = noise.clone().requires_grad_()
    reference = module.uniformity_loss(anchors, positives, leaf)
    (expected,) = torch.autograd.grad(reference, leaf)
    torch.testing.assert_close(loss, reference.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gradient, expected, rtol=1e-10, atol=1e-12)

    torch.manual_seed(3)
    output = module(anchors, positives)
    torch.manual_seed(3)
    drawn = torch.randn(9, DIM, dtype=torch.float64)
    leaf = drawn.clone().requires_grad_()
    (step_gradient,) = torch.autograd.grad(module.uniformity_loss(anchors, positives, leaf), leaf)
    stepped = drawn + 0.05 * torch.nn.functional.normalize(step_gradient, dim=-1)
    torch.testing.assert_close(output.negatives, stepped, rtol=1e-12, atol=1e-12)
    after = module.uniformity_loss(anchors, positives, stepped)
    torch.testing.assert_close(output.logs["uniformity_loss_after"], after)


@pytest.fixture(scope="module")
def tiny_model_and_batch(tiny_encoder_dir: Path) -> tuple[CSEModel, dict[str, torch.Tensor]]:
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls"))
    batch = AutoTokenizer.from_pretrained(tiny_encoder_dir)(SENTENCES[:4], padding=True, return_tensors="pt")
    return model, dict(batch)


@pytest.mark.parametrize("name", sorted(VIEW_AUGMENTATIONS))
def test_every_view_augmentation_compiles_whole_and_matches_eager(
    name: str, tiny_model_and_batch: tuple[CSEModel, dict[str, torch.Tensor]]
) -> None:
    model, batch = tiny_model_and_batch
    augmentation = VIEW_AUGMENTATIONS.build(name)
    stacked = []
    for function in (compiled(augmentation.stack), augmentation.stack):
        torch.manual_seed(5)
        stacked.append(function(model, batch, 3))
    got, expected = stacked
    assert got.keys() == expected.keys()
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], msg=key)
    assert expected["attention_mask"].shape[0] == 3 * len(SENTENCES[:4])


def test_every_input_provider_has_stand_in_values() -> None:
    """A provider registered later needs its stand-in values above, so the objectives and terms reading them are
    compiled with them; each declared embedding is among its values."""
    stand_ins = stand_in_values(torch.Generator().manual_seed(0))
    assert set(stand_ins) == set(INPUT_PROVIDERS)
    for name, provider in INPUT_PROVIDERS.items():
        assert set(provider.embeddings) <= set(stand_ins[name]), name


PROVIDER_RUNS: dict[str, dict[str, Any]] = {
    "complementary_similarities": {"objective": "dclr"},
    "negations_and_paraphrases": {
        "objective": "osscse",
        "input_kwargs": {"negations_and_paraphrases": {"negation_backend": "rules"}},
    },
    "negations": {"objective": "sncse", "input_kwargs": {"negations": {"negation_backend": "rules"}}},
    "prompt_template_views": {"objective": "promptbert"},
    "word_repetition_views": {"objective": "esimcse"},
    "duplicate_texts": {"objective": "simcse", "mask_duplicates": True},
    # With the queue's text hashes (--mask_duplicates), a superset of its values without them.
    "momentum_queue": {"objective": "simcse", "objective_kwargs": {"momentum_queue_size": 6}, "mask_duplicates": True},
    "off_dropout_embeddings": {"objective": "simcsepp"},
    "labelled_pairs": {"objective": "simcse", "pairs": True},  # SimCSE's triplets (provider_step's data)
}
"""A run that builds each input provider (the test below fails for a provider missing here)."""


def provider_step(encoder_dir: Path, output_dir: Path, name: str) -> tuple[Any, StepContext]:
    """A trainer whose run builds provider ``name`` (model in training mode), and its first batch's step as the
    provider sees it (the views encoded eagerly)."""
    settings = dict(PROVIDER_RUNS[name])
    if name == "negations_and_paraphrases":  # paraphrases for two sentences, so the margin's rows are encoded
        paraphrases = output_dir.parent / f"{output_dir.name}-paraphrases.tsv"
        paraphrases.write_text(
            f"{SENTENCES[0]}\ta man plays the guitar\n{SENTENCES[2]}\tin the park the dog runs\n", encoding="utf-8"
        )
        negator = {"negation_backend": "rules", "paraphrase_source": f"tsv:{paraphrases}"}
        settings["input_kwargs"] = {"negations_and_paraphrases": negator}
    data = {"text": SENTENCES}
    if settings.pop("pairs", False):  # each sentence, a paraphrase, another row's sentence as hard negative
        data = {"sent0": SENTENCES, "sent1": [f"indeed {s}" for s in SENTENCES], "hard_neg": SENTENCES[::-1]}
    pooler = OBJECTIVES[settings["objective"]].required_pooler or "cls"
    torch.manual_seed(0)
    trainer = CSETrainer(
        model=CSEModel.from_pretrained(encoder_dir, pooling=PoolingConfig(pooler=pooler)),
        args=training_args(output_dir, per_device_train_batch_size=len(SENTENCES), max_seq_length=24, **settings),
        train_dataset=Dataset.from_dict(data),
        processing_class=AutoTokenizer.from_pretrained(encoder_dir),
    )
    model = trainer.model.train()
    batch = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
    torch.manual_seed(1)
    _, views = trainer._encode_views(model, batch, trainer.num_views, False)
    return trainer, StepContext(model, batch, views[0], None)


STEPS_COMPILED_ELSEWHERE = {
    "augmented_views": "it only applies the run's view augmentation, each of which "
    "test_every_view_augmentation_compiles_whole_and_matches_eager compiles whole",
    "masked_next_tokens": "MNTP's provider draws its masked positions on the host, whose number (a shape) is data no "
    "graph captures, and needs a decoder's LM head; tests/test_mntp.py compiles its device half (MaskingRecipe.apply) "
    "whole",
}
"""Input providers whose step the test below does not compile, and why."""


def test_every_input_provider_has_a_run() -> None:
    assert set(PROVIDER_RUNS) | set(STEPS_COMPILED_ELSEWHERE) == set(INPUT_PROVIDERS)


@pytest.mark.parametrize("name", sorted(PROVIDER_RUNS))
def test_every_input_providers_step_compiles_whole_and_matches_eager(
    name: str, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """``provide`` (and ``stack_views`` for a provider that makes the views), twice - a momentum queue is empty at
    the first step - compiled in one trainer and eager in another built alike: the same values. The model's forward
    is traced inside the provider's graph."""
    results = []
    for mode in ("compiled", "eager"):
        trainer, step = provider_step(tiny_encoder_dir, tmp_path / mode, name)
        # A view maker that no objective requires (labelled pairs') is the trainer's view maker alone.
        provider = trainer.input_providers.get(name) or trainer.view_maker
        assert provider.name == name
        provide = compiled(provider.provide) if mode == "compiled" else provider.provide
        values = []
        for call in range(2):
            torch.manual_seed(10 + call)
            provided = provide(step)
            values.append({**provided.objective, **{f"local.{k}": v for k, v in provided.auxiliary.items()}})
        if provider.makes_views:
            stack = compiled(provider.stack_views) if mode == "compiled" else provider.stack_views
            torch.manual_seed(12)
            values.append(stack(step.batch, trainer.num_views))
        results.append(values)
        torch._dynamo.reset()
    for got, expected in zip(*results, strict=True):
        assert got.keys() == expected.keys()
        for key in expected:
            torch.testing.assert_close(got[key], expected[key], msg=key)
    flags = {"negations_and_paraphrases": "local.has_pair", "negations": "local.has_negation"}
    if name in flags:  # some rows are encoded through the model inside the graph
        assert results[1][0][flags[name]].any()
    if name == "momentum_queue":
        assert results[1][1][MOMENTUM_NEGATIVES].shape[0] == len(SENTENCES[:6])  # the second step reads the queue


def train_dclr(encoder_dir: Path, output_dir: Path, **overrides: Any) -> tuple[CSETrainer, list[dict[str, float]]]:
    """6 steps of DCLR (batch 4, noise ascent, complementary weighting) with the distillation term at weight 0.5,
    padded to multiples of 8 in both arms (the compiled run's default); the trainer and its logged steps."""
    torch.manual_seed(0)
    trainer = CSETrainer(
        model=CSEModel.from_pretrained(encoder_dir, pooling=PoolingConfig(pooler="cls")),
        args=training_args(
            output_dir,
            objective="dclr",
            auxiliary_losses={"distill": {"weight": 0.5}},
            max_steps=6,
            pad_to_multiple_of=8,
            **overrides,
        ),
        train_dataset=Dataset.from_dict({"text": SENTENCES * 2}),
        processing_class=AutoTokenizer.from_pretrained(encoder_dir),
    )
    trainer.train()
    return trainer, [entry for entry in trainer.state.log_history if "loss" in entry]


def test_torch_compile_compiles_the_loss_beside_the_model_and_trains_as_eager(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """``--torch_compile`` compiles the objective and each auxiliary term (:mod:`hf_cse.training.step.compiled_loss`)
    besides the model; on CPU with ``backend="eager"`` the run's losses and loss parts are the eager run's (17 s on
    2 cores: not marked slow)."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    from hf_cse.objectives import DistillationLoss
    from hf_cse.objectives.base import ContrastiveObjective

    _, eager = train_dclr(tiny_encoder_dir, tmp_path / "eager")
    for part in (ContrastiveObjective, DistillationLoss):
        assert not _debug_get_cache_entry_list(part.forward.__code__)
    trainer, logged = train_dclr(tiny_encoder_dir, tmp_path / "compiled", torch_compile_backend="eager")

    compiled_parts = {type(part).__name__ for part, _ in trainer.compile_loss._compiled.values()}
    assert compiled_parts == {"DCLRLoss", "DistillationLoss"}
    for part in (ContrastiveObjective, DistillationLoss):  # dynamo holds graphs for each part's forward
        assert _debug_get_cache_entry_list(part.forward.__code__), part.__name__
    assert len(logged) == len(eager) == 6
    for got, expected in zip(logged, eager, strict=True):
        for key in ("loss", "loss_dclr", "loss_distill", "masked_negative_share", "uniformity_loss_after"):
            assert got[key] == pytest.approx(expected[key], rel=1e-4, abs=1e-5), key


def test_the_loss_is_compiled_without_cuda_graphs() -> None:
    """CUDA graphs would overwrite the loss parts the trainer keeps until it logs them: the loss takes the model's
    compile mode less CUDA graphs; without --torch_compile the parts are called as they are."""
    from hf_cse.training.step.compiled_loss import LossCompiler, loss_compile_mode

    assert loss_compile_mode("reduce-overhead") is None
    assert loss_compile_mode("max-autotune") == "max-autotune-no-cudagraphs"
    assert loss_compile_mode("max-autotune-no-cudagraphs") == "max-autotune-no-cudagraphs"
    assert loss_compile_mode(None) is None
    objective = build_objective("simcse")
    assert LossCompiler(type("Args", (), {"torch_compile": False})())(objective) is objective
    compiler = LossCompiler(type("Args", (), {"torch_compile": True, "torch_compile_mode": "reduce-overhead"})())
    wrapper = compiler(objective)
    assert wrapper is not objective and compiler(objective) is wrapper and compiler.mode is None


POOLER_SETTINGS = {name: {"pooler": name} for name in sorted(POOLERS)} | {
    "mask-denoised": {"pooler": "mask", "template_denoising": True}
}


@pytest.mark.parametrize("case", list(POOLER_SETTINGS))
def test_every_pooler_compiles_whole_in_the_models_training_forward(case: str, tiny_encoder_dir: Path) -> None:
    """The model's forward (the Trainer compiles it) with each registered pooler, in training mode (dropout on,
    the same draws): one graph, the eager run's embeddings and gradients."""
    pooling = PoolingConfig(**POOLER_SETTINGS[case])
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=pooling).train()
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    tokens = SentenceTokenizer(tokenizer, model.pooling, max_seq_length=24)(SENTENCES[:4])
    batch = tokenizer.pad(tokens, return_tensors="pt")

    def call(inputs: StepInputs) -> ObjectiveOutput:
        embeddings = model(**inputs["batch"]).embeddings
        return ObjectiveOutput(embeddings.square().sum(), {"embeddings": embeddings})

    assert_same_output(call, StepInputs(torch.zeros(2, 1), torch.zeros(2, 1), batch=dict(batch)), model=model)


def test_two_templates_denoised_compile_whole_in_the_models_forward(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """PromptBERT's paper setting: both templates' rows in one forward, each minus its own template's bias. The
    provider hands the model the widest template on the host, so the forward is one graph (the pooler would
    otherwise read it back from the device: a break) with the eager run's embeddings and gradients."""
    torch.manual_seed(0)
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="mask", template_denoising=True))
    trainer = CSETrainer(
        model=model,
        args=training_args(tmp_path, objective="promptbert", per_device_train_batch_size=4, max_seq_length=24),
        train_dataset=Dataset.from_dict({"text": SENTENCES[:4]}),
        processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
    )
    batch = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
    stacked = trainer.input_providers["prompt_template_views"].stack_views(batch, 2)
    lengths = stacked["template_lengths"]
    assert lengths.unique(dim=0).shape[0] == 2  # two templates of different lengths in one batch
    assert stacked["template_width"] == int(lengths.sum(dim=1).max())
    model.train()

    def call(inputs: StepInputs) -> ObjectiveOutput:
        embeddings = model(**inputs["batch"]).embeddings
        return ObjectiveOutput(embeddings.square().sum(), {"embeddings": embeddings})

    assert_same_output(call, StepInputs(torch.zeros(2, 1), torch.zeros(2, 1), batch=stacked), model=model)
