"""The progress bars of the libraries a run calls, off with ``--disable_tqdm`` as the Trainer's own bars are.

The Trainer's flag hides only the Trainer's bars. datasets ("Tokenizing", "Generating train split"), transformers
(``save_pretrained``'s "Writing model shards", a second bar under the training bar, whose cursor moves wrote ``ESC [A``
into a log file) and huggingface_hub (downloads, uploads) each have a process-wide switch of their own instead;
:func:`third_party_progress_bars` turns them off for a block and back on after it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProgressBarSwitch:
    """One library's process-wide progress-bar switch.

    Attributes:
        disabled: whether its bars are off now (by a call or by its environment variable).
        forced_on: its environment variable keeps them on whatever a call says
            (``HF_DATASETS_DISABLE_PROGRESS_BARS=0``, ``HF_HUB_DISABLE_PROGRESS_BARS=0``): left alone then, as a call
            would only warn.
        disable: turn them off.
        enable: turn them back on.
    """

    disabled: Callable[[], bool]
    forced_on: Callable[[], bool]
    disable: Callable[[], None]
    enable: Callable[[], None]


def _library_switch(utils: Any, forced_on: Callable[[], bool]) -> ProgressBarSwitch:
    """The switch of a library whose ``utils`` has huggingface_hub's three functions (datasets' copies them)."""
    return ProgressBarSwitch(
        utils.are_progress_bars_disabled, forced_on, utils.disable_progress_bars, utils.enable_progress_bars
    )


def _datasets_switch() -> ProgressBarSwitch:
    import datasets

    return _library_switch(datasets.utils, lambda: datasets.config.HF_DATASETS_DISABLE_PROGRESS_BARS is False)


def _hub_switch() -> ProgressBarSwitch:
    from huggingface_hub import constants
    from huggingface_hub import utils as hub_utils

    return _library_switch(hub_utils, lambda: constants.HF_HUB_DISABLE_PROGRESS_BARS is False)


def _transformers_switch() -> ProgressBarSwitch:
    """transformers' bars. Its switch sets huggingface_hub's too: turned back on, it leaves the Hub's as they were
    when this switch was made."""
    from huggingface_hub import constants
    from huggingface_hub import utils as hub_utils
    from transformers.utils import logging

    hub_was_off = hub_utils.are_progress_bars_disabled()

    def enable() -> None:
        logging.enable_progress_bar()
        if hub_was_off:
            hub_utils.disable_progress_bars()

    return ProgressBarSwitch(
        disabled=lambda: not logging.is_progress_bar_enabled(),
        forced_on=lambda: constants.HF_HUB_DISABLE_PROGRESS_BARS is False,
        disable=logging.disable_progress_bar,
        enable=enable,
    )


SWITCHES: dict[str, Callable[[], ProgressBarSwitch]] = {
    "datasets": _datasets_switch,
    "huggingface_hub": _hub_switch,
    "transformers": _transformers_switch,
}
"""Each library's switch, made when a block starts (the library imported then)."""


@contextlib.contextmanager
def third_party_progress_bars(shown: bool, libraries: Iterable[str] = tuple(SWITCHES)) -> Iterator[None]:
    """Hide the progress bars of ``libraries`` (default: datasets, huggingface_hub and transformers; keys of
    :data:`SWITCHES`) while the block runs unless ``shown`` (``not --disable_tqdm``). Bars already off stay off, and
    ``HF_DATASETS_DISABLE_PROGRESS_BARS=0`` or ``HF_HUB_DISABLE_PROGRESS_BARS=0``, which those libraries let no call
    override, keep theirs on."""
    with contextlib.ExitStack() as stack:
        if not shown:
            for switch in [SWITCHES[library]() for library in libraries]:
                # Bars that are off (or that the environment keeps on) are left as they are.
                if not (switch.disabled() or switch.forced_on()):
                    switch.disable()
                    stack.callback(switch.enable)
        yield
