"""Objectives in training: view augmentations and gradient caching with any objective, OssCSE's terms, DCLR's
complementary model, 2 CPU processes equal to one, and bad settings as one-line errors. That every registered
objective trains from run_unsup.py is checked in tests/every_part/test_training_runs.py."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
from common.two_processes import assert_two_processes_equal_one
from conftest import (
    SENTENCES,
    complementary_of,
    dclr_trainer,
    launch_two_process_runs,
    run_unsup,
    training_args,
    write_config,
    write_train_file,
)
from datasets import Dataset
from rounding import assert_equal_up_to_float64_rounding
from safetensors.torch import load_file
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, PoolingConfig
from hf_cse.errors import UsageError
from hf_cse.objectives import StepInputs


def test_cached_and_uncached_complementary_similarities_train_identically(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    # float32 storage: identical similarities (float16 storage is within a tolerance, see test_complementary.py)
    cached = dclr_trainer(
        tiny_encoder_dir, tmp_path / "cached", input_kwargs={"complementary_similarities": {"cache_dtype": "float32"}}
    )
    index = torch.tensor([3, 0, 7, 5])
    cached_similarities = complementary_of(cached)(index)
    cached.train()
    uncached = dclr_trainer(
        tiny_encoder_dir, tmp_path / "uncached", input_kwargs={"complementary_similarities": {"cache": False}}
    )
    assert complementary_of(cached).cached is not None and complementary_of(uncached).cached is None
    assert torch.allclose(cached_similarities, complementary_of(uncached)(index), atol=1e-5)
    uncached.train()
    losses = [[e["loss"] for e in t.state.log_history if "loss" in e] for t in (cached, uncached)]
    assert min(losses[0]) > 0.01
    assert losses[0] == pytest.approx(losses[1], rel=1e-4)
    assert any(e["masked_negative_share"] > 0 for e in cached.state.log_history if "masked_negative_share" in e)


def test_complementary_similarities_stay_float32_under_autocast(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    complementary = complementary_of(dclr_trainer(tiny_encoder_dir, tmp_path))
    index = torch.tensor([3, 0, 7, 5])
    rows = torch.nn.functional.normalize(complementary.cached[index].float(), dim=-1)  # float16 rows, renormalized
    reference = rows @ rows.T
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the Trainer calls it inside its autocast context
        similarities = complementary(index)
    assert similarities.dtype == torch.float32 and similarities.shape == (4, 4)
    assert torch.equal(similarities, reference)
    assert torch.allclose(similarities.diagonal(), torch.ones(4))


def test_complementary_model_is_frozen_and_never_saved(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    trainer = dclr_trainer(tiny_encoder_dir, tmp_path)
    before = {k: v.clone() for k, v in complementary_of(trainer).encoder.model.state_dict().items()}
    trainer.train()
    after = complementary_of(trainer).encoder.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    trainer.save_model()
    saved = load_file(str(tmp_path / "model.safetensors"))
    assert set(saved) == set(trainer.model.inference_state_dict())  # the exported weights, and nothing else


def test_missing_complementary_model_is_a_clear_error(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(
        UsageError, match="complementary model '/no/such/model': Model folder '/no/such/model' does not"
    ):
        dclr_trainer(
            tiny_encoder_dir,
            tmp_path,
            input_kwargs={"complementary_similarities": {"model_name_or_path": "/no/such/model"}},
        )


@pytest.mark.parametrize(
    ("augmentation", "kwargs"),
    [("shuffle", {}), ("token_cutoff", {"rate": 0.2}), ("span_cutoff", {}), ("feature_cutoff", {"rate": 0.2})],
)
@pytest.mark.parametrize("objective", ["simcse", "dclr"])
def test_positive_augmentations_train_with_any_objective(
    tiny_encoder_dir: Path, tmp_path: Path, augmentation: str, kwargs: dict, objective: str
) -> None:
    config = write_config(
        tmp_path,
        tiny_encoder_dir,
        write_train_file(tmp_path, SENTENCES),
        objective=objective,
        objective_kwargs=json.dumps({"weighting": "self"} if objective == "dclr" else {}),
        view_augmentation=augmentation,
        view_augmentation_kwargs=json.dumps(kwargs),
        max_steps=2,
    )
    assert math.isfinite(run_unsup.main(["--config", str(config)])["train_loss"])


@pytest.mark.parametrize(
    ("flag", "value", "match"),
    [
        ("--view_augmentation", "crop", "valid augmentations are: dropout, shuffle, token_cutoff"),
        ("--view_augmentation_kwargs", "[0.2]", "must be a JSON object"),
        ("--objective_kwargs", '{"k": -1}', "must be a number in \\[0, 100\\]"),
        ("--objective_kwargs", '{"phi": 1.2}', "phi must be a number in \\(0, 1\\]"),
    ],
)
def test_bad_objective_and_augmentation_settings_are_clear_errors(
    tiny_encoder_dir: Path, tmp_path: Path, flag: str, value: str, match: str
) -> None:
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), objective="dclr")
    with pytest.raises(ValueError, match=match):
        run_unsup.main(["--config", str(config), flag, value])


def write_paraphrase_tsv(tmp_path: Path) -> Path:
    """Hand-written paraphrases of the first training sentences (MER within OssCSE's [0.15, 0.6] band)."""
    rows = {
        "a man is playing a guitar": "a man plays the guitar",
        "a woman plays the piano": "the piano is played by a woman",
        "the dog runs in the park": "in the park the dog is running",
        "a cat is in the house": "the cat is inside the house",
    }
    path = tmp_path / "paraphrases.tsv"
    path.write_text("".join(f"{s}\t{p}\n" for s, p in rows.items()), encoding="utf-8")
    return path


@pytest.mark.parametrize("denoising", [False, True], ids=["plain", "template-denoising"])
def test_osscse_trains_with_margin_and_recall(tiny_encoder_dir: Path, tmp_path: Path, denoising: bool) -> None:
    config = write_config(
        tmp_path,
        tiny_encoder_dir,
        write_train_file(tmp_path, SENTENCES),
        objective="osscse",
        pooler="mask",
        max_seq_length=24,
        input_kwargs={
            "negations_and_paraphrases": {
                "negation_backend": "rules",
                "paraphrase_source": f"tsv:{write_paraphrase_tsv(tmp_path)}",
            }
        },
        per_device_train_batch_size=12,
        max_steps=3,
        learning_rate=5e-3,
        template_denoising=denoising,
    )
    metrics = run_unsup.main(["--config", str(config)])
    assert math.isfinite(metrics["train_loss"])
    logged = [
        e for e in json.loads((tmp_path / "out" / "trainer_state.json").read_text())["log_history"] if "loss" in e
    ]
    assert all({"loss_osscse", "loss_margin", "loss_recall", "margin_rows_skipped"} <= set(e) for e in logged)
    assert logged[0]["margin_rows_skipped"] < 12  # some sentences have both a negation and a paraphrase
    assert logged[-1]["loss_recall"] > 0  # the weights moved away from the start
    total = logged[-1]["loss_osscse"] + logged[-1]["loss_recall"] + 1e-3 * logged[-1]["loss_margin"]
    assert logged[-1]["loss"] == pytest.approx(total, rel=1e-3)
    card = (tmp_path / "out" / "README.md").read_text()
    assert '"margin": {' in card and '"gamma": 0.002' in card and "@inproceedings{shi2023osscse" in card


def test_distillation_baseline_trains_beside_simcse(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        tiny_encoder_dir,
        write_train_file(tmp_path, SENTENCES),
        auxiliary_losses=json.dumps({"distill": {"weight": 1.0, "temperature": 0.05}}),
    )
    assert math.isfinite(run_unsup.main(["--config", str(config)])["train_loss"])


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (
            {"objective": "osscse", "pooler": "cls"},
            "needs pooler='mask' or pooler='prompt_last_token'; the model uses pooler='cls'",
        ),
        (
            {"objective": "osscse", "pooler": "mask", "view_augmentation": "shuffle"},
            "two prompt templates; it cannot be combined with view_augmentation='shuffle'",
        ),
        (
            {"auxiliary_losses": '{"contrast": {}}'},
            "valid terms are: bml, dimension_contrast, distill, margin, recall",
        ),
        ({"auxiliary_losses": '{"recall": {"weight": -1}}'}, "weight must be a number in \\[0, 1000\\]"),
    ],
)
def test_incompatible_combinations_are_clear_errors(
    tiny_encoder_dir: Path, tmp_path: Path, overrides: dict, match: str
) -> None:
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), **overrides)
    with pytest.raises(ValueError, match=match):
        run_unsup.main(["--config", str(config)])


