"""What the decoder config tests put in place of a shipped config's corpus and sequence length: the test sentences in
the corpus's shape and the length the tiny decoders read (``tests/test_decoder_configs.py``,
``tests/test_decoder_configs_on_a_cpu.py``)."""

from __future__ import annotations

from pathlib import Path

from conftest import SENTENCES, write_train_file

from common.triplets import write_triplets

STAND_IN_POSITIONS = 128
"""The tokens the tiny decoders read (conftest's ``max_position_embeddings``): a config's longer ``max_seq_length``
(the supervised stage's 512) is cut to it, the one setting the stand-in model cannot take as shipped."""


def stand_in_corpus(train_file: str, tmp_path: Path) -> Path:
    """The test sentences in the shipped corpus's shape: SimCSE's triplets for a pairs file (``.csv``: the supervised
    stage's NLI triplets), one sentence a line otherwise."""
    if train_file.endswith(".csv"):
        return write_triplets(tmp_path / "triplets.csv")
    return write_train_file(tmp_path, SENTENCES)


def stand_in_max_seq_length(shipped: int | None) -> int:
    """``shipped`` (a config's ``max_seq_length``, or unset) cut to :data:`STAND_IN_POSITIONS`."""
    return min(shipped or STAND_IN_POSITIONS, STAND_IN_POSITIONS)
