"""sentence-transformers files beside a checkpoint, so ``SentenceTransformer(out_dir)`` encodes like hf_cse, or stops.

sentence-transformers reads ``modules.json`` and builds Transformer -> Pooling [-> Dense] [-> Normalize]. Whether
it can express a pooler is the pooler's :meth:`~hf_cse.modeling.poolers.Pooler.sentence_transformers_pooling` under
the model's settings (built in: ``cls``/``cls_before_pooler`` as ``"cls"``, ``avg`` as ``"mean"`` where it averages
every attended token, ``last_token`` as ``"lasttoken"``, ``weighted_mean`` as ``"weightedmean"`` likewise); SimCSE's
inference-time MLP head becomes a tanh ``Dense``. For the others (``avg_first_last``, ``avg_top2``, ``mask``,
``prompt_last_token``, ``echo``, and a decoder's ``avg`` that leaves its BOS out) a folder without ``modules.json``
would be loaded with mean pooling, in silence: the folder gets a ``modules.json`` whose Pooling module names a mode
that sentence-transformers refuses in one line, the mode's text saying which hf_cse pooler to load it with
(:data:`REFUSED_MODE`); the run says so once (:func:`no_modules_json_line`, logged by the run's writer at its first
save). ``sentence_bert_config.json`` names no ``modality_config``: sentence-transformers 6 then reads the folder as
one saved before modalities, plain text, even where the tokenizer has a chat template (a decoder's), which it would
otherwise render every sentence through (``tests/test_sentence_transformers_poolers.py``).

A model with an instruction (``PoolingConfig.instruction``) gets ``config_sentence_transformers.json`` with its
``prompts`` (``query``: the instruction; ``document``: the instruction where ``instruct_positives``, else empty; no
default prompt, as hf_cse's ``encode()`` without ``prompt_name``) and a Pooling module with ``include_prompt: false``:
sentence-transformers' ``encode_query`` (``prompt_name="query"``) then puts the instruction before each query and
leaves the tokens it counts as the prompt's out of the mean, the tokens hf_cse leaves out
(:class:`~hf_cse.modeling.tokenization.SentenceTokenizer`, ``tests/test_pairs_instruction.py``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from safetensors.torch import save_file

from ..modeling.configuration_cse import POOLERS, PoolingConfig
from ..modeling.modeling_cse import CSEModel
from ..modeling.saved_pooling import POOLING_MODE_KEY, POOLING_MODE_KEYS

# The four keys written for every model are those hf_cse always wrote (the cls and mean modes' files stay byte
# for byte); a mode outside them adds its own key.
_ALWAYS_WRITTEN = ("cls", "mean", "max", "mean_sqrt_len_tokens")

REFUSED_MODE = (
    "hf_cse:{pooler} (sentence-transformers cannot express hf_cse's {pooler!r} pooler; load this model with "
    "hf_cse.SentenceEncoder.from_pretrained)"
)
"""The Pooling mode written for a pooler sentence-transformers cannot express: not one of its modes, so loading the
folder stops in one line (sentence-transformers 6: ``ValueError: Invalid pooling mode: 'hf_cse:...'``; earlier
releases fail their own check of the mode), the line naming the pooler and the loader to use instead."""

SENTENCE_TRANSFORMERS_CONFIG_FILE = "config_sentence_transformers.json"
"""sentence-transformers' file of model-wide settings, the prompts among them."""


def sentence_transformers_poolers() -> list[str]:
    """The registered poolers whose class declares a sentence-transformers Pooling mode, in registration order (some
    express it only under some settings: :meth:`~hf_cse.modeling.poolers.Pooler.sentence_transformers_pooling`)."""
    return [name for name in POOLERS if POOLERS[name].sentence_transformers_mode is not None]


def sentence_transformers_mode(pooling: PoolingConfig) -> str | None:
    """sentence-transformers' Pooling mode that computes ``pooling``'s embedding, or ``None``."""
    return pooling.get_pooler().sentence_transformers_pooling(pooling)


def expresses(pooling: PoolingConfig) -> bool:
    """Whether sentence-transformers can express ``pooling``'s pooler under its settings."""
    return sentence_transformers_mode(pooling) is not None


def no_modules_json_line(pooling: PoolingConfig) -> str | None:
    """The one line saying that sentence-transformers cannot load a save of a model pooling with ``pooling`` (its
    ``modules.json`` stops it) and how to load it instead; ``None`` when sentence-transformers expresses it."""
    if expresses(pooling):
        return None
    return (
        f"sentence-transformers cannot express pooler {pooling.pooler!r} under these settings (it expresses "
        f"{', '.join(sentence_transformers_poolers())}, where they average every token the tokenizer gives); the "
        "saved modules.json stops sentence-transformers in one line. Load this checkpoint with hf_cse.SentenceEncoder."
    )


def _pooling_module_config(mode: str, pooler: str, hidden_size: int) -> dict[str, Any]:
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
    for name in ("modules.json", "sentence_bert_config.json", SENTENCE_TRANSFORMERS_CONFIG_FILE):
        (directory / name).unlink(missing_ok=True)
    for module_dir in (*directory.glob("*_Pooling"), *directory.glob("*_Dense"), *directory.glob("*_Normalize")):
        shutil.rmtree(module_dir)


def write_sentence_transformers_files(directory: str | Path, model: CSEModel, max_seq_length: int) -> bool:
    """Write ``modules.json`` and module folders into ``directory``; return whether the pooler was expressible.

    The files of an earlier save into ``directory`` are removed first: a stale ``modules.json`` would make
    sentence-transformers pool the way the old model did. An inexpressible pooler gets a Transformer and a Pooling
    module whose mode sentence-transformers refuses in one line (:data:`REFUSED_MODE`), and logs nothing: every save
    of a run would repeat the same line (:func:`no_modules_json_line` is said once per run).
    """
    pooling: PoolingConfig = model.pooling
    directory = Path(directory)
    remove_sentence_transformers_files(directory)
    mode = sentence_transformers_mode(pooling)
    hidden_size = model.config.hidden_size
    modules = [("sentence_transformers.models.Transformer", ""), ("sentence_transformers.models.Pooling", "1_Pooling")]
    _write_json(directory / "sentence_bert_config.json", {"max_seq_length": max_seq_length, "do_lower_case": False})
    if mode is None:
        refused = REFUSED_MODE.format(pooler=pooling.pooler)
        pooling_module: dict[str, Any] = {"word_embedding_dimension": hidden_size, POOLING_MODE_KEY: refused}
    else:
        pooling_module = _pooling_module_config(mode, pooling.pooler, hidden_size)
        prompts = pooling.sentence_transformers_prompts()
        if prompts is not None:
            pooling_module["include_prompt"] = False
            config = {"prompts": prompts, "default_prompt_name": None}
            _write_json(directory / SENTENCE_TRANSFORMERS_CONFIG_FILE, config)
    _write_json(directory / "1_Pooling" / "config.json", pooling_module)
    if mode is not None and pooling.uses_mlp_at_inference:
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
    if mode is not None and pooling.normalize:
        normalize_dir = f"{len(modules)}_Normalize"
        (directory / normalize_dir).mkdir(exist_ok=True)
        modules.append(("sentence_transformers.models.Normalize", normalize_dir))
    _write_json(
        directory / "modules.json",
        [{"idx": i, "name": str(i), "path": path, "type": kind} for i, (kind, path) in enumerate(modules)],
    )
    return mode is not None
