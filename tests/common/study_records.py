"""Writing a study's kept run records (``benchmarks/_study_records.py``) for the study scripts' tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_records(folder: Path, records: list[dict[str, Any]]) -> None:
    """Each record as ``folder/NAME.json`` (``NAME`` its ``name``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for item in records:
        (folder / f"{item['name']}.json").write_text(json.dumps(item))
