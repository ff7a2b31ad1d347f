"""What a card says about a run: where its usage code loads the model from, how long it trained, the truncation
length in effect at inference (issue #16: a bare folder name, `num_train_epochs 3` for a run stopped by max_steps,
`max_seq_length None`), and the settings of every input provider the run built (the one decision of
:func:`hf_cse.inputs.run_input_providers`: the view maker and ``duplicate_texts`` too)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import SENTENCES, run_unsup, training_args, write_config, write_train_file
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, PoolingConfig, SentenceEncoder, build_objective
from hf_cse.export.model_card import render_card_from_summary, summarize_training
from hf_cse.inputs import AugmentedViews, InputProvider, InputSettings
from hf_cse.inputs.duplicates import DuplicateTexts
from hf_cse.registry import INPUT_PROVIDERS
from hf_cse.training.record.run_arguments import training_arguments_record


def test_card_of_a_local_run_loads_its_folder_and_shows_the_steps_and_lengths_in_effect(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # output_dir relative, as in the Quickstart's config
    train_file = write_train_file(tmp_path, SENTENCES * 2)  # 24 sentences: 6 steps of 4 per epoch
    config = write_config(tmp_path, tiny_encoder_dir, train_file, max_steps=4, output_dir="outputs/quickstart")
    run_unsup.main(["--config", str(config)])
    card = Path("outputs/quickstart/README.md").read_text(encoding="utf-8")

    assert "\n# quickstart\n" in card  # the title keeps the folder's name
    for code in (
        'AutoModel.from_pretrained("outputs/quickstart")',
        'SentenceTransformer("outputs/quickstart")',
        'SentenceEncoder.from_pretrained("outputs/quickstart")',
        "python -m hf_cse.eval --model_name_or_path outputs/quickstart ",
    ):
        assert code in card, code
    assert 'from_pretrained("quickstart")' not in card
    SentenceEncoder.from_pretrained("outputs/quickstart", device="cpu")  # the snippet's path loads from here
    # The push command's repository is a placeholder named after the folder (issue 38 item 4d): the output folder
    # as --repo_id would name a user "outputs"'s repository.
    assert "python -m hf_cse.push RUN_DIR --repo_id YOUR_USERNAME/quickstart --sts_results sts.json" in card
    assert "--repo_id outputs/" not in card

    # max_steps stopped the run at 4 of the 6 steps of the first epoch: no "num_train_epochs 3".
    for row in ("| `max_steps` | `4` |", "| `global_steps` | `4` |", "| `epochs_trained` | `0.667` |"):
        assert row in card, row
    assert "num_train_epochs" not in card
    # Training truncates at 32 tokens; inference at the tiny model's limit, 128 (pooling max_seq_length unset).
    assert "| `max_seq_length` | `32` |" in card
    assert "| `max_seq_length` | `128 (unset: the model's limit)` |" in card
    assert "| `max_seq_length` | `None` |" not in card


def test_an_epoch_based_run_shows_its_epochs_and_no_unset_max_steps(tmp_path: Path) -> None:
    args = training_args(tmp_path, max_steps=-1, num_train_epochs=2)
    log_history = [{"loss": 1.0, "step": 6, "epoch": 1.0}, {"loss": 0.9, "step": 12, "epoch": 2.0}]
    objective = build_objective("simcse", temperature=0.05)
    pooling = PoolingConfig(pooler="avg", max_seq_length=64)
    summary = summarize_training(pooling, training_arguments_record(args), objective, {}, log_history)
    assert summary.training["num_train_epochs"] == 2 and "max_steps" not in summary.training
    assert (summary.training["global_steps"], summary.training["epochs_trained"]) == (12, 2.0)
    card = render_card_from_summary(summary, "someone/model")
    assert "| `max_seq_length` | `64` |" in card  # set in the pooling config: shown as it is
    assert 'AutoModel.from_pretrained("someone/model")' in card  # without a local folder: the repository


def test_a_run_named_for_the_hub_loads_its_repository(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="avg"))
    args = training_args(tmp_path / "out", hub_model_id="someone/tiny-simcse")
    trainer = CSETrainer(model, args, processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir))
    trainer.create_model_card()
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "\n# someone/tiny-simcse\n" in card
    assert 'SentenceTransformer("someone/tiny-simcse")' in card
    assert f"--model_name_or_path {shlex.quote('someone/tiny-simcse')} " in card
    assert "python -m hf_cse.push RUN_DIR --repo_id someone/tiny-simcse --sts_results sts.json" in card
    assert "YOUR_USERNAME" not in card  # the run names its repository: nothing to replace
    assert str(tmp_path) not in card  # no local path on a card meant for the Hub


@dataclass
class WindowSettings(InputSettings):
    """A throwaway provider's one setting, which its card must show: ``window`` (default 3)."""

    window: int = 3


@pytest.mark.parametrize(
    ("provider", "overrides"),
    [(AugmentedViews, {}), (DuplicateTexts, {"mask_duplicates": True})],
    ids=["view_maker", "mask_duplicates"],
)
def test_the_card_shows_the_settings_of_the_view_maker_and_of_duplicate_texts(
    provider: type[InputProvider], overrides: dict[str, bool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SimCSE requires no provider: the run builds ``augmented_views`` as its view maker, and ``duplicate_texts``
    under mask_duplicates. Each, given settings here (a throwaway subclass registered under its name for this test
    only), shows them on the card; re-rendered from an older ``training_args.json`` that lacks the keys the decision
    reads, they read as their defaults (the view maker still, no mask_duplicates)."""
    monkeypatch.setattr(INPUT_PROVIDERS, "_classes", dict(INPUT_PROVIDERS._classes))
    INPUT_PROVIDERS._classes[provider.name] = type("Windowed", (provider,), {"Settings": WindowSettings})
    args = training_args(tmp_path, input_kwargs={provider.name: {"window": 5}}, **overrides)
    record = training_arguments_record(args)
    older = {key: value for key, value in record.items() if key not in ("view_augmentation", "mask_duplicates")}
    objective = build_objective("simcse", temperature=0.05)
    summaries = [summarize_training(PoolingConfig(pooler="avg"), a, objective, {}, []) for a in (record, older)]
    assert [summary.training.get("window") for summary in summaries] == [5, None if overrides else 5]
    assert "| `window` | `5` |" in render_card_from_summary(summaries[0], "someone/model")
