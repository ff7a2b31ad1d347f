"""How a checkpoint is saved (hf_cse.training.saving.writer): the Trainer writes ``checkpoint-N`` in place through its
public methods, and the run's writer, a callback, commits it in ``on_save`` with the manifest, written last. No
private Trainer method is overridden and no training argument changes while the trainer runs; each way a transformers
release could save otherwise (a checkpoint written elsewhere, a save that bypasses ``save_model``) stops the run with
one line, and the one private Trainer method hf_cse calls (``_load_from_checkpoint``) is checked here."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import make_tiny_trainer
from safetensors.torch import load_file
from transformers import Trainer
from transformers.trainer_utils import HubStrategy

from hf_cse import CSETrainer
from hf_cse.errors import UsageError
from hf_cse.training.record.run_arguments import TRAINING_ARGS_FILE
from hf_cse.training.saving import (
    TrainerSaveError,
    is_committed,
    newest_verified_checkpoint,
    resolve_resume_checkpoint,
    verification_problem,
)
from hf_cse.training.saving.resume import load_finished_run
from hf_cse.training.saving.writer import RunWriter


def private_trainer_overrides(cls: type) -> set[str]:
    """The private ``Trainer`` methods that ``cls`` or a base class of hf_cse's defines."""
    private = {name for name in dir(Trainer) if name.startswith("_") and not name.startswith("__")}
    return {
        name
        for base in inspect.getmro(cls)
        if base.__module__.startswith("hf_cse")
        for name, value in vars(base).items()
        if name in private and callable(value)
    }


def test_the_trainer_has_no_mixin_and_overrides_no_private_method() -> None:
    assert CSETrainer.__bases__ == (Trainer,)
    assert private_trainer_overrides(CSETrainer) == set()


def test_the_private_loader_of_a_finished_run_is_as_hf_cse_calls_it(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """``load_finished_run`` calls ``Trainer._load_from_checkpoint(checkpoint)`` (no public method loads a
    checkpoint's weights without training): a release that renames it or changes its arguments fails here, and the
    call loads the checkpoint's weights."""
    assert list(inspect.signature(Trainer._load_from_checkpoint).parameters) == [
        "self",
        "resume_from_checkpoint",
        "model",
    ]
    make_tiny_trainer(tiny_encoder_dir, tmp_path, max_steps=2).train()
    fresh = make_tiny_trainer(tiny_encoder_dir, tmp_path, max_steps=2)
    load_finished_run(fresh, str(tmp_path / "checkpoint-2"))
    saved = load_file(tmp_path / "checkpoint-2" / "model.safetensors")
    loaded = fresh.model.state_dict()
    assert fresh.state.global_step == 2 and saved.keys() <= loaded.keys()
    assert all(torch.equal(saved[name], loaded[name]) for name in saved)


def test_every_checkpoint_is_written_in_place_and_committed_by_its_manifest(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the writer's ``on_save`` starts, the Trainer has written ``checkpoint-N`` in place and nothing commits it
    yet; with ``save_total_limit`` 1, the last verified checkpoint is still there (the Trainer rotates nothing: it is
    given no limit), and is rotated away only once the new one is committed."""
    out = tmp_path / "out"
    trainer = make_tiny_trainer(tiny_encoder_dir, out, max_steps=4, save_total_limit=1, hub_strategy="checkpoint")
    seen: list[dict[str, Any]] = []
    on_save = RunWriter.on_save

    def recorded(writer: RunWriter, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        folder = out / f"checkpoint-{state.global_step}"
        before = {"committed": is_committed(folder), "files": {path.name for path in folder.iterdir()}}
        before["newest verified"] = newest_verified_checkpoint(out)
        seen.append(before)
        return on_save(writer, args, state, control, **kwargs)

    monkeypatch.setattr(RunWriter, "on_save", recorded)
    trainer.train()
    assert [entry["committed"] for entry in seen] == [False, False]
    assert all({"model.safetensors", "optimizer.pt", "trainer_state.json"} <= entry["files"] for entry in seen)
    assert [entry["newest verified"] for entry in seen] == [None, out / "checkpoint-2"]
    assert sorted(path.name for path in out.iterdir() if "checkpoint" in path.name) == ["checkpoint-4"]
    assert verification_problem(out / "checkpoint-4") is None
    # The Trainer was handed no limit and no checkpoint push from the start; the arguments saved are the user's.
    assert (trainer.args.save_total_limit, trainer.args.hub_strategy) == (None, HubStrategy.END)
    assert (trainer.args.checkpoint_limit, trainer.args.checkpoint_hub_strategy) == (1, HubStrategy.CHECKPOINT)
    saved = json.loads((out / "checkpoint-4" / TRAINING_ARGS_FILE).read_text(encoding="utf-8"))
    assert (saved["output_dir"], saved["save_total_limit"], saved["hub_strategy"]) == (str(out), 1, "checkpoint")


def test_saving_a_step_again_keeps_the_verified_checkpoint_until_the_new_one_is_committed(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run resumed from an earlier checkpoint than the newest saves the newest's step again: the verified
    checkpoint-4 is set aside (not written into), a save that fails midway puts it back, and one that finishes
    replaces it."""
    make_tiny_trainer(tiny_encoder_dir, tmp_path, max_steps=4).train()
    original = (tmp_path / "checkpoint-4" / "hf_cse_manifest.json").read_bytes()
    save_rng_state = CSETrainer._save_rng_state

    def crash_at_step_4(self: CSETrainer, output_dir: str) -> None:
        if self.state.global_step == 4:
            raise KeyboardInterrupt  # Ctrl-C: nothing is cleaned up, as after a kill
        save_rng_state(self, output_dir)

    monkeypatch.setattr(CSETrainer, "_save_rng_state", crash_at_step_4)
    with pytest.raises(KeyboardInterrupt):
        make_tiny_trainer(tiny_encoder_dir, tmp_path, max_steps=4).train(str(tmp_path / "checkpoint-2"))
    monkeypatch.undo()
    assert not is_committed(tmp_path / "checkpoint-4")
    assert [path.name.startswith(".checkpoint-4.old-") for path in tmp_path.glob(".checkpoint-4.*")] == [True]
    assert newest_verified_checkpoint(tmp_path) == tmp_path / "checkpoint-2"  # the unfinished one is never taken

    again = make_tiny_trainer(tiny_encoder_dir, tmp_path, max_steps=4)
    again.run_writer.recover()  # what the next run does first: the verified checkpoint-4 is back
    assert (tmp_path / "checkpoint-4" / "hf_cse_manifest.json").read_bytes() == original
    assert resolve_resume_checkpoint("true", tmp_path) == str(tmp_path / "checkpoint-4")
    again.train(str(tmp_path / "checkpoint-2"))  # and saved again, whole
    assert verification_problem(tmp_path / "checkpoint-4") is None
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".")) == []


