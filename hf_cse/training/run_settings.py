"""The resume contract: a run resumed from a checkpoint trains with the settings the checkpoint was trained with.

Every checkpoint records the settings that change what is trained (``hf_cse_run_settings.json``, see
:meth:`RunSettingsRecord.settings`): the objective and its hyper-parameters, auxiliary terms, view augmentation,
Matryoshka dimensions, pooling, base model, batch geometry, sequence length, seeds, learning rate and the corpus's
identity; the optimizer's schedule and precision; LoRA; and the input providers' sources (complementary model, negator,
paraphrases). A resume whose settings differ is refused with one line listing the differences, unless
``allow_changed_settings``: then the change is logged and kept in the checkpoints that follow (so a later resume still
knows it), and the model card and ``hf_cse_training.json`` say what changed at which step.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datasets import Dataset

from ..errors import UsageError
from ..export.model_card.summary import describe_setting_changes
from ..modeling.backbone import encoder_settings
from .streaming import SentenceStream, StreamingCorpus

if TYPE_CHECKING:
    from .trainer import CSETrainer

logger = logging.getLogger(__name__)

RUN_SETTINGS_FILE = "hf_cse_run_settings.json"

HASHED_BYTES = 1 << 20
"""The corpus identity hashes the first MiB of the corpus: enough to tell corpora apart, cheap for any size."""


LATER_SETTINGS = frozenset(
    {
        "lr_scheduler_type", "warmup_steps", "weight_decay", "max_grad_norm", "precision", "gather_negatives",
        "mask_duplicates", "mlp_only_train", "lora", "complementary_model", "complementary_pooler",
        "complementary_cache_dtype", "negation_backend", "paraphrase_source", "pooler_kwargs", "encoder",
    }
)  # fmt: skip
"""Settings recorded since hf_cse 0.1.0's first checkpoints: one that lacks them resumes without them compared."""


