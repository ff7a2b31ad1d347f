"""The resume contract: every checkpoint records the settings that change what is trained, and a resume with other
settings is refused in one line unless ``allow_changed_settings``, which the model card then records."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tracemalloc
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest
import torch
from common.content_edits import edit_in_place
from conftest import SENTENCES, make_tiny_trainer
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoTokenizer, TrainerCallback

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, Pooler, PoolingConfig, register_pooler
from hf_cse.augment.negation import negate_all
from hf_cse.errors import CheckpointError, UsageError
from hf_cse.export.model_card import TrainingSummary, render_card_from_summary
from hf_cse.inputs import negation_pairs
from hf_cse.objectives import OBJECTIVES, build_objective
from hf_cse.registry import POOLERS
from hf_cse.training.data.streaming import stream_sentences
from hf_cse.training.record.argument_settings import OPERATIONAL_ARGUMENTS, RECORDED_BY_PARTS, RECORDED_TOGETHER
from hf_cse.training.record.run_arguments import (
    read_training_arguments,
    training_arguments_record,
    write_training_arguments,
)
from hf_cse.training.record.run_settings import (
    HASH_CHUNK_BYTES,
    HELD_BY_OPTIMIZER_STATE,
    RUN_SETTINGS_FILE,
    RunSettingsRecord,
    corpus_identity,
)
from hf_cse.training.training_args import DEFAULT_TEMPERATURE, objective_hparams

TRAINING_ARGUMENTS = frozenset(item.name for item in fields(CSETrainingArguments))


def pooling_keys(pooling_class: type[PoolingConfig]) -> dict[str, str]:
    """``{key the run settings record it by: field}`` for every field of ``pooling_class``: its name, under
    ``pooling_`` where a training argument has it (``pooling_max_seq_length``)."""
    return {
        f"pooling_{item.name}" if item.name in TRAINING_ARGUMENTS else item.name: item.name
        for item in fields(pooling_class)
    }


MASK_TEMPLATE = 'This sentence : "{sentence}" means [MASK] .'
OTHER_TEMPLATE = 'The sentence "{sentence}" says [MASK] .'
SHORTER_SUFFIX_TEMPLATE = 'This sentence : "{sentence}" [MASK] .'
SHORTER_PREFIX_TEMPLATE = 'Sentence : "{sentence}" means [MASK] .'


class ScaledCLS(Pooler):
    """A user's pooler with a setting of its own (``pooler_kwargs``): the [CLS] state times ``scale``."""

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale

    def pool(self, inputs: Any, model: Any) -> torch.Tensor:
        return self.scale * inputs.last_hidden_state[:, 0]


@pytest.fixture(autouse=True)
def scaled_cls_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """``scaled_cls`` registered for this module's tests only (the registry is restored after each)."""
    monkeypatch.setattr(POOLERS, "_classes", dict(POOLERS._classes))
    register_pooler("scaled_cls")(ScaledCLS)


def make_record(
    encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch | None = None,
    **overrides: Any,
) -> RunSettingsRecord:
    """The settings record of a tiny CSETrainer (as ``CSETrainer.__init__`` builds it), with ``overrides`` of its
    training arguments and these special keys: ``model_dir`` (the base model's folder, for ``encoder_dir``),
    ``edited_negator`` (one sentence's negation changed, with ``monkeypatch``), ``pooling_class`` (default
    ``PoolingConfig``) and its fields by the keys the record names them by (:func:`pooling_keys`: ``pooler``,
    ``normalize``, ``pooling_max_seq_length``, ...), ``objective_module`` (``CSETrainer(objective=...)``),
    ``peft_config`` (``CSETrainer(peft_config=...)``), ``model_kwargs`` (config fields the model loads with, such
    as a dropout), ``padding_free`` (the model's), ``finetuned_from`` (``model_card_kwargs``), ``corpus`` (the
    training data as given: a ``Dataset`` or a ``StreamingCorpus``) and ``world_size`` (patched in after
    construction, with ``monkeypatch``: one process cannot be several)."""
    pooling_class = overrides.pop("pooling_class", PoolingConfig)
    pooling = {name: overrides.pop(key) for key, name in pooling_keys(pooling_class).items() if key in overrides}
    objective = overrides.pop("objective_module", None)
    peft_config = overrides.pop("peft_config", None)
    model_kwargs = overrides.pop("model_kwargs", {})
    padding_free = overrides.pop("padding_free", False)
    finetuned_from = overrides.pop("finetuned_from", None)
    corpus = overrides.pop("corpus", Dataset.from_dict({"text": SENTENCES * 2}))
    world_size = overrides.pop("world_size", None)
    encoder_dir = overrides.pop("model_dir", encoder_dir)
    if overrides.pop("edited_negator", False):  # one sentence negated otherwise, as an edited lexicon would
        made = negation_pairs.negate_all
        monkeypatch.setattr(negation_pairs, "negate_all", lambda texts, **kwargs: ["No."] + made(texts, **kwargs)[1:])
    args = {
        "output_dir": str(tmp_path / "out"),
        "per_device_train_batch_size": 4,
        "learning_rate": 1e-3,
        "max_steps": 4,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "seed": 0,
        **overrides,
    }
    torch.manual_seed(0)
    saved = {name: value for name, value in pooling.items() if name in pooling_keys(PoolingConfig).values()}
    model = CSEModel.from_pretrained(encoder_dir, pooling=PoolingConfig(**saved), **model_kwargs)
    model.pooling = pooling_class(**pooling)  # a subclass's fields: config.json is read back into a PoolingConfig
    model.padding_free = padding_free
    trainer = CSETrainer(
        model=model,
        args=CSETrainingArguments(**args),
        train_dataset=corpus,
        processing_class=AutoTokenizer.from_pretrained(encoder_dir),
        objective=objective,
        peft_config=peft_config,
    )
    if finetuned_from is not None:
        trainer.model_card_kwargs["finetuned_from"] = finetuned_from
    if world_size is not None:
        monkeypatch.setattr(CSETrainingArguments, "world_size", property(lambda self: world_size))
    return trainer.run_settings  # the trainer's own record: its corpus as the trainer read it (pairs' columns renamed)