def test_a_checkpoint_written_elsewhere_fails_loudly(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release that writes checkpoints elsewhere than ``OUTPUT/checkpoint-N``: the run stops at the first save, and
    nothing is committed."""
    out = tmp_path / "out"
    trainer = make_tiny_trainer(tiny_encoder_dir, out, max_steps=4)
    monkeypatch.setattr(Trainer, "_get_output_dir", lambda self, trial: str(tmp_path / "elsewhere"))
    with pytest.raises(TrainerSaveError, match=r"saved checkpoint-2 without the trainer's save_model") as raised:
        trainer.train()
    assert "\n" not in str(raised.value)
    assert newest_verified_checkpoint(out) is None and newest_verified_checkpoint(tmp_path / "elsewhere") is None


def test_a_save_that_bypasses_save_model_fails_loudly(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release whose checkpoint save writes the model without the trainer's ``save_model``: ``on_save`` stops the
    run before anything commits the checkpoint."""
    out = tmp_path / "out"
    trainer = make_tiny_trainer(tiny_encoder_dir, out, max_steps=4)
    monkeypatch.setattr(CSETrainer, "save_model", Trainer.save_model)
    with pytest.raises(TrainerSaveError, match=r"saved checkpoint-2 without the trainer's save_model"):
        trainer.train()
    assert not is_committed(out / "checkpoint-2")


def test_a_limit_set_on_the_built_arguments_is_refused(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """``TrainingArguments.set_save(total_limit=...)`` after the arguments were built would hand the Trainer a limit
    it applies before the manifest: one line naming what to do, before anything is trained."""
    trainer = make_tiny_trainer(tiny_encoder_dir, tmp_path, max_steps=2)
    trainer.args.set_save(total_limit=1)
    with pytest.raises(UsageError, match=r"pass them to CSETrainingArguments\(\.\.\.\)") as raised:
        CSETrainer(model=trainer.model, args=trainer.args, processing_class=trainer.processing_class)
    assert "\n" not in str(raised.value)
