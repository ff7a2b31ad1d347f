"""The errors hf_cse raises for conditions a user can fix or must know about.

The command-line tools (``run_unsup.py``, ``python -m hf_cse.*``) print these as one line, without a traceback,
and exit non-zero. Each also derives from the built-in type that callers already catch (``ValueError``,
``RuntimeError``, ``OSError``), so library users keep their ``except`` clauses.
"""

from __future__ import annotations


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
