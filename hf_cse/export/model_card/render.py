"""A model card's Markdown from a :class:`~hf_cse.export.model_card.summary.TrainingSummary`, one function per section
(YAML front matter, introduction, Evaluation (in :mod:`.evaluation`), Usage, Training, Citation), and
:func:`write_model_card`, which saves the card and its summary into a checkpoint folder.

User strings (repository id, file names, prompt template, tags) go in through :mod:`hf_cse.markdown`'s function for
their place; the YAML front matter is dumped by ``huggingface_hub.ModelCardData``, which quotes what needs it.

Why the Markdown is not a ``huggingface_hub.ModelCard.from_template`` template: that renders a bare
``jinja2.Template`` (no filters or whitespace options can be set), so every value would reach the card unquoted (a
``|`` in a file name splits a table row) and each false ``{% if %}`` leaves a blank line; the values would have to be
quoted here first and most sections are tables and code computed from the summary anyway, which would leave the
template a list of slots. ``tests/test_model_card_templating.py`` shows both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCardData

from ...atomic_files import write_json_atomic, write_text_atomic
from ...evaluation.paper_comparison import PaperComparison
from ...markdown import code_block, code_span, markdown_text, table
from ...modeling.configuration_cse import PoolingConfig
from ...run_files import TRAINING_SUMMARY_FILE
from ..sentence_transformers_files import expresses
from .evaluation import evaluation_section
from .matryoshka_section import MatryoshkaCardResults
from .model_index import eval_results
from .paper_section import paper_comparison_section
from .snippets import hf_cse_snippet, sentence_transformers_snippet, transformers_snippet
from .sts_results import STSCardResults
from .summarize import hub_id
from .summary import TrainingSummary, describe_setting_change


@dataclass(frozen=True)
class CardOptions:
    """What a card shows besides the training summary; every field is optional.

    Attributes:
        sts: STS test results for the Evaluation section and the model-index; ``None`` (default): the card shows
            the command that computes them.
        language, license: card metadata (e.g. ``"en"``, ``"apache-2.0"``); default: none.
        tags: extra tags, after hf_cse's own (one string is one tag).
        base_model: Hub id for the ``base_model`` metadata; default: the summary's base model when it is a Hub id.
        datasets: Hub ids for the ``datasets`` metadata (one string is one id); default: the summary's training data
            when it is a Hub id.
        paper_comparison: the STS test scores beside a paper's (a paper config's ``paper_results``), shown in a
            section of their own after the Evaluation section; ``None`` (default): no such section.
        model_name_or_path: what the usage code and the evaluation command load: a local folder for a card that
            stays local; default: the card's ``repo_id``.
        matryoshka: a Matryoshka run's STS scores per embedding prefix (its ``matryoshka_sts.json``, read by
            :func:`~hf_cse.export.model_card.matryoshka_section.read_matryoshka_results`), a table in the Evaluation
            section and per-dimension entries in the model-index; ``None`` (default): neither.
    """

    sts: STSCardResults | None = None
    language: str | list[str] | None = None
    license: str | None = None
    tags: str | Sequence[str] | None = None
    base_model: str | None = None
    datasets: str | Sequence[str] | None = None
    paper_comparison: PaperComparison | None = None
    model_name_or_path: str | None = None
    matryoshka: MatryoshkaCardResults | None = None


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
    """What the embedding is, as the pooler's class describes it (:meth:`~hf_cse.modeling.poolers.Pooler.describe`)."""
    text = f"{code_span(pooling.pooler)} pooler: {pooling.get_pooler().describe(pooling)}"
    return text + (", L2-normalized" if pooling.normalize else "")


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


def _as_list(values: str | Sequence[str] | None) -> list[str]:
    """``values`` as a list: one string is one item, ``None`` none."""
    return [values] if isinstance(values, str) else list(values or [])


