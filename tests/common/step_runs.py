"""The training runs whose steps the registry-wide step checks (``tests/every_part/test_host_sync.py``,
``test_static_shapes.py``) examine: every objective over sentence embeddings with its defaults, and each setting that
takes a step down another path. A path added here is checked by both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import SENTENCES, write_config, write_train_file

from common.parts import SENTENCE_OBJECTIVES
from hf_cse import OBJECTIVES

QUIET = {"max_steps": 4, "logging_steps": 100, "save_strategy": "no", "eval_strategy": "no"}
"""No step logs, evaluates or saves: those may read values back. The last step's end-of-training checks come after
the step, as do the Trainer's."""

PARAPHRASES = "{paraphrases}"
"""Stands for the paraphrase file :func:`step_run_config` writes beside the run."""

STEP_RUNS: dict[str, dict[str, Any]] = {name: {"objective": name} for name in SENTENCE_OBJECTIVES} | {
    "simcse-matryoshka": {"objective": "simcse", "matryoshka_dims": [16, 32]},
    "dclr-matryoshka": {"objective": "dclr", "matryoshka_dims": [16, 32]},
    "simcse-gradient-cache": {"objective": "simcse", "gradient_cache_chunk_size": 2},
    "dclr-gradient-cache": {"objective": "dclr", "gradient_cache_chunk_size": 2},
    "esimcse-mask-duplicates": {"objective": "esimcse", "mask_duplicates": True},  # the queue's hashes too
    # PromptBERT's paper setting: two templates' rows in one forward, each minus its template's bias.
    "promptbert-denoising": {"objective": "promptbert", "template_denoising": True},
    # One template's denoising: its lengths are the pooling config's, on the host, not given with the batch.
    "simcse-mask-denoising": {"objective": "simcse", "pooler": "mask", "template_denoising": True},
    # A view augmentation told the special tokens by id, rather than finding each row's first and last.
    "simcse-token-cutoff-special-ids": {
        "objective": "simcse",
        "view_augmentation": "token_cutoff",
        "view_augmentation_kwargs": {"special_token_ids": [0, 1, 2, 3]},
    },
    # OssCSE's margin term encodes the negations and paraphrases of the rows that have both: two groups, and rows
    # that vary by batch (paraphrases for a third of the sentences).
    "osscse-paraphrases": {
        "objective": "osscse",
        "input_kwargs": {"negations_and_paraphrases": {"paraphrase_source": f"tsv:{PARAPHRASES}"}},
    },
    # Labelled pairs with a hard negative (the data: "triplets", written by step_run_config), SimCSE's log weight on,
    # duplicates masked by the positives' and hard negatives' hashes: three token groups in the step's forward.
    "simcse-triplets": {
        "objective": "simcse",
        "triplets": True,
        "mask_duplicates": True,
        "objective_kwargs": {"hard_negative_weight": 1.0},
    },
}


def step_run_config(tmp_path: Path, tiny_encoder_dir: Path, run: str, **overrides: Any) -> Path:
    """The config file of ``STEP_RUNS[run]`` on the tiny encoder, 4 quiet steps of batch 4 over 24 sentences (12 twice:
    some negatable, some not, so a negation's rows vary by batch), with ``overrides``."""
    paraphrases = tmp_path / "paraphrases.tsv"
    settings = dict(_placed(STEP_RUNS[run], str(paraphrases)))
    if settings != STEP_RUNS[run]:
        paraphrases.write_text("".join(f"{s}\t{s} , indeed\n" for s in SENTENCES[::3]), encoding="utf-8")
    pooler = OBJECTIVES[settings["objective"]].required_pooler or "cls"
    train = write_train_file(tmp_path, SENTENCES * 2)
    if settings.pop("triplets", False):  # each sentence, a paraphrase and another row's sentence, as SimCSE's CSV
        anchors = SENTENCES * 2
        rows = [f'"{s}","{s} , indeed","{t}"' for s, t in zip(anchors, anchors[1:] + anchors[:1], strict=True)]
        train = write_train_file(tmp_path, ["sent0,sent1,hard_neg", *rows], name="triplets.csv")
    return write_config(tmp_path, tiny_encoder_dir, train, **{"pooler": pooler, **QUIET, **settings, **overrides})


def _placed(value: Any, paraphrases: str) -> Any:
    """``value`` with :data:`PARAPHRASES` replaced by ``paraphrases`` in every string, nested dicts included."""
    if isinstance(value, dict):
        return {key: _placed(item, paraphrases) for key, item in value.items()}
    return value.replace(PARAPHRASES, paraphrases) if isinstance(value, str) else value
