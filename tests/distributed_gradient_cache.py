"""tests/distributed_equivalence.py with gradient caching: the same runs, plus ``<run>-chunked`` variants that
encode each process's batch in chunks (``gradient_cache_chunk_size``), for tests/test_gradient_cache_ddp.py.

    accelerate launch --multi_gpu --num_processes 2 tests/distributed_gradient_cache.py \
        MODEL_DIR OUT.json simcse-chunked 8 [--then MODEL_DIR OUT2.json simcse 8 ...]

With a global batch of 8 each of 2 processes holds 4 sentences, encoded in a chunk of 3 and a chunk of 1 (uneven on
purpose); with LOCAL_BATCH 2 (gradient accumulation over local negatives), in 2 chunks of 1.
"""

from __future__ import annotations

import sys

import distributed_equivalence as equivalence

VARIANTS = {
    "simcse-chunked": ("simcse", 3),
    "dclr-chunked": ("dclr", 3),
    "dclr-matryoshka-chunked": ("dclr-matryoshka", 3),
    "simcse-chunk1": ("simcse", 1),  # for LOCAL_BATCH 2 (gradient accumulation): two chunks of 1
}
"""Chunked run -> (the run it varies, sentences per chunk)."""

for _name, (_run, _chunk) in VARIANTS.items():
    equivalence.OBJECTIVES[_name] = {**equivalence.OBJECTIVES[_run], "gradient_cache_chunk_size": _chunk}

if __name__ == "__main__":
    equivalence.run(sys.argv[1:])
