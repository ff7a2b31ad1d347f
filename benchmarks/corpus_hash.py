"""What identifying the corpus by a SHA-256 of its whole content costs (the resume contract,
``hf_cse.training.record.run_settings.corpus_identity``), beside what a run spends reading the same corpus anyway.

A synthetic corpus of ``--sentences`` lines of 18-22 words (about 93 bytes a line; SimCSE's wiki1m is 1M Wikipedia
sentences, about 120 MB) is written to a temporary file, then timed (median of ``--repeats``):

- ``read``: ``load_sentences`` of the file, the in-memory path's read into a ``Dataset`` (what every run pays);
- ``hash in memory``: ``corpus_identity`` of that ``Dataset`` (every sentence joined, encoded and hashed in chunks);
- ``hash streamed``: ``corpus_identity`` of the file as a ``--streaming`` run gives it (its bytes, 1 MiB at a time).

Each run computes the identity once, when its trainer is built (every process of a multi-process run does). The
streamed hash reads the file at the disk's speed (here from the page cache, so these are the CPU's cost): a corpus of
100 GB read from a 1 GB/s disk adds about 100 s to a run that streams it for days.

    python benchmarks/corpus_hash.py --sentences 1000000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hf_cse.training.data.corpus import load_sentences  # noqa: E402
from hf_cse.training.data.streaming import stream_sentences  # noqa: E402
from hf_cse.training.record.run_settings import corpus_identity  # noqa: E402

WORDS = "the of and in to a was is for on as by with he at from his an were are which this be or had it".split()


def write_corpus(path: Path, sentences: int) -> None:
    """``sentences`` lines of 18-22 words (about 120 bytes), deterministic."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(sentences):
            length = 18 + i % 5
            handle.write(" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] + str(j % 10) for j in range(length)) + "\n")


def median_seconds(function: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=1_000_000, help="Lines of the synthetic corpus.")
    parser.add_argument("--repeats", type=int, default=3, help="Timings per measure; the median is reported.")
    parser.add_argument("--output_json", default=None, help="Also write the results here.")
    args = parser.parse_args(argv)
    if args.sentences < 1 or args.repeats < 1:
        parser.error(f"--sentences and --repeats must be >= 1, got {args.sentences} and {args.repeats}.")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "corpus.txt"
        write_corpus(path, args.sentences)
        size = path.stat().st_size
        dataset = load_sentences(str(path))
        stream = stream_sentences(str(path))
        seconds = {
            "read": median_seconds(lambda: load_sentences(str(path)), args.repeats),
            "hash in memory": median_seconds(lambda: corpus_identity(dataset), args.repeats),
            "hash streamed": median_seconds(lambda: corpus_identity(stream), args.repeats),
        }
    result = {
        "command": "python benchmarks/corpus_hash.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "sentences": args.sentences,
        "bytes": size,
        "seconds": seconds,
        "streamed_mb_per_s": size / seconds["hash streamed"] / 1e6,
    }
    print(f"corpus: {args.sentences:,} sentences, {size / 1e6:.1f} MB")
    for name, value in seconds.items():
        ratio = f"  ({value / seconds['read']:.2f} x the read)" if name != "read" else ""
        print(f"  {name:<20} {value:8.3f} s{ratio}")
    print(f"  streamed hash: {result['streamed_mb_per_s']:.0f} MB/s")
    if args.output_json:
        Path(args.output_json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
