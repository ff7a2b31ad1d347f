"""A model card from a :class:`~hf_cse.export.model_card.summary.TrainingSummary`: the template ``template.md``
(:mod:`.templating`: every value Markdown-escaped unless a filter quotes it for its place) filled with what this
module computes from the summary, under YAML front matter that ``huggingface_hub.ModelCardData`` writes (with the
``EvalResult`` list of :mod:`.model_index` as its ``model-index``); and :func:`write_model_card`, which saves the card
and its summary into a checkpoint folder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from ...atomic_files import write_json_atomic, write_text_atomic
from ...evaluation.paper_comparison import PaperComparison
from ...evaluation.sts_model_index import STS_DISPLAY
from ...markdown import code_span, markdown_text, table
from ...modeling.configuration_cse import PoolingConfig
from ...run_files import TRAINING_SUMMARY_FILE
from ..sentence_transformers_files import expresses, sentence_transformers_poolers
from .matryoshka_results import MatryoshkaCardResults
from .model_index import eval_results
from .prompts import SentenceTransformerPrompts, read_prompts
from .snippets import EXAMPLE_SENTENCES, pooler_module, transformers_snippet
from .sts_results import STS_TEXT, STSCardResults
from .summarize import hub_id
from .summary import TrainingSummary
from .templating import ENVIRONMENT, Markdown


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
            :func:`~hf_cse.export.model_card.matryoshka_results.read_matryoshka_results`), a table in the Evaluation
            section and per-dimension entries in the model-index; ``None`` (default): neither.
        prompts: the sentence-transformers prompts saved with the model (:func:`~.prompts.read_prompts`), shown in
            the usage code; ``None`` (default): :func:`write_model_card` reads them from the folder it writes into.
        recorded_results: ``model-index`` entries the card keeps after its own, e.g. the MTEB scores
            ``python -m hf_cse.eval --mteb_tasks`` added to the folder's card
            (:func:`~.model_index.recorded_mteb_results`); default: none.
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
    prompts: SentenceTransformerPrompts | None = None
    recorded_results: Sequence[EvalResult] = ()


def _as_list(values: str | Sequence[str] | None) -> list[str]:
    """``values`` as a list: one string is one item, ``None`` none."""
    return [values] if isinstance(values, str) else list(values or [])


def _card_data(summary: TrainingSummary, repo_id: str, options: CardOptions) -> ModelCardData:
    """The YAML front matter: metadata, tags, and the model-index when there are scores."""
    expressible = expresses(summary.pooling_config)
    tags = ["hf_cse", "sentence-similarity", "feature-extraction", "contrastive-learning", summary.objective]
    tags += [*summary.auxiliary_losses, *(["sentence-transformers"] if expressible else []), *_as_list(options.tags)]
    datasets = _as_list(options.datasets) or [d for d in [hub_id(summary.train_data)] if d]
    results = [*eval_results(summary, options.sts, options.matryoshka), *options.recorded_results]
    return ModelCardData(
        base_model=options.base_model or hub_id(summary.base_model),
        datasets=datasets or None,
        language=options.language,
        license=options.license,
        library_name="sentence-transformers" if expressible else "transformers",
        pipeline_tag="sentence-similarity",
        tags=list(dict.fromkeys(tags)),
        model_name=repo_id if results else None,
        eval_results=results or None,
    )


def _base_model_text(summary: TrainingSummary, base_model_id: str | None) -> str:
    """The base model as the run named it, with a Hub link when the metadata names a different Hub id."""
    text = code_span(summary.base_model) if summary.base_model else "an unrecorded checkpoint"
    if base_model_id and base_model_id != summary.base_model and hub_id(base_model_id) == base_model_id:
        text += f" ([{markdown_text(base_model_id)}](https://huggingface.co/{base_model_id}))"
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


def _hyperparameters(summary: TrainingSummary) -> dict[str, Any]:
    """The summary's settings, in its order: the objective's name with its hyper-parameters, LoRA's when trained."""
    keys = ("base_model", "train_data", "objective", "auxiliary_losses", "view_augmentation", "pooling", "training")
    values = {key: getattr(summary, key) for key in (*keys, *(["lora"] if summary.lora else []))}
    return {**values, "objective": {"name": summary.objective, **summary.objective_config}}  # in its place


