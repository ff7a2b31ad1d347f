"""Each part owns its settings (issue 39, item 1): an input provider takes them as a dataclass of its own, filled from
the run's ``input_kwargs`` mapping, and reports them through that dataclass's ``record()`` alone, which the run
settings, the resume contract and the model card all read; the views have one maker per run.

The proof that no central file names a part's settings: an objective with a new input, both registered here (in the
test, as a built-in would be in its own files), trains through ``run_unsup.py`` and its settings reach the checkpoint's
run settings, refuse a changed resume, appear on the card and in a sweep's record of the run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from conftest import SENTENCES, make_tiny_trainer, run_unsup, write_config, write_train_file

from hf_cse import CSETrainingArguments
from hf_cse.augment.views import TokenCutoff
from hf_cse.commands.push import load_training_summary
from hf_cse.errors import UsageError
from hf_cse.inputs import AugmentedViews, InputProvider, InputSettings, ProvidedInputs, StepContext
from hf_cse.inputs.word_repetition_views import WordRepetitionViews
from hf_cse.objectives import ObjectiveOutput, SimCSELoss
from hf_cse.objectives.contract import StepInputs
from hf_cse.registry import INPUT_PROVIDERS, OBJECTIVES
from hf_cse.sweeps.selection import trained_with
from hf_cse.training.arguments.checks import check_input_paths
from hf_cse.training.record.run_settings import RUN_SETTINGS_FILE
from hf_cse.training.saving.output_dir import run_inputs

# --- a new objective with a new input, registered in the test only --------------------------------------------------


@dataclass
class SentenceScaleSettings(InputSettings):
    """``scale``: every sentence's weight; ``lexicon``: a local file, which the card names by its last component."""

    scale: float = 1.0
    lexicon: str | None = None

    def __post_init__(self) -> None:
        if not self.scale > 0:
            raise UsageError(f"scale must be above 0, got {self.scale!r}.")


class SentenceScales(InputProvider):
    """Gives ``sentence_scale`` ``[B]``: ``scale`` for every sentence."""

    Settings = SentenceScaleSettings

    def provide(self, step: StepContext) -> ProvidedInputs:
        scales = torch.full((len(step.anchors),), self.settings.scale, device=step.anchors.device)
        return ProvidedInputs.per_sentence(step, sentence_scale=scales)


class ScaledSimCSE(SimCSELoss):
    """SimCSE's loss times the batch's mean ``sentence_scale``."""

    required_inputs = ("sentence_scales",)

    def forward(self, inputs: StepInputs) -> ObjectiveOutput:
        output = super().forward(inputs)
        return ObjectiveOutput(output.loss * inputs.tensor("sentence_scale").mean(), output.logs)


