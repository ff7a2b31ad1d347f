"""Decoder-style tokenizers built in-process with the ``tokenizers`` library, one per family the decoder tests name,
trained on a small corpus full of quotes and periods so that the merges that make a prompt tokenize differently in one
piece and in pieces exist (``."``, ``"A``, ``▁"``):

- ``qwen``: byte-level BPE split by Qwen2's pre-tokenizer pattern (a punctuation mark joins the letters after it,
  ``"A``; punctuation runs stay together, ``."``), no BOS, no mask token, a pad token that is not the eos token
  (``<|endoftext|>`` and ``<|im_end|>``, as Qwen3's);
- ``llama``: SentencePiece-style BPE over Metaspace (a ``▁`` before the first word, words split at ``▁``), a BOS
  before every sentence, no pad token (hf_cse pads with eos);
- ``gemma``: SentencePiece-style BPE without the leading ``▁`` (Gemma's ``add_dummy_prefix`` false), a BOS, a pad
  and a ``<mask>`` token.

The BERT-vocabulary tiny models of ``conftest.py`` hide what these show: their WordPiece tokenizer splits at every
punctuation mark, so a prompt tokenizes alike in one piece and in pieces.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from conftest import save_random_decoder

FAMILIES = ("qwen", "llama", "gemma")
"""The tokenizer families, in the order the tests parametrize them."""

ARCHITECTURES = {"qwen": "qwen3", "llama": "llama", "gemma": "gemma3_text"}
"""The transformers model type a tiny model of each family is built as."""

QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""Qwen2's (and Qwen3's) pre-tokenizer pattern, from their ``tokenizer.json``."""

QUOTED_SENTENCES = [
    '"A man is playing a guitar."',
    "A man is playing a guitar.",
    'The woman said "no".',
    "a dog runs",
    "Is the cat on the mat?",
    "'Quoted' words, then a period.",
]
"""Sentences that start and end with quotes and periods, the joints where tokenizing in pieces differs."""

_CORPUS_LINES = [
    'This sentence : "{}" means in one word:"',
    'This sentence of "{}" means in one word:"',
    "{}",
    '"{}"',
    "She said: {}",
    "Document:{}\nDocument again:{}",
]
_CORPUS_SENTENCES = [
    *QUOTED_SENTENCES,
    "A man is playing a flute.",
    "A woman is slicing an onion.",
    "The cat sits on the mat.",
    "Two dogs play in the snow.",
    "A child is riding a horse.",
    "Someone plays an instrument.",
    "The weather is nice today.",
    "He said it was fine.",
]


def corpus() -> list[str]:
    """The training lines: every sentence inside every template shape, repeated so that the joints merge."""
    lines = [shape.format(sentence, sentence) for shape in _CORPUS_LINES for sentence in _CORPUS_SENTENCES]
    return lines * 4


def _trained(model_pre_tokenizer: Any, decoder: Any, special_tokens: list[str], vocab_size: int = 420) -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    backend = Tokenizer(models.BPE(unk_token=None if "<unk>" not in special_tokens else "<unk>"))
    backend.pre_tokenizer = model_pre_tokenizer
    backend.decoder = decoder
    alphabet = (
        pre_tokenizers.ByteLevel.alphabet()
        if isinstance(model_pre_tokenizer, pre_tokenizers.Sequence)
        else sorted({char for line in corpus() for char in line.replace(" ", "▁")} | {"▁"})
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=special_tokens, initial_alphabet=alphabet, show_progress=False
    )
    backend.train_from_iterator(corpus(), trainer)
    return backend


@functools.cache
def _backend_json(family: str) -> str:
    """The trained ``tokenizers`` backend of ``family`` as JSON (trained once per process)."""
    from tokenizers import Regex, decoders, pre_tokenizers, processors

    if family == "qwen":
        pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        backend = _trained(pre_tokenizer, decoders.ByteLevel(), ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    elif family == "llama":
        metaspace = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
        backend = _trained(
            metaspace, decoders.Metaspace(replacement="▁", prepend_scheme="first"), ["<unk>", "<s>", "</s>"]
        )
        backend.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", backend.token_to_id("<s>"))]
        )
    elif family == "gemma":
        metaspace = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
        specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
        backend = _trained(metaspace, decoders.Metaspace(replacement="▁", prepend_scheme="never"), specials)
        backend.post_processor = processors.TemplateProcessing(
            single="<bos> $A", special_tokens=[("<bos>", backend.token_to_id("<bos>"))]
        )
    else:
        raise ValueError(f"Unknown tokenizer family {family!r}; the families are {', '.join(FAMILIES)}.")
    return backend.to_str()


SPECIAL_TOKENS = {
    "qwen": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "llama": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "gemma": {
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "mask_token": "<mask>",
    },
}


def decoder_tokenizer(family: str) -> Any:
    """A fresh ``PreTrainedTokenizerFast`` of ``family`` (``qwen``, ``llama``, ``gemma``); see the module."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer.from_str(_backend_json(family))
    return PreTrainedTokenizerFast(tokenizer_object=backend, model_max_length=128, **SPECIAL_TOKENS[family])


def save_decoder(directory: Path, family: str, **config_overrides: Any) -> Path:
    """A randomly initialized 2-layer causal LM of ``family``'s architecture (conftest's
    :func:`save_random_decoder`) saved with :func:`decoder_tokenizer`, like a Hub checkpoint of that family."""
    return save_random_decoder(directory, ARCHITECTURES[family], decoder_tokenizer(family), **config_overrides)
