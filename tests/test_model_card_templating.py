"""The card is a Jinja2 template (``hf_cse/export/model_card/template.md``) under huggingface_hub's ``ModelCardData``
front matter: every value reaches the Markdown escaped for its place (a value printed without a filter as text, by
default), a false block leaves no line behind, the card ends in one line break, the template ships in the wheel, and
the usage code shows the sentence-transformers prompts saved with the model."""

from __future__ import annotations

import ast
import configparser
import fnmatch
import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO_ROOT, training_args
from huggingface_hub import ModelCard

from hf_cse import PoolingConfig, build_objective
from hf_cse.export.model_card import (
    CardOptions,
    SentenceTransformerPrompts,
    TrainingSummary,
    render_card_from_summary,
    summarize_training,
    write_model_card,
)
from hf_cse.export.model_card.templating import ENVIRONMENT
from hf_cse.markdown import code_span, markdown_text
from hf_cse.training.record.run_arguments import training_arguments_record

TRAIN_DATA = "data/news|sports_*v2*.txt"  # a file name a user may give: "|" ends a table cell, "*" emphasizes


def cells(row: str) -> list[str]:
    """The cells of a Markdown table row, split where GitHub's renderer splits them: at each unescaped ``|``."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def summary_of(tmp_path: Path, pooler: str = "avg") -> TrainingSummary:
    objective = build_objective("simcse", temperature=0.05)
    record = training_arguments_record(training_args(tmp_path))
    return summarize_training(PoolingConfig(pooler=pooler), record, objective, {}, [], dataset=TRAIN_DATA)


def test_a_value_printed_without_a_filter_is_markdown_escaped_and_filters_quote_for_their_place() -> None:
    template = ENVIRONMENT.from_string("{{ value }}|{{ value|code }}|{{ value|cell }}|{{ value|python }}\n")
    value = "a|b *c* <d>\n`e`"
    assert template.render(value=value) == (
        f"{markdown_text(value)}|{code_span(value)}|{code_span(value, in_table=True)}|{json.dumps(value)}\n"
    )
    assert markdown_text(value) == r"a\|b \*c\* \<d\>\n\`e\`"  # no markup can start, on one line
    joined = ENVIRONMENT.from_string('{{ items|join(", ") }}').render(items=["*x*", "y"])
    assert joined == r"\*x\*, y"  # each item escaped; a filter's Markdown is joined as it is
    assert ENVIRONMENT.from_string('{{ items|map("code")|join(", ") }}').render(items=["*x*"]) == "`*x*`"


def test_user_strings_stay_in_their_table_cell_title_and_code(tmp_path: Path) -> None:
    summary = summary_of(tmp_path)
    summary.training["text_file"] = TRAIN_DATA  # a setting's value in the table of training settings
    card = render_card_from_summary(summary, "someone/model *v2*")
    assert "\n# someone/model \\*v2\\*\n" in card and f"- **Training data**: {code_span(TRAIN_DATA)}\n" in card
    row = next(line for line in card.splitlines() if line.startswith("| `text_file`"))
    assert cells(row) == ["`text_file`", "`data/news\\|sports_*v2*.txt`"]  # two cells, the name whole
    assert 'SentenceTransformer("someone/model *v2*")' in card  # a Python string literal in code, not escaped
    assert ModelCard(card).data.model_name is None  # no scores: no model-index, and the front matter parses


def test_a_false_block_leaves_no_line_and_the_card_ends_in_one_line_break(tmp_path: Path) -> None:
    card = render_card_from_summary(summary_of(tmp_path), "someone/model")
    assert "LoRA" not in card and "\n\n\n" not in card.split("\n---\n", 1)[1]  # no LoRA: no line, no blank run
    assert card.endswith("```\n") and not card.endswith("\n\n")


def test_the_template_ships_in_the_wheel() -> None:
    """setup.cfg's package data names the template, so a wheel (not only a checkout) renders cards."""
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / "setup.cfg")
    patterns = [p.strip() for p in config["options.package_data"]["hf_cse"].replace("\n", ",").split(",")]
    template = "export/model_card/template.md"
    assert (REPO_ROOT / "hf_cse" / template).is_file()
    assert any(fnmatch.fnmatch(template, pattern) for pattern in patterns if pattern)


