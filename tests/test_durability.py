"""Durability: what a power cut can lose (hf_cse/training/saving/writer.py, "Durability"). The invariant, checked on
every file a run and its report leave, by recording each ``fsync`` and each rename as they happen:

1. a file appears under a visible path (no hidden component: not in a staging folder, nor a temporary
   ``.NAME.XXXX.tmp``) only by a rename, and only after it was flushed to disk (``fsync`` of the path it had then):
   a power cut never publishes a file whose bytes are not on the disk. A checkpoint's files, which the Trainer
   writes in place, are published by the rename that puts the checkpoint's manifest in place (its commit), and
   must be flushed before it;
2. after that rename, the folder it was renamed into (for a checkpoint's commit: the run folder, which holds the
   checkpoint's own entry) is flushed (``fsync`` of the folder), before anything there is taken out of view (an
   older checkpoint rotated away or set aside): the rename itself survives, and a power cut never leaves the older
   checkpoint deleted and the newer one not yet committed.

The files: every checkpoint's (model, optimizer, scheduler, RNG and trainer state, run settings, manifest), the
final model's (with its manifest and sentence-transformers files), the metrics, trainer state and card (written
whole by the atomic writer), and what the commands write into the run folder: ``python -m hf_cse.report``'s report
and plots, ``python -m hf_cse.eval --output_json``, and ``python -m hf_cse.push``'s card and STS results.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT, SENTENCES, write_senteval_dir

from hf_cse.commands import report as report_cli
from hf_cse.commands.eval import main as eval_main
from hf_cse.commands.push import main as push_main
from hf_cse.folder_lock import LOCK_FILE
from hf_cse.run_files import MANIFEST_FILE

sys.path.insert(0, str(REPO_ROOT))
import run_unsup  # noqa: E402

Event = tuple[str, Path, Path | None]
"""``("fsync", path, None)`` or ``("rename", source, destination)``, absolute paths."""


def record_events(monkeypatch: pytest.MonkeyPatch) -> list[Event]:
    events: list[Event] = []
    fsync, replace, rename = os.fsync, os.replace, os.rename

    def recorded_fsync(fd: int) -> None:
        events.append(("fsync", Path(os.readlink(f"/proc/self/fd/{fd}")), None))
        fsync(fd)

    def recorded_replace(source: str | os.PathLike, destination: str | os.PathLike, **kwargs: object) -> None:
        replace(source, destination, **kwargs)
        events.append(("rename", Path(os.path.abspath(source)), Path(os.path.abspath(destination))))

    def recorded_rename(source: str | os.PathLike, destination: str | os.PathLike, **kwargs: object) -> None:
        rename(source, destination, **kwargs)
        events.append(("rename", Path(os.path.abspath(source)), Path(os.path.abspath(destination))))

    monkeypatch.setattr(os, "fsync", recorded_fsync)
    monkeypatch.setattr(os, "replace", recorded_replace)
    monkeypatch.setattr(os, "rename", recorded_rename)
    return events


def visible(path: Path, root: Path) -> bool:
    return path.is_relative_to(root) and not any(part.startswith(".") for part in path.relative_to(root).parts)


def history(path: Path, events: list[Event]) -> list[tuple[int, Path]]:
    """The paths the file now at ``path`` had, oldest first: ``(-1, the path it was written at)``, then ``(index of
    the rename, the path it gave)`` for each rename that moved it or a folder holding it."""
    steps = []
    current = path
    for index in range(len(events) - 1, -1, -1):
        kind, source, destination = events[index]
        if kind == "rename" and destination is not None and current.is_relative_to(destination):
            steps.append((index, current))
            current = source / current.relative_to(destination)
    steps.append((-1, current))
    return steps[::-1]


def checkpoint_commit(path: Path, root: Path, events: list[Event]) -> int | None:
    """The index of the rename that put the manifest of the ``checkpoint-N`` holding ``path`` in place (the last
    one), ``None`` when ``path`` is in no checkpoint or its checkpoint was never committed."""
    parts = path.relative_to(root).parts
    if len(parts) < 2 or not re.fullmatch(r"checkpoint-\d+", parts[0]):
        return None
    manifest = root / parts[0] / MANIFEST_FILE
    commits = [j for j, (kind, _, destination) in enumerate(events) if kind == "rename" and destination == manifest]
    return commits[-1] if commits else None


def check_durability(root: Path, events: list[Event]) -> list[str]:
    """The invariant of the module docstring for every file under ``root``; returns the files checked."""
    root = root.resolve()
    fsyncs = [(index, path) for index, (kind, path, _) in enumerate(events) if kind == "fsync"]
    checked = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        if path.name == LOCK_FILE:
            continue
        steps = history(path, events)
        shown = next((n for n, (index, current) in enumerate(steps) if index >= 0 and visible(current, root)), None)
        if shown is None:  # written in place: a checkpoint's file, shown by its checkpoint's commit
            commit = checkpoint_commit(path, root, events)
            assert commit is not None, f"{path} was written in place, never renamed into view: {steps}"
            steps, shown = [*steps, (commit, path)], len(steps)
        index = steps[shown][0]
        # Flushed under any path it had before it was shown (an atomic write flushes its temporary file).
        spans = [(steps[n][0], steps[n + 1][0], steps[n][1]) for n in range(shown)]
        flushed = any(start < i < end and p == name for i, p in fsyncs for start, end, name in spans)
        assert flushed, f"{path} was published before it was flushed: {steps}"
        folder = events[index][2].parent  # the folder the rename changed
        if events[index][2] != steps[shown][1]:  # a checkpoint's commit: its entry in the run folder must last
            folder = root
        # Flushed before anything is taken out of view there (a rotation, a checkpoint set aside), else before the end.
        hiding = [
            j
            for j, (kind, source, destination) in enumerate(events)
            if j > index and kind == "rename" and source.parent == folder and visible(source, root)
            if not visible(destination, root)
        ]
        deadline = min(hiding, default=len(events))
        assert any(index < i < deadline and p == folder for i, p in fsyncs), f"the rename of {path} is not flushed"
        checked.append(path.relative_to(root).as_posix())
    return checked


def test_nothing_a_run_or_its_report_publishes_waits_in_the_page_cache(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    train_file = tmp_path / "train.txt"
    train_file.write_text("\n".join(SENTENCES * 2) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    argv = [f"--model_name_or_path={tiny_encoder_dir}", f"--train_file={train_file}", f"--output_dir={out}"]
    argv += ["--per_device_train_batch_size=4", "--max_steps=4", "--save_steps=2", "--save_total_limit=1"]
    argv += ["--logging_steps=1", "--report_to=none", "--use_cpu=true", "--disable_tqdm=true"]
    events = record_events(monkeypatch)
    run_unsup.main(argv)
    report_cli.main([str(out), "--device", "cpu"])
    sts_dir = write_senteval_dir(tmp_path / "sts")
    eval_main(["--model_name_or_path", str(out), "--sts_dir", str(sts_dir), "--device", "cpu"]
              + ["--output_json", str(out / "eval" / "sts.json")])  # fmt: skip
    push_main([str(out), "--repo_id", "someone/tiny", "--sts_dir", str(sts_dir), "--device", "cpu", "--dry_run"])
    checked = check_durability(out, events)
    assert len(checked) > 30
    for expected in (
        "checkpoint-4/model.safetensors",
        "checkpoint-4/optimizer.pt",
        "checkpoint-4/rng_state.pth",
        "checkpoint-4/hf_cse_manifest.json",
        "model.safetensors",
        "tokenizer.json",
        "1_Pooling/config.json",
        "hf_cse_manifest.json",
        "trainer_state.json",
        "all_results.json",
        "README.md",
        "report/report.md",
        "report/loss.png",
        "eval/sts.json",
        "sts_results.json",
        "hf_cse_training.json",
    ):
        assert expected in checked, expected
