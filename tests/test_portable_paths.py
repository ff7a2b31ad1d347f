"""BENCHMARKS.md and the benchmark records name no development machine's folders (issue 38 item 4f): a recorded
command's absolute paths are relative to the repository root (``benchmarks/_common.portable_paths``), when it is
recorded and again when ``benchmarks/render.py`` shows a record written before (the quality study's invocations
held ``--work_dir /work/quality_study``)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))  # the scripts import their helpers as `from _common import ...`
common = importlib.import_module("_common")
render = importlib.import_module("render")


@pytest.fixture
def team_checkout(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The repository as the team's machines hold it, /work/main beside /work/quality_study and /work/shared: the
    records were written there (this test may run from a checkout anywhere, /tmp included)."""
    monkeypatch.setattr(common, "REPO_ROOT", Path("/work/main"))
    return common.REPO_ROOT


def test_absolute_paths_become_relative_to_the_repository_and_the_rest_is_kept(team_checkout: Path) -> None:
    text = (
        "python benchmarks/quality_study.py --work_dir /work/quality_study --records_dir "
        "/work/main/benchmarks/results/quality_study --output_json=/work/main/x.json --hf_cse_root /tmp/wt-base "
        "--home /root/.cache/x # https://huggingface.co/datasets/a/b, 3/4 of the steps, 12 it/s, ../shared/data"
    )
    assert common.portable_paths(text) == (
        "python benchmarks/quality_study.py --work_dir ../quality_study --records_dir "
        "benchmarks/results/quality_study --output_json=x.json --hf_cse_root /tmp/wt-base "
        "--home ../../root/.cache/x # https://huggingface.co/datasets/a/b, 3/4 of the steps, 12 it/s, ../shared/data"
    )
    assert common.portable_path("/work/main") == "."


def test_a_recorded_command_line_is_relative_to_the_repository(team_checkout: Path) -> None:
    argv = ["/work/main/benchmarks/quality_study.py", "--work_dir", "/work/quality_study", "--label", "a b"]
    assert common.command_line(argv) == "python benchmarks/quality_study.py --work_dir ../quality_study --label 'a b'"


def test_render_shows_an_old_records_absolute_paths_relative_to_the_repository(
    team_checkout: Path, tmp_path: Path
) -> None:
    command = "python benchmarks/quality_study.py --work_dir /work/quality_study --arms simcse"
    study = {"protocol": {"seeds": [42]}, "arms": [], "invocations": [{"command": command, "environment": {}}]}
    (tmp_path / "quality_study.json").write_text(json.dumps(study), encoding="utf-8")
    markdown = render.render(tmp_path, generated_at="2026-01-01T00:00:00+00:00")
    assert "python benchmarks/quality_study.py --work_dir ../quality_study --arms simcse" in markdown
    assert "/work/" not in markdown


def test_benchmarks_md_holds_no_absolute_path_but_scratch_ones() -> None:
    """Whatever machine rendered it: only paths under /tmp, the same scratch folder everywhere, stay absolute."""
    text = (REPO_ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    absolute = common.ABSOLUTE_PATH.findall(text)
    assert [path for path in absolute if not path.startswith(f"{common.SCRATCH_DIR}/")] == []