def _base_model_id(summary: TrainingSummary, options: CardOptions) -> str | None:
    return options.base_model or hub_id(summary.base_model)


def _base_model_text(summary: TrainingSummary, options: CardOptions) -> str:
    """The base model as the run named it, with a Hub link when the metadata names a different Hub id."""
    text = code_span(summary.base_model) if summary.base_model else "an unrecorded checkpoint"
    base_model_id = _base_model_id(summary, options)
    if base_model_id and base_model_id != summary.base_model and hub_id(base_model_id) == base_model_id:
        text += f" ([{markdown_text(base_model_id)}](https://huggingface.co/{base_model_id}))"
    return text


def _data_text(summary: TrainingSummary) -> str:
    return code_span(summary.train_data) if summary.train_data else "unrecorded data"


def _objective_text(summary: TrainingSummary) -> str:
    """``objective`` + ``w × term`` for each auxiliary term."""
    text = code_span(summary.objective)
    if summary.auxiliary_losses:
        text += " + " + " + ".join(
            f"{spec.get('weight', 1.0):g} × {code_span(name)}" for name, spec in summary.auxiliary_losses.items()
        )
    return text


def _front_matter(summary: TrainingSummary, repo_id: str, options: CardOptions) -> list[str]:
    """The YAML front matter between ``---`` lines: metadata, tags, and the model-index when there are scores."""
    expressible = expresses(summary.pooling_config)
    tags = ["hf_cse", "sentence-similarity", "feature-extraction", "contrastive-learning", summary.objective]
    tags += list(summary.auxiliary_losses)
    if expressible:
        tags.append("sentence-transformers")
    tags += _as_list(options.tags)
    datasets = _as_list(options.datasets) or [d for d in [hub_id(summary.train_data)] if d]
    results = eval_results(summary, options.sts, options.matryoshka)
    card_data = ModelCardData(
        base_model=_base_model_id(summary, options),
        datasets=datasets or None,
        language=options.language,
        license=options.license,
        library_name="sentence-transformers" if expressible else "transformers",
        pipeline_tag="sentence-similarity",
        tags=list(dict.fromkeys(tags)),
        model_name=repo_id if results else None,
        eval_results=results or None,
    )
    return ["---", card_data.to_yaml(), "---"]


def _introduction(summary: TrainingSummary, repo_id: str, options: CardOptions) -> list[str]:
    pooling = summary.pooling_config
    expressible = expresses(pooling)
    return [
        f"# {markdown_text(repo_id)}",
        "",
        f"A sentence encoder trained with hf_cse from {_base_model_text(summary, options)} on {_data_text(summary)} "
        f"with the unsupervised contrastive objective {_objective_text(summary)}. Sentence embedding: "
        f"{_describe_pooler(pooling)}. Compare sentences by cosine similarity."
        + (
            " Training was resumed with changed settings: the steps before each change used the earlier ones, and "
            "this card shows those after the last (see Training)."
            if summary.settings_changes
            else ""
        ),
        "",
        "The checkpoint is a plain checkpoint of the encoder's architecture (no custom code): hf_cse's pooling "
        "settings are stored in `config.json` under `hf_cse`"
        + (", and sentence-transformers files sit beside it." if expressible else "."),
    ]


def _usage_section(repo_id: str, pooling: PoolingConfig, max_seq_length: int | None = None) -> list[str]:
    has_code = pooling.get_pooler().transformers_code(pooling) is not None  # a user's pooler may give none
    return [
        "## Usage",
        "",
        "With transformers (reproduces hf_cse's embeddings exactly; no hf_cse needed):"
        if has_code
        else "With transformers:",
        "",
        transformers_snippet(repo_id, pooling, max_seq_length),
        "",
        "With sentence-transformers:",
        "",
        sentence_transformers_snippet(repo_id, pooling),
        "",
        "With hf_cse installed:",
        "",
        hf_cse_snippet(repo_id, pooling),
    ]


