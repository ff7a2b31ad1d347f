"""Encode sentences with a (trained or plain) encoder: the inference path shared by evaluation and users."""

from __future__ import annotations

import numbers
import os
import sys
from collections.abc import Sequence
from dataclasses import replace

import torch
from tqdm import tqdm as tqdm_base
from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerBase
from transformers.utils.logging import tqdm

from ..errors import UsageError, echo
from ..sources import resolve_model_path
from .configuration_cse import PoolingConfig
from .modeling_cse import CSEModel
from .positions import default_position_ids
from .saved_pooling import plain_checkpoint_max_seq_length, plain_checkpoint_pooling
from .tokenization import SentenceTokenizer, shortest_max_seq_length


def max_input_length(model: CSEModel) -> int | None:
    """The most tokens one input of ``model`` may have; ``None`` when its config sets no position limit.

    ``config.max_position_embeddings``, less the positions the architecture skips: RoBERTa-like encoders number
    tokens from ``padding_idx + 1`` (514 positions hold 512 tokens). The first token's position comes from
    :func:`~hf_cse.modeling.modeling_cse.default_position_ids`, the model's own numbering, not from a list of
    architectures.
    """
    positions = getattr(model.config, "max_position_embeddings", None)
    if positions is None:
        return None
    first_token = torch.full((1, 1), (model.config.pad_token_id or 0) + 1)  # any id but padding
    return positions - int(default_position_ids(model, first_token)[0, 0])


