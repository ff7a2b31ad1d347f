"""The one check of the text that feeds a model in training: no control character.

Every reader of training text (a corpus in memory or streamed, labelled pairs, a paraphrase TSV, a probe file) checks
each text with :func:`check_text`; ``tests/test_text_checks.py`` walks them all. Evaluation data are read as they are:
the papers' STS test sets hold control characters (STS12 MSRpar and STS-B train a U+0012, STS15 belief thirty cp1252
quotes read as U+0091-U+0095), and their published scores were computed on that text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..errors import UsageError

CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
"""Unicode's control characters (category Cc) but tab, line feed and carriage return: no sentence holds one. A NUL
mostly means a UTF-16 or binary file, the others a damaged or mis-decoded one (cp1252 quotes read as latin-1 become
U+0091-U+0094); tokenizers drop some and keep others, so the model would not train on the text that was meant."""


def check_text(text: str, location: Callable[[], str]) -> str:
    """``text``, unless it holds one of :data:`CONTROL_CHARACTERS`: then an error naming ``location()`` (a file and
    line), the character and its column. Every corpus reader, in memory and streaming, checks its texts with this."""
    found = CONTROL_CHARACTERS.search(text)
    if found is None:
        return text
    raise UsageError(
        f"{location()} holds the control character U+{ord(found.group()):04X} (character {found.start() + 1} of its "
        "text); no text may hold a control character but tab (a NUL often means a UTF-16 file: iconv -f utf-16 -t "
        f"utf-8). To delete them: perl -CSD -pe 's/{CONTROL_CHARACTERS.pattern}//g' FILE > CLEAN."
    )