@pytest.fixture
def scaled_simcse(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``sentence_scales`` and ``scaled_simcse`` registered for one test (the registries are restored after it)."""
    for registry in (INPUT_PROVIDERS, OBJECTIVES):
        monkeypatch.setattr(registry, "_classes", dict(registry._classes))
    INPUT_PROVIDERS.register("sentence_scales")(SentenceScales)
    OBJECTIVES.register("scaled_simcse")(ScaledSimCSE)
    yield


def test_a_new_inputs_settings_reach_the_run_settings_the_resume_contract_the_card_and_the_sweep(
    scaled_simcse: None, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    lexicon = tmp_path / "private" / "lexicon.txt"
    lexicon.parent.mkdir()
    lexicon.write_text("a\n", encoding="utf-8")
    output_dir = tmp_path / "out"
    config = write_config(
        tmp_path,
        tiny_encoder_dir,
        write_train_file(tmp_path, SENTENCES),
        objective="scaled_simcse",
        input_kwargs={"sentence_scales": {"scale": 2.0, "lexicon": str(lexicon)}},
        save_strategy="steps",
        save_steps=2,
    )
    run_unsup.main(["--config", str(config)])

    # The run settings every checkpoint records: the provider's record, by its own names.
    checkpoint = output_dir / "checkpoint-2"
    recorded = json.loads((checkpoint / RUN_SETTINGS_FILE).read_text(encoding="utf-8"))["settings"]
    assert (recorded["objective"], recorded["scale"], recorded["lexicon"]) == ("scaled_simcse", 2.0, str(lexicon))

    # The card, at the end of the run and re-rendered from the checkpoint's training_args.json (hf_cse.push): the
    # same settings, the local file by its name only.
    final = json.loads((output_dir / "hf_cse_training.json").read_text(encoding="utf-8"))["training"]
    from_checkpoint = load_training_summary(checkpoint).training
    for training in (final, from_checkpoint):
        assert (training["scale"], training["lexicon"]) == (2.0, "lexicon.txt (local)")
    card = (output_dir / "README.md").read_text(encoding="utf-8")
    assert "lexicon.txt" in card and "private" not in card

    # A sweep's record of the run (results/NAME.json) reads the same record.
    swept = trained_with(output_dir)
    assert (swept["objective"], swept["training"]["scale"], swept["training"]["lexicon"]) == (
        "scaled_simcse",
        2.0,
        "lexicon.txt (local)",
    )

    # The resume contract: another scale is refused, naming the setting and both values.
    changed = json.dumps({"sentence_scales": {"scale": 3.0, "lexicon": str(lexicon)}})
    with pytest.raises(UsageError, match=r"other settings: scale: 2\.0 -> 3\.0\. Resume with"):
        run_unsup.main(
            ["--config", str(config), "--resume_from_checkpoint", str(checkpoint), "--input_kwargs", changed]
        )


def test_a_checkpoint_from_before_a_provider_recorded_its_settings_resumes_without_them_compared(
    scaled_simcse: None, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """No central list names a provider's settings: any key a provider reports that the checkpoint lacks is not
    compared (as any setting a checkpoint lacks), while one it recorded still is."""
    trainer = make_tiny_trainer(
        tiny_encoder_dir, tmp_path / "a", objective="scaled_simcse", input_kwargs={"sentence_scales": {"scale": 2.0}}
    )
    checkpoint = tmp_path / "checkpoint-2"
    checkpoint.mkdir()
    trainer.run_settings.write(checkpoint)
    other = make_tiny_trainer(
        tiny_encoder_dir, tmp_path / "b", objective="scaled_simcse", input_kwargs={"sentence_scales": {"scale": 3.0}}
    )
    with pytest.raises(UsageError, match=r"scale: 2\.0 -> 3\.0"):
        other.run_settings.check_resume(checkpoint, 2)
    path = checkpoint / RUN_SETTINGS_FILE
    record = json.loads(path.read_text(encoding="utf-8"))
    del record["settings"]["scale"], record["settings"]["lexicon"]
    path.write_text(json.dumps(record), encoding="utf-8")
    other.run_settings.check_resume(checkpoint, 2)
    assert other.run_settings.changes == []


@pytest.mark.parametrize(
    ("input_kwargs", "message"),
    [
        ({"nope": {}}, r"^Unknown input provider 'nope'; valid input providers are: .*negations"),
        ({"negations": {"backend": "rules"}}, r"^Input provider 'negations' got unknown settings \['backend'\] in "),
        ({"negations": {"negation_backend": "regex"}}, r"^Unknown negation_backend 'regex'; valid backends are: auto"),
        ({"negations": "rules"}, r"^input_kwargs\['negations'\] must be an object of settings, got 'rules'\.$"),
        ('{"negations": ', r"^input_kwargs is not valid JSON"),
    ],
)
def test_bad_input_kwargs_are_one_line_errors_when_the_arguments_are_parsed(
    input_kwargs: object, message: str, tmp_path: Path
) -> None:
    with pytest.raises((UsageError, ValueError), match=message) as error:
        CSETrainingArguments(str(tmp_path), input_kwargs=input_kwargs, use_cpu=True)
    assert "\n" not in str(error.value)


def test_settings_of_a_provider_the_run_does_not_use_are_refused(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^input_kwargs sets 'negations', which this run does not use: its "):
        make_tiny_trainer(tiny_encoder_dir, tmp_path, input_kwargs={"negations": {"negation_backend": "rules"}})


def test_a_provider_with_the_old_settings_method_is_refused(
    scaled_simcse: None, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """hf_cse before InputSettings recorded what a provider's ``settings()`` returned; it is no longer called, so a
    provider that still defines it is refused rather than trained with its settings unrecorded."""

    class OldStyle(SentenceScales):
        def settings(self) -> dict[str, float]:
            return {"scale": 1.0}

    INPUT_PROVIDERS._classes["sentence_scales"] = OldStyle
    with pytest.raises(UsageError, match=r"^Input provider 'sentence_scales' defines settings\(\), which hf_cse no "):
        make_tiny_trainer(tiny_encoder_dir, tmp_path, objective="scaled_simcse")


def test_the_views_have_one_maker_per_run(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """The run's view augmentation is applied by the ``augmented_views`` provider, unless the objective's own
    provider makes the views (ESimCSE's word repetition), which then refuses another augmentation."""
    cutoff = make_tiny_trainer(tiny_encoder_dir, tmp_path / "a", view_augmentation="token_cutoff")
    assert isinstance(cutoff.view_maker, AugmentedViews) and isinstance(cutoff.view_maker.augmentation, TokenCutoff)
    recorded = cutoff.run_settings.settings()
    assert (recorded["view_augmentation"], recorded["view_augmentation_kwargs"]) == ("token_cutoff", {"rate": 0.1})
    esimcse = make_tiny_trainer(tiny_encoder_dir, tmp_path / "b", objective="esimcse")
    assert isinstance(esimcse.view_maker, WordRepetitionViews)
    assert esimcse.view_maker is esimcse.input_providers["word_repetition_views"]
    recorded = esimcse.run_settings.settings()
    assert (recorded["view_augmentation"], recorded["view_augmentation_kwargs"]) == ("dropout", {})
    with pytest.raises(UsageError, match=r"makes its views with word repetition; it cannot be combined with view_aug"):
        make_tiny_trainer(tiny_encoder_dir, tmp_path / "c", objective="esimcse", view_augmentation="shuffle")


def test_a_file_named_in_input_kwargs_is_one_of_the_runs_own_inputs(tmp_path: Path) -> None:
    """--overwrite_output_dir never sets aside a folder holding a file the run reads: one named in a provider's
    settings counts, after its ``scheme:`` prefix."""
    tsv = tmp_path / "paraphrases.tsv"
    input_kwargs = {"negations_and_paraphrases": {"paraphrase_source": f"tsv:{tsv}", "negation_backend": "rules"}}
    inputs = run_inputs(CSETrainingArguments(str(tmp_path / "out"), input_kwargs=input_kwargs, use_cpu=True))
    assert inputs["input_kwargs negations_and_paraphrases.paraphrase_source"] == str(tsv)


def test_a_model_or_file_named_in_input_kwargs_is_checked_before_anything_loads(tmp_path: Path) -> None:
    """Each provider the run builds checks what its settings name (``check_inputs``), the message naming the
    setting as given."""
    absent = tmp_path / "no_such_model"
    given = {"complementary_similarities": {"model_name_or_path": str(absent)}}
    with pytest.raises(UsageError, match=r"^input_kwargs complementary_similarities\.model_name_or_path '.*' is not"):
        check_input_paths(
            CSETrainingArguments(str(tmp_path / "out"), objective="dclr", input_kwargs=given, use_cpu=True)
        )
    given = {"negations_and_paraphrases": {"paraphrase_source": f"tsv:{tmp_path}"}}
    with pytest.raises(UsageError, match=r"^input_kwargs negations_and_paraphrases\.paraphrase_source .* is a folder"):
        check_input_paths(
            CSETrainingArguments(str(tmp_path / "out"), objective="osscse", input_kwargs=given, use_cpu=True)
        )
