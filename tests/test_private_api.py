"""The private argparse and ``HfArgumentParser`` names hf_cse relies on (issue 53 item 1), each with a test that fails,
naming it, on the Python or transformers release that renames it or changes its signature, and a test of the
behaviour it gives, which would silently stop otherwise (an override of a renamed method is never called).

- ``argparse.ArgumentParser._get_value(action, arg_string)`` and ``_check_value(action, value)``, overridden by
  ``CSEArgumentParser`` to cut a long unconvertible value in the one-line error;
- ``HfArgumentParser._add_dataclass_arguments(dtype)``, overridden by ``CSEArgumentParser`` to split a
  ``TrainingArguments`` subclass into two help groups, and ``HfArgumentParser._parse_dataclass_field(parser, field)``,
  which it calls to add each field's flags;
- ``argparse.ArgumentParser._actions``, the parser's list of actions (no public accessor lists a parser's flags):
  read by ``CSEArgumentParser`` for the near-miss hint and by ``python -m hf_cse.sweep`` to map each flag to its
  field (:class:`~hf_cse.sweeps.arguments.RunUnsupArguments`);
- the model's, tqdm's and mteb's: a transformers model's ``_init_weights(module)`` (``CSEModel._init_weights``
  hands the encoder's modules to it), ``tqdm._instances`` (``SentenceEncoder.encode``: is a bar already open?) and
  mteb's ``TaskMetadata._hf_task_type()`` (the Hub task type of an MTEB score).
"""

from __future__ import annotations

import argparse
import inspect

import pytest
import torch
from conftest import REPO_ROOT, run_unsup, tiny_config
from transformers import HfArgumentParser

from hf_cse.errors import UsageError
from hf_cse.sweeps.arguments import RunUnsupArguments
from hf_cse.training.arguments.parser import TRAINER_GROUP, TRAINING_GROUP

PRIVATE_SIGNATURES = {
    "argparse.ArgumentParser._get_value": (argparse.ArgumentParser, "_get_value", ["self", "action", "arg_string"]),
    "argparse.ArgumentParser._check_value": (argparse.ArgumentParser, "_check_value", ["self", "action", "value"]),
    "HfArgumentParser._add_dataclass_arguments": (HfArgumentParser, "_add_dataclass_arguments", ["self", "dtype"]),
    "HfArgumentParser._parse_dataclass_field": (HfArgumentParser, "_parse_dataclass_field", ["parser", "field"]),
}


@pytest.mark.parametrize("name", list(PRIVATE_SIGNATURES))
def test_each_private_method_relied_on_is_there_with_its_parameters(name: str) -> None:
    owner, attribute, parameters = PRIVATE_SIGNATURES[name]
    method = getattr(owner, attribute, None)
    assert method is not None, f"{name} is gone: hf_cse.training.arguments.parser.CSEArgumentParser relies on it."
    assert list(inspect.signature(method).parameters) == parameters, (
        f"{name} takes other parameters now: CSEArgumentParser's use of it must follow."
    )


def test_the_value_hooks_still_cut_a_long_value_in_the_error() -> None:
    """``_get_value`` (an int flag given text) and ``_check_value`` (no choice of an enum flag) are where argparse
    raises; their overrides cut the value, which would otherwise fill the line whole."""
    parser = run_unsup.build_parser()
    for flag, value in (("--max_steps", "9" * 300 + "x"), ("--lr_scheduler_type", "y" * 300)):
        with pytest.raises(UsageError) as error:
            parser.parse_args_into_dataclasses([flag, value])
        assert value not in str(error.value) and " characters)" in str(error.value), (
            f"{flag}: the value is whole in the error: argparse's _get_value/_check_value are no longer reached"
        )


