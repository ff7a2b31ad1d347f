"""Why the card's Markdown is built in Python (:mod:`hf_cse.export.model_card.render`) and only its YAML front
matter by huggingface_hub (``ModelCardData``): what ``ModelCard.from_template``, the library's templating, does with
a template's values and blocks. It renders a bare ``jinja2.Template`` with no way to set filters or whitespace
options, so a value reaches the Markdown unquoted, a false ``{% if %}`` block leaves its line behind, and the last
line break is dropped; the card's own functions quote each value for its place and join sections without blank runs.
"""

from __future__ import annotations

import re
from pathlib import Path

from conftest import training_args
from huggingface_hub import ModelCard, ModelCardData

from hf_cse import PoolingConfig, build_objective
from hf_cse.export.model_card import render_card_from_summary, summarize_training
from hf_cse.markdown import code_span, table
from hf_cse.training.run_arguments import training_arguments_record

TEMPLATE = (
    "---\n{{ card_data }}\n---\n\n# {{ model_name }}\n\n{% if lora %}\n- LoRA: {{ lora }}\n{% endif %}\n"
    "| setting | value |\n|---|---|\n| train_data | {{ train_data }} |\n"
)
TRAIN_DATA = "data/news|sports.txt"  # a file name a user may give; "|" ends a table cell


def cells(row: str) -> list[str]:
    """The cells of a Markdown table row, split where GitHub's renderer splits them: at each unescaped ``|``."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def templated_card() -> ModelCard:
    return ModelCard.from_template(
        ModelCardData(license="apache-2.0"), template_str=TEMPLATE, model_name="tiny", lora=None, train_data=TRAIN_DATA
    )


def test_templating_passes_values_unquoted_where_the_cards_table_quotes_them() -> None:
    row = templated_card().text.splitlines()[-1]
    assert cells(row) == ["train_data", "data/news", "sports.txt"]  # three cells under a two-column header
    ours = table(
        ("setting", "value"), [(code_span("train_data", in_table=True), code_span(TRAIN_DATA, in_table=True))]
    )
    assert cells(ours.splitlines()[-1]) == ["`train_data`", "`data/news\\|sports.txt`"]


def test_templating_leaves_a_false_blocks_lines_and_drops_the_last_line_break(tmp_path: Path) -> None:
    card = templated_card()
    assert "# tiny\n\n\n| setting" in card.text  # the {% if lora %} block, false, left a blank line
    assert not str(card).endswith("\n")
    args = training_args(tmp_path)
    objective = build_objective("simcse", temperature=0.05)
    summary = summarize_training(PoolingConfig(pooler="avg"), training_arguments_record(args), objective, {}, [])
    ours = render_card_from_summary(summary, "someone/model")  # no LoRA: no LoRA line, and no blank line for it
    assert "LoRA" not in ours and "\n\n\n" not in ours.split("\n---\n", 1)[1]
    assert ours.endswith("\n") and not ours.endswith("\n\n")