def saved_checkpoint(record: RunSettingsRecord, tmp_path: Path, name: str = "checkpoint-4") -> Path:
    """A checkpoint folder holding ``record``'s settings file (what the trainer writes into every checkpoint)."""
    folder = tmp_path / name
    folder.mkdir(parents=True)
    record.write(folder)
    return folder


def corpus_file(tmp_path: Path, name: str = "stream.txt", tail: str = "") -> Path:
    """A streamed corpus longer than one chunk of the hash (:data:`HASH_CHUNK_BYTES`); ``tail`` is appended after
    it."""
    path = tmp_path / name
    lines = "\n".join(SENTENCES) + "\n"
    path.write_text(lines * (HASH_CHUNK_BYTES // len(lines) + 1) + tail, encoding="utf-8")
    return path


def stream(tmp_path: Path, name: str = "stream.txt", tail: str = "", reading: dict | None = None) -> Any:
    """A stream of :func:`corpus_file`, with ``reading``'s settings (``shuffle_buffer_size``, ...) set on it."""
    corpus = stream_sentences(str(corpus_file(tmp_path, name, tail)))
    for key, value in (reading or {}).items():
        setattr(corpus, key, value)
    return corpus


ENCODER, PARAPHRASES = "<the tiny encoder>", "<a paraphrase TSV>"
COPY, PAIRS, COMPLEMENTARY = "<a copy of the tiny encoder>", "<a file of scored pairs>", "<a complementary model>"
EDITED = "<edited in place> "
"""Placeholders in CHANGES for a path only the test knows (:func:`variant`); ``EDITED + placeholder``: the same
file or folder, edited in place (same size, same modification time) before the resume."""


def dclr(**settings: Any) -> dict[str, Any]:
    """make_record overrides of a DCLR run whose complementary model has ``settings``."""
    return {"objective": "dclr", "input_kwargs": {"complementary_similarities": settings}}


def osscse(**settings: Any) -> dict[str, Any]:
    """make_record overrides of an OssCSE run whose negations and paraphrases have ``settings`` (the rule-based
    negator unless they say otherwise)."""
    provider = {"negation_backend": "rules", **settings}
    return {"objective": "osscse", "pooler": "mask", "prompt_template": MASK_TEMPLATE,
            "input_kwargs": {"negations_and_paraphrases": provider}}  # fmt: skip


OSSCSE = osscse()

# For every recorded setting: (training of the checkpoint, training of the resume) that differ in it, and the
# settings that change with it (a new objective brings its own hyper-parameters). Overrides are make_record's.
LABELLED_PAIRS = {"corpus": Dataset.from_dict({"sent0": SENTENCES * 2, "sent1": SENTENCES[::-1] * 2})}
"""make_record's override of a corpus of labelled pairs (anchors and positives)."""

CHANGES: dict[str, tuple[Any, Any, set[str]]] = {
    "objective": ({}, {"objective": "focal_infonce"}, {"hardness"}),
    "temperature": ({}, {"temperature": 0.1}, set()),
    "hardness": (
        {"objective": "focal_infonce"},
        {"objective": "focal_infonce", "objective_kwargs": {"hardness": 0.5}},
        set(),
    ),
    "matryoshka_dims": ({}, {"matryoshka_dims": [32, 16]}, {"matryoshka_weights"}),
    "matryoshka_weights": (
        {"matryoshka_dims": [32, 16]},
        {"matryoshka_dims": [32, 16], "matryoshka_weights": [1.0, 0.5]},
        set(),
    ),
    "auxiliary_losses": ({}, {"auxiliary_losses": {"recall": {"weight": 1.0}}}, set()),
    "view_augmentation": ({}, {"view_augmentation": "shuffle"}, set()),
    "view_augmentation_kwargs": (
        {"view_augmentation": "token_cutoff"},
        {"view_augmentation": "token_cutoff", "view_augmentation_kwargs": {"rate": 0.2}},
        set(),
    ),
    "pooler": ({}, {"pooler": "avg"}, set()),
    "pooler_kwargs": ({"pooler": "scaled_cls"}, {"pooler": "scaled_cls", "pooler_kwargs": {"scale": 2.0}}, set()),
    "prompt_template": (
        {"pooler": "mask", "prompt_template": MASK_TEMPLATE},
        {"pooler": "mask", "prompt_template": MASK_TEMPLATE.replace("means", "is")},
        set(),
    ),
    # The template's token counts around the sentence follow from the template (and the tokenizer).
    "template_prefix_length": (
        {"pooler": "mask", "prompt_template": MASK_TEMPLATE},
        {"pooler": "mask", "prompt_template": SHORTER_PREFIX_TEMPLATE},
        {"prompt_template"},
    ),
    "template_suffix_length": (
        {"pooler": "mask", "prompt_template": MASK_TEMPLATE},
        {"pooler": "mask", "prompt_template": SHORTER_SUFFIX_TEMPLATE},
        {"prompt_template"},
    ),
    "mask_token_id": ({}, {"mask_token_id": 5}, set()),
    "normalize": ({}, {"normalize": True}, set()),
    "pooling_max_seq_length": ({}, {"pooling_max_seq_length": 16}, set()),
    # An instruction goes before the anchors of labelled pairs (a corpus of one sentence a row is refused with one).
    "instruction": (
        {"pooler": "avg", **LABELLED_PAIRS},
        {"pooler": "avg", "instruction": "Query: ", **LABELLED_PAIRS},
        set(),
    ),
    "instruct_positives": (
        {"pooler": "avg", "instruction": "Query: ", **LABELLED_PAIRS},
        {"pooler": "avg", "instruction": "Query: ", "instruct_positives": True, **LABELLED_PAIRS},
        set(),
    ),
    "template_denoising": (
        {"pooler": "mask", "prompt_template": MASK_TEMPLATE},
        {"pooler": "mask", "prompt_template": MASK_TEMPLATE, "template_denoising": True},
        set(),
    ),
    "base_model": ({}, {"finetuned_from": "another/model"}, set()),
    "per_device_train_batch_size": ({}, {"per_device_train_batch_size": 6}, set()),
    "world_size": ({}, {"world_size": 2}, set()),
    "gradient_accumulation_steps": ({}, {"gradient_accumulation_steps": 2}, set()),
    "max_seq_length": ({}, {"max_seq_length": 16}, set()),
    "seed": ({}, {"seed": 1}, set()),
    "data_seed": ({}, {"data_seed": 7}, set()),
    "learning_rate": ({}, {"learning_rate": 2e-3}, set()),
    "max_steps": ({}, {"max_steps": 8}, set()),
    "num_train_epochs": ({"max_steps": -1}, {"max_steps": -1, "num_train_epochs": 2}, set()),
    "lr_scheduler_type": ({}, {"lr_scheduler_type": "constant"}, set()),
    "lr_scheduler_kwargs": (
        {"lr_scheduler_type": "cosine"},
        {"lr_scheduler_type": "cosine", "lr_scheduler_kwargs": {"num_cycles": 1.0}},
        set(),
    ),
    "warmup_steps": ({}, {"warmup_steps": 2}, set()),
    "weight_decay": ({}, {"weight_decay": 0.01}, set()),
    "optimizer": ({}, {"adam_beta2": 0.99}, set()),
    "max_grad_norm": ({}, {"max_grad_norm": 0.5}, set()),
    "precision": ({}, {"bf16": True}, set()),
    "gather_negatives": ({}, {"gather_negatives": False}, set()),
    "mask_duplicates": ({}, {"mask_duplicates": True}, set()),
    # The same anchors as labelled pairs: another corpus (every cell hashed) and another kind of data.
    "num_hard_negatives": (
        {},
        LABELLED_PAIRS,
        {"corpus_content_sha256"},
    ),
    "mlp_only_train": ({}, {"mlp_only_train": False}, set()),
    "lora": ({}, {"peft_config": LoraConfig(r=2)}, set()),
    "encoder": ({}, {"model_kwargs": {"hidden_dropout_prob": 0.3}}, set()),
    "weights": ({}, {"model_kwargs": {"dtype": torch.bfloat16}}, set()),
    "padding_free": ({}, {"padding_free": True}, set()),
    "complementary_model": (dclr(), dclr(model_name_or_path=ENCODER), {"complementary_model_content_sha256"}),
    "complementary_model_content_sha256": (
        dclr(model_name_or_path=COMPLEMENTARY),
        dclr(model_name_or_path=EDITED + COMPLEMENTARY),
        set(),
    ),
    "complementary_pooler": (dclr(), dclr(pooler="avg"), set()),
    "complementary_cache_dtype": (dclr(), dclr(cache_dtype="float32"), set()),
    "negation_backend": (OSSCSE, osscse(negation_backend="auto"), set()),
    "paraphrase_source": (OSSCSE, osscse(paraphrase_source=PARAPHRASES), {"paraphrase_source_content_sha256"}),
    "paraphrase_source_content_sha256": (
        osscse(paraphrase_source=PARAPHRASES),
        osscse(paraphrase_source=EDITED + PARAPHRASES),
        set(),
    ),
    "negations_content_sha256": (OSSCSE, {**OSSCSE, "edited_negator": True}, set()),
    "base_model_content_sha256": ({"model_dir": COPY}, {"model_dir": EDITED + COPY}, set()),
    "evaluation_content_sha256": (
        {"eval_strategy": "steps", "eval_steps": 2, "evaluators": [PAIRS]},
        {"eval_strategy": "steps", "eval_steps": 2, "evaluators": [EDITED + PAIRS]},
        set(),
    ),
    "corpus_sentences": ({}, {"corpus": Dataset.from_dict({"text": SENTENCES * 3})}, {"corpus_content_sha256"}),
    "corpus_content_sha256": ({}, {"corpus": Dataset.from_dict({"text": SENTENCES[::-1] * 2})}, set()),
    "corpus_source": (("stream.txt", ""), ("moved.txt", ""), set()),
    "corpus_file_size": (
        ("stream.txt", ""),
        ("stream.txt", "one more sentence\n"),
        {"corpus_content_sha256"},
    ),
    "corpus_reading": (("stream.txt", ""), ("stream.txt", "", {"shuffle_buffer_size": 10}), set()),
}
"""The streaming entries are ``(file name, tail[, reading])`` of the streamed corpus (the same first MiB: moved, or
with more text after it, or read otherwise); see :func:`variant`."""


def variant(tmp_path: Path, spec: dict[str, Any] | tuple[str, str], encoder_dir: Path | None = None) -> dict[str, Any]:
    """make_record overrides of a CHANGES entry; a streaming one's file is written now, and a placeholder becomes
    its path (the tiny encoder; a copy of it, a paraphrase TSV or scored pairs written at the first mention, edited
    in place where ``EDITED`` says so)."""
    if isinstance(spec, tuple):
        return {"corpus": stream(tmp_path, *spec)}
    made = {
        PARAPHRASES: (tmp_path / "paraphrases.tsv", "".join(f"{s}\t{s} indeed\n" for s in SENTENCES)),
        PAIRS: (tmp_path / "pairs.tsv", "sentence1\tsentence2\tscore\n" + "".join(
            f"{s}\t{t}\t{i % 5}\n" for i, (s, t) in enumerate(zip(SENTENCES, SENTENCES[1:], strict=False))
        )),
        COPY: (tmp_path / "encoder", None),
        COMPLEMENTARY: (tmp_path / "complementary", None),
    }  # fmt: skip

    def path_of(value: Any) -> Any:
        if value == ENCODER:
            return str(encoder_dir)
        if not isinstance(value, str) or value.removeprefix(EDITED) not in made:
            return value
        path, text = made[value.removeprefix(EDITED)]
        if not path.exists():
            path.write_text(text, encoding="utf-8") if text is not None else shutil.copytree(encoder_dir, path)
        if value.startswith(EDITED):
            edit_in_place(path / "model.safetensors" if path.is_dir() else path)
        scheme = {PARAPHRASES: "tsv:", PAIRS: "pairs:"}.get(value.removeprefix(EDITED), "")
        return f"{scheme}{path}"

    def paths_of(value: Any) -> Any:  # in lists and in input_kwargs' mappings too
        if isinstance(value, dict):
            return {key: paths_of(item) for key, item in value.items()}
        return [paths_of(item) for item in value] if isinstance(value, list) else path_of(value)

    return paths_of(spec)


def test_the_changes_table_covers_every_recorded_setting(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    in_memory = make_record(tiny_encoder_dir, tmp_path, objective="focal_infonce").settings()
    streamed = make_record(tiny_encoder_dir, tmp_path, corpus=stream(tmp_path)).settings()
    # The input providers' settings are recorded when the run builds the provider (besides the objective's own).
    dclr_run = set(make_record(tiny_encoder_dir, tmp_path, **dclr()).settings())
    osscse_run = set(make_record(tiny_encoder_dir, tmp_path, **OSSCSE).settings())
    complementary = {
        "complementary_model", "complementary_pooler", "complementary_cache_dtype",
        "complementary_model_content_sha256",
    }  # fmt: skip
    negation = {
        "negation_backend", "paraphrase_source", "negations_content_sha256", "paraphrase_source_content_sha256"
    }  # fmt: skip
    # The training arguments without an entry are compared by one rule (test_the_arguments_are_compared_by_one_rule).
    recorded = set(in_memory) | set(streamed) | complementary | negation
    assert set(CHANGES) == recorded - (TRAINING_ARGUMENTS - set(CHANGES))
    assert set(streamed) - set(in_memory) == {"corpus_source", "corpus_file_size", "corpus_reading"}
    assert complementary <= dclr_run and not negation & dclr_run
    assert negation <= osscse_run and not complementary & osscse_run


@dataclass
class ScaledPoolingConfig(PoolingConfig):
    """The pooling settings with a field no list of hf_cse names, as a later hf_cse or a user's subclass adds one."""

    inference_scale: float = 1.0


def test_a_field_added_to_the_pooling_enters_the_resume_contract_unlisted(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """The record takes the pooling from ``PoolingConfig.to_dict()`` (issue 53 item 2): a new field is recorded, a
    resume that changes it is refused in one line naming it, and a checkpoint written before the field existed
    resumes (nothing to compare it with)."""
    record = make_record(tiny_encoder_dir, tmp_path, pooling_class=ScaledPoolingConfig)
    assert record.settings()["inference_scale"] == 1.0
    checkpoint = saved_checkpoint(record, tmp_path)
    make_record(tiny_encoder_dir, tmp_path, pooling_class=ScaledPoolingConfig).check_resume(checkpoint, 4)
    scaled = make_record(tiny_encoder_dir, tmp_path, pooling_class=ScaledPoolingConfig, inference_scale=2.0)
    with pytest.raises(
        UsageError, match=r" was trained with other settings: inference_scale: 1\.0 -> 2\.0\. "
    ) as error:
        scaled.check_resume(checkpoint, 4)
    assert "\n" not in str(error.value)
    older = saved_checkpoint(make_record(tiny_encoder_dir, tmp_path), tmp_path, "checkpoint-older")
    assert "inference_scale" not in json.loads((older / RUN_SETTINGS_FILE).read_text(encoding="utf-8"))["settings"]
    scaled.check_resume(older, 4)


def test_the_lora_record_is_peft_s_own_and_an_older_one_still_resumes(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """The adapter's settings are ``LoraConfig.to_dict()`` (issue 53 item 2): one that the older record's four keys
    did not name (``use_rslora``) is recorded, and a resume that changes it is refused in one line naming it alone;
    a checkpoint of the older record resumes, compared on its four."""
    record = make_record(tiny_encoder_dir, tmp_path, peft_config=LoraConfig(r=2))
    lora = record.settings()["lora"]
    assert lora["r"] == 2 and lora["use_rslora"] is False and lora["target_modules"] == sorted(lora["target_modules"])
    assert "peft_version" not in lora and "base_model_name_or_path" not in lora
    checkpoint = saved_checkpoint(record, tmp_path)
    rslora = make_record(tiny_encoder_dir, tmp_path, peft_config=LoraConfig(r=2, use_rslora=True))
    refused = r" was trained with other settings: lora: \{'use_rslora': False\} -> \{'use_rslora': True\}\. Resume "
    with pytest.raises(UsageError, match=refused):
        rslora.check_resume(checkpoint, 4)
    path = checkpoint / RUN_SETTINGS_FILE
    saved = json.loads(path.read_text(encoding="utf-8"))
    saved["settings"]["lora"] = {key: lora[key] for key in ("r", "lora_alpha", "lora_dropout", "target_modules")}
    path.write_text(json.dumps(saved), encoding="utf-8")
    rslora.check_resume(checkpoint, 4)
    with pytest.raises(UsageError, match=r" other settings: lora: \{'r': 2\} -> \{'r': 4\}\. "):
        make_record(tiny_encoder_dir, tmp_path, peft_config=LoraConfig(r=4)).check_resume(checkpoint, 4)


@dataclass
class ArgumentsWithAField(CSETrainingArguments):
    """The training arguments with a field no list of hf_cse names."""

    warmup_shape: str = "linear"


def test_the_arguments_are_compared_by_one_rule(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """Every training argument is recorded but the operational ones and those a part records in its own form; a
    change of one recorded without a hand-written entry (skipping the seen batches, the last partial batch) is
    refused, and a change of operational ones (saving, logging, evaluation batch, loader workers) resumes silently."""
    settings = make_record(tiny_encoder_dir, tmp_path).settings()
    together = {name for names in RECORDED_TOGETHER.values() for name in names}
    own = TRAINING_ARGUMENTS - RECORDED_BY_PARTS  # the parts record theirs under the same names, in their form
    assert set(settings) & own == own - OPERATIONAL_ARGUMENTS - together
    # hf_cse's own names are fields (transformers' operational ones may come and go between its releases).
    assert not (RECORDED_BY_PARTS | together) - TRAINING_ARGUMENTS
    assert "hub_token" not in settings and "output_dir" not in settings
    checkpoint = saved_checkpoint(make_record(tiny_encoder_dir, tmp_path), tmp_path)
    operational = {"save_steps": 7, "logging_steps": 3, "per_device_eval_batch_size": 5, "dataloader_num_workers": 1}
    make_record(tiny_encoder_dir, tmp_path, **operational, gradient_cache_chunk_size=2).check_resume(checkpoint, 4)
    for setting, value in (("ignore_data_skip", True), ("dataloader_drop_last", True)):
        with pytest.raises(UsageError, match=f"other settings: {setting}: {settings[setting]!r} -> {value!r}\\. "):
            make_record(tiny_encoder_dir, tmp_path, **{setting: value}).check_resume(checkpoint, 4)


def test_a_field_added_to_the_training_arguments_is_compared_on_resume(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """A field of the arguments that no list names (a later transformers', or a subclass's) is recorded and compared:
    only a field declared operational is left out."""

    def record(warmup_shape: str) -> RunSettingsRecord:
        args = ArgumentsWithAField(str(tmp_path / "out"), max_steps=4, use_cpu=True, warmup_shape=warmup_shape)
        corpus = Dataset.from_dict({"text": SENTENCES * 2})
        tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
        model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig())
        return CSETrainer(model=model, args=args, train_dataset=corpus, processing_class=tokenizer).run_settings

    checkpoint = saved_checkpoint(record("linear"), tmp_path)
    assert json.loads((checkpoint / RUN_SETTINGS_FILE).read_text(encoding="utf-8"))["settings"]["warmup_shape"] == (
        "linear"
    )
    with pytest.raises(UsageError, match=r"other settings: warmup_shape: 'linear' -> 'cosine'\. "):
        record("cosine").check_resume(checkpoint, 4)


def test_a_field_added_to_the_training_arguments_reaches_training_args_json(tmp_path: Path) -> None:
    """``training_args.json`` (what the card and ``python -m hf_cse.push`` read) is ``TrainingArguments.to_dict()``:
    a new field is written and read back with no list edited."""
    args = ArgumentsWithAField(str(tmp_path / "out"), warmup_shape="cosine", use_cpu=True, report_to="none")
    write_training_arguments(args, tmp_path)
    assert read_training_arguments(tmp_path)["warmup_shape"] == "cosine"


@pytest.mark.parametrize("setting", list(CHANGES))
def test_each_recorded_setting_changed_alone_is_refused(
    setting: str, tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, after, companions = CHANGES[setting]
    spacy_differs = setting == "negation_backend" and negate_all(SENTENCES) != negate_all(SENTENCES, backend="rules")
    if spacy_differs:  # "auto" is spaCy here, which negates otherwise
        companions = {"negations_content_sha256"}
    record = make_record(tiny_encoder_dir, tmp_path, monkeypatch, **variant(tmp_path, before, tiny_encoder_dir))
    checkpoint = saved_checkpoint(record, tmp_path)
    resumed = make_record(tiny_encoder_dir, tmp_path, monkeypatch, **variant(tmp_path, after, tiny_encoder_dir))
    recorded = json.loads((checkpoint / RUN_SETTINGS_FILE).read_text(encoding="utf-8"))["settings"]
    changed = {key for key in {*recorded, *resumed.settings()} if recorded.get(key) != resumed.settings().get(key)}
    assert changed == {setting, *companions}
    with pytest.raises(UsageError, match=f"was trained with other settings: .*{setting}: ") as error:
        resumed.check_resume(checkpoint, 4)
    assert "\n" not in str(error.value)


def test_an_unchanged_resume_passes_silently(
    tiny_encoder_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = saved_checkpoint(make_record(tiny_encoder_dir, tmp_path), tmp_path)
    resumed = make_record(tiny_encoder_dir, tmp_path)
    with caplog.at_level(logging.INFO, logger="hf_cse.training.record.run_settings"):
        resumed.check_resume(checkpoint, 4)
    assert caplog.records == [] and resumed.changes == []


def test_the_refusal_is_one_line_listing_the_differences(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    checkpoint = saved_checkpoint(make_record(tiny_encoder_dir, tmp_path), tmp_path)
    resumed = make_record(tiny_encoder_dir, tmp_path, objective="dcl", temperature=0.1)
    with pytest.raises(UsageError) as error:
        resumed.check_resume(checkpoint, 4)
    assert str(error.value) == (
        f"{checkpoint} was trained with other settings: objective: 'simcse' -> 'dcl'; temperature: 0.05 -> 0.1; "
        "tau_plus: unset -> 0.1; num_positive_views: unset -> 1. Resume with the settings it was trained with, or "
        "pass --allow_changed_settings true to train on with these (the model card then says what changed at which "
        "step)."
    )


def test_the_opt_in_records_the_change_and_later_checkpoints_keep_it(
    tiny_encoder_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = saved_checkpoint(make_record(tiny_encoder_dir, tmp_path), tmp_path)
    resumed = make_record(tiny_encoder_dir, tmp_path, temperature=0.1, allow_changed_settings=True)
    with caplog.at_level(logging.WARNING, logger="hf_cse.training.record.run_settings"):
        resumed.check_resume(first, 4)
    assert "Resumed at step 4 with changed settings: temperature: 0.05 -> 0.1." in caplog.text
    change = {"step": 4, "changes": [{"setting": "temperature", "before": 0.05, "after": 0.1}]}
    assert resumed.changes == [change]

    # The next checkpoints carry the history: a resume from one with these settings knows it, silently.
    second = saved_checkpoint(resumed, tmp_path, "checkpoint-6")
    again = make_record(tiny_encoder_dir, tmp_path, temperature=0.1)
    caplog.clear()
    again.check_resume(second, 6)
    assert again.changes == [change] and caplog.records == []
    # A second change adds to the history; without the flag it is refused like the first.
    with pytest.raises(UsageError, match="temperature: 0.1 -> 0.2"):
        make_record(tiny_encoder_dir, tmp_path, temperature=0.2).check_resume(second, 6)
    later = make_record(tiny_encoder_dir, tmp_path, temperature=0.2, allow_changed_settings=True)
    later.check_resume(second, 6)
    assert later.changes == [change, {"step": 6, "changes": [{"setting": "temperature", "before": 0.1, "after": 0.2}]}]


def test_a_checkpoint_of_an_older_hf_cse_resumes_with_a_warning(
    tiny_encoder_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    legacy = tmp_path / "checkpoint-4"
    legacy.mkdir()
    with caplog.at_level(logging.WARNING, logger="hf_cse.training.record.run_settings"):
        make_record(tiny_encoder_dir, tmp_path, objective="dcl").check_resume(legacy, 4)
    assert f"{legacy} has no {RUN_SETTINGS_FILE} (it was written by an older hf_cse)" in caplog.text
    assert "cannot be checked" in caplog.text


def test_an_objective_module_is_recorded_with_its_own_hyper_parameters(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """The run settings and the saved training arguments name the module's objective and hyper-parameters, not the
    arguments' default: ``training_args.json`` said ``simcse`` at temperature 0.05 for a DCL run at 0.1, and
    ``python -m hf_cse.push`` of a checkpoint rebuilt SimCSE for its card. Two objectives given is one line."""
    module = build_objective("dcl", temperature=0.1, tau_plus=0.2)
    record = make_record(tiny_encoder_dir, tmp_path, objective_module=module)
    settings = record.settings()
    assert (settings["objective"], settings["temperature"], settings["tau_plus"]) == ("dcl", 0.1, 0.2)
    saved = training_arguments_record(record.trainer.args)
    assert (saved["objective"], saved["temperature"], saved["objective_kwargs"]) == (
        "dcl", 0.1, {"tau_plus": 0.2, "num_positive_views": 1}
    )  # fmt: skip
    rebuilt = build_objective("dcl", **objective_hparams("dcl", saved["temperature"], saved["objective_kwargs"]))
    assert rebuilt.get_config_dict() == module.get_config_dict()
    with pytest.raises(
        UsageError, match=r"^CSETrainer got objective=DCLLoss \('dcl'\) and args.objective='focal_infonce'"
    ):
        make_record(tiny_encoder_dir, tmp_path, objective_module=module, objective="focal_infonce")


def test_objective_hyper_parameters_do_not_shadow_the_other_settings(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """Objective hyper-parameters sit beside the other settings, under their own names: none may take another's."""
    others = set(make_record(tiny_encoder_dir, tmp_path).settings()) - {"temperature", "matryoshka_dims"}
    for name in OBJECTIVES:
        module = build_objective(name, **objective_hparams(name, DEFAULT_TEMPERATURE, {}))
        assert set(module.get_config_dict()).isdisjoint(others), name


def test_the_corpus_identity_hashes_the_whole_content(tmp_path: Path) -> None:
    """An edit anywhere in the corpus changes its identity, the last byte of a same-size file included, in memory and
    streamed; token ids identify a corpus without text."""
    long = ["x" * 1000] * (HASH_CHUNK_BYTES // 1000 + 5)
    whole = corpus_identity(Dataset.from_dict({"text": long}))
    edited = corpus_identity(Dataset.from_dict({"text": [*long[:-1], "x" * 999 + "y"]}))
    assert whole["corpus_sentences"] == edited["corpus_sentences"] == len(long)
    assert whole["corpus_content_sha256"] != edited["corpus_content_sha256"]
    tokenized = corpus_identity(Dataset.from_dict({"input_ids": [[2, 5, 3], [2, 6, 3]]}))
    assert tokenized["corpus_sentences"] == 2 and tokenized != corpus_identity(
        Dataset.from_dict({"input_ids": [[2, 6, 3], [2, 5, 3]]})
    )

    path = corpus_file(tmp_path, tail="the last sentence\n")
    before = corpus_identity(stream_sentences(str(path)))
    data = bytearray(path.read_bytes())
    data[-2:-1] = b"E"  # the same size, one byte changed far past the first MiB
    path.write_bytes(bytes(data))
    after = corpus_identity(stream_sentences(str(path)))
    assert before["corpus_file_size"] == after["corpus_file_size"] == len(data)
    assert before["corpus_content_sha256"] != after["corpus_content_sha256"]
    assert after["corpus_content_sha256"] == hashlib.sha256(data).hexdigest()

    reading = {"text_column": None, "dataset_config_name": None, "split": "train", "max_sentences": None}
    builtin = corpus_identity(stream_sentences("gensim:lee"))
    assert builtin == {"corpus_source": "gensim:lee", "corpus_reading": {**reading, "shuffle_buffer_size": 10_000}}
    assert corpus_identity(None) == {}


def test_the_corpus_hash_reads_in_chunks_in_flat_memory(tmp_path: Path) -> None:
    """Hashing a 64 MiB corpus, streamed or in memory, holds a chunk at a time, not the corpus."""
    lines = ("a sentence of the corpus, long enough to count " * 2 + "\n") * ((64 << 20) // 97)
    path = tmp_path / "big.txt"
    path.write_text(lines, encoding="utf-8")
    corpus = stream_sentences(str(path))
    tracemalloc.start()
    corpus_identity(corpus)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 8 << 20, f"{peak / 2**20:.1f} MiB held to hash a {path.stat().st_size / 2**20:.0f} MiB file"


@pytest.mark.parametrize("setting", sorted(HELD_BY_OPTIMIZER_STATE))
def test_settings_the_optimizer_state_holds_are_refused_even_with_the_opt_in(
    setting: str, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """The resume loads the checkpoint's optimizer state, whose parameter groups hold these: a change of them would
    be recorded on the card but not trained."""
    before, after, _ = CHANGES[setting]
    checkpoint = saved_checkpoint(make_record(tiny_encoder_dir, tmp_path, **before), tmp_path)
    resumed = make_record(tiny_encoder_dir, tmp_path, **after, allow_changed_settings=True)
    refused = f"other optimizer settings: {setting}: .* even with --allow_changed_settings"
    with pytest.raises(UsageError, match=refused):
        resumed.check_resume(checkpoint, 4)


MALFORMED_SETTINGS_FILES = {
    "not JSON": "{settings",
    "a list": "[]",
    "no settings": '{"changes": []}',
    "settings a string": '{"settings": "simcse"}',
    "changes an object": '{"settings": {}, "changes": {"step": 2}}',
    "a change without a step": '{"settings": {}, "changes": [{"changes": []}]}',
    "a step that is text": '{"settings": {}, "changes": [{"step": "2", "changes": []}]}',
    "a change without a setting": '{"settings": {}, "changes": [{"step": 2, "changes": [{"before": 1}]}]}',
    "not UTF-8": b"\xff\xfe{}",
}


@pytest.mark.parametrize("name", list(MALFORMED_SETTINGS_FILES))
def test_a_malformed_settings_file_is_one_line_naming_it(name: str, tiny_encoder_dir: Path, tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint-4"
    checkpoint.mkdir()
    content = MALFORMED_SETTINGS_FILES[name]
    path = checkpoint / RUN_SETTINGS_FILE
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(CheckpointError) as error:
        make_record(tiny_encoder_dir, tmp_path).check_resume(checkpoint, 4)
    assert str(error.value).startswith(f"{path}") and "\n" not in str(error.value)


def test_the_card_and_record_say_what_changed_at_which_step() -> None:
    summary = TrainingSummary(
        base_model="bert-base-uncased", train_data="wiki.txt", objective="dcl", objective_config={}
    )
    assert "changed settings" not in render_card_from_summary(summary, "user/model")
    summary.settings_changes = [
        {"step": 40, "changes": [{"setting": "objective", "before": "simcse", "after": "dcl"}]},
        {"step": 90, "changes": [{"setting": "tau_plus", "after": 0.1}]},
    ]
    card = render_card_from_summary(summary, "user/model")
    assert "- **Resumed at step 40 with changed settings**: `objective: 'simcse' -> 'dcl'`" in card
    assert "- **Resumed at step 90 with changed settings**: `tau_plus: unset -> 0.1`" in card
    assert "Training was resumed with changed settings" in card
    assert TrainingSummary.from_dict(summary.to_dict()).settings_changes == summary.settings_changes


def train(encoder_dir: Path, output_dir: Path, resume: str | None = None, **overrides: Any) -> CSETrainer:
    """Train the tiny model 4 steps with a checkpoint every 2 (from ``resume`` when given)."""
    trainer = make_tiny_trainer(encoder_dir, output_dir, **{"max_steps": 4, **overrides})
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def test_a_resumed_run_with_changed_settings_is_refused_or_recorded_end_to_end(
    tiny_encoder_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    output_dir = tmp_path / "out"
    train(tiny_encoder_dir, output_dir)
    checkpoint = output_dir / "checkpoint-2"
    assert json.loads((checkpoint / RUN_SETTINGS_FILE).read_text(encoding="utf-8"))["changes"] == []

    with pytest.raises(UsageError) as error:
        train(tiny_encoder_dir, output_dir, str(checkpoint), objective="focal_infonce", temperature=0.1)
    assert str(error.value).startswith(
        f"{checkpoint} was trained with other settings: objective: 'simcse' -> 'focal_infonce'; temperature: 0.05 -> "
        "0.1; hardness: unset -> 0.3. Resume with"
    )
    assert "\n" not in str(error.value)

    with caplog.at_level(logging.WARNING, logger="hf_cse.training.record.run_settings"):
        resumed = train(
            tiny_encoder_dir,
            output_dir,
            str(checkpoint),
            objective="focal_infonce",
            temperature=0.1,
            allow_changed_settings=True,
        )
    described = "objective: 'simcse' -> 'focal_infonce'; temperature: 0.05 -> 0.1; hardness: unset -> 0.3"
    assert f"Resumed at step 2 with changed settings: {described}." in caplog.text
    assert [entry["step"] for entry in resumed.state.log_history if "loss" in entry] == [1, 2, 3, 4]
    change = {
        "step": 2,
        "changes": [
            {"setting": "objective", "before": "simcse", "after": "focal_infonce"},
            {"setting": "temperature", "before": 0.05, "after": 0.1},
            {"setting": "hardness", "after": 0.3},
        ],
    }
    # The checkpoint written after the resume carries the change, for a later resume.
    assert json.loads((output_dir / "checkpoint-4" / RUN_SETTINGS_FILE).read_text(encoding="utf-8"))["changes"] == [
        change
    ]
    resumed.create_model_card()
    record = json.loads((output_dir / "hf_cse_training.json").read_text(encoding="utf-8"))
    assert record["settings_changes"] == [change] and record["objective"] == "focal_infonce"
    card = (output_dir / "README.md").read_text(encoding="utf-8")
    assert (
        "- **Resumed at step 2 with changed settings**: `objective: 'simcse' -> 'focal_infonce'`; "
        "`temperature: 0.05 -> 0.1`; `hardness: unset -> 0.3`" in card
    )


def test_settings_an_older_hf_cse_did_not_record_are_not_compared(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """A checkpoint of an hf_cse that recorded only some settings (here the objective and the learning rate) resumes
    with the others not compared, with no list of the settings that came later; a setting it did record still is."""
    record = make_record(tiny_encoder_dir, tmp_path)
    checkpoint = saved_checkpoint(record, tmp_path)
    path = checkpoint / RUN_SETTINGS_FILE
    saved = json.loads(path.read_text(encoding="utf-8"))
    saved["settings"] = {key: saved["settings"][key] for key in ("objective", "learning_rate")}
    path.write_text(json.dumps(saved), encoding="utf-8")
    record.check_resume(checkpoint, 4)  # no error
    with pytest.raises(UsageError, match="learning_rate: 0.001 -> 0.002"):
        make_record(tiny_encoder_dir, tmp_path, learning_rate=2e-3).check_resume(checkpoint, 4)


class LearningRates(TrainerCallback):
    """The learning rate each optimizer step trains with, by step (read just before the step)."""

    def __init__(self) -> None:
        self.by_step: dict[int, float] = {}

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kwargs: Any) -> None:
        self.by_step[state.global_step + 1] = optimizer.param_groups[0]["lr"]


def rates(encoder_dir: Path, output_dir: Path, resume: str | None = None, **overrides: Any) -> dict[int, float]:
    """The learning rate of each step :func:`train` trains, from ``resume`` when given."""
    recorder = LearningRates()
    trainer = make_tiny_trainer(encoder_dir, output_dir, **{"max_steps": 4, **overrides})
    trainer.add_callback(recorder)
    trainer.train(resume_from_checkpoint=resume)
    return recorder.by_step


@pytest.mark.parametrize(
    "changed",
    [
        {"max_steps": 8},
        {"learning_rate": 3e-3},
        {"warmup_steps": 2, "max_steps": 8},
        {"lr_scheduler_type": "constant"},
    ],
    ids=["max_steps", "learning_rate", "warmup", "scheduler"],
)
def test_a_resume_with_another_schedule_is_refused_or_trains_the_new_schedule_from_its_first_step(
    changed: dict[str, Any], tiny_encoder_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A resume with another length or schedule is refused; with the opt-in, every resumed step, the first included,
    trains at the rate a straight run with the new settings has at that step (the checkpoint's optimizer state
    would have handed the first step the old schedule's rate, and kept the old peak)."""
    output_dir = tmp_path / "out"
    rates(tiny_encoder_dir, output_dir)
    checkpoint = str(output_dir / "checkpoint-2")
    with pytest.raises(UsageError, match=f"was trained with other settings: .*{next(iter(changed))}: "):
        rates(tiny_encoder_dir, output_dir, checkpoint, **changed)
    straight = rates(tiny_encoder_dir, tmp_path / "straight", **changed)
    with caplog.at_level(logging.WARNING, logger="hf_cse.training.record.run_settings"):
        resumed = rates(tiny_encoder_dir, output_dir, checkpoint, **changed, allow_changed_settings=True)
    assert sorted(resumed) == [step for step in sorted(straight) if step > 2]
    assert resumed == pytest.approx({step: rate for step, rate in straight.items() if step > 2}, rel=1e-12)
    assert "the learning rate follows this run's schedule" in caplog.text


def test_a_resume_naming_the_base_model_folder_otherwise_is_no_change(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run records the base model by the name it was loaded with: a resume that spells the same folder otherwise
    (relative, then absolute) was refused as "trained with other settings: base_model"; another folder still is."""
    monkeypatch.chdir(tiny_encoder_dir.parent)
    checkpoint = saved_checkpoint(make_record(Path(tiny_encoder_dir.name), tmp_path / "first"), tmp_path)
    make_record(tiny_encoder_dir.resolve(), tmp_path / "second").check_resume(checkpoint, 4)
    copy = shutil.copytree(tiny_encoder_dir, tmp_path / "copy")
    with pytest.raises(UsageError, match="trained with other settings: base_model"):
        make_record(copy, tmp_path / "third").check_resume(checkpoint, 4)