def _encoder_text(encoder: dict[str, Any], merged_lora: bool = False) -> str:
    """The backbone's dropout and attention direction, as trained and as ``config.json`` holds them; ``merged_lora``:
    LoRA adapters were trained and merged into the saved weights."""
    dropout = ", ".join(f"{code_span(key)} {value:g}" for key, value in encoder.get("dropout", {}).items())
    attention = {True: "bidirectional (`use_bidirectional_attention`)", False: "causal"}.get(
        encoder.get("bidirectional"), "as the architecture defines it"
    )
    text = f"dropout {dropout or 'none'}; attention {attention}; both saved in `config.json`"
    weights = _weights_text(encoder.get("weights") or {}, merged_lora)  # the records of earlier runs lack it
    return f"{text}; {weights}" if weights else text


def _weights_text(weights: dict[str, Any], merged_lora: bool = False) -> str | None:
    """How the backbone's weights were held in training: 4-bit under LoRA adapters (QLoRA), else their dtype (and,
    for LoRA over half-precision weights, that the merge is saved in float32:
    :data:`~hf_cse.modeling.lora.MERGED_DTYPE`); ``None`` when neither is recorded."""
    quantization = weights.get("quantization") or {}
    if quantization.get("load_in_4bit"):
        kind = quantization.get("bnb_4bit_quant_type") or "4-bit"
        return (
            f"weights frozen in 4 bits ({code_span(kind)}, bitsandbytes) under the LoRA adapters (QLoRA), saved "
            "dequantized with the adapters merged"
        )
    if not weights.get("dtype"):
        return None
    trained = f"weights trained in {code_span(weights['dtype'])}"
    if merged_lora and weights["dtype"] in ("bfloat16", "float16"):
        # lora.merged_copy: rounding W + s B A back to half precision would erase a short run's update.
        return f"{trained} under the LoRA adapters, saved in `float32` with the adapters merged"
    return trained


def _view_text(summary: TrainingSummary) -> str:
    view = dict(summary.view_augmentation)
    name = view.pop("name", "dropout")
    text = code_span(name) + (f" with {code_span(json.dumps(view))}" if view else "")
    if name == "dropout":
        text += " (the two views of a sentence differ by the encoder's dropout only)"
    return text


def _pooling_settings(pooling: PoolingConfig, inference_max_seq_length: int | None = None) -> dict[str, Any]:
    """The pooling settings that apply to its pooler (the prompt template for ``mask``, ``mlp_only_train`` for
    ``cls``), without the token ids and template lengths filled in from the tokenizer. An unset ``max_seq_length``
    shows the length in effect (``inference_max_seq_length``) when it is known: ``None`` reads as no truncation."""
    pooler = pooling.get_pooler()
    settings = {
        key: value
        for key, value in pooling.to_dict().items()
        if not (key == "mlp_only_train" and not pooler.mlp_head)
        and key not in ("prompt_template", "mask_token_id", "template_prefix_length", "template_suffix_length")
    }
    if pooler.uses_prompt_template:  # the pooler's own template (prompt_last_token keeps it in pooler_kwargs)
        settings["prompt_template"] = pooler.prompt_template(pooling)
    if pooling.max_seq_length is None and inference_max_seq_length is not None:
        settings["max_seq_length"] = f"{inference_max_seq_length} (unset: the model's limit)"
    return settings


def _auxiliary_table(summary: TrainingSummary) -> list[str]:
    """The weighted auxiliary terms with their hyper-parameters; ``[]`` without any."""
    if not summary.auxiliary_losses:
        return []
    lines = [
        "",
        "Auxiliary terms, added to the objective with their weights (`loss = objective + Σ weight × term`):",
        "",
    ]
    rows = [
        [_fmt(name), _fmt(float(spec.get("weight", 1.0))), _fmt({k: v for k, v in spec.items() if k != "weight"})]
        for name, spec in summary.auxiliary_losses.items()
    ]
    return [*lines, table(["term", "weight", "hyper-parameters"], rows, "lrl")]


