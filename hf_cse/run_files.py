"""The names of the files and folders hf_cse writes into a run's output folder and its ``checkpoint-N`` folders.

One place for them, at the bottom of the package: the code that writes a file, the code that reads it back (resume,
``python -m hf_cse.push``, the report) and the upload list (:mod:`hf_cse.export.upload_list`) all import the name from
here, so none of them imports another's module for a file name. This module imports nothing.

The names transformers and peft give their files (``config.json``, ``trainer_state.json``, ``optimizer.pt``, ...)
are theirs: import them from transformers.
"""

# Written into any folder hf_cse saves into (hf_cse.atomic_files).
STAGING_PREFIX = ".hf_cse-staging-"
"""A folder being saved (``.hf_cse-staging-XXXX/``): its files are moved into place once all are written."""
TEMPORARY_SUFFIX = ".tmp"
"""Suffix of an atomic write's temporary file (``.NAME.XXXX.tmp``), which a kill can leave behind."""
MANIFEST_FILE = "hf_cse_manifest.json"
"""The files hf_cse wrote into a folder: ``{"format": 1, "files": {relative path: {"size", "sha256"}}}``."""

# The run folder and its checkpoints.
LOCK_FILE = "_hf_cse.lock"
"""The output folder's lock. A leading ``_``: the Trainer's checkpoint pushes and ``python -m hf_cse.push`` never
upload such files."""
PREVIOUS_RUN_PREFIX = "_previous-run-"
"""Where ``--overwrite_output_dir`` moves an earlier run (``OUTPUT/_previous-run-TIME/``): inside the output folder
(the same filesystem, so each move is one atomic rename, also on a mount point) and with a leading ``_``, so that
neither a Hub push nor ``python -m hf_cse.push`` uploads it."""
ADAPTER_DIR = "adapter"
"""Where a LoRA run's adapter is saved, beside the merged model."""
TRAINING_ARGS_FILE = "training_args.json"
"""The training arguments as JSON (the Trainer's ``training_args.bin`` is a pickle), in the run folder and each
checkpoint."""
RUN_SETTINGS_FILE = "hf_cse_run_settings.json"
"""A checkpoint's record of the settings a resumed run must keep (or change only when allowed)."""
STREAM_POSITION_FILE = "stream_position.json"
"""A streamed run's position in its corpus, in each checkpoint."""

# The run's results and its card.
TRAINING_SUMMARY_FILE = "hf_cse_training.json"
"""Written beside ``README.md`` with the card's training summary; read back by ``python -m hf_cse.push``."""
STS_RESULTS_FILE = "sts_results.json"
"""The STS test results ``python -m hf_cse.push`` computed (the ``hf_cse.eval`` JSON format)."""
PAPER_COMPARISON_FILE = "paper_comparison.json"
"""A run's STS scores beside its paper's (written by ``run_unsup.py`` with a paper config, read for the card)."""
MATRYOSHKA_RESULTS_FILE = "matryoshka_sts.json"
"""A Matryoshka run's STS scores per embedding prefix (written by ``run_unsup.py``, read for the card)."""
