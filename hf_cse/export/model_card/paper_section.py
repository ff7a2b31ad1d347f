"""The card's "Comparison with the paper" section: the model's STS test scores beside those its paper config's
``paper_results`` block reports (:class:`~hf_cse.evaluation.paper_comparison.PaperComparison`)."""

from __future__ import annotations

from ...evaluation.paper_comparison import PaperComparison
from ...markdown import markdown_text, table


def paper_comparison_section(comparison: PaperComparison) -> list[str]:
    """``## Comparison with the paper``: which paper and table, the setting, and the scores of both sides with
    the differences (this model minus the paper); one string per line."""
    paper = comparison.paper
    return [
        "## Comparison with the paper",
        "",
        f"STS test scores of this model beside those reported for {markdown_text(paper.method)} in "
        f"{markdown_text(paper.source)} (difference: this model minus the paper; `-` where a side has no score).",
        "",
        table(["task", "this model", "paper", "difference"], [list(row) for row in comparison.rows()], "lrrr"),
        "",
        comparison.describe_setting(),  # hf_cse's own words, no user string: no escaping
        *([] if comparison.base_model_caveat is None else ["", markdown_text(comparison.base_model_caveat)]),
        *([] if paper.stated_gain is None else ["", markdown_text(comparison.stated_gain_line())]),
    ]
