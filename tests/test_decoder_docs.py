"""The decoder docs run as written (issue 54, item 5): every command of the command blocks of docs/decoders.md and
docs/objectives/mntp.md, read from the pages (so a page cannot drift from what runs), on a tiny random model of the
family it names, the Hub model id and the data replaced and the run cut to 2 steps of batch 4; and for every family
the blocks name, each decoder refusal is one line, raised before training, that names its fix.

The Qwen3 recipe of mntp.md failed as written: it omitted ``--pooler avg`` (the default ``cls`` is refused on a causal
model), gave ``--bidirectional true`` to Qwen3 (refused), and a run of MNTP from an exported folder is refused too."""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path

import pytest
from conftest import REPO_ROOT, SENTENCES, run_unsup, write_config, write_train_file
from transformers import AutoConfig, AutoModel, AutoTokenizer

from hf_cse.errors import UsageError
from hf_cse.modeling.backbone import BIDIRECTIONAL_FIELD, bidirectional_model_types

PAGES = (REPO_ROOT / "docs" / "decoders.md", REPO_ROOT / "docs" / "objectives" / "mntp.md")

HUB_FAMILIES = {"Qwen/Qwen3-0.6B": "qwen3", "meta-llama/Llama-3.2-1B": "llama", "google/gemma-3-1b-pt": "gemma3_text"}
"""The model ids the pages' commands name, by the family of conftest's tiny decoder that stands for each."""

TRAIN_FILE = "data/wiki1m_for_simcse.txt"
OUTPUTS = "outputs/"
TINY_RUN = ["--max_steps", "2", "--per_device_train_batch_size", "4", "--logging_steps", "1"]
TINY_RUN += ["--save_strategy", "no", "--report_to", "none", "--use_cpu", "true"]
"""Appended to each command (the last of a repeated flag wins): the run cut to 2 steps of batch 4 on the CPU."""


def command_blocks(page: Path) -> list[list[list[str]]]:
    """The ``bash`` blocks of ``page``, each a list of its commands' argument lists (continuation lines joined)."""
    blocks = re.findall(r"^```bash\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    joined = [block.replace("\\\n", " ") for block in blocks]
    return [[shlex.split(line) for line in block.splitlines() if line.strip()] for block in joined]


BLOCKS = [(page, block) for page in PAGES for block in command_blocks(page)]


def named_models(block: list[list[str]]) -> list[str]:
    """The Hub model ids of ``block``'s commands (the others start from an earlier command's output folder)."""
    return [
        argv[argv.index("--model_name_or_path") + 1]
        for argv in block
        if not argv[argv.index("--model_name_or_path") + 1].startswith(OUTPUTS)
    ]


FAMILIES = sorted({HUB_FAMILIES.get(model, model) for _, block in BLOCKS for model in named_models(block)})
"""Every family the pages' commands name."""


def as_run(argv: list[str], models: dict[str, Path], tmp_path: Path) -> list[str]:
    """``argv`` (``python run_unsup.py ...``) as ``run_unsup.main``'s arguments on the tiny models: each Hub id by its
    family's tiny model, ``outputs/`` under ``tmp_path``, the training file by the test sentences; then
    :data:`TINY_RUN`."""
    assert argv[:2] == ["python", "run_unsup.py"], argv
    replaced = []
    for flag, value in zip(argv[2:], argv[3:] + [""], strict=True):
        if flag == "--model_name_or_path" and not value.startswith(OUTPUTS):
            assert value in HUB_FAMILIES, f"the docs name {value}, whose family this test does not build"
            value = str(models[HUB_FAMILIES[value]])
        elif value.startswith(OUTPUTS):
            value = str(tmp_path / value)
        elif value == TRAIN_FILE:
            value = str(write_train_file(tmp_path, SENTENCES))
        replaced.append(value)
    return [argv[2], *replaced[:-1], *TINY_RUN]


@pytest.mark.parametrize(("page", "block"), BLOCKS, ids=[f"{p.stem}-{i}" for i, (p, _) in enumerate(BLOCKS)])
def test_every_decoder_docs_command_runs_as_written(
    page: Path, block: list[list[str]], tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    for argv in block:
        arguments = as_run(argv, tiny_decoder_dirs, tmp_path)
        metrics = run_unsup.main(arguments)
        assert math.isfinite(metrics["train_loss"])
        out = Path(arguments[arguments.index("--output_dir") + 1])
        model = Path(arguments[arguments.index("--model_name_or_path") + 1])
        config = json.loads((out / "config.json").read_text(encoding="utf-8"))
        if json.loads((model / "config.json").read_text(encoding="utf-8")).get(BIDIRECTIONAL_FIELD):
            assert config[BIDIRECTIONAL_FIELD] is True  # a bidirectional start trains and saves bidirectional


def test_the_pages_have_commands_for_each_tested_decoder_family() -> None:
    assert set(FAMILIES) == set(HUB_FAMILIES.values())
    assert {page for page, _ in BLOCKS} == set(PAGES)


def refusals(family: str) -> dict[str, tuple[dict, str]]:
    """The decoder refusals that apply to ``family``: each case's settings (``base`` stands for an exported plain
    encoder of the family) and the fix its line must name."""
    cases = {
        "cls-pooler": ({"pooler": "cls"}, "Use a pooler that sees the whole sentence ('avg'"),
        "equal-views": ({"dropout": None}, "Set --dropout 0.1"),
    }
    # conftest's tiny decoders keep their config class's tie_word_embeddings; a tied head is exported with the encoder
    if not AutoConfig.for_model(family).tie_word_embeddings:
        cases["mntp-from-an-exported-encoder"] = (
            {"objective": "mntp", "model": "base"},
            "start from the causal LM's checkpoint, not from an exported encoder",
        )
    if family not in bidirectional_model_types():
        cases["bidirectional"] = ({"bidirectional": True}, "Leave --bidirectional unset")
    if family != "gemma3_text":  # conftest's tiny Gemma 3 tokenizer has a mask token, the others none
        cases["mask-pooler"] = ({"pooler": "mask"}, "use pooler='prompt_last_token' or 'last_token'")
        cases["mask-second-template"] = (
            {"objective": "promptbert", "pooler": "prompt_last_token"},
            """One that does: --objective_kwargs '{"second_prompt_template": """,
        )
    return cases


REFUSALS = [(family, case) for family in FAMILIES for case in refusals(family)]


@pytest.mark.parametrize(("family", "case"), REFUSALS, ids=[f"{f}-{c}" for f, c in REFUSALS])
def test_each_decoder_refusal_is_one_line_before_training_naming_its_fix(
    family: str, case: str, tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    settings, fix = refusals(family)[case]
    settings = {"pooler": "avg", "dropout": 0.1, **settings}
    model_dir = tiny_decoder_dirs[family]
    if settings.pop("model", None) == "base":  # what an hf_cse run's root is: the encoder without its LM head
        model_dir = tmp_path / "exported"
        AutoModel.from_pretrained(tiny_decoder_dirs[family]).save_pretrained(model_dir)
        AutoTokenizer.from_pretrained(tiny_decoder_dirs[family]).save_pretrained(model_dir)
    settings = {key: value for key, value in settings.items() if value is not None}
    config = write_config(tmp_path, model_dir, write_train_file(tmp_path, SENTENCES), **settings)
    with pytest.raises((UsageError, ValueError)) as error:
        run_unsup.main(["--config", str(config)])
    message = str(error.value)
    assert "\n" not in message and fix in message, message
    assert not (tmp_path / "out" / "config.json").exists() and not (tmp_path / "out" / "trainer_state.json").exists()
