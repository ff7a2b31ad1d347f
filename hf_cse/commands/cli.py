"""Pieces shared by the command lines: the one error handler of ``run_unsup.py`` and every ``python -m hf_cse.*``
command (printing its message with secrets redacted by :mod:`hf_cse.redaction`), and the
encoder flags and :class:`EncoderOptions` of ``hf_cse.eval``, ``hf_cse.transfer`` and ``hf_cse.report``."""

from __future__ import annotations

import argparse
import functools
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ..atomic_files import write_json_atomic
from ..errors import MESSAGE_LIMIT, CSEError, InterruptedRun, UsageError, echo, shorten
from ..errors import OneLineErrorParser as OneLineErrorParser  # every command's parser; the training code's too
from ..number_ranges import SENTENCES, TOKEN_LIMIT, NumberFlag, NumberRange
from ..redaction import redact_text, secret_values

# Imported where they are used, not here: torch and the model code take seconds of CPU to import, and what every
# command shares (run_command, the error line, the encoder flags) needs none of them: no command's --help imports
# torch (tests/test_help_imports.py).
if TYPE_CHECKING:
    import torch

    from ..modeling.encoder import SentenceEncoder

logger = logging.getLogger(__name__)

TRACEBACK_FLAG = "--traceback"
TRACEBACK_ENV = "HF_CSE_TRACEBACK"
TRACEBACK_HELP = f"{TRACEBACK_FLAG} (or {TRACEBACK_ENV}=1) shows the traceback."
"""The end of the ``--help`` epilog of every command that runs through :func:`run_command`."""
ERRORS_HELP = (
    "A bad argument, configuration or input file prints one line and exits with 2; a failure of the run (diverged, "
    f"disk full, output folder locked) exits with 1. {TRACEBACK_HELP}"
)
"""The ``--help`` epilog (or its end) of the commands that load or train a model (``hf_cse.download`` has its own)."""

# Which exceptions are the user's to fix, printed as one line. hf_cse's own ``CSEError``s are, by definition. So are
# the built-in ValueError and file errors: hf_cse, transformers and datasets raise them for bad values and paths with
# one-line messages that say what to change (an unknown objective, a missing file), so a traceback only buries the
# message. A genuine bug can raise them too; the traceback stays one flag away.
USAGE_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)


INTERRUPTED_EXIT_STATUS = 130
"""The exit status of a command stopped by Ctrl-C: 128 + SIGINT, as a shell reports a process SIGINT ended."""


def run_command(
    main: Callable[[list[str]], Any], prog: str, argv: Sequence[str] | None = None, interrupted_hint: str = ""
) -> None:
    """Run a command line's ``main(argv)``, printing a user error as ``PROG: error: MESSAGE``, as argparse does.

    The exit status is 2 for bad input (:class:`~hf_cse.errors.UsageError` and :data:`USAGE_ERRORS`) and 1 for other
    :class:`~hf_cse.errors.CSEError`s (failures of the run). Ctrl-C prints ``PROG: interrupted (Ctrl-C)`` and
    what to do next in one line, exit status :data:`INTERRUPTED_EXIT_STATUS`, instead of a ``KeyboardInterrupt``
    traceback: the hint of the :class:`~hf_cse.errors.InterruptedRun` that ``main`` raised (for what the run left,
    which only it knows), else ``interrupted_hint``. ``--traceback`` (removed from
    ``argv`` before ``main`` sees it) or ``HF_CSE_TRACEBACK=1`` lets the exception through with its traceback instead.
    A process of a multi-process run (``accelerate launch``) then leaves its process group
    (:func:`~hf_cse.distributed.leave_process_group`; on gloo that ends the process, with the same exit status).

    Args:
        main: the command's entry point; takes the arguments without the program name.
        prog: the program name for the message, e.g. ``python -m hf_cse.eval``.
        argv: the arguments; defaults to ``sys.argv[1:]``.
        interrupted_hint: what to do after a Ctrl-C that ``main`` did not say, ending its line (default: nothing).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    show_traceback = TRACEBACK_FLAG in argv or os.environ.get(TRACEBACK_ENV, "0") not in ("", "0")
    try:
        main([arg for arg in argv if arg != TRACEBACK_FLAG])
    except (CSEError, *USAGE_ERRORS) as err:
        if show_traceback:
            raise
        exit_with_error(prog, err, hide=secret_values(argv))
    except KeyboardInterrupt as interrupt:
        if show_traceback:
            raise
        hint = interrupt.hint if isinstance(interrupt, InterruptedRun) else interrupted_hint
        _print_on_rank_zero(f"{prog}: interrupted (Ctrl-C){f'; {hint}' if hint else ''}.")
        sys.exit(INTERRUPTED_EXIT_STATUS)
    leave_process_group()


def leave_process_group(exit_code: int = 0) -> None:
    """:func:`hf_cse.distributed.leave_process_group` where there may be a group to leave: a process that never
    imported ``torch.distributed`` (``hf_cse.download``, a ``--help``) has none, and importing torch to find that out
    costs seconds of CPU."""
    if "torch.distributed" in sys.modules:
        from ..distributed import leave_process_group as leave_the_group

        leave_the_group(exit_code)


def configure_logging(level: int = logging.INFO) -> None:
    """Log at ``level`` on stderr with timestamps, each record once.

    huggingface_hub adds a bare stderr handler of its own to its logger when imported, and lets the records
    propagate too: once the root logger has a handler, each of its warnings (a retry, a missing file) came out twice,
    bare and formatted. Its handler is removed; its records reach the root's once, formatted like the rest."""
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=level)
    hub_logger = logging.getLogger("huggingface_hub")
    if logging.getLogger().handlers and hub_logger.propagate:
        for handler in [handler for handler in hub_logger.handlers if type(handler) is logging.StreamHandler]:
            hub_logger.removeHandler(handler)


