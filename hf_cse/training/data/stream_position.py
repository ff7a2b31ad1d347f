"""The trainer side of a streaming run (:mod:`hf_cse.training.data.streaming` is the data side): where in the stream
the
run is, and the dataloader over the stream.

:class:`StreamPosition` records the position of the last batch trained on (each batch carries it, from
:class:`~hf_cse.training.data.streaming.SentenceStream`), writes it into every checkpoint (``stream_position.json``:
epoch and chunks consumed) and, on resume, starts the stream right after it: the resumed run trains on exactly the
batches a straight run would have (the skipped sentences are re-read and re-shuffled, not re-tokenized). The Trainer's
own skip of the batches already trained on is then a no-op (``CSETrainer.get_resumed_dataloader``): the stream it reads
already starts after them.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader

from ...errors import UsageError
from ...run_files import STREAM_POSITION_FILE
from .streaming import STREAM_POSITION, SentenceStream

if TYPE_CHECKING:
    from transformers import Trainer

    from ..saving import RunWriter

logger = logging.getLogger(__name__)


class StreamPosition:
    """Where a streaming run is in its stream: recorded from the batches trained on, saved in every checkpoint,
    resumed from.

    Args:
        stream: the run's training stream; its ``position`` is where the next pass starts.
        writer: the run's writer; every checkpoint gets ``stream_position.json`` (:meth:`write`).
    """

    def __init__(self, stream: SentenceStream, writer: RunWriter) -> None:
        self.stream = stream
        self.writer = writer
        writer.add_checkpoint_file(self.write)

    def dataloader(self, trainer: Trainer) -> DataLoader:
        """The training dataloader over the stream, prepared by the trainer's accelerator (each process gets its
        slice of every chunk)."""
        args = trainer.args
        loader = DataLoader(
            self.stream,
            batch_size=args.train_batch_size,
            collate_fn=trainer.data_collator,
            num_workers=args.dataloader_num_workers,
            pin_memory=args.dataloader_pin_memory,
            prefetch_factor=args.dataloader_prefetch_factor,
            # Every pass (an epoch of the stream) draws its workers' base seed; from its own generator, not the
            # global RNG, which a straight run would draw from between two steps, where the Trainer gives a run
            # resumed there the checkpoint's RNG state after the pass began: their dropout masks would differ.
            generator=torch.Generator().manual_seed(args.seed),
        )
        return trainer.accelerator.prepare(loader)

    def record(self, batch: dict[str, Any]) -> None:
        """Take the stream position off ``batch``, the one a step trains on, before the model sees it: once the step
        is done, the run is there."""
        position = batch.pop(STREAM_POSITION, None)
        if position is not None:
            self.stream.position = [int(value) for value in position]

    def write(self, folder: Path) -> None:
        """Write ``stream_position.json`` (epoch, chunks consumed, chunk size) into ``checkpoint-N`` (its folder)."""
        epoch, chunks = self.stream.position
        record = {"epoch": epoch, "chunks": chunks, "chunk_size": self.stream.chunk_size}
        (folder / STREAM_POSITION_FILE).write_text(json.dumps(record) + "\n", encoding="utf-8")

    def start(self, checkpoint: str | None) -> None:
        """Before ``Trainer.train``: the stream starts after ``checkpoint``'s position, else (no checkpoint, or
        ``ignore_data_skip``, where the Trainer skips nothing either) at its beginning.

        Raises:
            UsageError: ``checkpoint`` has no stream position: it is no streaming run's.
        """
        self.stream.position = [0, 0]
        if checkpoint is not None and not self.writer.trainer.args.ignore_data_skip:
            path = Path(checkpoint) / STREAM_POSITION_FILE
            if not path.is_file():
                raise UsageError(f"{checkpoint} has no {STREAM_POSITION_FILE}: it is no streaming run's.")
            record = json.loads(path.read_text(encoding="utf-8"))
            position = self.stream.position = [int(record["epoch"]), int(record["chunks"])]
            logger.info("Resuming the stream at epoch %d after %d batches.", *position)