def test_paraphrase_tsv_with_bad_rows_is_a_clear_error(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("a man is playing a guitar\ta man plays the guitar\nonly one field\n", encoding="utf-8")
    config = write_config(
        tmp_path,
        tiny_encoder_dir,
        write_train_file(tmp_path, SENTENCES),
        objective="osscse",
        pooler="mask",
        max_seq_length=24,
        input_kwargs={"negations_and_paraphrases": {"negation_backend": "rules", "paraphrase_source": f"tsv:{bad}"}},
    )
    with pytest.raises(ValueError, match="line 2"):
        run_unsup.main(["--config", str(config)])


# The arguments of tests/distributed_equivalence.py for every 2-process run of this module.
TWO_PROCESS_RUNS = {
    "simcse": ["simcse", "8"],
    "dclr": ["dclr", "8"],
    "dclr-matryoshka": ["dclr-matryoshka", "8"],
    "simcse-local-negatives": ["simcse", "8", "4"],
    "shuffle": ["simcse", "8", "--view", "shuffle"],
    "token-cutoff": ["simcse", "8", "--view", "token_cutoff", json.dumps({"rate": 0.3})],
    "deterministic-cutoff": ["simcse", "8", "--view", "token_cutoff", json.dumps({"rate": 0.0})],
    "simcse-qwen3": ["simcse-last-token", "8"],
    "simcse-triplets": ["simcse-triplets", "8"],
}
DECODER_RUNS = {"simcse-qwen3": "qwen3"}
"""The runs on a tiny decoder (conftest's tiny_decoder_dirs) instead of the tiny BERT."""


def run_one_process(tmp_path: Path, model_dir: Path, run: str) -> dict:
    """tests/distributed_equivalence.py's run ``run`` in this process (a fresh interpreter would spend ~10 s
    importing hf_cse to train 3 tiny steps)."""
    import distributed_equivalence

    out = tmp_path / f"{run}-single.json"
    distributed_equivalence.run([str(model_dir), str(out), *TWO_PROCESS_RUNS[run]])
    result = json.loads(out.read_text())
    assert result["world_size"] == 1
    return result


@pytest.fixture(scope="module")
def two_process_runs(
    tiny_encoder_dir: Path, tiny_decoder_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict]:
    """Every run of TWO_PROCESS_RUNS in 2 CPU processes (gloo), in one launch (conftest's
    launch_two_process_runs)."""
    out_dir = tmp_path_factory.mktemp("two_processes")
    script = "distributed_equivalence.py"
    model_dirs = {run: tiny_decoder_dirs.get(DECODER_RUNS.get(run, ""), tiny_encoder_dir) for run in TWO_PROCESS_RUNS}
    results, stderr = launch_two_process_runs(script, model_dirs, out_dir, TWO_PROCESS_RUNS)
    # torch.distributed.nn.functional.all_gather warned once per process per run (deprecated in torch 2.13).
    own_warnings = re.findall(r"hf_cse[/\\]training[/\\]distributed\.py:\d+: \w*Warning: .*", stderr)
    assert not own_warnings, own_warnings
    return results


@pytest.mark.parametrize("run", ["simcse", "dclr", "simcse-local-negatives", "dclr-matryoshka", "simcse-triplets"])
def test_two_cpu_processes_equal_one_process_over_the_global_batch(
    tiny_encoder_dir: Path, tmp_path: Path, two_process_runs: dict[str, dict], run: str
) -> None:
    """Gathered negatives: one process over the global batch of 8. Local negatives (``gather_negatives=False``):
    one process accumulating two batches of 4, each contrasted within itself, as each of the two processes does.
    Triplets: every process's positives and hard negatives gathered as its anchors are (issue 52)."""
    single = run_one_process(tmp_path, tiny_encoder_dir, run)
    assert_two_processes_equal_one(single, two_process_runs[run])
    if run.startswith("simcse"):  # not every logit equal (a loss of log B whatever the weights): the loss checks much
        batch = 8 if run == "simcse" else 4
        assert all(abs(loss - math.log(batch)) > 0.01 for loss in single["losses"]), single["losses"]
    if run == "dclr-matryoshka":  # the per-dimension parts were compared, and sum to the logged objective
        for parts in single["loss_parts"]:
            weighted = parts["loss_dclr_dim32"] + 0.5 * parts["loss_dclr_dim8"]
            assert parts["loss_dclr"] == pytest.approx(weighted, rel=1e-4)


def test_two_cpu_processes_equal_one_process_on_a_decoder(
    tiny_decoder_dirs: dict[str, Path], tmp_path: Path, two_process_runs: dict[str, dict]
) -> None:
    """A tiny Qwen3 with last-token pooling: gathered negatives over 2 processes equal one process over the global
    batch, as for BERT (the decoder's causal mask, rotary positions and eos padding included)."""
    single = run_one_process(tmp_path, tiny_decoder_dirs["qwen3"], "simcse-qwen3")
    assert_two_processes_equal_one(single, two_process_runs["simcse-qwen3"])
    assert all(abs(loss - math.log(8)) > 0.01 for loss in single["losses"]), single["losses"]
    assert single["parameters"] != single["initial_parameters"]


@pytest.mark.parametrize(
    ("run", "view"), [("shuffle", "shuffle"), ("token-cutoff", "token_cutoff")], ids=["shuffle", "token-cutoff"]
)
def test_two_cpu_processes_train_with_shuffle_and_cutoff_views(
    two_process_runs: dict[str, dict], run: str, view: str
) -> None:
    """The embedding-level views (built from the model's word embeddings and position ids) under real DDP: the
    augmentation reads the bare model's encoder, the forward pass goes through the DDP wrapper.

    No equality with one process: each process draws its own shuffles/cutoffs for its own rows (padded to its own
    length), so the views differ from one process's over the global batch. What must hold: training runs, the losses
    are finite, the parameters move, and every process ends with the same parameters (the gradients were all-reduced;
    a forward through the bare module would skip that and leave the processes apart)."""
    result = two_process_runs[run]
    assert result["view_augmentation"] == view
    assert len(result["losses"]) == 3 and all(math.isfinite(loss) for loss in result["losses"])
    assert result["rank_spread"] == 0.0
    moved = [
        name
        for name, values in result["parameters"].items()
        if not torch.equal(torch.tensor(values), torch.tensor(result["initial_parameters"][name]))
    ]
    assert "bert.embeddings.word_embeddings.weight" in moved  # reached only through the views' lookup
    assert "bert.encoder.layer.1.output.dense.weight" in moved


def test_two_cpu_processes_equal_one_process_with_deterministic_cutoff_views(
    tiny_encoder_dir: Path, tmp_path: Path, two_process_runs: dict[str, dict]
) -> None:
    """token_cutoff at rate 0 erases nothing, so its views are random-free but still built as inputs_embeds from the
    word embeddings outside the wrapped forward: two processes must equal one over the global batch, the word
    embeddings' gradient (taken outside DDP's forward) included."""
    two = two_process_runs["deterministic-cutoff"]
    assert_two_processes_equal_one(run_one_process(tmp_path, tiny_encoder_dir, "deterministic-cutoff"), two)
    word_embeddings = "bert.embeddings.word_embeddings.weight"
    assert not torch.equal(
        torch.tensor(two["parameters"][word_embeddings]), torch.tensor(two["initial_parameters"][word_embeddings])
    )


@pytest.mark.parametrize("objective", ["simcse", "dcl"])
def test_gradient_cache_gives_the_gradients_of_the_uncached_chunks(
    tiny_encoder_dir: Path, tmp_path: Path, objective: str
) -> None:
    torch.manual_seed(0)
    kwargs = {"num_positive_views": 2} if objective == "dcl" else {}
    trainer = CSETrainer(
        # float64: the chunks of 3 sum in another order than the batch of 8 (tests/rounding.py)
        model=CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls")).double(),
        args=training_args(tmp_path, objective=objective, objective_kwargs=kwargs, gradient_cache_chunk_size=3),
        train_dataset=Dataset.from_dict({"text": SENTENCES}),
        processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
    )
    model = trainer.model.train()  # dropout on: the replay must reproduce every mask
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(8)])
    num_views = 3 if objective == "dcl" else 2

    torch.manual_seed(1)
    trainer.compute_loss(model, batch).backward()
    trained = [(name, p) for name, p in model.named_parameters() if p.requires_grad]  # not the encoder's pooler
    cached = {name: p.grad.clone() for name, p in trained}
    model.zero_grad()

    torch.manual_seed(1)  # the same chunks encoded with their graphs kept
    per_chunk = []
    for ids in torch.arange(8).split(3):
        embeddings = model(
            **trainer.stack_views({"sentences": {k: v[ids] for k, v in batch["sentences"].items()}}, num_views)
        )
        per_chunk.append(embeddings.embeddings.split(len(ids)))
    views = [torch.cat([chunk[v] for chunk in per_chunk]) for v in range(num_views)]
    trainer.objective(StepInputs(views[0], views[1], extra_positives=views[2:])).loss.backward()
    assert_equal_up_to_float64_rounding(cached, {name: p.grad for name, p in trained}, "gradients")
    assert any(p.grad.abs().sum() > 0 for _, p in trained)


def test_training_with_gradient_cache_from_run_unsup(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    config = write_config(
        tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), gradient_cache_chunk_size=2, max_steps=2
    )
    assert math.isfinite(run_unsup.main(["--config", str(config)])["train_loss"])