class RunSettingsRecord:
    """The settings of a :class:`~hf_cse.training.trainer.CSETrainer` run, written into every checkpoint and checked
    against the checkpoint a run resumes from.

    Args:
        trainer: the trainer, at the end of its construction. Its settings are read when written or checked (the
            base model named in ``model_card_kwargs["finetuned_from"]`` is set after construction); the corpus
            identity is computed here, once.
        corpus: the training sentences as given to the trainer (a ``Dataset`` with a ``"text"`` column, or a
            :class:`~hf_cse.training.streaming.StreamingCorpus`); default: ``trainer.train_dataset``. The in-memory
            path tokenizes the text away, and a corpus without text is identified by its token ids, which change
            with the tokenization too (``max_seq_length``, prompt template).

    Attributes:
        changes: every resume with changed settings in the run's history, oldest first:
            ``[{"step": s, "changes": [{"setting": k, "before": v, "after": w}, ...]}]`` (``before`` or ``after``
            left out for a setting one side does not have); read from the checkpoint on resume, and written into
            every checkpoint.
    """

    def __init__(self, trainer: CSETrainer, corpus: Dataset | StreamingCorpus | None = None) -> None:
        self.trainer = trainer
        self.corpus = corpus_identity(corpus if corpus is not None else trainer.train_dataset)
        self.changes: list[dict[str, Any]] = []

    def settings(self) -> dict[str, Any]:
        """The run's settings that change what is trained, JSON-ready, in a flat dict: ``objective`` and its
        hyper-parameters (``get_config_dict()`` of the objective module, e.g. ``temperature``, whether built from
        the arguments or passed to the trainer), ``matryoshka_dims``/``matryoshka_weights``, ``auxiliary_losses``,
        ``view_augmentation`` and ``view_augmentation_kwargs``, ``pooler``, ``prompt_template``,
        ``template_denoising``, ``base_model``, ``per_device_train_batch_size``, ``world_size``,
        ``gradient_accumulation_steps``, ``max_seq_length``, ``seed``, ``data_seed``, ``learning_rate``, the
        scheduler, warm-up, weight decay, gradient clipping and precision, ``gather_negatives``,
        ``mask_duplicates``, ``mlp_only_train``, the LoRA adapter's settings (``lora``), the encoder's dropout and
        attention direction (``encoder``: :func:`~hf_cse.modeling.backbone.encoder_settings`), the input providers' own
        settings (:meth:`~hf_cse.inputs.base.InputProvider.settings`), and the corpus identity
        (:func:`corpus_identity`)."""
        trainer, args = self.trainer, self.trainer.args
        model = trainer.accelerator.unwrap_model(trainer.model)  # a CSEModel, or a peft model that forwards to one
        objective = trainer.objective.get_config_dict()
        values = {
            "objective": trainer.objective.name,
            # A Matryoshka wrapper lists its dimensions among the objective's hyper-parameters; a plain objective
            # records them unset, so that adding or dropping them is a change.
            **objective,
            "matryoshka_dims": objective.get("matryoshka_dims"),
            "matryoshka_weights": objective.get("matryoshka_weights"),
            "auxiliary_losses": {
                name: {"weight": weight, **term.get_config_dict()}
                for name, (term, weight) in trainer.auxiliary_losses.items()
            },
            "view_augmentation": trainer.view_augmentation.name,
            "view_augmentation_kwargs": trainer.view_augmentation.hparams(),
            "pooler": model.pooling.pooler,
            "prompt_template": model.pooling.prompt_template,
            "template_denoising": model.pooling.template_denoising,
            "pooler_kwargs": model.pooling.pooler_kwargs,
            "base_model": trainer.model_card_kwargs.get("finetuned_from") or model.config._name_or_path or None,
            "per_device_train_batch_size": args.per_device_train_batch_size,
            "world_size": args.world_size,
            "gradient_accumulation_steps": args.gradient_accumulation_steps,
            "max_seq_length": args.max_seq_length,
            "seed": args.seed,
            "data_seed": args.data_seed,
            "learning_rate": args.learning_rate,
            # How the optimizer steps, and what a step's loss sees besides the objective's settings.
            "lr_scheduler_type": str(args.lr_scheduler_type),
            "warmup_steps": args.warmup_steps,
            "weight_decay": args.weight_decay,
            "max_grad_norm": args.max_grad_norm,
            "precision": "bf16" if args.bf16 else "fp16" if args.fp16 else "fp32",
            "gather_negatives": args.gather_negatives,
            "mask_duplicates": args.mask_duplicates,
            "mlp_only_train": model.pooling.mlp_only_train,
            "lora": lora_settings(model),
            "encoder": encoder_settings(model.config),  # dropout fields, bidirectional attention
            # Each input provider's own sources (complementary model, negator, paraphrases).
            **{
                key: value
                for provider in trainer.input_providers.values()
                for key, value in provider.settings().items()
            },
            **self.corpus,
        }
        # As the file holds them (tuples as lists, ...), to compare like with like.
        return json.loads(json.dumps(values, default=str))

    def write(self, folder: Path) -> None:
        """Write the settings and the history of changes into ``folder`` (a checkpoint being staged)."""
        record = {"settings": self.settings(), "changes": self.changes}
        (Path(folder) / RUN_SETTINGS_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")

    def check_resume(self, checkpoint: Path, step: int) -> None:
        """Check this run's settings against those ``checkpoint`` was trained with, before resuming from it at
        ``step``, and take over its history of changes.

        A checkpoint without the file (written by an older hf_cse) resumes with a warning. Differences raise, unless
        ``args.allow_changed_settings``: then they are logged as a warning and added to :attr:`changes`.

        Raises:
            UsageError: the settings differ and ``allow_changed_settings`` is off; one line listing the differences.
        """
        path = Path(checkpoint) / RUN_SETTINGS_FILE
        if not path.is_file():
            logger.warning(
                "%s has no %s (it was written by an older hf_cse): the settings it was trained with cannot be "
                "checked against this run's.",
                checkpoint,
                RUN_SETTINGS_FILE,
            )
            self.changes = []
            return
        recorded = json.loads(path.read_text(encoding="utf-8"))
        self.changes = list(recorded.get("changes", []))
        changes = setting_changes(recorded["settings"], self.settings())
        # The hf_cse that wrote the checkpoint did not record these yet: nothing to compare them with.
        differences = [change for change in changes if "before" in change or change["setting"] not in LATER_SETTINGS]
        if not differences:
            return
        described = describe_setting_changes(differences)
        if not self.trainer.args.allow_changed_settings:
            raise UsageError(
                f"{checkpoint} was trained with other settings: {described}. Resume with the settings it was trained "
                "with, or pass --allow_changed_settings true to train on with these (the model card then says what "
                "changed at which step)."
            )
        logger.warning("Resumed at step %d with changed settings: %s.", step, described)
        self.changes.append({"step": step, "changes": differences})


def lora_settings(model: Any) -> dict[str, Any] | None:
    """``{"r", "lora_alpha", "lora_dropout", "target_modules"}`` of a peft model's adapter; ``None`` for a plain
    model."""
    config = getattr(model, "peft_config", {}).get("default")
    if config is None:
        return None
    targets = config.target_modules
    return {
        "r": config.r,
        "lora_alpha": config.lora_alpha,
        "lora_dropout": config.lora_dropout,
        "target_modules": sorted(targets) if isinstance(targets, set | list | tuple) else targets,
    }


def setting_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``[{"setting": k, "before": v, "after": w}]`` for every setting that differs between two settings dicts, in
    the order of ``after`` (then settings only ``before`` has); a side that lacks the setting has no key."""
    changes = []
    for key in [*after, *(key for key in before if key not in after)]:
        if key in before and key in after and before[key] == after[key]:
            continue
        change: dict[str, Any] = {"setting": key}
        change.update({side: values[key] for side, values in (("before", before), ("after", after)) if key in values})
        changes.append(change)
    return changes


def corpus_identity(corpus: Dataset | StreamingCorpus | SentenceStream | None) -> dict[str, Any]:
    """What tells the training corpus apart, without reading it whole.

    - A file read as a stream: ``corpus_source`` (as given), ``corpus_file_size`` and ``corpus_sha256`` of the
      file's first MiB; a built-in corpus or Hub dataset read as a stream: its ``corpus_source``.
    - A ``Dataset``: ``corpus_sentences`` (its rows) and ``corpus_sha256`` of the first MiB of its sentences, one
      per line (of its ``input_ids``, space-separated, when it comes without a ``"text"`` column).
    - No corpus (a trainer built for evaluation): ``{}``.
    """
    if isinstance(corpus, SentenceStream):
        corpus = corpus.corpus
    if isinstance(corpus, StreamingCorpus):
        path = Path(corpus.source)
        if not path.is_file():
            return {"corpus_source": corpus.source}
        with path.open("rb") as handle:
            head = handle.read(HASHED_BYTES)
        return {
            "corpus_source": corpus.source,
            "corpus_file_size": path.stat().st_size,
            "corpus_sha256": hashlib.sha256(head).hexdigest(),
        }
    if corpus is None:
        return {}
    column = "text" if "text" in corpus.column_names else "input_ids"
    rows = (row for batch in corpus.select_columns([column]).iter(batch_size=1024) for row in batch[column])
    lines = (row if column == "text" else " ".join(map(str, row)) for row in rows)
    return {"corpus_sentences": len(corpus), "corpus_sha256": _head_sha256(lines)}


def _head_sha256(lines: Iterable[str]) -> str:
    """SHA-256 of the first :data:`HASHED_BYTES` of ``lines`` joined by line ends (UTF-8), reading no further."""
    head = bytearray()
    for line in lines:
        head += line.encode("utf-8") + b"\n"
        if len(head) >= HASHED_BYTES:
            break
    return hashlib.sha256(bytes(head[:HASHED_BYTES])).hexdigest()
