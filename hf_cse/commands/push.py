"""Share a trained run on the Hugging Face Hub, with a model card that reports its STS scores.

Example (evaluate the 7 STS tasks, write the card, upload the folder)::

    python -m hf_cse.push outputs/simcse-minilm-wiki1m --repo_id USER/simcse-minilm-wiki1m \\
        --sts_dir SentEval/data/downstream/STS [--private] [--token hf_...]

Steps:

1. Read how the run was trained: ``hf_cse_training.json`` (written with the card at the end of training), or for a
   folder without it (e.g. a ``checkpoint-N`` folder) ``training_args.json`` and ``trainer_state.json``. The
   pickled ``training_args.bin`` is never loaded: unpickling a downloaded folder's copy could run any code.
2. Unless ``--dry_run``, create the Hub repository (nothing happens if it exists) and ``--revision``'s branch: the
   request shows in seconds that the Hub answers and the token may write there, before minutes of evaluation. A
   Hub that cannot be reached raises a one-line ``HubUnreachableError``, a refusal (a bad token: 401, no write
   access: 403, a server error: 5xx) a one-line ``HubRequestError`` naming the repository and what to do.
3. With ``--sts_dir``, evaluate STS12-16, STS-B and SICK-R (cosine, 'all' Spearman x 100, STS-B test, SICK-R
   ``--sickr_split``) plus alignment/uniformity on STS-B test, and save them as ``sts_results.json``; or take
   ``--sts_results FILE`` (``python -m hf_cse.eval --output_json`` writes one), or a ``sts_results.json`` already in
   the folder. Whether the STS text is raw or SentEval's tokenized copy is detected (``--sts_text`` overrides). A
   Matryoshka run's test sets are scored for every ``matryoshka_dims`` prefix too, from the same embeddings, into
   its ``matryoshka_sts.json`` (the dev scores of training kept), which the card's per-dimension table shows.
4. Render ``README.md`` for ``--repo_id`` (usage code names the repository; ``model-index`` metadata carries the
   scores, and keeps the MTEB scores ``python -m hf_cse.eval --mteb_tasks`` added to the folder's card).
5. ``HfApi().upload_folder(...)`` of the files hf_cse wrote
   (:func:`~hf_cse.export.upload_list.build_upload_list`: model, tokenizer, sentence-transformers files, ``adapter/``,
   the card, its record and the results, given as ``allow_patterns``). Left out: ``checkpoint-*`` folders, the
   training arguments (``training_args.bin`` pickles every argument, ``training_args.json`` holds local paths),
   ``report/``, hf_cse's lock and staging folders, and, named in one warning, every symbolic link and every file hf_cse
   did not write. ``--dry_run`` prints the list, one path a line. An upload that fails raises as step 2 does, and
   the folder's previous ``README.md`` is put back.

The token comes from ``--token``, else from huggingface_hub's own lookup (``HF_TOKEN``, ``hf auth login``). It is
only handed to ``HfApi``: never logged, never written into a file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..atomic_files import adopt_files, read_manifest, write_json_atomic
from ..errors import UsageError
from ..evaluation.sts_data import STS_DOWNLOAD_HINT, STS_TASKS, detect_sts_text
from ..export.hub import (
    DEFAULT_COMMIT_MESSAGE,
    card_restored_on_failure,
    check_repo_id,
    create_repository,
    hub_api,
    upload_run,
)
from ..folder_lock import FolderLock
from ..number_ranges import SENTENCES, NumberFlag
from ..progress_bars import third_party_progress_bars
from ..run_files import PAPER_COMPARISON_FILE, STS_RESULTS_FILE, TRAINING_ARGS_FILE, TRAINING_SUMMARY_FILE
from .cli import ERRORS_HELP, IMPORT_MODULE_HELP, OneLineErrorParser, console_script, import_user_module

# The evaluation, the card, the upload list and the run's records import torch and transformers (seconds of CPU):
# imported where they run, so that --help does without them (tests/test_help_imports.py).
if TYPE_CHECKING:
    from ..evaluation.paper_comparison import PaperComparison
    from ..export.model_card import TrainingSummary

logger = logging.getLogger(__name__)


def check_run_dir(run_dir: str | Path) -> Path:
    """``run_dir`` as a path, after checking it holds a checkpoint (``config.json`` and weights)."""
    from ..sources import check_not_adapter_only

    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"Run folder {str(root)!r} does not exist or is not a directory.")
    check_not_adapter_only(root)
    if not (root / "config.json").is_file():
        raise FileNotFoundError(f"{str(root)!r} has no config.json: it is not a saved checkpoint.")
    weights = [p for p in root.iterdir() if p.name.startswith(("model.safetensors", "pytorch_model"))]
    if not weights:
        raise FileNotFoundError(f"{str(root)!r} has no model weights (model.safetensors or pytorch_model.bin).")
    linked = [p.name for p in (root / "config.json", *weights) if p.is_symlink()]
    if linked:  # the upload would leave them out: a repository without its model
        raise FileNotFoundError(
            f"Symbolic links in {str(root)!r}: {', '.join(linked)}. A push never uploads a link (its target may lie "
            "outside the run): copy the files into the folder."
        )
    return root


def load_training_summary(run_dir: str | Path, base_model: str | None = None) -> TrainingSummary:
    """How the run in ``run_dir`` was trained.

    Reads ``hf_cse_training.json``; without it (``checkpoint-N`` folders) rebuilds the summary from
    ``training_args.json``, ``trainer_state.json`` and the pooling settings in ``config.json``. ``base_model`` fills
    in an unrecorded base.
    """
    from ..export.model_card import TrainingSummary

    root = Path(run_dir)
    path = root / TRAINING_SUMMARY_FILE
    if path.is_file():
        summary = TrainingSummary.from_json_file(path)
        if base_model and not summary.base_model:
            summary.base_model = base_model
        return summary
    if not (root / TRAINING_ARGS_FILE).is_file():
        raise FileNotFoundError(
            f"{str(root)!r} has neither {TRAINING_SUMMARY_FILE} nor {TRAINING_ARGS_FILE}: cannot tell how it was "
            "trained (training_args.bin is never read: it is a pickle, and loading it can run code). Point RUN_DIR "
            "at the output_dir of run_unsup.py or CSETrainer."
        )
    from transformers import AutoConfig

    from ..export.model_card import read_lora_settings, summarize_training
    from ..modeling.backbone import backbone_record
    from ..modeling.configuration_cse import PoolingConfig
    from ..objectives import build_objective, build_weighted_auxiliary_losses, with_matryoshka
    from ..training.record.run_arguments import read_training_arguments
    from ..training.training_args import objective_hparams

    logger.info(
        "No %s in %s: rebuilding the training summary from %s.", TRAINING_SUMMARY_FILE, root, TRAINING_ARGS_FILE
    )
    arguments = read_training_arguments(root)
    objective = build_objective(
        arguments["objective"],
        **objective_hparams(arguments["objective"], arguments["temperature"], arguments["objective_kwargs"]),
    )
    config = AutoConfig.from_pretrained(root, trust_remote_code=False)
    # Older records lack the keys: no Matryoshka training.
    objective = with_matryoshka(
        objective,
        arguments.get("matryoshka_dims"),
        arguments.get("matryoshka_weights"),
        embedding_size=getattr(config, "hidden_size", None),
    )
    pooling = PoolingConfig.from_model_config(config) or PoolingConfig()
    state_path = root / "trainer_state.json"
    log_history = (
        json.loads(state_path.read_text(encoding="utf-8")).get("log_history", []) if state_path.is_file() else []
    )
    return summarize_training(
        pooling,
        arguments,
        objective,
        build_weighted_auxiliary_losses(objective.default_auxiliary_losses, arguments["auxiliary_losses"]),
        log_history,
        base_model=base_model,
        lora=read_lora_settings(root),
        encoder=backbone_record(config),
    )


def compare_with_saved_paper(run_dir: Path, results: dict[str, Any]) -> PaperComparison | None:
    """``results`` beside the paper a run from a paper config was compared with (its ``paper_comparison.json``), so
    that a re-rendered card keeps that section, with the scores it shows; ``None`` without the file, or with results
    in another setting than the papers' (e.g. MTEB's SICK-R), which is logged."""
    from ..evaluation.paper_comparison import PaperComparison, compare_with_paper

    path = run_dir / PAPER_COMPARISON_FILE
    if not path.is_file():
        return None
    saved = PaperComparison.from_dict(json.loads(path.read_text(encoding="utf-8")))
    try:
        return compare_with_paper(results, saved.paper, base_model=saved.base_model)
    except ValueError as err:
        logger.warning("The card leaves out the comparison with %s: %s", saved.paper.method, err)
        return None


def push_run(
    run_dir: str | Path,
    repo_id: str,
    *,
    token: str | None = None,
    private: bool | None = None,
    revision: str | None = None,
    commit_message: str = DEFAULT_COMMIT_MESSAGE,
    sts_dir: str | Path | None = None,
    sts_results: str | Path | dict[str, Any] | None = None,
    sts_text: str | None = None,
    sickr_split: str = "test",
    tasks: Sequence[str] | None = None,
    alignment_uniformity: bool = True,
    batch_size: int = 128,
    device: str | None = None,
    base_model: str | None = None,
    dataset: str | None = None,
    language: str | list[str] | None = None,
    license: str | None = None,
    tags: Sequence[str] | None = None,
    dry_run: bool = False,
    write_manifest: bool = False,
    show_progress_bar: bool = True,
    api: Any = None,
) -> dict[str, Any]:
    """Evaluate (optional), write the card and upload ``run_dir`` to ``repo_id``; see the module docstring.

    The card (``README.md``, ``hf_cse_training.json``) is rendered into ``run_dir`` for the upload and put back as it
    was if the upload fails; ``sts_results.json`` is kept (a second try without ``sts_dir`` reuses it). The rendered
    card keeps the MTEB entries ``python -m hf_cse.eval --mteb_tasks`` added to the folder's card
    (:func:`~hf_cse.export.model_card.recorded_mteb_results`): they score the same model. ``show_progress_bar``
    (default True): the STS encoding's bar and huggingface_hub's upload bars (``--disable_tqdm`` hides both).

    A folder without a manifest (saved by an hf_cse from before manifests) is refused before anything is evaluated
    or written; with ``write_manifest``, its files of an uploadable kind are listed as the run's first (its user has
    checked them), which is refused for a folder that has a manifest.

    Raises:
        UsageError: ``repo_id`` is not a Hub repository id; ``run_dir`` has no manifest (or, with ``write_manifest``,
            has one).
        HubUnreachableError: the Hub could not be reached.
        HubRequestError: the Hub refused the request (token, permissions, server error).

    Returns:
        ``{"repo_id", "card" (path), "files" (uploaded, relative), "sts_results" (or None), "commit"}``.
    """
    from ..evaluation.checkpoint_scores import evaluate_run
    from ..export.model_card import (
        CardOptions,
        STSCardResults,
        read_matryoshka_results,
        recorded_mteb_results,
        write_model_card,
    )
    from ..export.upload_list import build_upload_list, read_run_manifest
    from ..training.saving.writer import recover_run_folder

    check_repo_id(repo_id)
    if Path(run_dir).is_dir():  # a run killed while publishing its final model is completed first, not uploaded half
        with FolderLock(run_dir, "python -m hf_cse.push"):
            recover_run_folder(Path(run_dir))
    root = check_run_dir(run_dir)
    if write_manifest:
        adopt_run_files(root)
    read_run_manifest(root)  # a folder that would upload nothing: said before minutes of evaluation
    summary = load_training_summary(root, base_model=base_model)
    if not dry_run:  # the Hub, the token and the right to write there, checked before minutes of evaluation
        api = hub_api(api)
        full_repo_id = create_repository(api, repo_id, token=token, private=private, revision=revision)
    results: dict[str, Any] | None
    if sts_dir is not None:
        logger.info(
            "Scoring %s on the STS tasks of %s before the upload (minutes on a CPU).", root, Path(sts_dir).name
        )
        results = evaluate_run(
            root, sts_dir, tasks, sickr_split, batch_size, device, alignment_uniformity, sts_text=sts_text,
            matryoshka_dims=summary.objective_config.get("matryoshka_dims"), show_progress_bar=show_progress_bar,
        )  # fmt: skip
        write_json_atomic(root / STS_RESULTS_FILE, results)
    elif isinstance(sts_results, dict):
        results = dict(sts_results)
    elif sts_results is not None:
        results = json.loads(Path(sts_results).read_text(encoding="utf-8"))
    elif (root / STS_RESULTS_FILE).is_file():
        logger.info("Using the STS results in %s.", root / STS_RESULTS_FILE)
        results = json.loads((root / STS_RESULTS_FILE).read_text(encoding="utf-8"))
    else:
        results = None
        logger.warning("No STS results (pass --sts_dir or --sts_results): the card will show dev scores only.")
    if results is not None and sts_text is not None:
        results["text"] = sts_text
    elif results is not None and results.get("text") is None:
        # hf_cse.eval records the folder it read: detect the text from it when it is still there.
        evaluated_dir = (results.get("details", {}).get("settings", {}) or {}).get("sts_dir")
        if evaluated_dir and Path(evaluated_dir).is_dir():
            results["text"] = detect_sts_text(evaluated_dir)
    options = CardOptions(
        sts=None if results is None else STSCardResults.from_any(results),
        paper_comparison=None if results is None else compare_with_saved_paper(root, results),
        language=language,
        license=license,
        tags=tags,
        base_model=base_model,
        datasets=dataset,
        matryoshka=read_matryoshka_results(root, summary),  # the table the training run's card showed
        recorded_results=recorded_mteb_results(root),  # read before the card is written anew
    )
    with card_restored_on_failure(root):
        card = write_model_card(root, summary, repo_id, options)
        upload = build_upload_list(root)
        upload.warn_left_out()
        files = upload.files
        outcome = {"repo_id": repo_id, "card": str(card), "files": files, "sts_results": results, "commit": None}
        if dry_run:
            logger.info("Dry run: would upload %d files of %s to %s.", len(files), root, repo_id)
            return outcome
        logger.info(
            "Uploading %d files of %s to %s (not checkpoint-* folders, the training arguments or report/).",
            len(files),
            root,
            repo_id,
        )
        # Hide huggingface_hub's bars ("Processing Files", "New Data Upload") under --disable_tqdm.
        with third_party_progress_bars(show_progress_bar, libraries=("huggingface_hub",)):
            outcome["commit"] = upload_run(
                root,
                full_repo_id,
                api=api,
                token=token,
                revision=revision,
                commit_message=commit_message,
                upload=upload,
            )
    url = getattr(outcome["commit"], "commit_url", None) or f"https://huggingface.co/{repo_id}"
    logger.info("Pushed %s", url)
    return outcome


def adopt_run_files(root: Path) -> list[str]:
    """List the files of ``root``, a run folder saved by an hf_cse from before manifests, as the run's: each of a
    kind a push uploads (:data:`~hf_cse.export.upload_list.RUN_FILES`) in a new manifest, named in a warning. Returns
    them.

    Raises:
        UsageError: ``root`` has a manifest: its run's own word on what it wrote is never replaced.
    """
    from ..export.upload_list import RUN_FILES

    if read_manifest(root) is not None:
        raise UsageError(
            f"--write_manifest lists the files of a run saved without a manifest, and {root} has one: push without "
            "--write_manifest (what the run wrote is uploaded, and the files it did not write are named)."
        )
    adopted = adopt_files(root, RUN_FILES.fullmatch)
    logger.warning("Listed %d files of %s as the run's, on your word: %s", len(adopted), root, ", ".join(adopted))
    return adopted


def build_parser() -> OneLineErrorParser:
    """The argument parser of ``python -m hf_cse.push``."""
    parser = OneLineErrorParser(
        prog="python -m hf_cse.push",
        epilog=ERRORS_HELP,
        description="Write the model card of a trained hf_cse run (optionally with its STS scores) and upload the "
        "run folder to the Hugging Face Hub.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="output_dir of run_unsup.py / CSETrainer.")
    parser.add_argument(
        "--import_module",
        action="append",
        default=[],
        metavar="MODULE",
        help="Import MODULE first (repeatable): the run's pooler, when you registered it (hf_cse.register_pooler). "
        f"MODULE: {IMPORT_MODULE_HELP}.",
    )
    parser.add_argument("--repo_id", required=True, help="Hub repository, USER/NAME or ORG/NAME.")
    parser.add_argument(
        "--token",
        default=None,
        help="Hub token with write access; default: the saved login or HF_TOKEN. Never logged or written.",
    )
    parser.add_argument("--private", action="store_true", help="Create the repository private.")
    parser.add_argument("--revision", default=None, help="Branch to push to (created if missing); default: main.")
    parser.add_argument("--commit_message", default=DEFAULT_COMMIT_MESSAGE)
    parser.add_argument(
        "--sts_dir", default=None, help="SentEval-layout STS folder: evaluate the 7 STS tasks for the card."
    )
    parser.add_argument(
        "--sts_results", default=None, help="Results JSON of `python -m hf_cse.eval --output_json` (no evaluation)."
    )
    parser.add_argument(
        "--sts_text",
        default="auto",
        choices=("auto", "raw", "tokenized"),
        help="STS text of --sts_dir/--sts_results: raw, or SentEval's Moses-tokenized lower-cased copy (default: "
        "detected from letter case).",
    )
    parser.add_argument(
        "--sickr_split", default="test", choices=("test", "all"), help="SICK-R split: test (SimCSE) or all (MTEB)."
    )
    parser.add_argument(
        "--tasks", nargs="+", default=None, metavar="TASK", help=f"STS tasks (default: {' '.join(STS_TASKS)})."
    )
    parser.add_argument(
        "--no_alignment_uniformity", action="store_true", help="Skip alignment/uniformity on STS-B test."
    )
    parser.add_argument(
        "--batch_size", type=NumberFlag(SENTENCES), default=128, help="Encoding batch size (default: 128)."
    )
    parser.add_argument("--device", default=None, help="Encoding device (default: cuda if available).")
    parser.add_argument(
        "--disable_tqdm",
        action="store_true",
        help="Hide the progress bars: the STS encoding's and the upload's (as the Trainer's flag; "
        "HF_HUB_DISABLE_PROGRESS_BARS=1 hides them too).",
    )
    parser.add_argument("--base_model", default=None, help="Hub id of the base model, for the card's metadata.")
    parser.add_argument("--dataset", default=None, help="Hub id of the training dataset, for the card's metadata.")
    parser.add_argument("--language", nargs="+", default=None, help="Card metadata, e.g. en.")
    parser.add_argument("--license", default=None, help="Card metadata, e.g. apache-2.0.")
    parser.add_argument("--tags", nargs="+", default=None, help="Extra card tags.")
    parser.add_argument(
        "--dry_run",
        action="store_true",
        help="Write the card and print the files to upload, one a line; upload nothing.",
    )
    parser.add_argument(
        "--write_manifest",
        action="store_true",
        help="RUN_DIR was saved by an hf_cse from before manifests (a push refuses it): list its files of an "
        "uploadable kind as the run's, then push. Check the folder first: each of them will be uploaded.",
    )
    return parser


def main(argv: Sequence[str] | None = None, api: Any = None) -> dict[str, Any]:
    """Run ``python -m hf_cse.push``; ``api`` replaces ``huggingface_hub.HfApi()`` (tests)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    for module in args.import_module:  # before the card reads the run's pooler by name
        import_user_module(module)
    if args.sts_dir is not None and args.sts_results is not None:
        parser.error("Pass --sts_dir (evaluate now) or --sts_results (read a results file), not both.")
    if args.sts_dir is not None and not Path(args.sts_dir).is_dir():
        parser.error(f"--sts_dir {args.sts_dir!r} does not exist or is not a directory; {STS_DOWNLOAD_HINT}.")
    if args.sts_results is not None and not Path(args.sts_results).is_file():
        parser.error(f"--sts_results {args.sts_results!r} does not exist.")
    options = vars(args)  # every other flag is the push_run keyword of the same name
    del options["import_module"]
    outcome = push_run(
        options.pop("run_dir"),
        options.pop("repo_id"),
        private=True if options.pop("private") else None,
        sts_text=None if (sts_text := options.pop("sts_text")) == "auto" else sts_text,
        alignment_uniformity=not options.pop("no_alignment_uniformity"),
        show_progress_bar=not options.pop("disable_tqdm"),
        api=api,
        **options,
    )
    if args.dry_run:  # on stdout, apart from the log: exactly what upload_folder would send
        print("\n".join(outcome["files"]))
    return outcome


def console_main() -> None:
    """The command-line entry point: ``python -m hf_cse.push`` and the ``hf-cse-push`` console script."""
    console_script(main, build_parser().prog)
