"""hf_cse's config file reader and argument parser (:mod:`hf_cse.training.arguments.config_file`,
:mod:`hf_cse.training.arguments.parser`): what transformers' ``HfArgumentParser`` lacks there is listed in
docs/development.md, "Third-party behaviour hf_cse works around"."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from conftest import run_unsup

from hf_cse.errors import UsageError
from hf_cse.training.arguments.config_file import read_config_file


@dataclasses.dataclass
class Settings:
    """Three fields of the kinds a run's arguments have."""

    learning_rate: float = 3e-5
    lora_target_modules: list[str] | None = None
    seed: int = 42


def write(tmp_path: Path, text: str, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_yaml_string_where_a_number_belongs_is_converted_as_the_flag_would_be(tmp_path: Path) -> None:
    """PyYAML reads ``3e-5`` (no dot) as a string; hf_cse converts it as the flag would be."""
    path = write(tmp_path, "learning_rate: 3e-5\nlora_target_modules: query\n")
    ours = read_config_file(path, [Settings]).arguments
    assert ours == {"learning_rate": 3e-5, "lora_target_modules": ["query"]}  # a scalar for a list: a list of one


def test_a_value_of_the_wrong_type_is_one_line_naming_the_file_and_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, "learning_rate: [1.0e-5]\n")
    with pytest.raises(UsageError) as error:
        read_config_file(path, [Settings])
    assert str(error.value) == f"{path}: learning_rate must be a number, got [1e-05] (a list)."


def test_run_unsup_reads_the_file_then_the_flags_over_it(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    config = write(
        tmp_path,
        yaml.safe_dump(
            {"model_name_or_path": str(tiny_encoder_dir), "train_file": "t.txt", "output_dir": str(tmp_path / "o")}
            | {"use_cpu": True, "report_to": "none", "seed": 1}
        ),
    )
    assert run_unsup.parse_args(["--config", str(config)])[2].seed == 1
    _, _, args = run_unsup.parse_args(["--config", str(config), "--seed", "2"])
    assert args.seed == 2


def test_yaml_aliases_are_refused(tmp_path: Path) -> None:
    """A few lines of nested aliases expand to more values than memory holds (a "billion laughs")."""
    path = write(
        tmp_path,
        'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
        "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
        "lora_target_modules: [*c]\n",
    )
    refused = r": not valid YAML: line 2, column 8: found the alias \*a; aliases are not allowed"
    with pytest.raises(UsageError, match=refused):
        read_config_file(path, [Settings])


def test_a_key_given_twice_is_one_line(tmp_path: Path) -> None:
    """YAML and JSON readers keep the last of a repeated key without a word; hf_cse refuses it."""
    yaml_file = write(tmp_path, "seed: 1\nlearning_rate: 1.0e-5\nseed: 2\n", "twice.yaml")
    with pytest.raises(
        UsageError, match=rf"^{yaml_file}: not valid YAML: line 3, column 1: the key 'seed' is given twice"
    ):
        read_config_file(yaml_file, [Settings])
    json_file = write(tmp_path, '{"seed": 1, "seed": 2}', "twice.json")
    with pytest.raises(UsageError, match=rf"^{json_file}: \['seed'\] given more than once; keep one of each\.$"):
        read_config_file(json_file, [Settings])


def test_a_broken_file_or_an_unknown_key_is_one_line_naming_the_file(tmp_path: Path) -> None:
    broken = write(tmp_path, "learning_rate: [1e-5\nseed: 3\n", "broken.yaml")
    with pytest.raises(UsageError) as error:
        read_config_file(broken, [Settings])
    assert "\n" not in str(error.value) and str(error.value).startswith(f"{broken}: not valid YAML: line 2, column 5")

    typo = write(tmp_path, "learning_rte: 1.0e-5\n", "typo.yaml")
    with pytest.raises(UsageError, match=rf"^Unknown keys \['learning_rte'\] in {typo}; see"):
        read_config_file(typo, [Settings])


def test_a_paper_results_block_is_read_apart_and_a_typo_beside_it_is_still_refused(tmp_path: Path) -> None:
    """The paper configs' ``paper_results`` block is no argument: hf_cse reads it apart and still refuses a misspelt
    argument."""
    scores = "".join(f"  {task}: 70.0\n" for task in ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"))
    path = write(tmp_path, f"seed: 3\npaper_results:\n  source: A paper\n  method: SimCSE\n{scores}  avg: 70.0\n")
    config = read_config_file(path, [Settings])
    assert config.arguments == {"seed": 3} and config.paper_results.method == "SimCSE"

    path.write_text(path.read_text().replace("seed: 3", "sed: 3"))
    with pytest.raises(UsageError, match=r"Unknown keys \['sed'\]"):
        read_config_file(path, [Settings])


# --- argument_parser.py: --help and value errors -------------------------------------------------------------------


def test_help_shows_hf_cses_flags_first_and_the_trainers_most_used_ones() -> None:
    """CSEArgumentParser puts hf_cse's own flags (``--objective``) first and shows the Trainer's most used ones, where
    HfArgumentParser lists the Trainer's hundred-odd first."""
    ours = run_unsup.build_parser().format_help()
    assert "--objective" in ours and "--per_device_train_batch_size" in ours
    assert ours.index("--objective") < ours.index("--per_device_train_batch_size") and "--adam_beta1" not in ours


def test_a_long_bad_value_is_cut_in_the_one_line() -> None:
    pasted = "x" * 5000  # a file pasted where a number belongs
    with pytest.raises(UsageError) as ours:  # the one line run_command prints
        run_unsup.build_parser().parse_args_into_dataclasses(args=["--seed", pasted])
    assert pasted not in str(ours.value) and len(str(ours.value)) < 400, str(ours.value)[:200]


def test_config_given_twice_is_one_line_where_argparse_kept_the_last_file(tmp_path: Path) -> None:
    first = write(tmp_path, "seed: 1\n", "first.yaml")
    second = write(tmp_path, "seed: 2\n", "second.yaml")
    files = rf"'{first}', '{second}'"
    with pytest.raises(UsageError, match=rf"^--config given 2 times \({files}\): give one file") as error:
        run_unsup.parse_run(["--config", str(first), f"--config={second}", "--output_dir", str(tmp_path)])
    assert "\n" not in str(error.value)


def test_a_relative_path_in_a_config_file_is_read_from_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As docs/training.md says: the file's values are taken as flags would be, a relative path unchanged, so that it
    is read from the folder the command runs in, not from the config file's folder."""
    (tmp_path / "configs").mkdir()
    config = write(tmp_path / "configs", "train_file: data/corpus.txt\nmodel_name_or_path: m\n", "run.yaml")
    monkeypatch.chdir(tmp_path)
    parsed = run_unsup.parse_run(["--config", str(config), "--output_dir", "out"])
    assert parsed.data_args.train_file == "data/corpus.txt" and parsed.training_args.output_dir == "out"
    assert Path(parsed.data_args.train_file).resolve() == tmp_path / "data" / "corpus.txt"
