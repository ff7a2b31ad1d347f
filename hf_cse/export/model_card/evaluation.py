"""The card's Evaluation section: STS test scores with the setting they were computed in (metric, splits, text
variant, truncation, alignment/uniformity), and the dev scores logged during training."""

from __future__ import annotations

import shlex

from ...evaluation.sts_model_index import STS_DISPLAY
from ...markdown import code_block, table
from ...modeling.configuration_cse import PoolingConfig
from .matryoshka_section import MatryoshkaCardResults, matryoshka_section
from .snippets import pooler_module
from .sts_results import STS_TEXT, STSCardResults
from .summary import TrainingSummary

#: The namespace of the push command's ``--repo_id`` on a card whose name is no Hub id: a placeholder to replace.
PUSH_NAMESPACE_PLACEHOLDER = "YOUR_USERNAME"


def push_repo_id(card_name: str) -> str:
    """The ``--repo_id`` the card's ``hf_cse.push`` command suggests: the card's name when it is a Hub id
    (``NAMESPACE/NAME``: the run's ``hub_model_id``, or the ``--repo_id`` of a push that re-rendered the card), else
    ``YOUR_USERNAME/NAME``. A local run's card is named after its output folder (``my-focal`` for
    ``outputs/my-focal``), and that folder is no repository id: ``--repo_id outputs/my-focal`` would name a user
    ``outputs``'s repository."""
    return card_name if "/" in card_name else f"{PUSH_NAMESPACE_PLACEHOLDER}/{card_name}"


def _sts_section(
    sts: STSCardResults | None, pooling: PoolingConfig, model_name_or_path: str, card_name: str
) -> list[str]:
    """The STS test table with its evaluation setting, or without results the ``hf_cse.eval`` command for them (on
    ``model_name_or_path``, where the model is) and the ``hf_cse.push`` command that puts them on the card (to
    :func:`push_repo_id`)."""
    if sts is None:
        module = pooler_module(pooling)  # a user's pooler loads once its module is imported
        import_flag = f" --import_module {shlex.quote(module)}" if module is not None else ""
        return [
            "The 7 STS test sets were not evaluated for this card. To score them (the SimCSE setting, raw text) and "
            "put the scores on the card (`--sts_results` re-renders it from the JSON, without evaluating again), "
            "from the run's output folder `RUN_DIR`:",
            "",
            code_block(
                f"python -m hf_cse.eval --model_name_or_path {shlex.quote(model_name_or_path)}{import_flag} "
                "--sts_dir STS_DIR --alignment_uniformity --output_json sts.json\n"
                f"python -m hf_cse.push RUN_DIR --repo_id {shlex.quote(push_repo_id(card_name))}{import_flag} "
                "--sts_results sts.json",
                "bash",
            ),
        ]
    header = [STS_DISPLAY[task][0] for task in sts.scores]
    avg_label = "Avg." if len(sts.scores) == 7 else f"Avg. ({len(sts.scores)} tasks)"
    lines = [
        table(
            [*header, avg_label],
            [[*(f"{value:.2f}" for value in sts.scores.values()), f"{sts.avg:.2f}"]],
            "r" * (len(header) + 1),
        ),
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
    text = STS_TEXT.get(sts.text or "", "not recorded (raw or SentEval-tokenized)")
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
            table(
                ["alignment", "uniformity"], [[f"{geometry['alignment']:.4f}", f"{geometry['uniformity']:.4f}"]], "rr"
            ),
            "",
            f"Alignment: mean squared distance of the pairs with a gold score ≥ {min_score:g}; uniformity: "
            "log of the mean of exp(-2 × squared distance) over all pairs of distinct sentences.",
        ]
    return lines


def _dev_section(summary: TrainingSummary) -> list[str]:
    """A table of the dev scores logged during training, one row per evaluation; ``[]`` without any."""
    if not summary.dev_evaluations:
        return []
    keys = list(dict.fromkeys(key for entry in summary.dev_evaluations for key in entry if key != "step"))
    sts_only = all(key.endswith("_spearman") or key in ("eval_alignment", "eval_uniformity") for key in keys)
    what = (
        "STS-B dev / SICK-R trial, Spearman ×100 of cosine similarity"
        if sts_only
        else "the run's evaluators; retrieval metrics in [0, 1]"
    )
    lines = [f"Dev scores logged during training ({what}; model selection only):", ""]
    rows = [
        [
            str(entry.get("step", "")),
            *(f"{entry[key]:.4g}" if isinstance(entry.get(key), int | float) else "" for key in keys),
        ]
        for entry in summary.dev_evaluations
    ]
    return [*lines, table(["step", *keys], rows, "r" * (len(keys) + 1))]


def evaluation_section(
    summary: TrainingSummary,
    repo_id: str,
    sts: STSCardResults | None,
    matryoshka: MatryoshkaCardResults | None = None,
    card_name: str | None = None,
) -> list[str]:
    """``## Evaluation``: the STS test table and its setting (or the commands that compute it and put it on the
    card), a Matryoshka run's table per dimension, then the dev scores logged during training; one string per line.

    ``repo_id`` is where the commands load the model from (a local card's output folder); ``card_name`` the card's
    own name (default: ``repo_id``), from which the push command's ``--repo_id`` is made (:func:`push_repo_id`)."""
    dev = _dev_section(summary)
    return [
        "## Evaluation",
        "",
        *_sts_section(sts, summary.pooling_config, repo_id, card_name or repo_id),
        *(["", *matryoshka_section(matryoshka, repo_id)] if matryoshka is not None else []),
        *(["", *dev] if dev else []),
    ]
