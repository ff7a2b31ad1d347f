"""``momentum_queue``: a FIFO queue of past batches' embeddings from a momentum (EMA) copy of the encoder, contrasted
with every anchor as extra negatives (ESimCSE, after MoCo). Any :class:`~hf_cse.objectives.base.ContrastiveObjective`
takes it (``build_objective(name, momentum_queue_size=Q, momentum=m)``, ``--objective_kwargs``); ``esimcse`` uses it
by default.

Each step, as ESimCSE's released code (``CLTrainer.compute_loss``, ``cl_forward``) does:

1. the objective gets the queue as it stands, ``momentum_negatives`` ``[Q', D]`` (``Q' <= Q``; empty at the first
   step): negatives from *past* batches only;
2. the momentum encoder's weights move towards the live model's: ``theta_m <- m * theta_m + (1 - m) * theta``
   (every parameter that trains: a frozen one stays as copied; buffers copied), once per forward, so per
   micro-batch under gradient accumulation, as the code;
3. the momentum encoder, in eval mode (no dropout) and without gradients, encodes the batch's plain sentences
   (view 1); the embeddings of every process are gathered (the global batch, in rank order) and appended; the
   queue keeps the newest ``Q``.

Under ``--mask_duplicates`` the queue also keeps each row's text hash (``momentum_text_hash``, the hash
:mod:`hf_cse.inputs.duplicates` gives the batch), so a queued copy of an anchor's sentence is dropped from its
negatives as an in-batch copy is.

So every process holds the same queue and the same EMA weights (DDP keeps the live weights equal). The queue and
the EMA of the parameters that train (a LoRA run's adapters and head, no second copy of its base) are saved into
every checkpoint (``momentum_queue.pt``, covered by the checkpoint's manifest) and read back on resume, so a resumed
run equals a straight one. The EMA copy lives here, not in the model: it never
reaches ``save_model``'s root.

Cost: one forward of the batch without gradients per step (about +15-20% of a SimCSE step, whose two views take a
forward and a backward), one more copy of the model's weights in memory, and ``Q x D`` floats.

Where hf_cse differs from the code: the EMA copy is of the whole model, SimCSE's MLP head included (the code's
momentum encoder is the transformer only, and the live head is applied to its output); the queue is of the global
batch and is not emptied at each epoch (the code keeps one queue per process and resets it every epoch; the papers'
runs train one epoch).
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from torch import nn

from ..errors import UsageError
from ..objectives.base import MOMENTUM_NEGATIVES, MOMENTUM_TEXT_HASH, MomentumQueueSettings, loss_dtype
from ..registry import register_input_provider
from .base import SENTENCES, InputProvider, ProvidedInputs, StepContext, TrainingSetup
from .duplicates import text_hashes

MOMENTUM_QUEUE_FILE = "momentum_queue.pt"
"""The checkpoint file holding the queue and the momentum encoder's weights."""


