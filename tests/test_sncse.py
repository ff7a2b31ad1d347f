"""SNCSE: its BML term against a row-by-row reference written from the paper's equation, its two templates and the
negation under the second as its code makes them, and short trainings (from Python, by name from the CLI), with the
one-line refusal of a second term that also reads the negations."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from common.commands import train_from_a_config
from common.training_checks import changed_parameters
from conftest import SENTENCES
from datasets import Dataset
from transformers import AutoTokenizer

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig
from hf_cse.errors import UsageError
from hf_cse.objectives import StepInputs, build_auxiliary_loss


def naive_bml(z1, z2, z3, alpha, beta):
    """SNCSE's BML, one row at a time."""
    total = 0.0
    for i in range(len(z1)):
        delta = torch.cosine_similarity(z1[i], z3[i], dim=0).item() - torch.cosine_similarity(z1[i], z2[i], dim=0)
        total += max(delta.item() + alpha, 0.0) + max(-delta.item() - beta, 0.0)
    return total / len(z1)


def test_bml_matches_the_row_by_row_reference_with_gradients() -> None:
    torch.manual_seed(2)
    z1, z2, z3 = (torch.randn(6, 5, dtype=torch.float64) for _ in range(3))
    term = build_auxiliary_loss("bml")
    flags = torch.ones(6, dtype=torch.bool)
    inputs = StepInputs(z1, z2, negations=z3, has_negation=flags)
    assert term(inputs).loss.item() == pytest.approx(naive_bml(z1, z2, z3, 0.1, 0.3))
    z3.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda n: term(inputs.replace(negations=n)).loss, (z3,))
    flags[1:] = False  # rows without a negation are skipped and counted
    output = term(inputs.replace(has_negation=flags))
    assert output.loss.item() == pytest.approx(naive_bml(z1[:1], z2[:1], z3[:1].detach(), 0.1, 0.3))
    assert output.logs["bml_rows_skipped"].item() == 5


def sncse_trainer(encoder_dir: Path, output_dir: Path, **overrides) -> CSETrainer:
    torch.manual_seed(0)
    args = {"output_dir": str(output_dir), "per_device_train_batch_size": 4, "learning_rate": 1e-3, "max_steps": 2}
    args.update(logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, seed=0, objective="sncse")
    args.update({"input_kwargs": {"negations": {"negation_backend": "rules"}}, **overrides})
    return CSETrainer(
        model=CSEModel.from_pretrained(encoder_dir, pooling=PoolingConfig(pooler="mask")),
        args=CSETrainingArguments(**args),
        train_dataset=Dataset.from_dict({"text": SENTENCES}),
        processing_class=AutoTokenizer.from_pretrained(encoder_dir),
    )


def test_sncse_trains_by_name_with_the_bml_term(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    trainer = sncse_trainer(tiny_encoder_dir, tmp_path)
    assert set(trainer.auxiliary_losses) == {"bml"} and trainer.auxiliary_losses["bml"][1] == 1e-3
    changed, total = changed_parameters(trainer)
    assert changed >= total - 1  # the encoder's frozen NSP pooler aside
    assert any("loss_bml" in entry for entry in trainer.state.log_history)


def test_sncse_with_osscse_margin_is_one_line_saying_which_term_to_drop(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """bml's ``negations`` provider and margin's ``negations_and_paraphrases`` both give ``negations``: refused when
    the trainer is built, before the corpus is negated, with the way out; taking that way trains."""
    margin = {"margin": {"weight": 1e-3, "alpha": 0.05, "beta": 0.2}}
    with pytest.raises(UsageError) as refused:
        sncse_trainer(tiny_encoder_dir, tmp_path, auxiliary_losses=margin)
    message = str(refused.value)
    assert "\n" not in message
    assert "Auxiliary loss 'bml' needs input provider 'negations' and auxiliary loss 'margin' needs" in message
    assert (
        'drop one (auxiliary_losses {"bml": {"weight": 0}} or auxiliary_losses {"margin": {"weight": 0}})' in message
    )
    trainer = sncse_trainer(
        tiny_encoder_dir,
        tmp_path,
        auxiliary_losses={**margin, "bml": {"weight": 0}},
        input_kwargs={"negations_and_paraphrases": {"negation_backend": "rules"}},
    )
    assert set(trainer.auxiliary_losses) == {"margin"}
    trainer.train()


def test_sncse_trains_by_name_from_the_cli_and_the_card_cites_the_paper(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    negator = {"negations": {"negation_backend": "rules"}}
    card = train_from_a_config(tiny_encoder_dir, tmp_path, objective="sncse", pooler="mask", input_kwargs=negator)
    assert "@article{wang2022sncse" in card


def test_sncse_takes_two_templates_and_the_negation_under_the_second_as_its_code(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """train_SNCSE.py: view 1 ``This sentence : ...``, view 2 and the negation ``This sentence of ...``."""
    trainer = sncse_trainer(tiny_encoder_dir, tmp_path)
    assert set(trainer.input_providers) == {"prompt_template_views", "negations"}
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    row = trainer.train_dataset[0]

    def prefix(ids: list[int]) -> str:  # the template's words before the sentence
        return tokenizer.decode(ids, skip_special_tokens=True).split('"')[0].strip()

    assert prefix(row["input_ids"]) == "this sentence :"
    assert prefix(row["second_view.input_ids"]) == prefix(row["negation.input_ids"]) == "this sentence of"
    assert row["has_negation"] and row["negation.input_ids"] != row["second_view.input_ids"]

    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="mask", template_denoising=True))
    with pytest.raises(UsageError, match="set template_denoising false"):
        CSETrainer(
            model=model,
            args=CSETrainingArguments(
                str(tmp_path / "d"),
                objective="sncse",
                input_kwargs={"negations": {"negation_backend": "rules"}},
                use_cpu=True,
            ),
            train_dataset=Dataset.from_dict({"text": SENTENCES}),
            processing_class=tokenizer,
        )
