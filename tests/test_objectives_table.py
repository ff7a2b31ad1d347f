"""The objectives' table at the top of docs/objectives/index.md is the registry's (issue 56 item 10): one row per
built-in objective of ``hf_cse.registry.OBJECTIVES``, linked to its page, its paper's first author and year read from
the objective's ``citation``, and what it needs read from the objective itself (``required_pooler``,
``required_inputs``, and those of the auxiliary terms it turns on by default). A new objective, or one whose needs
change, fails here until its row says so; the failure prints the row expected."""

from __future__ import annotations

import re

from conftest import REPO_ROOT

import hf_cse.objectives  # noqa: F401  (registers the built-in objectives)
from hf_cse.registry import AUXILIARY_LOSSES, OBJECTIVES

PAGE = REPO_ROOT / "docs" / "objectives" / "index.md"
ROW = re.compile(r"^\| \[`(\w+)`\]\(([\w.]+)\) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", flags=re.M)

#: What a reader gives or gets for each input provider an objective reads (``hf_cse/inputs/``).
PROVIDER_NEEDS = {
    "complementary_similarities": "a frozen complementary model (input provider `complementary_similarities`)",
    "prompt_template_views": "two prompt templates",
    "negations_and_paraphrases": "negations (`negation_backend`); paraphrases (`paraphrase_source`) for the margin",
    "negations": "negations (`negation_backend`)",
    "masked_next_tokens": "the checkpoint's LM head",
    "off_dropout_embeddings": "a second forward pass, dropout off",
    "word_repetition_views": "word-repetition views of the batch",
}


def built_in_objectives() -> dict[str, type]:
    """The objectives hf_cse itself registers (not a user's, which other tests may have registered)."""
    return {name: cls for name, cls in OBJECTIVES.items() if cls.__module__.startswith("hf_cse.")}


def needs(name: str) -> str:
    """The "needs" cell of ``name``'s row, from the registry."""
    objective = OBJECTIVES.build(name)
    parts = [f"the `{objective.required_pooler}` pooler"] if objective.required_pooler else []
    inputs = list(objective.required_inputs)
    for term in objective.default_auxiliary_losses:
        inputs += AUXILIARY_LOSSES[term].required_inputs
    for provider in dict.fromkeys(inputs):
        assert provider in PROVIDER_NEEDS, f"say in PROVIDER_NEEDS what the input provider {provider!r} needs"
        parts.append(PROVIDER_NEEDS[provider])
    return "; ".join(parts) or "—"


def first_author_and_year(citation: str) -> tuple[str, str]:
    """The first author's surname (else the BibTeX key's leading letters) and the year of a BibTeX entry."""
    author = re.search(r"author\s*=\s*[{\"]\s*([^,{}\"]+),", citation)
    surname = author.group(1) if author else re.match(r"@\w+\{([a-z]+)", citation).group(1)
    return surname.strip(), re.search(r"year\s*=\s*[{\"]?(\d{4})", citation).group(1)


def test_the_objectives_table_is_the_registrys() -> None:
    text = PAGE.read_text(encoding="utf-8")
    rows = {match[0]: match[1:] for match in ROW.findall(text)}
    objectives = built_in_objectives()
    assert sorted(rows) == sorted(objectives), "docs/objectives/index.md's table: one row per registered objective"
    for name, (page, paper, need, _) in rows.items():
        assert page == f"{name}.md" and (PAGE.parent / page).is_file(), f"{name}: its row links to its own page"
        surname, year = first_author_and_year(objectives[name].citation)
        cited = f"{name}: paper {paper!r}, its citation's {surname} {year}"
        assert paper.lower().startswith(surname.lower()) and year in paper, cited
        assert need.strip() == needs(name), f"{name}: the needs cell should read: {needs(name)}"
    first_section = text.index("\n## ")
    assert text.index("| [`") < first_section, "the table opens the page, before its first section"
