"""``run_unsup.py``'s model flags build the pooling, the backbone's settings and the LoRA adapter from the parts' own
fields (issue 53 item 2): no flag is copied into a part by hand, and a field added to a part and to the flags reaches
the part from the command line with no list edited."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import pytest
from conftest import run_unsup
from peft import LoraConfig

from hf_cse import PoolingConfig
from hf_cse.modeling.backbone import BackboneSettings
from hf_cse.training.arguments import model_data
from hf_cse.training.arguments.model_data import RENAMED_FLAGS, ModelArguments

PARTS = (PoolingConfig, BackboneSettings, LoraConfig)


def command_line(tmp_path: Path, *flags: str) -> list[str]:
    """A command line of ``run_unsup.py`` with the required flags and ``flags`` (nothing is read: parsing only)."""
    required = ["--model_name_or_path", "tiny", "--train_file", "corpus.txt", "--output_dir", str(tmp_path / "out")]
    return [*required, "--use_cpu", "true", *flags]


def test_each_flag_sets_one_part_by_its_field() -> None:
    """Every model flag but the model's name and padding-free packing sets the field of one part: a flag that two
    parts took would set both."""
    flags = ModelArguments()
    taken = [set(flags.values_for(part)) for part in PARTS]
    parts_of = {
        flag.name: sum(RENAMED_FLAGS.get(flag.name, flag.name) in names for names in taken)
        for flag in fields(ModelArguments)
    }
    assert {flag for flag, parts in parts_of.items() if parts != 1} == {"model_name_or_path", "padding_free"}


def test_the_flags_reach_each_part(tmp_path: Path) -> None:
    """Each flag, renamed ones included, sets its part's field; ``--pooler_kwargs`` is parsed from its JSON."""
    flags = [
        *("--pooler", "avg", "--normalize_embeddings", "true", "--inference_max_seq_length", "48"),
        *("--pooler_kwargs", '{"tokens": "all"}', "--instruction", "Query: ", "--mlp_only_train", "false"),
        *("--dropout", "0.2", "--torch_dtype", "bfloat16", "--bidirectional", "false"),
        *("--lora_r", "4", "--lora_alpha", "8", "--lora_dropout", "0.1", "--lora_target_modules", "query", "key"),
    ]
    model_args = run_unsup.parse_args(command_line(tmp_path, *flags))[0]
    pooling = model_args.pooling_config()
    assert (pooling.pooler, pooling.normalize, pooling.max_seq_length, pooling.pooler_kwargs) == (
        "avg", True, 48, {"tokens": "all"}
    )  # fmt: skip
    assert (pooling.instruction, pooling.mlp_only_train) == ("Query: ", False)
    backbone = model_args.backbone_settings()
    assert (backbone.dropout, backbone.torch_dtype, backbone.bidirectional) == (0.2, "bfloat16", False)
    lora = model_args.lora_config()
    assert (lora.r, lora.lora_alpha, lora.lora_dropout, sorted(lora.target_modules)) == (4, 8, 0.1, ["key", "query"])
    assert run_unsup.parse_args(command_line(tmp_path))[0].lora_config() is None


@dataclass
class ScaledPooling(PoolingConfig):
    """The pooling with a field no list names, as a later hf_cse adds one."""

    scale: float = 1.0


@dataclass
class ArgumentsWithScale(ModelArguments):
    """The model flags with that field's flag."""

    scale: float = 1.0


def test_a_field_added_to_the_pooling_reaches_it_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A field added to ``PoolingConfig`` and given a flag is set from the command line, and reaches no other part:
    nothing lists the fields the flags copy."""
    monkeypatch.setattr(model_data, "PoolingConfig", ScaledPooling)
    monkeypatch.setattr(run_unsup, "ModelArguments", ArgumentsWithScale)
    model_args = run_unsup.parse_args(command_line(tmp_path, "--scale", "2.5", "--lora_r", "2"))[0]
    assert model_args.pooling_config().scale == 2.5
    assert "scale" not in model_args.values_for(BackboneSettings) and "scale" not in model_args.values_for(LoraConfig)
