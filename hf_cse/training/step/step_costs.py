"""What a training step costs, as the Trainer reports it: the FLOP estimate of ``total_flos``
(:class:`TrainedTokens`) and whether DDP must search every step for parameters the loss did not reach
(:func:`find_unused_parameters_decided`).

The Trainer's own ``floating_point_ops`` reads ``input_ids`` at the top level of a batch; an hf_cse batch holds
nested token groups (``{"sentences": {"input_ids": ...}, ...}``) whose views are built during the step, so it
counted 0. The Trainer's own DDP setting searches for unused parameters whenever the model is a
``PreTrainedModel``; a :class:`~hf_cse.modeling.modeling_cse.CSEModel` keeps every trainable weight in the loss's
graph (the encoder's own pooler is frozen), so the search cost a graph traversal per step and a warning for nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.training_args import ParallelMode

from ...modeling.tokenization import SentenceTokenizer

PROBE_SENTENCES = ["A probe sentence.", "Another probe sentence, a little longer than the first."]
"""What :func:`unused_trainable_parameters` encodes: two rows of different lengths, so padding is exercised too."""


class TrainedTokens:
    """Counts the tokens a training step encodes with gradients, for ``CSETrainer.floating_point_ops``.

    Every stacked view input (``[V*B, L]``, each chunk's under gradient caching) is :meth:`add`-ed as the step
    builds it; forwards without gradients (gradient caching's first pass, a frozen complementary model) are not
    counted. Extra forwards that are not views (OssCSE's negations and paraphrases, template denoising's
    template-only pass) are left out: the estimate is of the views, a lower bound for those objectives.

    Args:
        model: the trained model (a ``PreTrainedModel``, or a peft model that forwards to one); its non-embedding
            parameter count ``N`` is read once here.
    """

    def __init__(self, model: nn.Module) -> None:
        self.non_embedding_parameters: int = model.num_parameters(exclude_embeddings=True)
        self.tokens = 0

    def add(self, model_inputs: Mapping[str, Any]) -> None:
        """Count ``rows x length`` padded tokens of one forward's inputs, when it builds a graph for backward."""
        if not torch.is_grad_enabled():
            return
        tokens = model_inputs.get("inputs_embeds", model_inputs.get("input_ids"))
        self.tokens += tokens.shape[0] * tokens.shape[1]

    def pop_flops(self) -> int:
        """``6 N T`` for the ``T`` tokens counted since the last call (2 per weight and token forward, 4 backward:
        Kaplan et al. 2020, the Trainer's own estimate), and start counting afresh."""
        flops = 6 * self.non_embedding_parameters * self.tokens
        self.tokens = 0
        return flops


def unused_trainable_parameters(model: nn.Module, sentence_tokenizer: SentenceTokenizer) -> list[str]:
    """Names of the trainable parameters of ``model`` that a training-mode forward pass over two probe sentences
    leaves out of the embeddings' autograd graph (e.g. an encoder pooler someone unfroze, which no hf_cse pooler
    reads).

    The graph is walked, not differentiated, and the random state is restored afterwards, so the probe neither
    computes gradients nor changes the run's dropout masks. Runs on the model's device.
    """
    trainable = {parameter: name for name, parameter in model.named_parameters() if parameter.requires_grad}
    if not trainable:
        return []
    device = next(iter(trainable)).device
    batch = {key: value.to(device) for key, value in sentence_tokenizer.batch(PROBE_SENTENCES).items()}
    was_training = model.training
    cuda_devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda_devices), torch.enable_grad():
        model.train()
        try:
            embeddings = model(**batch).embeddings
        finally:
            model.train(was_training)
    reached: set[int] = set()
    seen, pending = set(), [embeddings.grad_fn]
    while pending:
        node = pending.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):  # AccumulateGrad: a leaf, i.e. a parameter
            reached.add(id(node.variable))
        pending.extend(next_node for next_node, _ in node.next_functions)
    return [name for parameter, name in trainable.items() if id(parameter) not in reached]


def activation_checkpointing(model: PreTrainedModel) -> bool:
    """Whether ``model`` recomputes activations in the backward pass (transformers' ``is_activation_checkpointing``,
    before its rename ``is_gradient_checkpointing``)."""
    if hasattr(type(model), "is_activation_checkpointing"):
        return bool(model.is_activation_checkpointing)
    return bool(model.is_gradient_checkpointing)


@contextlib.contextmanager
def find_unused_parameters_decided(
    args: Any, model: nn.Module, sentence_tokenizer: SentenceTokenizer
) -> Iterator[None]:
    """Around the Trainer's construction, which builds the accelerator's DDP settings from the training arguments:
    ``args.ddp_find_unused_parameters`` is set to whether ``model`` has trainable parameters a step leaves unused
    (:func:`unused_trainable_parameters`), and set back to the user's ``None`` after, so that the saved arguments are
    the user's.

    Left as the Trainer decides it: in one process (no DDP, nothing to probe); when the user set
    ``ddp_find_unused_parameters``; and under activation checkpointing, for which the Trainer turns the search off
    (it breaks it).
    """
    turned_off = isinstance(model, PreTrainedModel) and (
        activation_checkpointing(model) or bool(getattr(args, "activation_checkpointing", False))
    )
    if args.ddp_find_unused_parameters is not None or args.parallel_mode != ParallelMode.DISTRIBUTED or turned_off:
        yield
        return
    args.ddp_find_unused_parameters = bool(unused_trainable_parameters(model, sentence_tokenizer))
    try:
        yield
    finally:
        args.ddp_find_unused_parameters = None
