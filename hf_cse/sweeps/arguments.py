"""The ``run_unsup.py`` command line of each setting of a sweep, checked before any run starts.

A sweep's runs are ``run_unsup.py`` subprocesses; their flags are the sweep's ``--config``, the setting's grid values
and the flags after ``--``, then the flags by which the sweep selects checkpoints on STS-B dev. Each setting's
command line is parsed here with ``run_unsup.py``'s own ``parse_args`` (the file loaded, not run), so an unknown
flag, a value of the wrong type or an unknown objective is one error before the first run rather than a failed run
hours in.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import hashlib
import importlib.util
import io
import json
import os
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import HfArgumentParser

from .._third_party_logs import errors_only
from ..errors import UsageError
from ..export.model_card.summary import jsonable
from ..training.training_args import CSETrainingArguments
from .grid import Setting

DEFAULT_EVAL_STEPS = 125
"""STS-B dev is scored every this many steps unless the runs' own ``eval_steps`` says otherwise (SimCSE's value)."""
SELECTION_METRIC = "stsb_spearman"
_MODULE_NAME = "_hf_cse_sweep_run_unsup"
_SELECTION_FLAGS = (
    "the sweep selects checkpoints on STS-B dev every eval_steps (load_best_model_at_end); set eval_steps instead"
)
SWEEP_OWNED: dict[str, str] = {
    "output_dir": "each run goes to OUTPUT_DIR/runs/NAME: give the sweep's --output_dir",
    "seed": "give the seeds with the sweep's --seeds",
    "sts_dir": "give the STS folder with the sweep's --sts_dir (STS-B dev selects, the test sets are scored once)",
    "resume_from_checkpoint": "the sweep resumes or restarts unfinished runs itself",
    "overwrite_output_dir": "the sweep resumes or restarts unfinished runs itself",
    **dict.fromkeys(
        "eval_strategy save_strategy save_steps load_best_model_at_end metric_for_best_model greater_is_better "
        "eval_on_start eval_sts_tasks evaluators".split(),
        _SELECTION_FLAGS,
    ),
}
"""run_unsup.py flags that the sweep sets itself, and why a user may not."""


@dataclass(frozen=True)
class SettingCommand:
    """The ``run_unsup.py`` arguments shared by the runs of one setting (each run adds ``--seed`` and
    ``--output_dir``).

    Attributes:
        setting: the grid point.
        arguments: the arguments, the sweep's own flags last.
        values: the setting's values as run_unsup.py parsed them (``3e-05`` a number, a JSON key's value as
            JSON), for the results.
        eval_steps: how often STS-B dev is scored (and a checkpoint saved).
        sts_dir: the STS folder whose STS-B dev selects checkpoints and whose test sets score them.
        config_sha256: the SHA-256 of the ``--config`` file (``None`` without one): a finished run whose config
            has changed since is not reused.
    """

    setting: Setting
    arguments: tuple[str, ...]
    values: dict[str, Any]
    eval_steps: float
    sts_dir: str
    config_sha256: str | None


class RunUnsupArguments:
    """The flags of a ``run_unsup.py`` file, and its ``parse_args`` to check a command line.

    Args:
        script: the ``run_unsup.py`` to run; it must have ``parse_args(argv)``, ``ModelArguments`` and
            ``DataArguments``, as the repository's has (:mod:`hf_cse.training.arguments.model_data`' two).
    """

    def __init__(self, script: str | os.PathLike) -> None:
        self.script = Path(script)
        if not self.script.is_file():
            raise UsageError(f"--run_unsup {str(self.script)!r} does not exist; give the path of run_unsup.py.")
        spec = importlib.util.spec_from_file_location(_MODULE_NAME, self.script)
        module = importlib.util.module_from_spec(spec)
        sys.modules[_MODULE_NAME] = module  # dataclasses look their module up while the file runs
        spec.loader.exec_module(module)  # defines the parser; its `if __name__ == "__main__"` part does not run
        self._parse_args = module.parse_args
        dataclass_types = (module.ModelArguments, module.DataArguments, CSETrainingArguments)
        parser = HfArgumentParser(dataclass_types)
        # argparse's private list of actions: no public accessor lists a parser's flags (tests/test_private_api.py).
        self.dests = {option: action.dest for action in parser._actions for option in action.option_strings}
        self.dests.update({"--config": "config", "--import_module": "import_module"})
        self.annotations: dict[str, Any] = {}
        for dataclass_type in dataclass_types:
            self.annotations.update(typing.get_type_hints(dataclass_type))

    def flag_name(self, option: str, where: str) -> str:
        """The field that ``option`` (``--learning_rate``, ``--learning-rate``, ``--no_mlp_only_train``) sets.

        Raises:
            UsageError: no run_unsup.py flag is spelt so; the message gives the nearest ones.
        """
        if option in self.dests:
            return self.dests[option]
        names = sorted(set(self.dests.values()))
        near = difflib.get_close_matches(option.lstrip("-"), names, n=3)
        hint = f"did you mean {' or '.join(near)}? " if near else ""
        raise UsageError(
            f"{where}: unknown run_unsup.py flag {option.lstrip('-')!r}; {hint}"
            f"`python run_unsup.py --help_all` lists all {len(names)}."
        )

    def parse(self, argv: list[str], where: str) -> tuple[Any, Any, CSETrainingArguments]:
        """``run_unsup.parse_args(argv)``, its errors (argparse's exits included) as one :class:`UsageError`."""
        stderr = io.StringIO()
        try:
            # Parsing builds TrainingArguments, whose warnings would otherwise print once per setting.
            with contextlib.redirect_stderr(stderr), errors_only("transformers", "hf_cse"):
                return self._parse_args(argv)
        except SystemExit:  # argparse printed usage and "prog: error: MESSAGE"
            lines = [line for line in stderr.getvalue().splitlines() if line.strip()]
            message = lines[-1].split("error: ", 1)[-1] if lines else "invalid arguments"
            raise UsageError(f"{where}: {message}") from None
        except (UsageError, ValueError, FileNotFoundError) as err:
            raise UsageError(f"{where}: {err}") from None

    def check_passthrough(self, argv: list[str], grid_keys: list[str]) -> None:
        """Refuse flags after ``--`` that are unknown, that the sweep sets itself, that a ``--grid`` sweeps (the
        last would win for every run), or ``--config`` (the sweep's own ``--config`` goes to every run)."""
        swept = {key for key in grid_keys if "." not in key}
        for option in (token.split("=", 1)[0] for token in argv if token.startswith("--")):
            name = self.flag_name(option, f"{option} after --")
            if name == "config":
                raise UsageError("--config after --: give it before --, as the sweep's own --config.")
            if name in SWEEP_OWNED:
                raise UsageError(f"{option} after --: {SWEEP_OWNED[name]}.")
            if name in swept:
                raise UsageError(f"{option} after --: --grid {name}=... sets it for each setting; give it once.")

    def grid_key(self, key: str) -> str:
        """``key`` of a ``--grid`` with the flag's own name (``learning-rate`` -> ``learning_rate``).

        Raises:
            UsageError: no run_unsup.py flag, one the sweep sets, ``import_module`` (give it after ``--``), or
                ``FIELD.KEY`` of a ``FIELD`` that takes no JSON mapping.
        """
        field, dot, subkey = key.partition(".")
        name = "config" if field == "config" else self.flag_name(f"--{field}", f"--grid {key}")
        if name in SWEEP_OWNED:
            raise UsageError(f"--grid {key}: {SWEEP_OWNED[name]}.")
        if name == "import_module":
            raise UsageError(f"--grid {key}: modules to import go to every run; give --import_module after --.")
        if subkey and not _takes(self.annotations.get(name), dict):
            mappings = sorted(name for name, annotation in self.annotations.items() if _takes(annotation, dict))
            raise UsageError(
                f"--grid {key}: only JSON flags take FLAG.KEY ({', '.join(mappings)}); {field} is no JSON flag."
            )
        return f"{name}{dot}{subkey}"

    def setting_command(
        self,
        setting: Setting,
        *,
        config: str | None,
        passthrough: list[str],
        sts_dir: str | None,
        placeholder_dir: Path,
    ) -> SettingCommand:
        """The run_unsup.py arguments of ``setting``, checked by parsing them.

        ``eval_steps`` is the runs' own (grid, flag after ``--`` or config file), else :data:`DEFAULT_EVAL_STEPS`;
        a checkpoint is saved at every evaluation and ``save_total_limit`` defaults to 1 (while training, the
        Trainer keeps the best checkpoint and the latest, enough to resume; at the end, the best alone).
        ``sts_dir`` is the sweep's ``--sts_dir``, else the runs'.

        Raises:
            UsageError: a value run_unsup.py refuses, no STS folder, or fewer training steps than ``eval_steps``.
        """
        where = f"setting {setting.name}"
        values = setting.as_dict()
        config = values.get("config", config)
        plain, nested = [], {}
        for key, value in setting.items:
            if key == "config":
                continue
            field, _, subkey = key.partition(".")
            if subkey:
                nested.setdefault(field, []).append((subkey.split("."), value))
            elif _takes(self.annotations.get(field), list):
                plain += [f"--{field}", *value.split()]
            else:
                plain += [f"--{field}", value]
        base = ([] if config is None else ["--config", config]) + plain + list(passthrough)
        probe = ["--output_dir", str(placeholder_dir), "--eval_strategy", "no", "--save_strategy", "no"]
        parsed = self.parse([*base, *probe, "--load_best_model_at_end", "false"], where)
        training_args = parsed[-1]

        merged = []
        for field, entries in nested.items():  # FIELD.KEY values, over the FIELD the config and flags give
            current = _parsed(parsed, field) or {}
            mapping = copy.deepcopy(_json_value(current) if isinstance(current, str) else current)
            if not isinstance(mapping, dict):
                raise UsageError(f"{where}: {field} is {current!r}, not a JSON mapping to set keys of.")
            for path, value in entries:
                _set_nested(mapping, path, _json_value(value))
            merged += [f"--{field}", json.dumps(mapping)]

        eval_steps = training_args.eval_steps or DEFAULT_EVAL_STEPS
        steps = str(plain_number(eval_steps))
        if training_args.max_steps > 0 and eval_steps >= 1 and training_args.max_steps < eval_steps:
            raise UsageError(
                f"{where}: max_steps {training_args.max_steps} < eval_steps {steps}: STS-B dev would never be scored "
                "to select a checkpoint; lower eval_steps (e.g. -- --eval_steps N)."
            )
        sts_dir = sts_dir if sts_dir is not None else training_args.sts_dir
        if sts_dir is None:
            raise UsageError(
                "--sts_dir is required (or sts_dir in the --config file): the SentEval-layout STS folder whose STS-B "
                "dev selects checkpoints and whose test sets score them (python -m hf_cse.download fetches it)."
            )
        selection = ["--eval_strategy", "steps", "--eval_steps", steps, "--save_strategy", "steps"]
        selection += ["--save_steps", steps, "--load_best_model_at_end", "true", "--eval_on_start", "false"]
        selection += ["--metric_for_best_model", SELECTION_METRIC, "--greater_is_better", "true"]
        # The run's evaluator is STS-B dev whatever its config says, so that its primary metric is the one selected.
        selection += ["--eval_sts_tasks", "stsb", "--evaluators", "sts", "--sts_dir", str(sts_dir)]
        if training_args.checkpoint_limit is None:  # the save_total_limit given (CSETrainingArguments)
            selection += ["--save_total_limit", "1"]
        arguments = [*base, *merged, *selection]
        parsed = self.parse([*arguments, "--seed", "0", "--output_dir", str(placeholder_dir)], where)

        typed = {  # a flag's value as run_unsup.py parsed it (3e-5 a number, true a bool), a JSON key's as JSON
            key: value if key == "config" else _json_value(value) if "." in key else jsonable(_parsed(parsed, key))
            for key, value in setting.items
        }
        digest = hashlib.sha256(Path(config).read_bytes()).hexdigest() if config is not None else None
        return SettingCommand(setting, tuple(arguments), typed, float(eval_steps), str(sts_dir), digest)


def _set_nested(mapping: dict[str, Any], path: list[str], value: Any) -> None:
    """``mapping[path[0]][path[1]]... = value``, creating (or replacing non-mapping) levels on the way."""
    for part in path[:-1]:
        if not isinstance(mapping.get(part), dict):
            mapping[part] = {}
        mapping = mapping[part]
    mapping[path[-1]] = value


def _parsed(parsed: tuple[Any, ...], field: str) -> Any:
    """The value of ``field`` in the argument dataclasses ``parsed`` (run_unsup.py's ``parse_args``)."""
    return next(getattr(args, field) for args in parsed if hasattr(args, field))


def _json_value(text: str) -> Any:
    """A ``FIELD.KEY`` grid value: JSON (``0.2``, ``true``, ``[1, 2]``), else the text as a string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def plain_number(value: float) -> int | float:
    """``value``, an int when it is a whole number (``125.0`` -> ``125``)."""
    return int(value) if float(value).is_integer() else value


def _takes(annotation: Any, kind: type) -> bool:
    """Whether ``annotation``, or a member of its union, is ``kind`` (``dict``, ``list``) or ``kind[...]``."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    members = typing.get_args(annotation) if union else (annotation,)
    return any(member is kind or typing.get_origin(member) is kind for member in members)
