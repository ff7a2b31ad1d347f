"""Every page of docs/objectives opens with its recipe (issue 56): a ``python run_unsup.py`` command before the
page's first section, which the docs tests run on tiny models (tests/test_docs_commands.py; mntp.md's, on a tiny
decoder, tests/test_decoder_docs.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO_ROOT

PAGES = sorted((REPO_ROOT / "docs" / "objectives").glob("*.md"))
SHELL_BLOCK = re.compile(r"^```(?:bash|sh|shell|console)\n(.*?)^```", flags=re.S | re.M)


def opening_commands(page: str) -> list[str]:
    """The commands of the shell blocks before ``page``'s first ``## `` section."""
    opening = re.split(r"^## ", page, maxsplit=1, flags=re.M)[0]
    return [block.replace("\\\n", " ") for block in SHELL_BLOCK.findall(opening)]


def test_the_opening_is_read() -> None:
    page = (
        "# X\n\nIntro.\n\n```bash\npython run_unsup.py \\\n    --objective x\n```\n\n"
        "## Formula\n\n```bash\nlater\n```\n"
    )
    assert opening_commands(page) == ["python run_unsup.py      --objective x\n"]
    assert opening_commands("# X\n\n## Formula\n\n```bash\npython run_unsup.py\n```\n") == []


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_each_objective_page_opens_with_a_training_command(page: Path) -> None:
    commands = opening_commands(page.read_text(encoding="utf-8"))
    assert any(command.startswith("python run_unsup.py ") for command in commands), (
        f"{page.name} opens with no `python run_unsup.py` command block before its first section"
    )