def console_script(main: Callable[[list[str]], Any], prog: str) -> None:
    """What a command's ``console_main`` does: log at INFO with timestamps (loading and evaluating a model takes a
    while; the steps say where it is; :func:`configure_logging`), then :func:`run_command` on ``sys.argv[1:]``."""
    configure_logging(logging.INFO)
    run_command(main, prog)


def exit_with_error(prog: str, err: BaseException, hide: Sequence[str] = ()) -> NoReturn:
    """Print ``PROG: error: MESSAGE`` once and exit with 2 (bad input) or 1 (a failed run).

    ``hide``: secrets of the command line (:func:`secret_values`), replaced by their placeholder wherever the message
    repeats them (argparse's "unrecognized arguments: --hub_token hf_..." does).

    Launched as several processes (``WORLD_SIZE > 1``), only rank 0 prints: the arguments and data are the same on
    every rank, so every rank fails alike, and N copies of the line would bury it under the launcher's output. Each
    rank also writes the message to its ``TORCHELASTIC_ERROR_FILE``, which ``torchrun`` and ``accelerate launch``
    print as the root cause in their failure summary (instead of a link to their docs), so an error that one rank
    alone raised is reported too.

    A message longer than :data:`~hf_cse.errors.MESSAGE_LIMIT` is cut in the middle: hf_cse cuts the values it
    repeats (:func:`~hf_cse.errors.echo`), but transformers' and datasets' messages may hold a whole argument list.
    """
    from ..distributed import record_error_for_launcher

    code = 2 if isinstance(err, UsageError) or not isinstance(err, CSEError) else 1
    message = f"{prog}: error: {shorten(redact_text(str(err), hide), MESSAGE_LIMIT)}"
    _print_on_rank_zero(message)
    record_error_for_launcher(message)
    leave_process_group(code)
    sys.exit(code)


def _print_on_rank_zero(message: str) -> None:
    """Print ``message`` to stderr on rank 0 only: every rank of a launch fails alike (:func:`exit_with_error`)."""
    if int(os.environ.get("RANK", "0")) == 0:
        print(message, file=sys.stderr)


IMPORT_MODULE_HELP = (
    "a module name importable from the working directory (my_objectives), or the path of its .py file "
    "(examples/python/my_objectives.py)"
)
"""What ``--import_module`` takes, in every command's help."""


def import_user_module(name: str) -> None:
    """Import ``name`` so that its registrations run (``--import_module`` of ``run_unsup.py`` and of the encoder
    commands): a module name, found from the working directory too (as ``python -m`` would), or the path of a
    ``.py`` file (:func:`import_user_file`), which is what a user has in hand: the docs' examples live in
    ``examples/python/``, not in the folder the commands run from.

    Raises:
        UsageError: ``name`` does not import; the message is the import error's.
    """
    if name.endswith(".py") or os.sep in name or (os.altsep is not None and os.altsep in name):
        import_user_file(name)
        return
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        importlib.import_module(name)
    except ImportError as err:
        # The module itself not found (not an import inside it): say what else the option takes.
        missing = isinstance(err, ModuleNotFoundError) and name.startswith(str(err.name))
        hint = f"; give {IMPORT_MODULE_HELP.replace(' (my_objectives)', '')}" if missing else ""
        raise UsageError(f"--import_module {echo(name)}: {err}{hint}.") from err