def _settings_changes(summary: TrainingSummary) -> list[str]:
    """A bullet per resume with changed settings (``--allow_changed_settings``), oldest first; ``[]`` without any."""
    return [
        f"- **Resumed at step {resume['step']} with changed settings**: "
        + "; ".join(code_span(describe_setting_change(change)) for change in resume["changes"])
        for resume in summary.settings_changes
    ]


def _training_section(summary: TrainingSummary, options: CardOptions) -> list[str]:
    """How the model was trained: an overview, then every setting in tables and as JSON."""
    pooling = summary.pooling_config
    lines = [
        "## Training",
        "",
        f"- **Base model**: {_base_model_text(summary, options)}",
        f"- **Training data**: {_data_text(summary)}",
        f"- **Objective**: {_objective_text(summary)}",
        f"- **Positive views**: {_view_text(summary)}",
        f"- **Pooling**: {_describe_pooler(pooling)}",
    ]
    if summary.lora:
        lines.append(f"- **LoRA**: adapters {code_span(json.dumps(summary.lora))}, merged into the saved weights")
    if summary.encoder:
        lines.append(f"- **Backbone**: {_encoder_text(summary.encoder, merged_lora=summary.lora is not None)}")
    lines += _settings_changes(summary)
    return [
        *lines,
        "",
        f"Objective hyper-parameters ({code_span(summary.objective)}):",
        "",
        _key_value_table(summary.objective_config, ("hyper-parameter", "value")),
        *_auxiliary_table(summary),
        "",
        "Pooling (`config.json` → `hf_cse`):",
        "",
        _key_value_table(_pooling_settings(pooling, summary.inference_max_seq_length)),
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
    ]


def _citation_section(summary: TrainingSummary) -> list[str]:
    if not summary.citations:
        return ["## Citation", "", "_No citation recorded._"]
    return [
        "## Citation",
        "",
        "Papers whose methods trained this model:",
        "",
        code_block("\n\n".join(summary.citations), "bibtex"),
    ]


def render_card_from_summary(summary: TrainingSummary, repo_id: str, options: CardOptions | None = None) -> str:
    """The card's Markdown, YAML front matter included, from a :class:`TrainingSummary`.

    Args:
        summary: how the model was trained.
        repo_id: the model's name in the title and the model-index (``user/name`` for the Hub), and what the usage
            code loads unless ``options.model_name_or_path`` says otherwise.
        options: STS results and metadata; default: ``CardOptions()`` (no STS results, no extra metadata).
    """
    options = options or CardOptions()
    model_name_or_path = options.model_name_or_path or repo_id
    sections = [
        _front_matter(summary, repo_id, options),
        _introduction(summary, repo_id, options),
        evaluation_section(summary, model_name_or_path, options.sts, options.matryoshka, card_name=repo_id),
        *([paper_comparison_section(options.paper_comparison)] if options.paper_comparison is not None else []),
        _usage_section(model_name_or_path, summary.pooling_config, summary.inference_max_seq_length),
        _training_section(summary, options),
        _citation_section(summary),
    ]
    return "\n\n".join("\n".join(section) for section in sections) + "\n"


def write_model_card(
    directory: str | Path, summary: TrainingSummary, repo_id: str, options: CardOptions | None = None
) -> Path:
    """Write the card (:func:`render_card_from_summary`) to ``directory/README.md`` and ``summary`` to
    ``directory/hf_cse_training.json`` (the record the card links to, which ``python -m hf_cse.push`` reads back);
    return the card's path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    # Each file whole or not at all: a kill while the card is written never leaves half a card to upload.
    write_json_atomic(directory / TRAINING_SUMMARY_FILE, summary.to_dict())
    return write_text_atomic(directory / "README.md", render_card_from_summary(summary, repo_id, options))