class MomentumEncoder:
    """The EMA copy of a model and the FIFO queue of its embeddings (the state of :class:`MomentumQueue`).

    Args:
        model: the live model (a :class:`~hf_cse.modeling.modeling_cse.CSEModel`, possibly under peft); copied now
            (its weights at the start of training), gradients off.
        settings: the queue's size ``Q`` and momentum ``m``.
    """

    def __init__(self, model: torch.nn.Module, settings: MomentumQueueSettings) -> None:
        self.settings = settings
        self.averaged = [name for name, parameter in model.named_parameters() if parameter.requires_grad]
        """The names of the parameters that train, the only ones averaged (:meth:`update`) and saved."""
        self.model = copy.deepcopy(model).requires_grad_(False)
        # The model in training mode, so a training-only head (SimCSE's MLP) applies as it does to the views, and its
        # encoder in eval mode: no dropout, as the code's model.eval() around the momentum pass.
        self.model.train()
        self.model.encoder_model.eval()
        self.queue: torch.Tensor | None = None
        """``[Q', D]`` float32 (float64 for a float64 model, as the objectives' ``loss_dtype``), oldest first;
        ``None`` before the first batch."""
        self.text_hashes: torch.Tensor | None = None
        """``[Q']`` int64, the queued sentences' text hashes when :meth:`enqueue` is given them
        (``--mask_duplicates``); ``None`` otherwise."""

    @torch.no_grad()
    def update(self, live: torch.nn.Module) -> None:
        """``theta_m <- m * theta_m + (1 - m) * theta`` for every parameter that trains (:attr:`averaged`); buffers
        copied.

        A frozen parameter (a LoRA run's base weights) never changes, so its average is the copy made at the start:
        it is left as it is, which also spares the weights a 4-bit model holds packed in uint8 (QLoRA), over which
        ``mul_``/``add_`` cannot run."""
        device = next(live.parameters()).device
        if next(self.model.parameters()).device != device:  # the Trainer places the live model after the copy
            self.model.to(device)
        momentum = self.settings.momentum
        averages, parameters = dict(self.model.named_parameters()), dict(live.named_parameters())
        for name in self.averaged:
            average = averages[name]
            average.mul_(momentum).add_(parameters[name].detach().to(average.dtype), alpha=1.0 - momentum)
        for ema, buffer in zip(self.model.buffers(), live.buffers(), strict=True):
            ema.copy_(buffer)

    @torch.no_grad()
    def encode(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Embeddings ``[B, D]`` (float32; float64 for a float64 model) of ``inputs`` by the momentum encoder, dropout
        off."""
        embeddings = self.model(**inputs).embeddings
        return embeddings.to(loss_dtype(embeddings))

    def enqueue(self, embeddings: torch.Tensor, hashes: torch.Tensor | None = None) -> None:
        """Append ``embeddings`` ``[B, D]`` (newest last), with their sentences' text ``hashes`` ``[B]`` when given
        (at every step or at none), and keep the newest ``Q`` rows."""
        self.queue = _append(self.queue, embeddings.detach().to(loss_dtype(embeddings)), self.settings.size)
        if hashes is not None:
            self.text_hashes = _append(self.text_hashes, hashes, self.settings.size)

    def negatives(self, like: torch.Tensor) -> torch.Tensor:
        """The queue as it stands, ``[Q', D]`` on ``like``'s device (``[0, D]`` before the first batch)."""
        if self.queue is None:
            return like.new_zeros(0, like.shape[-1], dtype=loss_dtype(like))
        return self.queue.to(like.device)

    def negative_text_hashes(self, like: torch.Tensor) -> torch.Tensor:
        """The queued sentences' text hashes, ``[Q']`` int64 on ``like``'s device, row for row with
        :meth:`negatives`. Rows queued without a hash (resumed from a checkpoint that kept none) get -1, which no
        text hashes to: they stay negatives."""
        known = like.new_zeros(0, dtype=torch.long) if self.text_hashes is None else self.text_hashes
        queued = 0 if self.queue is None else self.queue.shape[0]
        return nn.functional.pad(known.to(like.device), (queued - known.shape[0], 0), value=-1)

    def state_dict(self) -> dict:
        return {
            "size": self.settings.size,
            "momentum": self.settings.momentum,
            "queue": None if self.queue is None else self.queue.cpu(),
            "text_hashes": None if self.text_hashes is None else self.text_hashes.cpu(),
            # The averaged parameters only: the frozen ones are the live model's, which loads them, and the buffers
            # are copied from it at every update (a LoRA run's checkpoint holds no second copy of the base model).
            "model": {name: value.cpu() for name, value in self.model.named_parameters() if name in self.averaged},
        }

    def load_state_dict(self, state: dict, source: Path) -> None:
        saved = (state["size"], state["momentum"])
        if saved != (self.settings.size, self.settings.momentum):
            raise UsageError(
                f"{source} holds a momentum queue of size {saved[0]} and momentum {saved[1]}; this run uses size "
                f"{self.settings.size} and momentum {self.settings.momentum}. Resume with the settings it was trained "
                "with."
            )
        missing = sorted(set(self.averaged) - set(state["model"]))
        if missing:
            raise UsageError(
                f"{source} holds no momentum average of the parameters {missing[:3]} that this run trains; resume "
                "with the LoRA settings it was trained with."
            )
        # Checkpoints from before the file held the averaged parameters only hold every weight: the others are left.
        self.model.load_state_dict({name: state["model"][name] for name in self.averaged}, strict=False)
        self.queue = state["queue"]
        self.text_hashes = state.get("text_hashes")  # none in checkpoints from before the queue kept them


@register_input_provider("momentum_queue")
class MomentumQueue(InputProvider):
    """Gives the objective ``momentum_negatives`` ``[Q', D]``, the queue before this step's batch (the same on every
    process; not per sentence, so not gathered), and the auxiliary terms the same tensor. It is an embedding of (an
    EMA of) the trained model: Matryoshka truncates it with the views. Under ``--mask_duplicates`` also
    ``momentum_text_hash`` ``[Q']``, the queued sentences' text hashes. See the module docstring.

    Raises:
        UsageError: the run's objective has no :attr:`~hf_cse.objectives.base.ContrastiveObjective.momentum_queue`.
    """

    embeddings = (MOMENTUM_NEGATIVES,)

    def __init__(self, setup: TrainingSetup) -> None:
        super().__init__(setup)
        settings = getattr(setup.objective, "momentum_queue", None)
        if settings is None:
            raise UsageError(
                f"Objective {setup.objective.name!r} has no momentum queue settings; pass momentum_queue_size in "
                "objective_kwargs."
            )
        self.state = MomentumEncoder(setup.model, settings)

    def provide(self, step: StepContext) -> ProvidedInputs:
        values = {MOMENTUM_NEGATIVES: self.state.negatives(step.anchors)}
        sentences, hashes = step.batch[SENTENCES], None
        if self.setup.args.mask_duplicates:  # the queue's hashes before this batch; this batch's, to enqueue
            values[MOMENTUM_TEXT_HASH] = self.state.negative_text_hashes(step.anchors)
            hashes = step.gather(text_hashes(sentences["input_ids"], sentences["attention_mask"]))
        self.state.update(self.setup.model)
        self.state.enqueue(step.gather(self.state.encode(sentences)), hashes)
        return ProvidedInputs(values, dict(values))

    def save_state(self, checkpoint: Path) -> None:
        torch.save(self.state.state_dict(), checkpoint / MOMENTUM_QUEUE_FILE)

    def load_state(self, checkpoint: Path) -> None:
        path = checkpoint / MOMENTUM_QUEUE_FILE
        if not path.is_file():
            raise UsageError(
                f"{checkpoint} has no {MOMENTUM_QUEUE_FILE}: it was trained without a momentum queue, so this run "
                "cannot resume from it exactly."
            )
        # Onto the model's device now, before the first step: a queue left on the host would be copied to the device
        # in that step (by negatives and the next enqueue), a copy a GPU's host waits for.
        device = next(self.setup.model.parameters()).device
        self.state.load_state_dict(torch.load(path, map_location=device, weights_only=True), path)


def _append(queue: torch.Tensor | None, rows: torch.Tensor, size: int) -> torch.Tensor:
    """``rows`` appended to ``queue`` (``None``: empty), the newest ``size`` rows kept."""
    joined = rows if queue is None else torch.cat([queue.to(rows.device), rows])
    return joined[-size:]
