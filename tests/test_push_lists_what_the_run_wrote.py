"""``python -m hf_cse.push`` of a real finished run uploads exactly what the run wrote: the files its manifest lists
(the final model's publish, then the metrics, trainer state and card, each added as it is written), of an
uploadable kind. Every uploadable name planted afterwards, by name alone indistinguishable from hf_cse's (the
audit's ``pytorch_model.bin``, ``added_tokens.json``, ``merges.txt``, ``2_Dense/model.safetensors``, and a LoRA
adapter's files), stays local and is named; a file of the run changed afterwards too. tests/test_upload_list.py
enumerates the names on placeholder folders; this is the same on the folder a run leaves. A run saved by an hf_cse
from before manifests is refused in one line before anything is evaluated, until its user lists its files
(``--write_manifest``).
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT, SENTENCES

from hf_cse.atomic_files import read_manifest
from hf_cse.commands.push import main as push_main
from hf_cse.errors import UsageError
from hf_cse.evaluation import checkpoint_scores
from hf_cse.export.upload_list import RUN_FILES

sys.path.insert(0, str(REPO_ROOT))
import run_unsup  # noqa: E402

PLANTED = [
    "pytorch_model.bin",
    "added_tokens.json",
    "merges.txt",
    "2_Dense/model.safetensors",
    "2_Dense/config.json",
    "adapter/adapter_model.safetensors",
    "adapter/adapter_config.json",
    "model-00001-of-00002.safetensors",
    "special_tokens_map.json",
    "generation_config.json",
]


@pytest.fixture(scope="module")
def finished_run(tiny_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("run")
    train_file = work / "train.txt"
    train_file.write_text("\n".join(SENTENCES * 2) + "\n", encoding="utf-8")
    argv = [f"--model_name_or_path={tiny_encoder_dir}", f"--train_file={train_file}", f"--output_dir={work / 'out'}"]
    argv += ["--per_device_train_batch_size=4", "--max_steps=2", "--save_steps=2", "--report_to=none"]
    run_unsup.main([*argv, "--use_cpu=true", "--disable_tqdm=true"])
    return work / "out"


def dry_run(run: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    push_main([str(run), "--repo_id", "someone/tiny", "--dry_run"])
    return capsys.readouterr().out.splitlines()


def test_a_push_lists_exactly_what_the_run_wrote(
    finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    run = Path(shutil.copytree(finished_run, tmp_path / "run"))
    listed = read_manifest(run)
    assert listed is not None
    wrote = sorted(name for name in listed if RUN_FILES.fullmatch(name))
    assert {"model.safetensors", "config.json", "tokenizer.json", "trainer_state.json", "README.md"} <= set(wrote)
    assert dry_run(run, capsys) == wrote

    assert not set(PLANTED) & set(listed)  # this run wrote none of them: each is planted
    for name in PLANTED:
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text('{"planted": true}', encoding="utf-8")
        assert RUN_FILES.fullmatch(name), name  # uploadable by its name alone
    changed = run / "tokenizer.json"
    changed.write_bytes(changed.read_bytes().replace(b'"', b"'", 1))  # same size, other bytes
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hf_cse.export.upload_list"):
        listed_now = dry_run(run, capsys)
    assert listed_now == [name for name in wrote if name != "tokenizer.json"]
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "hf_cse.export.upload_list"]
    for name in PLANTED:
        assert name.split("/")[0] in warning, name
    assert "changed since hf_cse wrote them (the manifest's size or SHA-256 differs): tokenizer.json" in warning


def test_a_run_without_a_manifest_is_refused_in_one_line(
    finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Path(shutil.copytree(finished_run, tmp_path / "run"))
    (run / "hf_cse_manifest.json").unlink()  # as an older hf_cse left it
    readme = (run / "README.md").read_bytes()
    with pytest.raises(UsageError, match="has no readable hf_cse_manifest.json, .*nothing is uploaded") as raised:
        dry_run(run, capsys)
    assert "\n" not in str(raised.value)
    assert (run / "README.md").read_bytes() == readme  # the card rendered for the push is put back


def as_an_older_hf_cse_left_it(finished_run: Path, tmp_path: Path) -> Path:
    """A copy of the run without any manifest, as an hf_cse from before manifests saved it."""
    run = Path(shutil.copytree(finished_run, tmp_path / "run"))
    for manifest in run.rglob("hf_cse_manifest.json"):
        manifest.unlink()
    return run


def test_a_run_without_a_manifest_is_refused_before_anything_is_evaluated_or_written(
    finished_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = as_an_older_hf_cse_left_it(finished_run, tmp_path)
    before = {path: path.read_bytes() for path in run.rglob("*") if path.is_file()}
    monkeypatch.setattr(
        checkpoint_scores, "evaluate_run", lambda *args, **kwargs: pytest.fail("evaluated before the refusal")
    )
    argv = [str(run), "--repo_id", "someone/tiny", "--sts_dir", str(tmp_path), "--dry_run"]
    with pytest.raises(UsageError, match="push with --write_manifest, which lists those of an uploadable kind"):
        push_main(argv)
    assert {path: path.read_bytes() for path in run.rglob("*") if path.is_file()} == before


def test_write_manifest_lists_an_older_run_s_files_as_the_run_s_and_pushes_them(
    finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    wrote = sorted(name for name in read_manifest(finished_run) if RUN_FILES.fullmatch(name))
    run = as_an_older_hf_cse_left_it(finished_run, tmp_path)
    with caplog.at_level(logging.WARNING, logger="hf_cse.commands.push"):
        push_main([str(run), "--repo_id", "someone/tiny", "--dry_run", "--write_manifest"])
    assert capsys.readouterr().out.splitlines() == wrote  # what this hf_cse would have listed itself
    assert f"Listed {len(wrote)} files of {run} as the run's, on your word: {', '.join(wrote)}" in caplog.text
    assert dry_run(run, capsys) == wrote  # from now on a plain push, which names what it did not write
    with pytest.raises(UsageError, match="--write_manifest lists the files of a run saved without a manifest, and"):
        push_main([str(run), "--repo_id", "someone/tiny", "--dry_run", "--write_manifest"])  # never replaced
