"""``off_dropout_embeddings``: the batch's sentences encoded by the live model with its encoder's dropout off
(SimCSE++'s off-dropout negatives), with gradients."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

from ..objectives.simcsepp import OFF_DROPOUT
from ..registry import register_input_provider
from .base import SENTENCES, InputProvider, ProvidedInputs, StepContext


@contextmanager
def encoder_in_eval_mode(model: nn.Module) -> Iterator[None]:
    """``model.encoder_model`` (the transformer) in eval mode inside the block, every module's mode restored after.

    The whole encoder, not only its ``nn.Dropout`` modules: transformers' attention reads its own module's
    ``training`` flag for attention-probability dropout (``dropout=0.0 if not self.training``), so switching only the
    ``nn.Dropout`` modules off (as SimCSE++'s code does on its older transformers) would leave that dropout on.
    The :class:`~hf_cse.modeling.modeling_cse.CSEModel` itself stays in training mode, so its training-only MLP head
    still applies and embeddings are not normalized: the off-dropout embeddings go through the same head as the
    views, as in the code (``z0 = mlp(pooler(...))``).
    """
    encoder = model.encoder_model
    modes = {module: module.training for module in encoder.modules()}
    encoder.eval()
    try:
        yield
    finally:
        for module, mode in modes.items():
            module.training = mode


@register_input_provider("off_dropout_embeddings")
class OffDropoutEmbeddings(InputProvider):
    """Each step encodes this process's sentences once more, with the encoder's dropout off and with gradients,
    through the (possibly DDP-wrapped) training model; gives ``off_dropout``: ``[B, D]`` of this process's rows to
    the auxiliary terms and ``[G, D]`` gathered over every process (gradients kept) to the objective.

    Costs one more forward and backward of the batch per step (the two dropout views are one forward of ``2B`` rows:
    about +50% of a SimCSE step). It reads the plain sentences (``batch["sentences"]``): under a view augmentation
    (token shuffle, cutoff) the off-dropout embedding is of the unaugmented sentence. Draws no random numbers, so a
    resumed run replays the same dropout masks for the views. ``off_dropout`` is an embedding of the trained model:
    Matryoshka truncates it with the views.
    """

    embeddings = (OFF_DROPOUT,)

    def provide(self, step: StepContext) -> ProvidedInputs:
        with encoder_in_eval_mode(self.setup.model):
            embeddings = step.model(**step.batch[SENTENCES]).embeddings
        return ProvidedInputs.per_sentence(step, **{OFF_DROPOUT: embeddings.to(step.anchors.dtype)})
