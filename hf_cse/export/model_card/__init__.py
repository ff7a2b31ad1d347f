"""Model cards (``README.md``) for trained checkpoints: what the model is, how it was trained, how well it does on
STS, how to use it with transformers / sentence-transformers / hf_cse, and what to cite.

A card is rendered in two steps so that a run folder can be re-carded later (``python -m hf_cse.push``):

1. :func:`summarize_training` (:mod:`.summarize`) collects everything the card says about training (base model,
   objective and its hyper-parameters, auxiliary terms with weights, view augmentation, pooling, training settings,
   dev scores, BibTeX from :mod:`.citations`) into a JSON-ready :class:`TrainingSummary`, which
   :func:`write_model_card` saves beside the card as ``hf_cse_training.json``.
2. :func:`render_card_from_summary` (:mod:`.render`) turns a summary and :class:`CardOptions` (optional STS test
   results, :class:`STSCardResults`, and metadata) into Markdown: the Jinja2 template ``template.md``, whose every
   value is Markdown-escaped unless a filter quotes it for its place (:mod:`.templating`), with the tables computed
   in Python and the plain-transformers code rendered from the template ``transformers_code.md`` (:mod:`.snippets`).
   The YAML front matter is built with ``huggingface_hub.ModelCardData`` and the ``EvalResult`` list of
   :mod:`.model_index`, so its ``model-index`` has the structure the Hub expects.

This package works from summaries and run folders, never from a trainer: a ``CSETrainer`` run's summary is built on
the training side (:mod:`hf_cse.training.record.model_card`) and handed over. Hub tokens never reach a card: the
summary copies named settings only, never ``hub_token``.
"""

from ...run_files import STS_RESULTS_FILE, TRAINING_SUMMARY_FILE
from .citations import collect_citations
from .matryoshka_results import MatryoshkaCardResults, read_matryoshka_results
from .model_index import recorded_mteb_results
from .prompts import SentenceTransformerPrompts, read_prompts
from .render import CardOptions, render_card_from_summary, write_model_card
from .sts_results import STSCardResults
from .summarize import hub_id, read_lora_settings, summarize_training
from .summary import TrainingSummary

__all__ = [
    "STS_RESULTS_FILE",
    "TRAINING_SUMMARY_FILE",
    "CardOptions",
    "MatryoshkaCardResults",
    "STSCardResults",
    "SentenceTransformerPrompts",
    "TrainingSummary",
    "collect_citations",
    "hub_id",
    "read_lora_settings",
    "read_matryoshka_results",
    "read_prompts",
    "recorded_mteb_results",
    "render_card_from_summary",
    "summarize_training",
    "write_model_card",
]
