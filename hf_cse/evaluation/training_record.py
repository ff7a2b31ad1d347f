"""Reading back the record a trained hf_cse checkpoint holds (``hf_cse_training.json``, written with its card): what
the evaluation commands learn from it (the model it started from, its Matryoshka dimensions)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..run_files import TRAINING_SUMMARY_FILE


def read_training_record(model_name_or_path: str | os.PathLike) -> Any:
    """The parsed ``hf_cse_training.json`` of a local checkpoint folder (any JSON value: the caller checks its shape),
    or ``None`` where there is none (another model, a Hub id).

    Raises:
        UsageError: the file is not valid JSON.
    """
    path = Path(model_name_or_path) / TRAINING_SUMMARY_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UsageError(f"{path} is not valid JSON ({err}).") from None
