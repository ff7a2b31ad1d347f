"""The errors hf_cse raises for conditions a user can fix or must know about.

The command-line tools (``run_unsup.py``, ``python -m hf_cse.*``) print these as one line, without a traceback,
and exit non-zero. Each also derives from the built-in type that callers already catch (``ValueError``,
``RuntimeError``, ``OSError``), so library users keep their ``except`` clauses.
"""

from __future__ import annotations

import argparse
import reprlib
from typing import Any, NoReturn

ECHO_LIMIT = 200
"""Characters of a user's value that an error message repeats (:func:`echo`): enough to recognize it, never a screen
of a pasted file or an expanded YAML alias."""

MESSAGE_LIMIT = 1000
"""Characters of a whole one-line error message (:func:`shorten`), for messages built outside hf_cse's control."""

# repr() of a nested value can be far longer than the value's memory (YAML aliases share one list many times over):
# reprlib stops at a few items and levels, so the text is never built whole.
_BOUNDED_REPR = reprlib.Repr()
_BOUNDED_REPR.maxlevel = 2
_BOUNDED_REPR.maxstring = _BOUNDED_REPR.maxother = 60


def shorten(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text`` if it has at most ``limit`` characters; else its start and end around ``...``, then its length:
    ``'aaaa...zzzz' (5000 characters)`` (the end often says the most: a file name, the options of a message)."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    return f"{text[:head]}...{text[len(text) - (limit - head) :]} ({len(text)} characters)"


def echo(value: object) -> str:
    """``repr(value)`` for an error message, at most about :data:`ECHO_LIMIT` characters: a string as
    :func:`shorten` cuts it, anything else with its first items and levels (``[[1, 2, ...], ...]``)."""
    if isinstance(value, str):
        return shorten(repr(value))
    text = _BOUNDED_REPR.repr(value)
    return text if len(text) <= ECHO_LIMIT else f"{text[: ECHO_LIMIT - 3]}..."


class CSEError(Exception):
    """Base class: a failure whose message alone tells the user what happened and what to do."""


class UsageError(CSEError, ValueError):
    """A bad argument, configuration value or input file (the command lines exit with 2, as argparse does)."""


class TrainingDivergedError(CSEError, RuntimeError):
    """The loss became non-finite; training stopped before anything non-finite was saved."""


class DiskFullError(CSEError, OSError):
    """A save ran out of disk space; the message names the folder."""


class OutputDirLockedError(CSEError, RuntimeError):
    """Another live run holds the output folder."""


class HubUnreachableError(CSEError, ConnectionError):
    """The Hugging Face Hub could not be reached (no network, offline mode); nothing was pushed."""


class HubRequestError(CSEError, OSError):
    """The Hugging Face Hub answered with an error (a token it refuses, no write access, a server error); the message
    names the repository and what to do."""


class DownloadError(CSEError, OSError):
    """A download failed (unreachable server, HTTP error, checksum mismatch, broken transfer); the message names the
    URL and what to do, and nothing incomplete was left at the file's final path."""


class CheckpointError(CSEError, RuntimeError):
    """A checkpoint named to resume from fails verification; the message names the bad file."""


class SaveFailedError(CSEError, OSError):
    """Writing a checkpoint or the final model failed (an I/O error); the message names the folder and says what
    was kept."""


class PreemptedError(CSEError, RuntimeError):
    """Training was stopped by a signal (SIGTERM, SIGUSR1) after saving a checkpoint; the message says how to
    resume."""


class InterruptedRun(KeyboardInterrupt):
    """A Ctrl-C that a command caught on its way out to say what to do next for what it leaves behind (``hint``:
    resume from a checkpoint, or start anew), which only it knows; :func:`~hf_cse.commands.cli.run_command` prints
    it in the interrupted line. Still a ``KeyboardInterrupt``, so code that stops on one stops on this too."""

    def __init__(self, hint: str) -> None:
        super().__init__(hint)
        self.hint = hint


class OneLineErrorParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors (a bad flag, a missing or unconvertible value, and every
    ``parser.error(...)`` of a command's own checks) raise :class:`UsageError` instead of printing the usage block
    before the message: :func:`~hf_cse.commands.cli.run_command` prints it as ``PROG: error: MESSAGE``, one line, exit
    2, with secrets redacted and on rank 0 only. ``--help`` prints the usage as before. Every command's parser is one
    (or, for ``run_unsup.py``, :class:`~hf_cse.training.arguments.parser.CSEArgumentParser`, which derives from it):
    it lives here, below the commands, so that the training code's parser can derive from it.

    Flags are taken as spelt only (``allow_abbrev=False``): argparse would take ``--max_step 5`` for ``--max_steps``,
    while the same key in a ``--config`` file is an error, and a script's abbreviation would break the day a new
    flag shares its prefix."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)
