"""Progress bars in a log file: an encoding bar nested under another (the Trainer's training bar) is drawn with
cursor-up escapes, which a log keeps as ``[A`` garbage, so it is left out where stderr is no terminal; alone, or on
a terminal, it is shown."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import SENTENCES
from transformers.utils.logging import tqdm

from hf_cse import SentenceEncoder

CURSOR_UP = "\x1b[A"


def test_an_encoding_bar_under_another_bar_is_left_out_of_a_log(
    tiny_encoder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_encoder_dir, device="cpu")
    capsys.readouterr()
    alone = encoder.encode(SENTENCES, batch_size=4, show_progress_bar=True)
    assert "Encoding" in capsys.readouterr().err
    with tqdm(total=1, desc="Training") as training:  # as the Trainer's bar, open while it evaluates
        nested = encoder.encode(SENTENCES, batch_size=4, show_progress_bar=True)
        training.update(1)
    err = capsys.readouterr().err
    assert "Training" in err and "Encoding" not in err and CURSOR_UP not in err
    assert nested.equal(alone)


def test_an_encoding_bar_under_another_bar_is_drawn_on_a_terminal(
    tiny_encoder_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_encoder_dir, device="cpu")
    capsys.readouterr()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with tqdm(total=1, desc="Training") as training:
        encoder.encode(SENTENCES, batch_size=4, show_progress_bar=True)
        training.update(1)
    assert "Encoding" in capsys.readouterr().err
