"""What the libraries' own config reading lacks, beside hf_cse's (the module docstrings of
:mod:`hf_cse.training.config_file` and :mod:`hf_cse.training.argument_parser`).

Each test runs the library on the same input as hf_cse's reader: ``HfArgumentParser.parse_yaml_file`` /
``parse_dict`` (transformers), and ``set_defaults`` then flags, which is TRL's ``TrlParser.parse_args_and_config``
pattern and ``run_unsup.py``'s.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
import yaml
from conftest import run_unsup
from transformers import HfArgumentParser

from hf_cse.errors import UsageError
from hf_cse.training.config_file import read_config_file


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


def test_parse_yaml_file_keeps_a_yaml_string_where_a_number_belongs(tmp_path: Path) -> None:
    """PyYAML reads ``3e-5`` (no dot) as a string; parse_yaml_file hands it on as one, and so would the optimizer get
    it. hf_cse converts it as the flag would be."""
    path = write(tmp_path, "learning_rate: 3e-5\nlora_target_modules: query\n")
    (theirs,) = HfArgumentParser(Settings).parse_yaml_file(path)
    assert theirs.learning_rate == "3e-5" and theirs.lora_target_modules == "query"
    ours = read_config_file(path, [Settings]).arguments
    assert ours == {"learning_rate": 3e-5, "lora_target_modules": ["query"]}  # a scalar for a list: a list of one


def test_set_defaults_lets_a_value_of_the_wrong_type_through_to_the_dataclass(tmp_path: Path) -> None:
    """TRL's pattern (the file's values as the parser's defaults, then the flags) is run_unsup.py's, but argparse
    converts only string defaults: a list where a number belongs reaches the dataclass. hf_cse checks each value
    against its field first and names the file and the key."""
    path = write(tmp_path, "learning_rate: [1.0e-5]\n")
    parser = HfArgumentParser(Settings)
    parser.set_defaults(**yaml.safe_load(path.read_text()))
    (theirs,) = parser.parse_args_into_dataclasses(args=["--seed", "7"])
    assert theirs.learning_rate == [1e-5] and theirs.seed == 7
    with pytest.raises(UsageError) as error:
        read_config_file(path, [Settings])
    assert str(error.value) == f"{path}: learning_rate must be a number, got [1e-05] (a list)."


def test_parse_yaml_file_takes_no_flags_over_the_file_and_run_unsup_does(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """parse_yaml_file builds the dataclasses from the file alone; run_unsup.py reads the file, then the flags over
    it."""
    config = write(
        tmp_path,
        yaml.safe_dump(
            {"model_name_or_path": str(tiny_encoder_dir), "train_file": "t.txt", "output_dir": str(tmp_path / "o")}
            | {"use_cpu": True, "report_to": "none", "seed": 1}
        ),
    )
    # Its parameters: the file and whether to allow extra keys; no command line.
    assert list(inspect.signature(HfArgumentParser.parse_yaml_file).parameters) == [
        "self",
        "yaml_file",
        "allow_extra_keys",
    ]
    assert run_unsup.build_parser().parse_yaml_file(config)[2].seed == 1
    _, _, args = run_unsup.parse_args(["--config", str(config), "--seed", "2"])
    assert args.seed == 2


def test_parse_yaml_file_expands_aliases_and_hf_cse_refuses_them(tmp_path: Path) -> None:
    """A few lines of nested aliases expand to more values than memory holds (a "billion laughs"); yaml.safe_load,
    which parse_yaml_file calls, expands them. Here 3 levels of 10 give 1,000 strings from 4 short lines."""
    path = write(
        tmp_path,
        'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
        "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
        "lora_target_modules: [*c]\n",
    )
    (theirs,) = HfArgumentParser(Settings).parse_yaml_file(path, allow_extra_keys=True)
    flat = theirs.lora_target_modules
    while isinstance(flat[0], list):
        flat = [item for inner in flat for item in inner]
    assert len(flat) == 1000
    refused = r": not valid YAML: line 2, column 8: found the alias \*a; aliases are not allowed"
    with pytest.raises(UsageError, match=refused):
        read_config_file(path, [Settings])


def test_a_key_given_twice_is_one_line_where_yaml_and_json_keep_the_last_without_a_word(tmp_path: Path) -> None:
    yaml_file = write(tmp_path, "seed: 1\nlearning_rate: 1.0e-5\nseed: 2\n", "twice.yaml")
    assert yaml.safe_load(yaml_file.read_text())["seed"] == 2
    with pytest.raises(
        UsageError, match=rf"^{yaml_file}: not valid YAML: line 3, column 1: the key 'seed' is given twice"
    ):
        read_config_file(yaml_file, [Settings])
    json_file = write(tmp_path, '{"seed": 1, "seed": 2}', "twice.json")
    with pytest.raises(UsageError, match=rf"^{json_file}: \['seed'\] given more than once; keep one of each\.$"):
        read_config_file(json_file, [Settings])


def test_parse_yaml_file_errors_are_several_lines_or_name_no_file_and_hf_cses_are_one(tmp_path: Path) -> None:
    broken = write(tmp_path, "learning_rate: [1e-5\nseed: 3\n", "broken.yaml")
    with pytest.raises(yaml.YAMLError) as error:
        HfArgumentParser(Settings).parse_yaml_file(broken)
    assert "\n" in str(error.value)
    with pytest.raises(UsageError) as error:
        read_config_file(broken, [Settings])
    assert "\n" not in str(error.value) and str(error.value).startswith(f"{broken}: not valid YAML: line 2, column 5")

    typo = write(tmp_path, "learning_rte: 1.0e-5\n", "typo.yaml")
    with pytest.raises(ValueError) as error:
        HfArgumentParser(Settings).parse_yaml_file(typo)
    assert str(error.value) == "Some keys are not used by the HfArgumentParser: ['learning_rte']"  # which file?
    with pytest.raises(UsageError, match=rf"^Unknown keys \['learning_rte'\] in {typo}; see"):
        read_config_file(typo, [Settings])


def test_a_paper_results_block_is_an_unknown_key_to_parse_yaml_file_or_hides_typos(tmp_path: Path) -> None:
    """The paper configs' ``paper_results`` block is no argument: parse_yaml_file refuses it, or, told to allow extra
    keys, also lets a misspelt argument pass unnoticed. hf_cse reads the block apart and still refuses the typo."""
    scores = "".join(f"  {task}: 70.0\n" for task in ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"))
    path = write(tmp_path, f"seed: 3\npaper_results:\n  source: A paper\n  method: SimCSE\n{scores}  avg: 70.0\n")
    with pytest.raises(ValueError, match=r"not used by the HfArgumentParser: \['paper_results'\]"):
        HfArgumentParser(Settings).parse_yaml_file(path)
    config = read_config_file(path, [Settings])
    assert config.arguments == {"seed": 3} and config.paper_results.method == "SimCSE"

    path.write_text(path.read_text().replace("seed: 3", "sed: 3"))
    (theirs,) = HfArgumentParser(Settings).parse_yaml_file(path, allow_extra_keys=True)
    assert theirs.seed == 42  # the typo is silently dropped
    with pytest.raises(UsageError, match=r"Unknown keys \['sed'\]"):
        read_config_file(path, [Settings])


# --- argument_parser.py: HfArgumentParser's --help and value errors ------------------------------------------------


def test_hf_argument_parsers_help_buries_hf_cses_flags_under_the_trainers() -> None:
    """HfArgumentParser lists a TrainingArguments subclass's fields in one group, the Trainer's hundred-odd first;
    CSEArgumentParser puts hf_cse's own (``--objective``) first and shows the Trainer's most used ones."""
    theirs = HfArgumentParser(run_unsup.build_parser().dataclass_types).format_help()
    ours = run_unsup.build_parser().format_help()
    for text in (theirs, ours):
        assert "--objective" in text and "--per_device_train_batch_size" in text
    assert theirs.index("--adam_beta1") < theirs.index("--objective")  # a rare Trainer flag first
    assert ours.index("--objective") < ours.index("--per_device_train_batch_size") and "--adam_beta1" not in ours


def test_argparse_repeats_a_long_bad_value_whole_and_cse_argument_parser_cuts_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pasted = "x" * 5000  # a file pasted where a number belongs
    with pytest.raises(SystemExit):
        HfArgumentParser(Settings).parse_args_into_dataclasses(args=["--seed", pasted])
    error = capsys.readouterr().err.splitlines()[-1]
    assert pasted in error and len(error) < 6000, error[:200]
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