def check_max_seq_length(max_seq_length: int, model: CSEModel, pad_to_multiple_of: int | None = None) -> None:
    """Raise :class:`~hf_cse.errors.UsageError` when inputs of ``max_seq_length`` tokens, padded up to a multiple of
    ``pad_to_multiple_of`` when given, overflow ``model``'s position embeddings (an index error in the middle of
    training otherwise, at the first long batch). Padding counts where the model numbers it: BERT-like encoders
    give padded tokens positions too, RoBERTa-like ones give them ``padding_idx``."""
    limit = max_input_length(model)
    if limit is None:
        return
    if max_seq_length > limit:
        raise UsageError(
            f"max_seq_length={max_seq_length} is longer than the model {model.config.name_or_path!r} can read: "
            f"at most {limit} tokens (max_position_embeddings={model.config.max_position_embeddings}). "
            f"Use max_seq_length <= {limit}."
        )
    if not pad_to_multiple_of:
        return
    padded = -(-max_seq_length // pad_to_multiple_of) * pad_to_multiple_of
    pad_id = model.config.pad_token_id or 0
    row = torch.full((1, padded), pad_id)
    row[0, :max_seq_length] = pad_id + 1  # any id but padding
    positions = model.config.max_position_embeddings
    if int(default_position_ids(model, row).max()) >= positions:
        raise UsageError(
            f"pad_to_multiple_of={pad_to_multiple_of} pads max_seq_length={max_seq_length} up to {padded} tokens, "
            f"past the {positions} position embeddings of the model {model.config.name_or_path!r}. Use "
            f"max_seq_length <= {limit // pad_to_multiple_of * pad_to_multiple_of}, or another pad_to_multiple_of."
        )


def check_max_seq_length_value(max_seq_length: object, tokenizer: PreTrainedTokenizerBase) -> None:
    """Raise :class:`~hf_cse.errors.UsageError` in one line unless ``max_seq_length`` is an integer (not a bool) of
    at least :func:`shortest_max_seq_length` tokens: ``0`` was read as unset, ``-1`` failed deep in the tokenizer,
    ``1`` or ``2`` with BERT's tokenizer gave the whole sentence or none of it, a float was rounded down without a
    word."""
    shortest = shortest_max_seq_length(tokenizer)
    if (
        isinstance(max_seq_length, numbers.Integral)
        and not isinstance(max_seq_length, bool)
        and max_seq_length >= shortest
    ):
        return
    specials = shortest - 1
    raise UsageError(
        f"max_seq_length={echo(max_seq_length)} is no valid truncation length: use an integer >= {shortest} "
        f"({type(tokenizer).__name__} adds {specials} special token{'' if specials == 1 else 's'} to each sentence, "
        "and at least one token of the sentence must remain), or None for the model's own limit."
    )


class SentenceEncoder:
    """A :class:`CSEModel` and its tokenizer, encoding lists of sentences into embeddings.

    Sentences are tokenized once per call and batched by length (longest first), so padding costs little;
    the embeddings come back in input order.

    Args:
        model: the model; put into eval mode for each ``encode`` call and restored afterwards.
        tokenizer: its tokenizer.
        max_seq_length: truncation length; ``None`` uses the model's pooling config, then the tokenizer's limit,
            capped at what the position embeddings hold. A larger explicit value is a ``UsageError``, and so is one
            that holds no token of the sentence beside the tokenizer's special tokens
            (:func:`check_max_seq_length_value`).
    """

    def __init__(self, model: CSEModel, tokenizer: PreTrainedTokenizerBase, max_seq_length: int | None = None) -> None:
        if max_seq_length is not None:
            check_max_seq_length_value(max_seq_length, tokenizer)
        self.model = model
        self.sentence_tokenizer = SentenceTokenizer(tokenizer, model.pooling, max_seq_length, inference=True)
        if max_seq_length is not None:
            check_max_seq_length(max_seq_length, model)
        else:
            limit = max_input_length(model)
            if limit is not None and self.sentence_tokenizer.max_seq_length > limit:
                # A tokenizer without a length limit (or a larger one) would overflow the positions at a long sentence.
                self.sentence_tokenizer = SentenceTokenizer(tokenizer, model.pooling, limit, inference=True)
        self._prompt_tokenizers: dict[str | None, SentenceTokenizer] = {None: self.sentence_tokenizer}

    def prompt_tokenizer(self, prompt_name: str | None) -> SentenceTokenizer:
        """The tokenizer of sentences encoded as ``prompt_name`` (``"query"``, ``"document"``, ``None``: see
        :meth:`~hf_cse.modeling.configuration_cse.PoolingConfig.prompt`), made once, truncating as
        :attr:`sentence_tokenizer` does.

        Raises:
            UsageError: an unknown ``prompt_name``.
        """
        if prompt_name not in self._prompt_tokenizers:
            self.model.pooling.prompt(prompt_name)  # an unknown name: one line, before the tokenizer is built
            self._prompt_tokenizers[prompt_name] = SentenceTokenizer(
                self.sentence_tokenizer.tokenizer,
                self.model.pooling,
                self.sentence_tokenizer.max_seq_length,
                inference=True,
                prompt_name=prompt_name,
            )
        return self._prompt_tokenizers[prompt_name]

    @classmethod
    def from_pretrained(
        cls,
        model_name_or_path: str | os.PathLike,
        pooler: str | None = None,
        max_seq_length: int | None = None,
        device: str | torch.device | None = None,
        pooling: PoolingConfig | None = None,
        **model_kwargs,
    ) -> SentenceEncoder:
        """Load a hf_cse checkpoint, or any encoder checkpoint (local path, Hub id or ``pip:PACKAGE``).

        ``pooler`` (a registered name) overrides the saved pooler (other saved settings are kept, but for the saved
        pooler's own ``pooler_kwargs``); ``pooling`` (a whole :class:`PoolingConfig`) replaces every saved pooling
        setting; at most one of the two. Without either, a checkpoint without hf_cse settings pools as its
        sentence-transformers Pooling module says, else with ``"cls"``
        (:func:`~hf_cse.modeling.saved_pooling.plain_checkpoint_pooler`), truncating at its
        ``sentence_bert_config.json``'s ``max_seq_length`` where it has one. ``model_kwargs`` go to
        :meth:`CSEModel.from_pretrained` (``torch_dtype``, ``attn_implementation``, ...).

        Raises:
            TypeError: ``pooling`` is no :class:`PoolingConfig` (a pooler's name goes in ``pooler``), or both are
                given.
        """
        if pooling is not None and not isinstance(pooling, PoolingConfig):
            raise TypeError(
                f"pooling={echo(pooling)} is no PoolingConfig: pass a pooler's name as pooler= (e.g. "
                f"pooler='avg'), or pooling=PoolingConfig(pooler=...) for every pooling setting."
            )
        if pooling is not None and pooler is not None:
            raise TypeError(f"Pass pooler={echo(pooler)} or pooling=PoolingConfig(...), not both.")
        path = resolve_model_path(str(model_name_or_path))
        config = AutoConfig.from_pretrained(path, trust_remote_code=False)  # never a model's own code, never a prompt
        pooling = pooling or PoolingConfig.from_model_config(config)
        if pooling is None:  # no hf_cse settings: read as sentence-transformers reads it, pooling and length
            name, kwargs = (pooler, {}) if pooler else plain_checkpoint_pooling(path, str(model_name_or_path))
            pooling = PoolingConfig(
                pooler=name, pooler_kwargs=kwargs, max_seq_length=plain_checkpoint_max_seq_length(path)
            )
        elif pooler is not None and pooler != pooling.pooler:
            pooling = replace(pooling, pooler=pooler, pooler_kwargs={})
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        if max_seq_length is not None:  # before the weights load
            check_max_seq_length_value(max_seq_length, tokenizer)
        model = CSEModel.from_pretrained(path, config=config, pooling=pooling, **model_kwargs)
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        return cls(model.to(device), tokenizer, max_seq_length)

    @torch.inference_mode()
    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 128,
        show_progress_bar: bool = False,
        prompt_name: str | None = None,
    ) -> torch.Tensor:
        """Embeddings ``[N, D]`` (float32, on CPU) of ``N`` sentences, in input order; one sentence given as a string
        gives its embedding ``[D]``, as sentence-transformers' ``encode`` does.

        Args:
            sentences: the sentences, or one sentence.
            batch_size: sentences per forward pass, an integer >= 1.
            show_progress_bar: show a tqdm bar over the sentences on stderr (transformers' tqdm, so
                ``HF_HUB_DISABLE_PROGRESS_BARS=1`` hides it too). Nested under another bar (the Trainer's training
                bar) it is erased when done, and left out where stderr is no terminal (a log file): tqdm draws a
                nested bar with cursor-up escapes, which a log keeps as ``[A`` garbage. On its own it stays.
            prompt_name: ``"query"`` encodes the sentences as queries, after the model's instruction
                (``PoolingConfig.instruction``, left out of the mean), as sentence-transformers'
                ``encode(prompt_name="query")`` (or ``encode_query``) encodes them with the saved prompts;
                ``"document"`` as documents (the instruction only where ``instruct_positives``); ``None`` (default):
                as they are.
        """
        if isinstance(sentences, str):  # else one "sentence" per character
            return self.encode([sentences], batch_size, show_progress_bar, prompt_name)[0]
        if not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, bool) or batch_size < 1:
            raise UsageError(
                f"batch_size={echo(batch_size)} is no number of sentences per forward pass: use an integer >= 1 "
                "(default 128)."
            )
        sentences = list(sentences)
        wrong = [sentence for sentence in sentences if not isinstance(sentence, str)]
        if wrong:
            raise TypeError(
                f"encode() takes strings; got {echo(wrong[0])} ({type(wrong[0]).__name__}) among the sentences."
            )
        if not sentences:
            raise ValueError("encode() got no sentences.")
        sentence_tokenizer = self.prompt_tokenizer(prompt_name)
        features = sentence_tokenizer(sentences)
        # Rows after an instruction: the model leaves its tokens out, row by row, as in training.
        row_span = torch.tensor([sentence_tokenizer.row_span]) if sentence_tokenizer.prompt else None
        order = sorted(range(len(sentences)), key=lambda i: -len(features["input_ids"][i]))
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        nested_in_a_log = bool(tqdm_base._instances) and not sys.stderr.isatty()
        progress = (
            tqdm(total=len(sentences), desc="Encoding", unit=" sentences", leave=None, dynamic_ncols=True)
            if show_progress_bar and not nested_in_a_log
            else None
        )
        try:
            chunks = []
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                batch = sentence_tokenizer.pad([{key: features[key][i] for key in features} for i in rows])
                if row_span is not None:
                    batch["template_lengths"] = row_span.expand(len(rows), 2)
                output = self.model(**{key: value.to(device) for key, value in batch.items()})
                chunks.append(output.embeddings.float().cpu())
                if progress is not None:
                    progress.update(len(rows))
        finally:
            self.model.train(was_training)
            if progress is not None:
                progress.close()
        embeddings = torch.cat(chunks)
        return embeddings[torch.argsort(torch.tensor(order))]