def test_add_dataclass_arguments_still_splits_the_training_arguments_in_two_help_groups() -> None:
    """Without the override called, ``--help`` would list every Trainer flag in one group after hf_cse's."""
    text = run_unsup.build_parser().format_help()
    assert f"{TRAINING_GROUP}:" in text and f"{TRAINER_GROUP}:" in text, "_add_dataclass_arguments not reached"
    assert text.index(f"{TRAINING_GROUP}:") < text.index("--temperature") < text.index(f"{TRAINER_GROUP}:")
    assert "--ddp_timeout" not in text  # a rare Trainer flag, listed by --help_all only
    assert "--ddp_timeout" in run_unsup.build_parser(show_all_trainer_flags=True).format_help()


def test_the_actions_list_names_every_flag() -> None:
    """``_actions`` gives the near-miss hint of a misspelt flag, and the sweep's map from each spelling of a flag
    (``--max-steps``, ``--no_mlp_only_train``) to its field."""
    with pytest.raises(UsageError, match=r"; did you mean --learning_rate"):
        run_unsup.build_parser().parse_args_into_dataclasses(["--lerning_rate", "1e-4"])
    dests = RunUnsupArguments(REPO_ROOT / "run_unsup.py").dests
    assert (dests["--max-steps"], dests["--no_mlp_only_train"], dests["--pooler"]) == (
        "max_steps", "mlp_only_train", "pooler"
    )  # fmt: skip


# --- privates of the model, tqdm and mteb ---------------------------------------------------------------------------


def test_the_encoders_init_weights_hook_is_there_and_initializes_a_linear_layer() -> None:
    """``CSEModel._init_weights`` hands every module but its MLP head to the encoder's own ``_init_weights(module)``
    (transformers' per-model initialization hook, which ``post_init`` calls): renamed, a model built from a config
    would keep torch's default initialization silently."""
    from transformers import AutoModel, BertConfig

    config = tiny_config(BertConfig)
    encoder = AutoModel.from_config(config)
    assert list(inspect.signature(type(encoder)._init_weights).parameters) == ["self", "module"], (
        "PreTrainedModel._init_weights(module) takes other parameters now: CSEModel._init_weights must follow."
    )
    torch.manual_seed(0)
    layer = torch.nn.Linear(64, 64)
    torch.nn.init.constant_(layer.weight, 1.0)
    torch.nn.init.constant_(layer.bias, 1.0)
    encoder._init_weights(layer)
    # normal(0, initializer_range), n = 4096 draws (seeded): the sample spread is within 5 standard errors
    # (std / sqrt(2n)) of it; torch's default init (uniform, bound 1/8) and the constant 1 are far outside.
    std = config.initializer_range
    assert abs(layer.weight.std().item() - std) < 5 * std / (2 * layer.weight.numel()) ** 0.5
    assert torch.equal(layer.bias, torch.zeros_like(layer.bias))


def test_tqdm_still_lists_its_open_bars() -> None:
    """``SentenceEncoder.encode`` reads ``tqdm._instances`` (tqdm's registry of open bars; no public accessor) to
    leave its bar out when nested under another in a log: gone, encode would draw ``[A`` escapes into logs again."""
    from tqdm import tqdm as tqdm_base
    from transformers.utils.logging import tqdm as transformers_tqdm

    assert hasattr(tqdm_base, "_instances"), "tqdm._instances is gone: hf_cse.modeling.encoder relies on it"
    with transformers_tqdm(total=1, disable=False) as bar:
        assert bar in tqdm_base._instances, "tqdm._instances no longer lists an open bar: encoder.py relies on it"


def test_mteb_still_maps_its_task_types_to_the_hubs() -> None:
    """``python -m hf_cse.eval --mteb_tasks`` files each score under the Hub task type mteb's own Hub export uses,
    ``TaskMetadata._hf_task_type()`` (no public name)."""
    mteb = pytest.importorskip("mteb")
    metadata = mteb.get_task("STSBenchmark").metadata
    assert metadata._hf_task_type()[0] == "sentence-similarity", (
        "mteb's TaskMetadata._hf_task_type() changed: hf_cse.evaluation.mteb_encoder relies on it."
    )
