"""Formatting shared by the sections of ``BENCHMARKS.md`` (``render.py``): numbers, tables, code blocks, the "not run
yet" note and the machine line."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _common import REPO_ROOT

from hf_cse.evaluation.paper_comparison import TASK_LABELS
from hf_cse.markdown import table as markdown_table

TASK_HEADERS = {**TASK_LABELS, "avg": "Avg."}
"""Column headers of the STS tables, in the order papers print the tasks."""


def rel(path: Path) -> str:
    """``path`` relative to the repository root when it is inside it (for commands a reader can paste)."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def load_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; ``None`` when the file is missing or not a JSON object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def file_date(path: Path) -> str:
    """The file's modification time, ISO 8601 in UTC."""
    stamp = datetime.fromtimestamp(os.path.getmtime(path), tz=timezone.utc).replace(microsecond=0)
    return stamp.isoformat()


def num(value: Any, digits: int = 2, suffix: str = "") -> str:
    """``value`` with ``digits`` decimals, or ``-`` when it is missing or not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    return f"{value:,.{digits}f}{suffix}"


def percent(share: Any) -> float | None:
    return 100.0 * share if isinstance(share, int | float) else None


def count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "-"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None) -> str:
    """A Markdown table; ``align`` is one character per column, ``l`` or ``r`` (default: first left, rest right)."""
    return markdown_table(header, rows, align or "l" + "r" * (len(header) - 1))


def code_block(commands: Sequence[str]) -> str:
    return "```bash\n" + "\n".join(commands) + "\n```"


def not_run(commands: Sequence[str], path: Path) -> str:
    return f"**Not run yet** (no `{rel(path)}`). Run:\n\n{code_block(commands)}"


def machine_line(env: dict[str, Any] | None, date: str | None, fallback: str = "") -> str:
    """``Machine: CPU, N cores, torch X, T threads; GPU ...; date`` from a recorded environment."""
    env = env or {}
    parts = []
    if env.get("cpu"):
        parts.append(f"{env['cpu']}, {env.get('cpu_cores', '?')} cores")
    if env.get("gpu"):
        parts.append(f"GPU {env['gpu']}")
    if env.get("torch"):
        parts.append(f"torch {env['torch']}")
    if env.get("torch_threads") is not None:
        parts.append(f"{env['torch_threads']} torch threads")
    if fallback:
        parts.append(fallback)
    text = "; ".join(parts) if parts else "not recorded"
    return f"Machine: {text}. Date: {date or 'not recorded'}."


def mean_std(mean: Any, std: Any) -> str:
    """``"72.00 ± 2.00"``; the mean alone without a deviation; ``"-"`` without a mean."""
    return num(mean) if std is None or num(mean) == "-" else f"{num(mean)} ± {num(std)}"
