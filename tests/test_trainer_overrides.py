"""The Trainer methods ``CSETrainer`` overrides (issue 53): each one is a place where a transformers release can change
what hf_cse relies on, so the list is kept short and every addition is noticed here. Why each is overridden is in
``hf_cse/training/trainer.py``'s module docstring; what each does is tested where it is used (saves, the Hub, streams,
the step)."""

from __future__ import annotations

import inspect

from transformers import Trainer

from hf_cse import CSETrainer

OVERRIDDEN = {
    # the step
    "compute_loss",
    "floating_point_ops",
    "log",
    "evaluate",
    # the run
    "train",
    "get_train_dataloader",
    "get_resumed_dataloader",
    # the writes (RunWriter)
    "save_model",
    "save_metrics",
    "save_state",
    # the Hub (HubPusher)
    "create_model_card",
    "push_to_hub",
}


def overridden_trainer_methods() -> set[str]:
    """The methods ``CSETrainer`` defines itself that ``transformers.Trainer`` has too (``__init__`` aside; a class
    attribute such as ``loss_is_scaled_for_ga`` is a setting the Trainer reads, not a method)."""
    return {
        name
        for name, value in vars(CSETrainer).items()
        if inspect.isfunction(value) and hasattr(Trainer, name) and name != "__init__"
    }


def test_cse_trainer_overrides_twelve_public_trainer_methods_and_no_private_one() -> None:
    overridden = overridden_trainer_methods()
    assert overridden == OVERRIDDEN, (
        f"CSETrainer overrides {sorted(overridden - OVERRIDDEN)} more and {sorted(OVERRIDDEN - overridden)} no "
        "longer (or the installed Trainer no longer has them: the override is never called): hand new behaviour to a "
        "callback or a collaborator where the Trainer allows it, else list it here and in trainer.py's docstring "
        "with its reason"
    )
    assert len(overridden) == 12
    assert not [name for name in overridden if name.startswith("_")]


def test_every_override_takes_the_trainer_methods_parameters() -> None:
    """The Trainer calls an override with its own arguments: each parameter an override names is the Trainer's at the
    same place, and one that names fewer takes the rest as ``**kwargs``."""
    for name in sorted(OVERRIDDEN):
        ours = inspect.signature(getattr(CSETrainer, name)).parameters.values()
        theirs = inspect.signature(getattr(Trainer, name)).parameters.values()
        named = [p.name for p in ours if p.kind != p.VAR_KEYWORD]
        trainers = [p.name for p in theirs if p.kind != p.VAR_KEYWORD]
        assert named == trainers[: len(named)], name
        assert len(named) == len(trainers) or any(p.kind == p.VAR_KEYWORD for p in ours), name
