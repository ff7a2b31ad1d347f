"""sentence-transformers files beside a checkpoint, so ``SentenceTransformer(out_dir)`` encodes like hf_cse.

sentence-transformers reads ``modules.json`` and builds Transformer -> Pooling [-> Dense] [-> Normalize]. Whether
it can express a pooler is the pooler class's :attr:`~hf_cse.modeling.poolers.Pooler.sentence_transformers_mode`
(built in: ``cls``/``cls_before_pooler`` as ``"cls"``, ``avg`` as ``"mean"``); SimCSE's inference-time MLP head
becomes a tanh ``Dense``. For the others (``avg_first_last``, ``avg_top2``, ``mask``, ``prompt_last_token``) no files
are written: without ``modules.json`` sentence-transformers would silently fall back to mean pooling, so the user is
told instead, once per run (:func:`no_modules_json_line`, which the run's writer logs at its first save).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from safetensors.torch import save_file

from ..modeling.configuration_cse import POOLERS, PoolingConfig
from ..modeling.modeling_cse import CSEModel
from ..modeling.poolers import pooler_class
from ..modeling.saved_pooling import POOLING_MODE_KEYS

# The four keys written for every model are those hf_cse always wrote (the cls and mean modes' files stay byte
# for byte); a mode outside them adds its own key.
_ALWAYS_WRITTEN = ("cls", "mean", "max", "mean_sqrt_len_tokens")


def sentence_transformers_poolers() -> list[str]:
    """The registered poolers sentence-transformers can express, in registration order."""
    return [name for name in POOLERS if POOLERS[name].sentence_transformers_mode is not None]


def expresses(pooling: PoolingConfig) -> bool:
    """Whether sentence-transformers can express ``pooling``'s pooler (its class has a Pooling mode)."""
    return pooler_class(pooling.pooler).sentence_transformers_mode is not None


def no_modules_json_line(pooling: PoolingConfig) -> str | None:
    """The one line saying that a save of a model pooling with ``pooling`` gets no ``modules.json`` and how to load it
    instead; ``None`` when sentence-transformers expresses the pooler."""
    if expresses(pooling):
        return None
    return (
        f"sentence-transformers cannot express pooler {pooling.pooler!r} (only "
        f"{', '.join(sentence_transformers_poolers())}); no modules.json written. Load this checkpoint with "
        "hf_cse.SentenceEncoder."
    )


def _pooling_module_config(mode: str, pooler: str, hidden_size: int) -> dict[str, int | bool]:
    """``1_Pooling/config.json`` for sentence-transformers' Pooling ``mode`` over ``hidden_size`` dimensions."""
    if mode not in POOLING_MODE_KEYS:
        raise ValueError(
            f"Pooler {pooler!r} declares sentence_transformers_mode={mode!r}; sentence-transformers' Pooling modes "
            f"are: {', '.join(POOLING_MODE_KEYS)}."
        )
    modes = dict.fromkeys([*_ALWAYS_WRITTEN, mode])
    return {"word_embedding_dimension": hidden_size, **{POOLING_MODE_KEYS[m]: m == mode for m in modes}}


def _write_json(path: Path, payload: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def remove_sentence_transformers_files(directory: Path) -> None:
    """Delete what :func:`write_sentence_transformers_files` writes, if ``directory`` has it."""
    for name in ("modules.json", "sentence_bert_config.json"):
        (directory / name).unlink(missing_ok=True)
    for module_dir in (*directory.glob("*_Pooling"), *directory.glob("*_Dense"), *directory.glob("*_Normalize")):
        shutil.rmtree(module_dir)


def write_sentence_transformers_files(directory: str | Path, model: CSEModel, max_seq_length: int) -> bool:
    """Write ``modules.json`` and module folders into ``directory``; return whether the pooler was expressible.

    The files of an earlier save into ``directory`` are removed first: a stale ``modules.json`` would make
    sentence-transformers pool the way the old model did. An inexpressible pooler writes nothing and logs nothing:
    every save of a run would repeat the same line (:func:`no_modules_json_line` is said once per run).
    """
    pooling: PoolingConfig = model.pooling
    directory = Path(directory)
    remove_sentence_transformers_files(directory)
    mode = pooler_class(pooling.pooler).sentence_transformers_mode
    if mode is None:
        return False
    hidden_size = model.config.hidden_size
    modules = [("sentence_transformers.models.Transformer", ""), ("sentence_transformers.models.Pooling", "1_Pooling")]
    _write_json(directory / "sentence_bert_config.json", {"max_seq_length": max_seq_length, "do_lower_case": False})
    _write_json(directory / "1_Pooling" / "config.json", _pooling_module_config(mode, pooling.pooler, hidden_size))
    if pooling.uses_mlp_at_inference:
        dense_dir = directory / "2_Dense"
        _write_json(
            dense_dir / "config.json",
            {
                "in_features": hidden_size,
                "out_features": hidden_size,
                "bias": True,
                "activation_function": "torch.nn.modules.activation.Tanh",
            },
        )
        dense = model.mlp.dense
        save_file(
            {"linear.weight": dense.weight.detach().cpu().contiguous(), "linear.bias": dense.bias.detach().cpu()},
            dense_dir / "model.safetensors",
        )
        modules.append(("sentence_transformers.models.Dense", "2_Dense"))
    if pooling.normalize:
        normalize_dir = f"{len(modules)}_Normalize"
        (directory / normalize_dir).mkdir(exist_ok=True)
        modules.append(("sentence_transformers.models.Normalize", normalize_dir))
    _write_json(
        directory / "modules.json",
        [{"idx": i, "name": str(i), "path": path, "type": kind} for i, (kind, path) in enumerate(modules)],
    )
    return True
