"""The position ids an encoder derives from its input ids, for the code that places tokens at chosen positions
(the mask pooler's template denoising, the token-shuffle view, the encoder's position checks). A module of its
own, below the poolers and the model: the model imports the poolers, so a pooler cannot import it from the model."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .modeling_cse import CSEModel


def default_position_ids(model: CSEModel, input_ids: torch.Tensor) -> torch.Tensor:
    """The position ids ``[B, L]`` the encoder would derive from ``input_ids`` itself.

    ``0, 1, 2, ...`` for BERT-like encoders; RoBERTa-like embeddings (``padding_idx`` and
    ``create_position_ids_from_input_ids``) number real tokens from ``padding_idx + 1`` and give padding
    ``padding_idx``.
    """
    embeddings = getattr(model.encoder_model, "embeddings", None)
    padding_idx = getattr(embeddings, "padding_idx", None)
    create = getattr(embeddings, "create_position_ids_from_input_ids", None)
    if padding_idx is not None and create is not None:
        return create(input_ids, padding_idx)
    return torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)
