"""The card and the Hub: the :class:`~hf_cse.training.trainer.CSETrainer` methods that write the model card and push.

One-line errors when the Hub cannot be reached (before any training, for ``push_to_hub=True``), and the local card
kept as it was unless an upload succeeds.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any

from transformers import Trainer

from ..export.hub import card_restored_on_failure, check_repo_id, hub_connection
from ..export.model_card import write_trainer_card


class HubPushMixin(Trainer):
    """Overrides ``create_model_card`` (hf_cse's card), ``init_hf_repo`` and ``push_to_hub``."""

    model_card_kwargs: dict[str, Any]
    """Card keywords (``finetuned_from``, ``dataset``, ...) filling in what a ``create_model_card`` call omits."""

    def create_model_card(self, **kwargs: Any) -> None:
        """Write ``README.md`` and ``hf_cse_training.json`` into ``args.output_dir`` (main process only).

        Takes the keywords of ``Trainer.create_model_card``, which ``push_to_hub`` forwards; ``self.model_card_kwargs``
        (e.g. ``finetuned_from``, ``dataset``) fill in what a call does not pass.
        """
        if self.is_world_process_zero():
            write_trainer_card(self, **{**self.model_card_kwargs, **kwargs})

    def init_hf_repo(self, token: str | None = None, private: bool | None = None) -> None:
        """``Trainer.init_hf_repo`` (run at construction with ``push_to_hub``), after checking ``hub_model_id`` by the
        Hub's rule; an unreachable Hub raises a one-line ``HubUnreachableError`` before any training."""
        if self.args.hub_model_id is not None:
            check_repo_id(self.args.hub_model_id)
        with hub_connection(self.args.hub_model_id or Path(self.args.output_dir).absolute().name):
            super().init_hf_repo(token=token, private=private)

    def push_to_hub(self, *args: Any, **kwargs: Any) -> Any:
        """``Trainer.push_to_hub``; an unreachable Hub raises a one-line ``HubUnreachableError``, and the card this
        renders into ``output_dir`` is put back as it was unless the upload succeeds (with ``blocking=False``: starts).
        """
        card_kept = card_restored_on_failure(self.args.output_dir) if self.is_world_process_zero() else nullcontext()
        with hub_connection(self.hub_model_id or self.args.hub_model_id), card_kept:
            return super().push_to_hub(*args, **kwargs)
