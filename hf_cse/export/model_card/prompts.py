"""The sentence-transformers prompts saved with a model (``config_sentence_transformers.json``: ``{"prompts": {name:
text}, "default_prompt_name": name or null}``), which the card's usage code shows: an instruction that
``SentenceTransformer.encode(texts, prompt_name=name)`` puts before each text."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..sentence_transformers_files import SENTENCE_TRANSFORMERS_CONFIG_FILE

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SentenceTransformerPrompts:
    """Attributes:
    prompts: ``{name: text put before each text}``, in the file's order (``{"query": "Given a question: ",
        "document": ""}``).
    default_prompt_name: the prompt ``encode`` uses when given none; ``None`` (default): no prompt.
    """

    prompts: Mapping[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None

    def instruction_name(self) -> str | None:
        """The prompt the card's code encodes with: ``query`` when it puts text before the sentence, else the first
        that does; ``None`` when every prompt is empty (an empty one changes nothing)."""
        instructions = [name for name, text in self.prompts.items() if text]
        return "query" if "query" in instructions else next(iter(instructions), None)


def read_prompts(directory: str | Path) -> SentenceTransformerPrompts | None:
    """The prompts of ``directory/config_sentence_transformers.json``; ``None`` without the file or prompts, or for a
    file that is not ``{"prompts": {str: str}, ...}``, which is logged: the card then shows no prompt rather than a
    wrong one."""
    path = Path(directory) / SENTENCE_TRANSFORMERS_CONFIG_FILE
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        logger.warning("The card shows no sentence-transformers prompt: %s is not JSON (%s).", path, err)
        return None
    prompts = config.get("prompts") if isinstance(config, dict) else None
    default = config.get("default_prompt_name") if isinstance(config, dict) else None
    if not prompts and default is None:  # sentence-transformers writes "prompts": {} for a model without any
        return None
    valid = isinstance(prompts, dict) and all(isinstance(v, str) for v in [*prompts, *prompts.values()])
    if not valid or not (default is None or default in prompts):
        logger.warning(
            "The card shows no sentence-transformers prompt: %s has prompts %r and default_prompt_name %r; "
            "expected a {name: text} object and one of its names or null.",
            path,
            prompts,
            default,
        )
        return None
    return SentenceTransformerPrompts(dict(prompts), default)
