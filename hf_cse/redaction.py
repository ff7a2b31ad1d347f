"""Secrets on command lines: every argument list hf_cse writes (a sweep's files and logs, a run's "To resume" line)
or prints (an error message) goes through :func:`redact_arguments` or :func:`redact_text`; nothing else decides what a
secret is.

A bottom module (it imports only the standard library): the command lines (:mod:`hf_cse.commands.cli`), the sweeps
and the training code's "To resume" line (:mod:`hf_cse.training.saving.preemption`) all use it, and the training
code never imports the commands built on it.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

SECRET_SUFFIX = "_token"
"""A flag whose name ends so holds a secret (``--hub_token``): the rule by which ``training_args.json`` leaves out the
``*_token`` fields too (:mod:`hf_cse.training.record.run_arguments`)."""


def secret_flag(option: str) -> str | None:
    """The name of the secret flag that ``option`` sets (``hub_token`` for ``--hub_token``, ``--hub-token``,
    ``--hub_token=VALUE``), or ``None`` when it is no secret flag (or no flag)."""
    if not option.startswith("--"):
        return None
    name = option[2:].split("=", 1)[0].replace("-", "_")
    return name if name.endswith(SECRET_SUFFIX) else None


def secret_placeholder(name: str) -> str:
    """What an argument list shows instead of the secret flag ``name``'s value: ``<HUB_TOKEN>`` (transformers'
    ``TrainingArguments.to_dict`` shows ``hub_token`` so too)."""
    return f"<{name.upper()}>"


def _secrets_given(argv: Sequence[str]) -> Iterator[tuple[str, str]]:
    """``(name, value)`` of each secret flag of ``argv`` (``--hub_token VALUE`` and ``--hub_token=VALUE``), in
    order."""
    for index, arg in enumerate(argv):
        name = secret_flag(arg)
        if name is not None and "=" in arg:
            yield name, arg.split("=", 1)[1]
        elif name is not None and index + 1 < len(argv):
            yield name, argv[index + 1]


def secret_values(argv: Sequence[str]) -> list[str]:
    """The values that secret flags take in ``argv`` (``--hub_token VALUE`` and ``--hub_token=VALUE``)."""
    return [value for _, value in _secrets_given(argv) if value]


def redact_arguments(argv: Sequence[str], hide: Sequence[str] = ()) -> list[str]:
    """``argv`` with the value of every secret flag replaced by its placeholder (:func:`secret_placeholder`), and
    any argument equal to a value of ``hide`` (a secret given in another spelling, e.g. an abbreviation argparse
    accepted) replaced too. Everything else is kept as it is, so the list still runs once the placeholders are
    filled in."""
    hidden = {*secret_values(argv), *(value for value in hide if value)}
    redacted: list[str] = []
    pending: str | None = None  # the placeholder of the value that follows a bare secret flag
    for arg in argv:
        if pending is not None:
            redacted.append(pending)
            pending = None
            continue
        name = secret_flag(arg)
        if name is not None and "=" in arg:
            redacted.append(f"{arg.split('=', 1)[0]}={secret_placeholder(name)}")
        elif name is not None:
            redacted.append(arg)
            pending = secret_placeholder(name)
        elif arg in hidden:
            redacted.append("<SECRET>")
        elif arg.startswith("--") and "=" in arg and arg.split("=", 1)[1] in hidden:
            redacted.append(f"{arg.split('=', 1)[0]}=<SECRET>")
        else:
            redacted.append(arg)
    return redacted


def redact_text(text: str, hide: Sequence[str]) -> str:
    """``text`` with every occurrence of a secret of ``hide`` replaced by ``<SECRET>``."""
    for value in sorted({value for value in hide if value}, key=len, reverse=True):
        text = text.replace(value, "<SECRET>")
    return text


def command_line(argv: Sequence[str], hide: Sequence[str] = ()) -> str:
    """``argv`` as one shell line, secrets redacted (:func:`redact_arguments`)."""
    return shlex.join(redact_arguments(argv, hide))


@dataclass(frozen=True)
class RedactedArguments:
    """An argument list whose secrets are placeholders everywhere but where it runs.

    Attributes:
        arguments: the list with every secret flag's value replaced by its placeholder: what may be written, logged,
            compared and recorded.
        secrets: placeholder to value, put back only by :meth:`reveal` (not shown by ``repr``).
    """

    arguments: tuple[str, ...]
    secrets: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, argv: Sequence[str]) -> RedactedArguments:
        # A flag given twice: the last value wins, as in argparse.
        secrets = {secret_placeholder(name): value for name, value in _secrets_given(argv)}
        return cls(tuple(redact_arguments(argv)), secrets)

    def reveal(self, command: Sequence[str]) -> list[str]:
        """``command`` (built from :attr:`arguments`) with each secret flag's placeholder replaced by its value: the
        list to execute, never to write."""
        revealed: list[str] = []
        after_flag = False
        for arg in command:
            name = secret_flag(arg)
            if after_flag and arg in self.secrets:
                arg = self.secrets[arg]
            elif name is not None and "=" in arg:
                flag, value = arg.split("=", 1)
                arg = f"{flag}={self.secrets.get(value, value)}"
            after_flag = name is not None and "=" not in arg
            revealed.append(arg)
        return revealed
