"""Pieces shared by the command lines that encode with a checkpoint: ``hf_cse.eval``, ``hf_cse.transfer`` and
``hf_cse.report``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .configuration_cse import POOLERS
from .encoder import SentenceEncoder


def add_encoder_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model_name_or_path`` (required), ``--pooler``, ``--batch_size``, ``--max_seq_length``, ``--device`` and
    ``--output_json``."""
    parser.add_argument(
        "--model_name_or_path",
        required=True,
        help="hf_cse checkpoint, plain encoder checkpoint (local folder or Hub id), or pip:PACKAGE.",
    )
    parser.add_argument(
        "--pooler",
        default=None,
        choices=POOLERS,
        help="Pooler; default: the one saved in the checkpoint (plain checkpoints without hf_cse settings: cls).",
    )
    parser.add_argument("--batch_size", type=int, default=128, help="Encoding batch size (default: 128).")
    parser.add_argument(
        "--max_seq_length",
        type=int,
        default=None,
        help="Truncation length in tokens; default: the checkpoint's setting, else the tokenizer's limit.",
    )
    parser.add_argument("--device", default=None, help="Device, e.g. cpu or cuda:0 (default: cuda if available).")
    parser.add_argument("--output_json", default=None, help="Write the results to this JSON file.")


def check_batch_size(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exit with a usage error for ``--batch_size < 1``, before any model is loaded."""
    if args.batch_size < 1:
        parser.error(f"--batch_size must be >= 1, got {args.batch_size}.")


def load_encoder(args: argparse.Namespace) -> SentenceEncoder:
    """The encoder that :func:`add_encoder_arguments`' flags name."""
    return SentenceEncoder.from_pretrained(
        args.model_name_or_path, pooler=args.pooler, max_seq_length=args.max_seq_length, device=args.device
    )


def encoder_settings(args: argparse.Namespace, encoder: SentenceEncoder) -> dict[str, Any]:
    """The settings actually used: the saved pooler when ``--pooler`` is omitted, the resolved length limit."""
    return {
        "model_name_or_path": str(args.model_name_or_path),
        "pooler": encoder.model.pooling.pooler,
        "max_seq_length": encoder.sentence_tokenizer.max_seq_length,
        "batch_size": args.batch_size,
        "device": str(next(encoder.model.parameters()).device),
    }


def write_output_json(path: str | Path | None, output: dict[str, Any]) -> None:
    """Write ``output`` to ``--output_json`` (parent folders created) and say so; nothing when ``path`` is None."""
    if path is None:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(output, indent=2) + "\n", encoding="utf-8")
    print(f"Wrote {path}")
