"""MNTP, LLM2Vec's masked next-token prediction (BehnamGhader et al., 2024): a decoder LLM learns to use the tokens
on both sides of a masked one, predicting it from the state of the position before it with its own LM head.

The two-run recipe of LLM2Vec. LLM2Vec turns a decoder into a sentence encoder in two trainings, each a LoRA run
whose adapter is merged before the next: (1) MNTP with bidirectional attention (``--objective mntp
--bidirectional true --lora_r 16``; 1000 steps of batch 32, masking 20% of the tokens with BERT's 80/10/10
replacement, its Llama and Qwen2 settings); (2) unsupervised SimCSE from the MNTP run's output folder, whose root is
the merged plain checkpoint (``--model_name_or_path <MNTP output> --objective simcse --temperature 0.05 --pooler avg
--dropout 0.3 --lora_r 16``; 1000 steps of batch 128, learning rate 3e-5). ``examples/configs/decoder/
llm2vec_mntp.yaml`` and ``llm2vec_simcse.yaml`` are the two runs for a 1B model. Sources: LLM2Vec's
``experiments/run_mntp.py`` and ``train_configs/mntp/*.json``, ``train_configs/simcse/*.json``
(McGill-NLP/llm2vec).

Where hf_cse departs from LLM2Vec's code: it trains on the run's sentences, one per row, where ``run_mntp.py`` cuts
wikitext-103 into 512-token chunks; and a row's first real token is never masked (no position before it to predict
it from; LLM2Vec's shifted loss drops it, after having masked it, when the tokenizer puts no BOS before it). In a
LoRA run an untied LM head is frozen, as a tied one is with the input embeddings (LLM2Vec's LoRA leaves an untied
head trainable; either way the head is dropped after MNTP).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn import functional as F

from ..errors import UsageError, echo
from ..modeling.poolers.mean import LLM2VEC_CITATION
from ..registry import register_objective
from .base import ContrastiveObjective, loss_dtype
from .contract import ObjectiveOutput, StepInputs

MNTP_LOGITS = "mntp_logits"
"""Step input of the ``masked_next_tokens`` provider: ``[N, V]`` LM-head logits of the positions before the ``N``
drawn positions (:mod:`hf_cse.inputs.masked_next_tokens`)."""
MNTP_TARGETS = "mntp_targets"
"""Step input of the ``masked_next_tokens`` provider: ``[N]`` the original token at each drawn position, or
:data:`IGNORE_INDEX` where the position may not be masked (padding, a special token, a row's first token)."""
IGNORE_INDEX = -100
"""The target of a position without a loss (transformers' and ``F.cross_entropy``'s ``ignore_index``)."""

MASK_TOKEN_TYPES = ("blank", "eos")
"""What replaces a masked token when the tokenizer has no mask token (LLM2Vec's ``mask_token_type``): ``blank``, the
token ``"_"`` (LLM2Vec's default, used for all its models); ``eos``, the end-of-sequence token. LLM2Vec's third
option, ``mask`` (adding a ``<mask>`` token and resizing the embeddings), would change the exported vocabulary and is
not offered. A tokenizer with its own mask token (Gemma's ``<mask>``) uses it, as LLM2Vec does."""
BLANK_MASK_TOKEN = "_"


@register_objective("mntp")
class MNTPLoss(ContrastiveObjective):
    """Masked next-token prediction: the mean cross-entropy, over the masked tokens of the step, of the LM head's
    logits at position ``i - 1`` against the original token at masked position ``i``::

        l = - 1/|M| sum_{(r, i) in M} log softmax(W h_{r, i-1})[x_{r, i}]

    with ``h`` the encoder's last hidden states of the masked input, ``W`` the model's own LM head (its input
    embeddings when ``tie_word_embeddings``, else the checkpoint's ``lm_head.weight``; Gemma's
    ``final_logit_softcapping`` applied) and ``M`` the masked positions. The loss is over tokens, not sentence
    embeddings: the ``masked_next_tokens`` input provider (:mod:`hf_cse.inputs.masked_next_tokens`) masks the batch,
    makes its one view and gives the logits and targets; under data parallelism each process averages over its own
    tokens (as LLM2Vec's ``Trainer`` does). A step with no masked token has loss 0.

    The masking recipe (LLM2Vec's ``run_mntp.py`` with transformers' ``DataCollatorForLanguageModeling``, whose
    draws it repeats): each token that is not padding, not a special token of the tokenizer and not its row's first
    is masked with probability ``mask_probability``; a masked token is replaced by the mask token (80%), a random
    token of the tokenizer (10%) or kept (10%), or always by the mask token with ``all_mask``.

    LLM2Vec's settings: ``mask_probability`` 0.2 with the 80/10/10 replacement for Sheared-LLaMA, Llama 2, Llama 3
    and Qwen2 (``data_collator_type: default``); 0.8 with ``all_mask`` for Mistral (``data_collator_type:
    all_mask``); ``mask_token_type: blank`` for all.

    Args:
        mask_probability: the probability of masking each eligible token, in ``(0, 1]``; defaults to 0.2.
        all_mask: replace every masked token by the mask token (LLM2Vec's ``all_mask`` collator); ``False``
            (default): BERT's 80% mask token, 10% random token, 10% unchanged.
        mask_token_type: the mask token of a tokenizer without one, one of :data:`MASK_TOKEN_TYPES`; defaults to
            ``"blank"`` (``"_"``).

    Raises:
        UsageError: a value outside the ranges above. (MNTP has no temperature: a run's ``--temperature`` other than
            its default is refused by :func:`~hf_cse.training.training_args.objective_hparams`.)
    """

    citation = LLM2VEC_CITATION
    num_positive_views = 0
    """No positive view: the trainer encodes one view, the masked sentences."""
    required_inputs = ("masked_next_tokens",)

    def __init__(
        self,
        mask_probability: float = 0.2,
        all_mask: bool = False,
        mask_token_type: str = "blank",
    ) -> None:
        # No loss form: MNTP is not the contrastive pipeline of ContrastiveObjective.forward (it overrides it).
        super().__init__(form=None)  # type: ignore[arg-type]
        is_number = isinstance(mask_probability, int | float) and not isinstance(mask_probability, bool)
        if not is_number or not 0.0 < mask_probability <= 1.0:
            raise UsageError(f"mask_probability must be a probability in (0, 1], got {echo(mask_probability)}.")
        if not isinstance(all_mask, bool):
            raise UsageError(f"all_mask must be true or false, got {echo(all_mask)}.")
        if mask_token_type not in MASK_TOKEN_TYPES:
            raise UsageError(f"mask_token_type {echo(mask_token_type)} is not one of: {', '.join(MASK_TOKEN_TYPES)}.")
        self.mask_probability = float(mask_probability)
        self.all_mask = all_mask
        self.mask_token_type = mask_token_type

    @property
    def citations(self) -> tuple[str, ...]:
        return (self.citation,)

    def use_momentum_queue(self, size: int, momentum: float = 0.995) -> ContrastiveObjective:
        raise UsageError("Objective 'mntp' has no negatives: it cannot take a momentum queue (momentum_queue_size).")

    def forward(self, inputs: StepInputs) -> ObjectiveOutput:
        """The loss from ``inputs[MNTP_LOGITS]`` (``[N, V]``) and ``inputs[MNTP_TARGETS]`` (``[N]``,
        :data:`IGNORE_INDEX` where no token was masked), in float32 (float64 for float64 logits) with autocast off.

        Logs ``masked_tokens`` (how many tokens the step masked) and ``masked_token_accuracy`` (the share of them
        whose original token has the largest logit)."""
        logits, targets = inputs.tensor(MNTP_LOGITS), inputs.tensor(MNTP_TARGETS)
        with torch.autocast(device_type=logits.device.type, enabled=False):
            logits = logits.to(loss_dtype(logits))
            counted = targets != IGNORE_INDEX
            count = counted.sum().clamp_min(1).to(logits.dtype)  # on the device: no read-back of the count
            loss = F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX, reduction="sum") / count
            correct = ((logits.detach().argmax(dim=-1) == targets) & counted).sum().to(logits.dtype)
        logs = {"masked_tokens": counted.sum().to(logits.dtype), "masked_token_accuracy": correct / count}
        return ObjectiveOutput(loss, {name: value.detach() for name, value in logs.items()})

    def get_config_dict(self) -> dict[str, Any]:
        return {
            "mask_probability": self.mask_probability,
            "all_mask": self.all_mask,
            "mask_token_type": self.mask_token_type,
        }