def _cell(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "-"


def _sts_table(sts: STSCardResults) -> str:
    header = [STS_DISPLAY[task][0] for task in sts.scores]
    header.append("Avg." if len(sts.scores) == 7 else f"Avg. ({len(sts.scores)} tasks)")
    row = [*(f"{value:.2f}" for value in sts.scores.values()), f"{sts.avg:.2f}"]
    return table(header, [row], "r" * len(header))


def _dev_table(summary: TrainingSummary) -> tuple[str | None, bool]:
    """The dev scores logged during training, one row per evaluation (``None`` without any), and whether they are
    STS scores only."""
    if not summary.dev_evaluations:
        return None, True
    keys = list(dict.fromkeys(key for entry in summary.dev_evaluations for key in entry if key != "step"))
    sts_only = all(key.endswith("_spearman") or key in ("eval_alignment", "eval_uniformity") for key in keys)
    rows = [
        [
            str(entry.get("step", "")),
            *(f"{entry[key]:.4g}" if isinstance(entry.get(key), int | float) else "" for key in keys),
        ]
        for entry in summary.dev_evaluations
    ]
    return table(["step", *keys], rows, "r" * (len(keys) + 1)), sts_only


def _matryoshka_table(results: MatryoshkaCardResults) -> str:
    """One row per dimension: the Spearman ×100 of every task the run scored (dev sets, then test sets, each with
    their average when there are several)."""
    header, columns = ["dim"], []  # columns: (evaluation index, task or "avg")
    for index, evaluation in enumerate(results.evaluations):
        for task, split in evaluation["splits"].items():
            name = STS_DISPLAY[task][0]
            header.append(name if task.startswith("sts1") else f"{name} {split}")  # STS12; STS-B dev
            columns.append((index, task))
        if len(evaluation["splits"]) > 1:
            header.append(f"Avg. ({evaluation['name']})")
            columns.append((index, "avg"))
    rows = [
        [str(dim), *(_cell(results.evaluations[i]["scores"][str(dim)].get(key)) for i, key in columns)]
        for dim in results.dims
    ]
    return table(header, rows, "r" * len(header))


def render_card_from_summary(summary: TrainingSummary, repo_id: str, options: CardOptions | None = None) -> str:
    """The card's Markdown, YAML front matter included, from a :class:`TrainingSummary`.

    Args:
        summary: how the model was trained.
        repo_id: the model's name in the title and the model-index (``user/name`` for the Hub), and what the usage
            code loads unless ``options.model_name_or_path`` says otherwise.
        options: STS results and metadata; default: ``CardOptions()`` (no STS results, no extra metadata).
    """
    options = options or CardOptions()
    pooling = summary.pooling_config
    sts, matryoshka = options.sts, options.matryoshka
    dev_table, dev_sts_only = _dev_table(summary)
    tests = [group for group in (matryoshka.evaluations if matryoshka else ()) if group.get("name") == "test"]
    tested_text = tests[0].get("text") if tests else None
    # The prompts' code calls the sentence-transformers model, which a pooler it cannot express has not.
    prompt = options.prompts.instruction_name() if options.prompts is not None and expresses(pooling) else None
    markdown = {  # what this module writes as Markdown, each user string quoted for its place
        "card_data": _card_data(summary, repo_id, options).to_yaml(),
        "base_model": _base_model_text(summary, options.base_model or hub_id(summary.base_model)),
        "train_data": code_span(summary.train_data) if summary.train_data else "unrecorded data",
        "sts_table": _sts_table(sts) if sts is not None else "",
        "sts_text": STS_TEXT.get(sts.text or "", "not recorded (raw or SentEval-tokenized)") if sts else "",
        "matryoshka_table": _matryoshka_table(matryoshka) if matryoshka is not None else "",
        "matryoshka_test_text": STS_TEXT.get(tested_text, "not recorded") if tested_text else "",
        "dev_table": dev_table or "",
        "transformers_snippet": transformers_snippet(
            options.model_name_or_path or repo_id, pooling, summary.inference_max_seq_length
        ),
    }
    values = {
        "summary": summary,
        "name": repo_id,
        "model_name_or_path": options.model_name_or_path or repo_id,
        "pooling": pooling,
        "expressible": expresses(pooling),
        "sentence_transformers_poolers": sentence_transformers_poolers(),
        "transformers_code_exact": pooling.get_pooler().transformers_code(pooling) is not None,
        "pooler_module": pooler_module(pooling),
        "pooler_in_main": type(pooling.get_pooler()).__module__ == "__main__",
        "example_sentences": EXAMPLE_SENTENCES,
        "sts": sts,
        "matryoshka": matryoshka,
        "dev_sts_only": dev_sts_only,
        "paper_comparison": options.paper_comparison,
        "prompt": prompt,
        "prompts": options.prompts if prompt else None,
        "pooling_settings": _pooling_settings(pooling, summary.inference_max_seq_length),
        "hyperparameters": _hyperparameters(summary),
        "record_file": TRAINING_SUMMARY_FILE,
    }
    text = ENVIRONMENT.get_template("template.md").render(
        **values, **{key: Markdown(value) for key, value in markdown.items()}
    )
    return str(ModelCard(text))  # huggingface_hub parses the front matter back: a card it cannot read fails here


def write_model_card(
    directory: str | Path, summary: TrainingSummary, repo_id: str, options: CardOptions | None = None
) -> Path:
    """Write the card (:func:`render_card_from_summary`) to ``directory/README.md`` and ``summary`` to
    ``directory/hf_cse_training.json`` (the record the card links to, which ``python -m hf_cse.push`` reads back);
    return the card's path. The usage code shows the sentence-transformers prompts saved in ``directory`` unless
    ``options.prompts`` gives them."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    options = options or CardOptions()
    if options.prompts is None:
        options = dataclasses.replace(options, prompts=read_prompts(directory))
    # Each file whole or not at all: a kill while the card is written never leaves half a card to upload.
    write_json_atomic(directory / TRAINING_SUMMARY_FILE, summary.to_dict())
    return write_text_atomic(directory / "README.md", render_card_from_summary(summary, repo_id, options))