def import_user_file(path: str) -> None:
    """Import the Python file ``path`` as the module its name names (``my_poolers.py`` -> ``my_poolers``), its folder
    first on ``sys.path``, as ``PYTHONPATH=FOLDER`` would: its classes then have the module name a model card's code
    imports (``import my_poolers``) and that another process (a sweep's run, a DDP rank) imports the same way.

    Raises:
        UsageError: no such file, not a ``.py`` file, a name that is no module name, a module of that name imported
            from elsewhere already, or an error raised while importing it.
    """
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"--import_module {echo(path)}: no such file; give {IMPORT_MODULE_HELP}.")
    if file.suffix != ".py" or not file.stem.isidentifier():
        raise UsageError(
            f"--import_module {echo(path)}: a file to import is a .py file whose name is a Python identifier "
            "(my_objectives.py)."
        )
    folder, module_name = str(file.resolve().parent), file.stem
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise UsageError(f"--import_module {echo(path)}: {err}") from err
    imported = getattr(module, "__file__", None)
    if imported is None or Path(imported).resolve() != file.resolve():
        raise UsageError(
            f"--import_module {echo(path)}: the module name {module_name!r} is already taken by "
            f"{imported or 'a built-in module'}; rename the file."
        )


_MODEL_HELP = "hf_cse checkpoint, plain encoder checkpoint (local folder or Hub id), or pip:PACKAGE."


def add_encoder_arguments(
    parser: argparse.ArgumentParser, *, model_default: str | None = None, output_json: bool = False
) -> None:
    """``--model_name_or_path``, ``--pooler``, ``--import_module``, ``--batch_size``, ``--max_seq_length``,
    ``--device`` and ``--disable_tqdm``.

    Args:
        parser: the command's parser; the flags are added in this order, for ``--help``.
        model_default: what is evaluated without ``--model_name_or_path``, said in its help (the report's default
            is the run's own model); None (the default) makes the flag required.
        output_json: add ``--output_json`` last, which :func:`write_output_json` writes (the report writes its own
            ``report.json``).
    """
    parser.add_argument(
        "--model_name_or_path",
        required=model_default is None,
        help=_MODEL_HELP if model_default is None else f"{_MODEL_HELP} Default: {model_default}.",
    )
    # No argparse choices, and no list in the help: a pooler registered by an --import_module module is valid too, and
    # argparse would check --pooler before the import; the registry fills as the poolers' modules (torch, seconds of
    # CPU that a --help does without) are imported. EncoderOptions.from_args checks it after the imports, in one line
    # listing the registered ones.
    parser.add_argument(
        "--pooler",
        default=None,
        metavar="POOLER",
        help="Pooler, by its registered name (e.g. cls or avg; an unknown name is refused with the list of them), one "
        "an --import_module module registers too; default: the one saved in the checkpoint (without hf_cse settings: "
        "its sentence-transformers pooling, e.g. mean -> avg, else cls).",
    )
    parser.add_argument(
        "--import_module",
        action="append",
        default=[],
        metavar="MODULE",
        help="Import MODULE first (repeatable), so that the pooler it registers (hf_cse.register_pooler) loads: a "
        f"checkpoint trained with a pooler of your own names it in config.json. MODULE: {IMPORT_MODULE_HELP}.",
    )
    parser.add_argument(
        "--batch_size", type=NumberFlag(SENTENCES), default=128, help="Encoding batch size (default: 128)."
    )
    parser.add_argument(
        "--max_seq_length",
        type=NumberFlag(NumberRange(low=1, high=TOKEN_LIMIT, integer=True)),  # the tokenizer's lower bound once loaded
        default=None,
        help="Truncation length in tokens; default: the checkpoint's setting, else the tokenizer's limit.",
    )
    parser.add_argument("--device", default=None, help="Device, e.g. cpu or cuda:0 (default: cuda if available).")
    parser.add_argument(
        "--disable_tqdm",
        action="store_true",
        help="Hide the progress bar of the encoding (as the Trainer's flag; HF_HUB_DISABLE_PROGRESS_BARS=1 hides it "
        "too).",
    )
    if output_json:
        parser.add_argument("--output_json", default=None, help="Write the results to this JSON file.")


