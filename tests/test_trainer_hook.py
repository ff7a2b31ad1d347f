"""The one private Trainer method hf_cse overrides, ``Trainer._save_checkpoint`` (hf_cse.training.saving.trainer_hook):
every checkpoint is written into the writer's staging folder and published whole, and each way a transformers release
could change the hook (the method gone or changed, a save that does not call it, a checkpoint written outside
``args.output_dir``) stops the run with a one-line error instead of publishing an unstaged checkpoint."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import make_tiny_trainer
from transformers import Trainer

from hf_cse import CSETrainer
from hf_cse.training.run_arguments import TRAINING_ARGS_FILE
from hf_cse.training.saving import TrainerHookError, verification_problem
from hf_cse.training.saving.trainer_hook import CHECKPOINT_HOOK


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


def test_the_trainer_has_no_mixin_and_overrides_one_private_method() -> None:
    assert CSETrainer.__bases__ == (Trainer,)
    assert private_trainer_overrides(CSETrainer) == {CHECKPOINT_HOOK}
    assert list(inspect.signature(getattr(Trainer, CHECKPOINT_HOOK)).parameters) == ["self", "model", "trial"]


def test_every_checkpoint_is_written_in_staging_and_published_whole(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    trainer = make_tiny_trainer(tiny_encoder_dir, out, max_steps=4, push_to_hub=False)
    writes: list[dict[str, Any]] = []
    trainer_save_checkpoint = Trainer._save_checkpoint

    def recorded(self: Trainer, model: Any, trial: Any) -> None:
        before = {path.name for path in out.iterdir()}
        trainer_save_checkpoint(self, model, trial)
        staged = Path(self.args.output_dir) / f"checkpoint-{self.state.global_step}"
        writes.append(
            {
                "output_dir": Path(self.args.output_dir),
                "new_in_output": {path.name for path in out.iterdir()} - before,
                "staged": sorted(path.name for path in staged.iterdir()),
            }
        )

    monkeypatch.setattr(Trainer, CHECKPOINT_HOOK, recorded)
    trainer.train()

    assert [write["output_dir"] for write in writes] == [out / f".checkpoint-{step}.partial" for step in (2, 4)]
    for write in writes:
        assert write["new_in_output"] == set()  # the Trainer wrote nothing beside its staging folder
        assert {"model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json"} <= set(write["staged"])
    assert sorted(path.name for path in out.iterdir() if path.name.startswith(".checkpoint")) == []
    for step in (2, 4):
        checkpoint = out / f"checkpoint-{step}"
        assert verification_problem(checkpoint) is None
        # The saved arguments are the user's: the run folder, and push_to_hub as given, not the save's.
        saved = json.loads((checkpoint / TRAINING_ARGS_FILE).read_text(encoding="utf-8"))
        assert (saved["output_dir"], saved["push_to_hub"]) == (str(out), False)
    assert trainer.args.output_dir == str(out) and trainer.args.push_to_hub is False


def test_a_checkpoint_written_outside_args_output_dir_fails_loudly(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release whose ``_save_checkpoint`` no longer writes under ``args.output_dir``: the run stops at the first
    save, and what the Trainer wrote in place never verifies (no manifest), so no resume takes it."""
    out = tmp_path / "out"
    trainer = make_tiny_trainer(tiny_encoder_dir, out, max_steps=4)
    monkeypatch.setattr(Trainer, "_get_output_dir", lambda self, trial: str(out))
    with pytest.raises(TrainerHookError, match=r"wrote checkpoint-2 outside the staging folder") as raised:
        trainer.train()
    assert "\n" not in str(raised.value) and CHECKPOINT_HOOK in str(raised.value)
    assert verification_problem(out / "checkpoint-2") is not None
    assert not (out / ".checkpoint-2.partial").exists()


def test_a_save_that_does_not_call_the_hook_fails_loudly(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release that saves checkpoints through another method than ``_save_checkpoint`` (hf_cse's override never
    runs): the save's ``on_save`` stops the run."""
    trainer = make_tiny_trainer(tiny_encoder_dir, tmp_path / "out", max_steps=4)
    monkeypatch.setattr(CSETrainer, CHECKPOINT_HOOK, Trainer._save_checkpoint)
    with pytest.raises(TrainerHookError, match=r"saved checkpoint-2 without calling Trainer\._save_checkpoint"):
        trainer.train()


@pytest.mark.parametrize("change", ["removed", "other arguments"])
def test_a_removed_or_changed_hook_fails_when_the_trainer_is_built(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    if change == "removed":
        monkeypatch.delattr(Trainer, CHECKPOINT_HOOK)
        expected = r"Trainer has no method _save_checkpoint"
    else:
        monkeypatch.setattr(Trainer, CHECKPOINT_HOOK, lambda self, model, trial, metrics: None)
        expected = r"Trainer\._save_checkpoint takes \(self, model, trial, metrics\)"
    with pytest.raises(TrainerHookError, match=expected):
        make_tiny_trainer(tiny_encoder_dir, tmp_path / "out")
