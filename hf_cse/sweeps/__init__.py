"""Seed-and-grid sweeps of ``run_unsup.py`` (``python -m hf_cse.sweep``) and the resumable batch machinery they share
with ``benchmarks/quality.py``.

- :mod:`.grid`: ``--grid KEY=V1,V2`` parsing and the settings it spans;
- :mod:`.arguments`: each setting's ``run_unsup.py`` command line, checked with run_unsup.py's own parser;
- :mod:`.runs`: run the pending tasks of a batch (sequentially or one per CUDA device), atomic result files, locks,
  training subprocesses;
- :mod:`.selection`: one run: train, select on STS-B dev, score the STS test sets;
- :mod:`.aggregate` and :mod:`.report`: mean and spread over seeds, ``sweep.json`` and ``sweep.md``.
"""