def check_directory(
    parser: argparse.ArgumentParser, flag: str, path: str | os.PathLike | None, hint: str | None = None
) -> None:
    """Raise the parser's usage error when ``path`` (given as ``flag``) is set but is no directory, before any model
    is loaded; ``hint`` (how to get the folder) ends the message."""
    if path is not None and not Path(path).is_dir():
        parser.error(f"{flag} {echo(str(path))} does not exist or is not a directory{f'; {hint}' if hint else ''}.")


@dataclass(frozen=True)
class EncoderOptions:
    """How a command loads and runs its encoder: the flags of :func:`add_encoder_arguments` but the model, which
    the report defaults to the run's own. The defaults are the flags'.

    Attributes:
        pooler: pooler override; None keeps the checkpoint's (for a checkpoint without hf_cse settings, its
            sentence-transformers pooling where a pooler computes it, else ``cls``:
            :func:`~hf_cse.modeling.saved_pooling.plain_checkpoint_pooler`).
        max_seq_length: truncation length in tokens; None keeps the checkpoint's, else the tokenizer's limit.
        batch_size: sentences per forward pass (default 128).
        device: e.g. ``"cpu"``, ``"cuda:0"``; None picks cuda if available.
        show_progress_bar: show a progress bar over the sentences of each encoding (default; evaluating a model
            on a CPU takes minutes).
    """

    pooler: str | None = None
    max_seq_length: int | None = None
    batch_size: int = 128
    device: str | None = None
    show_progress_bar: bool = True

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EncoderOptions:
        """The options that :func:`add_encoder_arguments`' flags parsed into ``args``, once the ``--import_module``
        modules are imported (their poolers registered) and ``--pooler`` is checked against the registry.

        Raises:
            UsageError: a module that does not import. ValueError: a pooler no one registered.
        """
        from ..modeling.poolers import pooler_class

        for module in args.import_module:
            import_user_module(module)
        if args.pooler is not None:
            pooler_class(args.pooler)
        return cls(
            args.pooler, args.max_seq_length, args.batch_size, args.device, show_progress_bar=not args.disable_tqdm
        )

    def load(self, model_name_or_path: str | os.PathLike) -> SentenceEncoder:
        """The encoder of ``model_name_or_path`` (local folder, Hub id or ``pip:PACKAGE``) with these options; without
        ``pooler``, a checkpoint without hf_cse settings pools as its sentence-transformers files say
        (:func:`~hf_cse.modeling.saved_pooling.plain_checkpoint_pooler`)."""
        from ..modeling.encoder import SentenceEncoder

        return SentenceEncoder.from_pretrained(
            model_name_or_path, pooler=self.pooler, max_seq_length=self.max_seq_length, device=self.device
        )

    def encode_function(self, encoder: SentenceEncoder) -> Callable[[Sequence[str]], torch.Tensor]:
        """``encoder.encode`` at ``batch_size`` (with its progress bar unless disabled): N sentences to a float
        ``[N, hidden]`` tensor."""
        return functools.partial(encoder.encode, batch_size=self.batch_size, show_progress_bar=self.show_progress_bar)

    def settings(self, model_name_or_path: str | os.PathLike, encoder: SentenceEncoder) -> dict[str, Any]:
        """:func:`embedding_settings` plus ``batch_size`` and the ``device`` the encoder runs on."""
        return {
            **embedding_settings(model_name_or_path, encoder),
            "batch_size": self.batch_size,
            "device": str(next(encoder.model.parameters()).device),
        }


def embedding_settings(model_name_or_path: str | os.PathLike, encoder: SentenceEncoder) -> dict[str, Any]:
    """The settings that decide the embeddings, as actually used: ``model_name_or_path``, the ``pooler`` (the saved
    one when ``--pooler`` is omitted) and the resolved ``max_seq_length``."""
    return {
        "model_name_or_path": str(model_name_or_path),
        "pooler": encoder.model.pooling.pooler,
        "max_seq_length": encoder.sentence_tokenizer.max_seq_length,
    }


def write_output_json(path: str | Path | None, output: dict[str, Any]) -> None:
    """Write ``output`` to ``--output_json`` (parent folders created) and say so; nothing when ``path`` is None."""
    if path is None:
        return
    print(f"Wrote {write_json_atomic(path, output)}")
