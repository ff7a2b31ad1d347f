"""``--disable_tqdm true`` hides the libraries' progress bars too (issue 56): transformers' "Writing model shards" of
every save, which under the open training bar wrote cursor-up escapes (``ESC [A``) into a log, datasets'
"Tokenizing" and huggingface_hub's; without the flag they are shown as before. Either way each library's switch is
as it was once the run is over (:func:`hf_cse.progress_bars.third_party_progress_bars`)."""

from __future__ import annotations

import os
from pathlib import Path

import datasets
import huggingface_hub.utils
import pytest
from common.commands import run_unsup_argv
from conftest import run_unsup
from transformers.utils import logging as transformers_logging

from hf_cse.progress_bars import third_party_progress_bars

CURSOR_UP = "\x1b[A"
TQDM_BAR = "%|"  # tqdm's bar: "Writing model shards: 100%|██████████| 1/1"


def switches() -> tuple[bool, bool, bool]:
    """Whether datasets', transformers' and huggingface_hub's bars are on."""
    return (
        not datasets.utils.are_progress_bars_disabled(),
        transformers_logging.is_progress_bar_enabled(),
        not huggingface_hub.utils.are_progress_bars_disabled(),
    )


@pytest.mark.skipif(
    {"HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS"} & set(os.environ),
    reason="the libraries' bars are set for the whole process here",
)
@pytest.mark.parametrize("disable_tqdm", ["true", "false"])
def test_disable_tqdm_hides_the_libraries_bars_and_leaves_their_switches_as_they_were(
    disable_tqdm: str, capfd: pytest.CaptureFixture[str], tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    before = switches()
    assert before == (True, True, True)
    # a checkpoint while the training bar is open: its shard bar nested under it
    argv = run_unsup_argv(tiny_encoder_dir, tmp_path, max_steps=2, save_steps=1, disable_tqdm=disable_tqdm)
    run_unsup.main(argv)
    err = capfd.readouterr().err
    if disable_tqdm == "true":
        assert TQDM_BAR not in err and CURSOR_UP not in err, err
    else:
        assert "Writing model shards" in err and "Tokenizing" in err and TQDM_BAR in err
    assert switches() == before


@pytest.mark.skipif(
    {"HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS"} & set(os.environ),
    reason="the libraries' bars are set for the whole process here",
)
def test_one_library_s_bars_alone_and_bars_that_were_off_stay_off() -> None:
    assert switches() == (True, True, True)
    with third_party_progress_bars(shown=False, libraries=("huggingface_hub",)):  # python -m hf_cse.push's
        assert switches() == (True, True, False)
    assert switches() == (True, True, True)
    # transformers' own switch turns the Hub's back on with its own: here the Hub's were off before the block
    huggingface_hub.utils.disable_progress_bars()
    try:
        with third_party_progress_bars(shown=False):
            assert switches() == (False, False, False)
        assert switches() == (True, True, False)
    finally:
        huggingface_hub.utils.enable_progress_bars()
    with third_party_progress_bars(shown=True):
        assert switches() == (True, True, True)
