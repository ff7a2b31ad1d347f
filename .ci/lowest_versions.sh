#!/usr/bin/env bash
# The lowest versions setup.cfg declares, tried (issue 38 item 5): a fresh venv with exactly .ci/lowest-versions.txt,
# then the smoke subset, tests/test_smoke.py (2 training steps, save, load in AutoModel and sentence-transformers, a
# resumed run), and the tests that the releases just below the floors fail (setup.cfg names each failure).
# Usage: bash .ci/lowest_versions.sh [VENV_DIR]   (default build/lowest-versions-venv, removed and made anew)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-build/lowest-versions-venv}"
rm -rf "$venv"
python3 -m venv "$venv"
# shellcheck disable=SC1091
. "$venv/bin/activate"
python -m pip install -q --upgrade pip
# The constraints file pins torch too: pip never picks another torch (a CUDA build of several GB).
pip install -q -c .ci/lowest-versions.txt -e . sentence-transformers "pytest>=8" "pytest-xdist>=3.0"
pip list 2>/dev/null | grep -iE '^(torch|transformers|accelerate|datasets|peft|sentence-transformers) '
# One process (-n 0): the subset is a few small files, and every xdist worker would import torch first.
python -m pytest -n 0 -p no:cacheprovider -rs \
    tests/test_smoke.py \
    "tests/test_hub.py::test_trainer_push_without_the_hub_fails_in_one_line_and_keeps_the_local_card" \
    "tests/test_streaming.py::test_two_processes_resume_each_shard_where_it_stopped" \
    "tests/test_st_loss.py::test_the_readme_example_trains_and_cards"