def saved_model_with_prompts(source: Path, folder: Path, prompts: dict[str, str], default: str | None) -> Path:
    """A copy of the tiny saved encoder with a sentence-transformers config holding ``prompts``."""
    shutil.copytree(source, folder)
    config = {"prompts": prompts, "default_prompt_name": default, "similarity_fn_name": "cosine"}
    (folder / "config_sentence_transformers.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def test_the_usage_code_encodes_queries_with_the_saved_instruction(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    instruction = "Given a question, retrieve passages | that answer it: "
    prompts = {"document": "", "query": instruction}
    folder = saved_model_with_prompts(tiny_encoder_dir, tmp_path / "model", prompts, default=None)
    card = write_model_card(folder, summary_of(tmp_path), "someone/model").read_text(encoding="utf-8")
    row = next(line for line in card.splitlines() if line.startswith("| `query`"))
    assert cells(row) == ["`query`", code_span(instruction, in_table=True)]
    document = next(line for line in card.splitlines() if line.startswith("| `document`"))
    assert cells(document) == ["`document`", "_none_"]
    code = card.split("Encode queries with theirs:", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    call = ast.parse(code).body[0].value
    assert ast.unparse(call.func) == "model.encode"
    assert [(k.arg, ast.literal_eval(k.value)) for k in call.keywords] == [("prompt_name", "query")]
    assert "when given none" not in card  # no default prompt


def test_a_default_prompt_is_named_and_a_model_without_instruction_shows_none(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    folder = saved_model_with_prompts(tiny_encoder_dir, tmp_path / "a", {"q": "Query: "}, default="q")
    card = write_model_card(folder, summary_of(tmp_path), "someone/model").read_text(encoding="utf-8")
    assert "(`q` when given none)" in card and 'prompt_name="q")' in card
    empty = saved_model_with_prompts(tiny_encoder_dir, tmp_path / "b", {"query": "", "document": ""}, default=None)
    assert "prompt_name" not in write_model_card(empty, summary_of(tmp_path), "x").read_text(encoding="utf-8")
    plain = tmp_path / "c"
    shutil.copytree(tiny_encoder_dir, plain)
    assert "prompt_name" not in write_model_card(plain, summary_of(tmp_path), "x").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "config",
    [{"prompts": ["Query: "]}, {"prompts": {"query": 1}}, {"prompts": {"q": "Q: "}, "default_prompt_name": "z"}],
)
def test_a_malformed_prompt_config_leaves_the_prompts_out_with_a_warning(
    tmp_path: Path, config: dict, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "config_sentence_transformers.json").write_text(json.dumps(config), encoding="utf-8")
    card = write_model_card(tmp_path, summary_of(tmp_path), "x").read_text(encoding="utf-8")
    assert "prompt_name" not in card
    assert "The card shows no sentence-transformers prompt" in caplog.text


def test_options_prompts_override_the_folders(tmp_path: Path) -> None:
    options = CardOptions(prompts=SentenceTransformerPrompts({"query": "Search: "}))
    card = render_card_from_summary(summary_of(tmp_path), "x", options)
    assert "| `query` | `Search: ` |" in card
    # A pooler sentence-transformers cannot express has no SentenceTransformer model to call encode on.
    assert "prompt_name" not in render_card_from_summary(summary_of(tmp_path, pooler="mask"), "x", options)


def python_blocks(card: str, after: str) -> str:
    """The first ```python block of ``card`` after the line ``after``."""
    return card.split(f"\n{after}\n", 1)[1].split("```python\n", 1)[1].split("\n```", 1)[0]


def test_the_card_of_a_model_saved_with_an_instruction_encodes_queries_as_its_code_says(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """Through the real save (the instruction in ``config.json`` and sentence-transformers' prompts): the card's
    hf_cse and sentence-transformers code runs on the saved folder, and its queries are the instruction's encoding,
    not the plain sentences'."""
    import torch

    from hf_cse import CSEModel, SentenceEncoder
    from hf_cse.export.model_card.snippets import EXAMPLE_SENTENCES
    from hf_cse.export.sentence_transformers_files import write_sentence_transformers_files

    pooling = PoolingConfig(pooler="avg", instruction="Given a question, retrieve its answer: ")
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=pooling)
    folder = tmp_path / "saved"
    model.save_pretrained(folder)
    shutil.copy(tiny_encoder_dir / "tokenizer.json", folder)
    for name in ("tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (tiny_encoder_dir / name).is_file():
            shutil.copy(tiny_encoder_dir / name, folder)
    write_sentence_transformers_files(folder, model, max_seq_length=128)  # instruction + sentence untruncated
    summary = summarize_training(
        model.pooling, training_arguments_record(training_args(tmp_path)), build_objective("simcse"), {}, []
    )
    card = write_model_card(folder, summary, str(folder)).read_text(encoding="utf-8")
    expected = SentenceEncoder.from_pretrained(folder).encode(EXAMPLE_SENTENCES, prompt_name="query")
    hf_cse_code: dict = {}
    exec(python_blocks(card, "With hf_cse installed:"), hf_cse_code)
    torch.testing.assert_close(hf_cse_code["queries"], expected, rtol=0, atol=0)  # the same batch, the same code
    assert not torch.equal(hf_cse_code["queries"], hf_cse_code["embeddings"])
    pytest.importorskip("sentence_transformers")
    st_code: dict = {}
    exec(python_blocks(card, "With sentence-transformers:"), st_code)
    exec(python_blocks(card, "| `document` | _none_ |"), st_code)
    # float32 through another forward: sentence-transformers pools in its own code, within float32 rounding.
    queries = torch.as_tensor(st_code["queries"])
    torch.testing.assert_close(queries, expected.to(queries.dtype))
