"""SimCSE's triplets layout (``sent0,sent1,hard_neg``) over the tests' sentences, written as a CSV file: the labelled
pairs the pairs tests train on, in memory and streamed."""

from __future__ import annotations

import csv
from pathlib import Path

from conftest import SENTENCES

TRIPLETS = {
    "sent0": SENTENCES,
    "sent1": [f"indeed, {sentence}" for sentence in SENTENCES],
    "hard_neg": SENTENCES[1:] + SENTENCES[:1],
}


def write_triplets(path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(TRIPLETS)
        writer.writerows(zip(*TRIPLETS.values(), strict=True))
    return path
