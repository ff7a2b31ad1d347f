"""The resume contract: a run resumed from a checkpoint trains with the settings the checkpoint was trained with.

Every checkpoint records the settings that change what is trained (``hf_cse_run_settings.json``, see
:meth:`RunSettingsRecord.settings`): the objective and its hyper-parameters, auxiliary terms, view augmentation,
Matryoshka dimensions, pooling (every field of the model's ``PoolingConfig``, a later one included), base model;
every training argument but the operational ones (:mod:`hf_cse.training.record.argument_settings`: batch geometry,
sequence length, seeds, learning rate, the run's length, the optimizer's schedule, its own hyper-parameters,
precision, ... and any field a later transformers or hf_cse adds, unless declared operational: output folder,
logging, evaluation and saving cadence, publishing, speed and memory settings); LoRA (peft's ``LoraConfig``); each
input provider's own settings, as it reports them (complementary model, negator, paraphrases);
and every input the run reads by its content (``*_content_sha256``, :mod:`hf_cse.content_identity`): the corpus (a
SHA-256 of its whole content), the base model's files, the evaluation data scored while training
(:func:`evaluation_identity`), and what each provider read (:meth:`~hf_cse.inputs.InputProvider.content_identity`: the
complementary model's files, the paraphrase TSV's bytes, the negations made), so that an input edited in place is a
change. A resume whose settings differ is refused with one line listing the differences, unless
``allow_changed_settings``: then the change is logged and kept in the checkpoints that follow (so a later resume still
knows it), and the model card and ``hf_cse_training.json`` say what changed at which step.

What a resume with changed settings trains (:class:`~hf_cse.training.saving.resume.ScheduleRealignment`): the
learning-rate schedule is this run's, built for its length, warm-up and learning rate, from the resumed step on, the
first resumed step included (the optimizer's state in the checkpoint would otherwise hand that step the rate of the
checkpoint's schedule, and keep its peak learning rate for good). The optimizer's own hyper-parameters
(``weight_decay``, ``optimizer``: Adam's betas and epsilon, ``optim``, ``optim_args``) are held by that state too,
which the resume loads: a change of them is refused even with ``allow_changed_settings``, as is a LoRA adapter of
another shape (:data:`ADAPTER_SHAPE`), which the checkpoint's adapter cannot load into.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datasets import Dataset

from ...atomic_files import sha256_of
from ...augment.views import build_view_augmentation
from ...content_identity import hub_dataset_revision, model_sha256, path_sha256, rows_sha256
from ...errors import CheckpointError, UsageError, echo
from ...evaluation import STSDevSets
from ...evaluation.evaluators.specs import parse_evaluator_spec
from ...export.model_card.summary import describe_setting_changes
from ...inputs import AugmentedViews
from ...modeling.backbone import encoder_settings, weight_settings
from ...run_files import RUN_SETTINGS_FILE
from ...sources import is_builtin_corpus
from ..data.pair_columns import training_pairs
from ..data.streaming import SentenceStream, StreamingCorpus
from ..evaluators import evaluates_during_training
from ..saving.resume import ScheduleRealignment
from .argument_settings import argument_settings

if TYPE_CHECKING:
    from ...modeling.configuration_cse import PoolingConfig
    from ..trainer import CSETrainer
    from ..training_args import CSETrainingArguments

logger = logging.getLogger(__name__)

HASH_CHUNK_BYTES = 1 << 20
"""Bytes read (or sentences joined) per update of the corpus hash: memory stays flat in the corpus size."""


CONTENT_SUFFIX = "_content_sha256"
"""The ending of every setting that identifies an input by its content (the corpus, the base model, the providers'
files and models, the evaluation data)."""

HELD_BY_OPTIMIZER_STATE = frozenset({"weight_decay", "optimizer"})
"""Settings the optimizer's state in a checkpoint holds (its parameter groups), which a resume loads over this run's:
changing them on resume is refused even with ``allow_changed_settings``, since the change would not be trained."""


ADAPTER_SHAPE = ("r", "target_modules")
"""The LoRA settings that decide the shape of the adapter's weights, which a checkpoint's adapter must have to load:
changing them on resume is refused even with ``allow_changed_settings`` (peft would fail in a size-mismatch
traceback); ``lora_alpha`` and ``lora_dropout`` may change."""


LORA_PROVENANCE = ("base_model_name_or_path", "peft_version")
"""``LoraConfig.to_dict()`` keys that say where an adapter came from, not how it trains: the base model is the run's
own setting (``base_model``, compared by folder), and peft's version changes with an upgrade of peft."""


def reshapes_the_adapter(change: Mapping[str, Any]) -> bool:
    """Whether the ``lora`` ``change`` (``{"setting", "before", "after"}``) adds or removes the adapter, or changes
    :data:`ADAPTER_SHAPE`."""
    if change["setting"] != "lora":
        return False
    before, after = change.get("before"), change.get("after")
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return True
    return any(before.get(key) != after.get(key) for key in ADAPTER_SHAPE)


class RunSettingsRecord:
    """The settings of a :class:`~hf_cse.training.trainer.CSETrainer` run, written into every checkpoint and checked
    against the checkpoint a run resumes from.

    Args:
        trainer: the trainer, at the end of its construction. Its settings are read when written or checked (the
            base model named in ``model_card_kwargs["finetuned_from"]`` is set after construction); the corpus
            identity is computed here, once.
        corpus: the training sentences as given to the trainer (a ``Dataset`` with a ``"text"`` column, or a
            :class:`~hf_cse.training.data.streaming.StreamingCorpus`); default: ``trainer.train_dataset``. The
            in-memory path tokenizes the text away, and a corpus without text is identified by its token ids, which
            change with the tokenization too (``max_seq_length``, prompt template).

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

    @functools.cached_property
    def inputs(self) -> dict[str, Any]:
        """The base model's and the evaluation data's identities by content (``base_model_content_sha256``:
        :func:`~hf_cse.content_identity.model_sha256`; ``evaluation_content_sha256``: :func:`evaluation_identity`),
        computed once, at the first :meth:`settings` (a resume's check, or the first checkpoint), so that a trainer
        that never trains hashes nothing. The providers report their own (:meth:`input_settings`)."""
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        return {
            "base_model_content_sha256": model_sha256(model.config.name_or_path),
            "evaluation_content_sha256": evaluation_identity(self.trainer.args, self.trainer.eval_dataset),
        }

    def settings(self) -> dict[str, Any]:
        """The run's settings that change what is trained (the module's docstring says which), JSON-ready, in a flat
        dict: the run's own (:func:`~hf_cse.training.record.argument_settings.argument_settings`: every training
        argument but the operational ones), and each part's settings as the
        part serializes them: the objective's and each auxiliary term's ``get_config_dict()``, the view
        augmentation's hyper-parameters, the pooling (:func:`pooling_settings`), the LoRA adapter
        (:func:`lora_settings`), the encoder's (:func:`~hf_cse.modeling.backbone.encoder_settings`,
        :func:`~hf_cse.modeling.backbone.weight_settings`), each input provider's
        (:meth:`~hf_cse.inputs.InputSettings.record`, :meth:`~hf_cse.inputs.InputProvider.content_identity`), and
        the corpus identity (:func:`corpus_identity`).

        Raises:
            UsageError: the pooling or an input provider reports a setting named as one of the run's own.
        """
        trainer, args = self.trainer, self.trainer.args
        model = trainer.accelerator.unwrap_model(trainer.model)  # a CSEModel, or a peft model that forwards to one
        objective = trainer.objective.get_config_dict()
        # The view augmentation: dropout where an input provider of the objective makes the views (two prompt
        # templates, word repetition).
        view_maker = trainer.view_maker
        augmentation = view_maker.augmentation if isinstance(view_maker, AugmentedViews) else build_view_augmentation()
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
            "view_augmentation": augmentation.name,
            "view_augmentation_kwargs": augmentation.hparams(),  # its hyper-parameters, defaults filled in
            "base_model": trainer.model_card_kwargs.get("finetuned_from") or model.config.name_or_path or None,
            # The run's own arguments by one rule (hf_cse.training.record.argument_settings): all but the operational.
            **argument_settings(trainer.args),
            "lora": lora_settings(model),
            "encoder": encoder_settings(model.config),  # dropout fields, bidirectional attention
            "weights": weight_settings(model.config),  # dtype and 4-bit quantization
            # Packed batches draw other dropout masks and round otherwise (hf_cse.modeling.packing).
            "padding_free": bool(getattr(model, "padding_free", False)),
            **self.corpus,
            **self.inputs,
        }
        # The parts' own settings, as each serializes them: the pooling, and each input provider (complementary
        # model, negator, paraphrases).
        for part, reported in (
            ("The pooling", pooling_settings(model.pooling, args)),
            ("Input providers", self.input_settings()),
        ):
            taken = sorted(set(reported) & set(values))
            if taken:
                raise UsageError(f"{part} report settings named as the run's own: {taken}; rename them.")
            values.update(reported)
        # As the file holds them (tuples as lists, ...), to compare like with like.
        return json.loads(json.dumps(values, default=str))

    def input_settings(self) -> dict[str, Any]:
        """The input providers' settings, each as its provider reports them (:meth:`~hf_cse.inputs.InputSettings.
        record`), and what identifies the inputs they read by content (:meth:`~hf_cse.inputs.InputProvider.
        content_identity`: a paraphrase TSV's bytes, the complementary model's files, the negations made), in one
        flat dict.

        Raises:
            UsageError: two providers, or a provider and the run, report a setting of the same name.
        """
        trainer = self.trainer
        values: dict[str, Any] = {}
        for provider in dict.fromkeys([*trainer.input_providers.values(), trainer.view_maker]):
            own = provider.settings.record() if provider.name in trainer.input_providers else {}
            for key, value in {**own, **provider.content_identity()}.items():
                if key in values:
                    raise UsageError(f"Input providers report the setting {key!r} twice; rename it in one of them.")
                values[key] = value
        return values

    def write(self, folder: Path) -> None:
        """Write the settings and the history of changes into ``folder`` (a checkpoint being staged)."""
        record = {"settings": self.settings(), "changes": self.changes}
        (Path(folder) / RUN_SETTINGS_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")

    def check_resume(self, checkpoint: Path, step: int) -> None:
        """Check this run's settings against those ``checkpoint`` was trained with, before resuming from it at
        ``step``, and take over its history of changes.

        A checkpoint without the file (written by an older hf_cse) resumes with a warning, and a setting the file lacks
        is not compared (no list names the settings that came later). Differences raise, unless
        ``args.allow_changed_settings``: then they are logged as a warning, added to :attr:`changes`, and the
        learning-rate schedule follows this run's settings from ``step`` on (:class:`ScheduleRealignment`).

        Raises:
            UsageError: the settings differ and ``allow_changed_settings`` is off; or a setting that the optimizer's
                state holds (:data:`HELD_BY_OPTIMIZER_STATE`) differs. One line listing the differences.
            CheckpointError: the checkpoint's settings file is unreadable or not of its format.
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
        recorded = read_run_settings(path)
        self.changes = list(recorded["changes"])
        before, after = recorded["settings"], self.settings()
        if same_folder(before.get("base_model"), after.get("base_model")):  # 'tiny' then '/abs/tiny', say
            after = {**after, "base_model": before["base_model"]}
        old_lora, new_lora = before.get("lora"), after.get("lora")
        if isinstance(old_lora, Mapping) and isinstance(new_lora, Mapping):
            # Only the LoRA settings both sides hold are compared: one side lacks what its hf_cse or peft did not
            # record (hf_cse before LoraConfig.to_dict() recorded four).
            keys = [key for key in new_lora if key in old_lora and old_lora[key] != new_lora[key]]
            before = {**before, "lora": {key: old_lora[key] for key in keys}}
            after = {**after, "lora": {key: new_lora[key] for key in keys}}
        changes = setting_changes(before, after)
        # A setting the checkpoint lacks was not recorded by the hf_cse (or peft, or part) that wrote it: nothing to
        # compare it with, so it alone is no difference. A current checkpoint records every setting of the parts it
        # built; one that the resume builds besides (an input provider, an objective's hyper-parameter) comes with a
        # recorded setting that differs (the objective, the auxiliary terms, the view augmentation), beside which the
        # refusal and the record list it ("tau_plus: unset -> 0.1").
        recorded = [change for change in changes if "before" in change]
        if not recorded:
            return
        described = describe_setting_changes(changes)
        held = [change for change in recorded if change["setting"] in HELD_BY_OPTIMIZER_STATE]
        if held and self.trainer.args.allow_changed_settings:
            raise UsageError(
                f"{checkpoint} was trained with other optimizer settings: {describe_setting_changes(held)}. The "
                "optimizer's state that a resume loads holds them, so the change would not be trained, even with "
                "--allow_changed_settings: resume with the settings it was trained with, or start a new run."
            )
        reshaped = [change for change in recorded if reshapes_the_adapter(change)]
        if reshaped and self.trainer.args.allow_changed_settings:
            raise UsageError(
                f"{checkpoint} holds a LoRA adapter of other shape: {describe_setting_changes(reshaped)}. Its weights "
                "cannot load into this one, even with --allow_changed_settings: resume with the rank and modules it "
                "was trained with, or start a new run."
            )
        if not self.trainer.args.allow_changed_settings:
            inputs = " and inputs" if any(change["setting"].endswith(CONTENT_SUFFIX) for change in changes) else ""
            raise UsageError(
                f"{checkpoint} was trained with other settings: {described}. Resume with the settings{inputs} it was "
                "trained with, or pass --allow_changed_settings true to train on with these (the model card then says "
                "what changed at which step)."
            )
        logger.warning("Resumed at step %d with changed settings: %s.", step, described)
        self.changes.append({"step": step, "changes": changes})
        # The loaded optimizer and scheduler states hold the checkpoint's schedule: this run's takes over.
        self.trainer.remove_callback(ScheduleRealignment)
        self.trainer.add_callback(ScheduleRealignment(step, before.get("learning_rate")))


def same_folder(recorded: Any, given: Any) -> bool:
    """Whether two base-model names are one local folder spelled two ways (relative and absolute, through a link):
    the name a model was loaded by is what a run records, and a resume may spell it otherwise."""
    names = (recorded, given)
    return all(isinstance(name, str) and os.path.isdir(name) for name in names) and os.path.samefile(*names)


def read_run_settings(path: Path) -> dict[str, Any]:
    """The record :meth:`RunSettingsRecord.write` saved at ``path``: ``{"settings": {...}, "changes": [...]}``,
    each part of the type the resume reads (``changes``: ``{"step": int, "changes": [{"setting": str, ...}]}``).

    Raises:
        CheckpointError: unreadable, not JSON, or of another shape; one line naming the file and the part.
    """
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CheckpointError(
            f"{path} is unreadable ({err}): the settings the checkpoint was trained with cannot be checked; resume "
            "from another checkpoint."
        ) from None
    problem = None
    if not isinstance(record, dict):
        problem = f"it holds a JSON {type(record).__name__}, not an object"
    elif not isinstance(record.get("settings"), dict):
        problem = f"its 'settings' is {echo(record.get('settings'))}, not a JSON object"
    elif not isinstance(record.get("changes", []), list) or not all(
        isinstance(entry, dict)
        and type(entry.get("step")) is int  # not a bool
        and isinstance(entry.get("changes"), list)
        and all(isinstance(change, dict) and isinstance(change.get("setting"), str) for change in entry["changes"])
        for entry in record.get("changes", [])
    ):
        problem = (
            f"its 'changes' is {echo(record.get('changes'))}, not a list of "
            '{"step": N, "changes": [{"setting": NAME, ...}]}'
        )
    if problem is not None:
        raise CheckpointError(
            f"{path}: {problem}; the settings the checkpoint was trained with cannot be checked. Resume from another "
            "checkpoint."
        )
    return {"settings": record["settings"], "changes": record.get("changes", [])}


def pooling_settings(pooling: PoolingConfig, args: CSETrainingArguments) -> dict[str, Any]:
    """Every field of the model's pooling settings (``pooler``, ``prompt_template``, ``template_denoising``,
    ``pooler_kwargs``, ``mlp_only_train``, ``normalize``, ``instruction``, ... and any field a subclass or a later
    hf_cse adds), as :meth:`~hf_cse.modeling.configuration_cse.PoolingConfig.to_dict` serializes them, the ones it
    leaves out at their default filled in: a checkpoint records each, so a key it lacks is one its hf_cse did not
    have. A field named as one of the training ``args`` is recorded under ``pooling_`` (``pooling_max_seq_length``,
    the truncation at inference, beside the run's ``max_seq_length`` in training)."""
    arguments = {item.name for item in fields(args)}
    values = {item.name: getattr(pooling, item.name) for item in fields(pooling)} | pooling.to_dict()
    return {f"pooling_{key}" if key in arguments else key: value for key, value in values.items()}


def lora_settings(model: Any) -> dict[str, Any] | None:
    """A peft model's adapter settings as ``LoraConfig.to_dict()`` serializes them (``r``, ``lora_alpha``,
    ``lora_dropout``, ``target_modules``, ``use_dora``, ``modules_to_save``, ... and any a later peft adds), less
    :data:`LORA_PROVENANCE`, sets as sorted lists (a set's order changes with the process's hash seed); ``None`` for
    a plain model."""
    config = getattr(model, "peft_config", {}).get("default")
    if config is None:
        return None
    return {key: sorted_sets(value) for key, value in config.to_dict().items() if key not in LORA_PROVENANCE}


def sorted_sets(value: Any) -> Any:
    """``value`` with every set in it, at any depth, a sorted list."""
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    if isinstance(value, Mapping):
        return {key: sorted_sets(item) for key, item in value.items()}
    return [sorted_sets(item) for item in value] if isinstance(value, list | tuple) else value


def evaluation_identity(args: CSETrainingArguments, eval_dataset: Any) -> dict[str, str] | None:
    """What identifies the data that the evaluations during training score (which choose the best checkpoint), by
    content: ``{"sts": SHA-256 of the STS dev sets' pairs and scores as read (from sts_dir or the Hub), spec:
    SHA-256 of the file or folder of each --evaluators spec that names one (pairs:FILE, ir:FOLDER)}``; ``None`` for a
    run that does not evaluate while training. An evaluator passed to ``CSETrainer`` as an object is not identified."""
    if not evaluates_during_training(args):
        return None
    identity = {}
    if isinstance(eval_dataset, STSDevSets):
        identity["sts"] = rows_sha256(
            (subset.task, subset.name, *pair) for subsets in eval_dataset.subsets.values() for subset in subsets
            for pair in subset
        )  # fmt: skip
    for spec in args.evaluators or ():
        path = parse_evaluator_spec(spec).path
        if path is not None and path.exists():
            identity[spec] = path_sha256(path)
    return identity


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
    """What tells the training corpus apart: a SHA-256 of its whole content, read in chunks of
    :data:`HASH_CHUNK_BYTES` (memory flat in the corpus size; ``benchmarks/corpus_hash.py`` measures the time).

    - A file read as a stream: ``corpus_source`` (as given), ``corpus_file_size`` and ``corpus_content_sha256`` of
      the file's bytes; a built-in corpus or Hub dataset read as a stream: its ``corpus_source``, and a Hub
      dataset's ``corpus_revision``, the commit the Hub serves (a Hub stream is not read twice to be identified;
      offline, its name alone). Both with ``corpus_reading``: the text column, Hub configuration and split, the
      ``max_sentences`` kept and the shuffle buffer, which change what the stream trains on.
    - A ``Dataset``: ``corpus_sentences`` (its rows) and ``corpus_content_sha256`` of its sentences, one per line
      (of its ``input_ids``, space-separated, when it comes without a ``"text"`` column).
    - No corpus (a trainer built for evaluation): ``{}``.
    """
    if isinstance(corpus, SentenceStream):
        corpus = corpus.corpus
    if isinstance(corpus, StreamingCorpus):
        reading = {item.name: getattr(corpus, item.name) for item in fields(corpus) if item.name != "source"}
        identity = {"corpus_source": corpus.source, "corpus_reading": reading}
        path = Path(corpus.source)
        if path.is_file():  # read in chunks of 1 MiB (HASH_CHUNK_BYTES)
            return identity | {"corpus_file_size": path.stat().st_size, "corpus_content_sha256": sha256_of(path)}
        revision = None if is_builtin_corpus(corpus.source) else hub_dataset_revision(corpus.source)
        return identity | {"corpus_revision": revision} if revision else identity
    if corpus is None:
        return {}
    pairs = training_pairs(corpus.column_names)
    # Labelled pairs by every cell of a row (anchor, positive, hard negatives: an edited positive is another corpus),
    # a one-sentence corpus by its text as before (checkpoints recorded that hash).
    columns = list(pairs.training_columns) if pairs else ["text" if "text" in corpus.column_names else "input_ids"]
    digest = hashlib.sha256()
    for batch in corpus.select_columns(columns).iter(batch_size=HASH_CHUNK_BYTES // 128):
        if columns[0] == "input_ids":
            rows = [" ".join(map(str, row)) for row in batch["input_ids"]]
        else:
            rows = ["\t".join(cells) for cells in zip(*(batch[column] for column in columns), strict=True)]
        if rows:
            digest.update(("\n".join(rows) + "\n").encode("utf-8"))
    return {"corpus_sentences": len(corpus), "corpus_content_sha256": digest.hexdigest()}
