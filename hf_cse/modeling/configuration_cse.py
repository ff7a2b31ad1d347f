"""How hf_cse turns an encoder's hidden states into one sentence embedding.

Which pooler does what is its class's (:mod:`hf_cse.modeling.poolers`, by name in :data:`POOLERS`); everything
that changes how a sentence is encoded lives in :class:`PoolingConfig` and is written into the encoder's
own ``config.json`` under the key ``"hf_cse"``. The checkpoint stays a plain checkpoint of the encoder's model type
(``AutoModel`` loads it without ``trust_remote_code``); hf_cse reads the extra key back so that a reloaded model
encodes exactly like the trained one.
"""

from __future__ import annotations

import json
import typing
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from transformers import PretrainedConfig

from ..errors import UsageError, echo
from ..json_types import describe_json_type, json_matches, json_type
from ..registry import POOLERS
from .poolers import DEFAULT_PROMPT_TEMPLATE, Pooler, pooler_class

CONFIG_KEY = "hf_cse"
PROMPT_NAMES = ("query", "document")
"""The prompts a model with an instruction encodes with (sentence-transformers' names, ``encode(prompt_name=...)``):
``query`` (the anchors' side, with the instruction) and ``document`` (the positives' side)."""

# POOLERS (the registry) and DEFAULT_PROMPT_TEMPLATE (the mask pooler's) are imported from here by hf_cse's users.
__all__ = ["CONFIG_KEY", "DEFAULT_PROMPT_TEMPLATE", "POOLERS", "PROMPT_NAMES", "PoolingConfig"]


@dataclass
class PoolingConfig:
    """Inference-relevant settings of a sentence encoder.

    Args:
        pooler: the name of a registered pooler (:data:`~hf_cse.registry.POOLERS`: ``cls``, ``cls_before_pooler``,
            ``avg``, ``avg_first_last``, ``avg_top2``, ``weighted_mean``, ``mask``, ``last_token``,
            ``prompt_last_token``, ``echo``, and those registered with
            :func:`~hf_cse.register_pooler`; see :mod:`hf_cse.modeling.poolers`). Defaults to ``"cls"``
            (unsupervised SimCSE).
        mlp_only_train: for a pooler with SimCSE's MLP head (``cls``), use the head in training only (unsupervised
            SimCSE's choice). Defaults to ``True``.
        prompt_template: template with ``{sentence}`` and ``[MASK]``; used only by a pooler that
            :attr:`~hf_cse.modeling.poolers.Pooler.uses_prompt_template` (``mask``).
        normalize: L2-normalize the embeddings returned at inference. Defaults to ``False``.
        max_seq_length: truncation length at inference (template included); ``None`` means the model's limit.
        mask_token_id: the tokenizer's mask token id, filled in from the tokenizer for ``pooler="mask"``.
        template_denoising: ``pooler="mask"`` only: subtract the mask state of the template alone, encoded at the
            positions it holds around the sentence (PromptBERT's template denoising). Defaults to ``False``.
        template_prefix_length, template_suffix_length: token counts before and after the sentence, special tokens
            included: the prompt template's (before its last copy of the sentence, the others left out: Echo's);
            for a mean that averages the sentence's own tokens only (LLM2Vec's, ``avg`` on a decoder), the
            tokenizer's special tokens around it (``None``: it averages every token). Filled in from the tokenizer
            (:class:`~hf_cse.modeling.tokenization.SentenceTokenizer`).
        pooler_kwargs: the pooler's own settings, passed to its class's constructor (JSON values, saved in
            ``config.json`` with the rest): ``mask`` takes ``denoise_at_inference``, ``prompt_last_token`` its
            ``template`` and ``rewrite_at_inference``, ``avg`` and ``weighted_mean`` ``tokens``, ``echo`` its
            ``template`` and ``strategy``, a user's pooler what its ``__init__`` takes. Defaults to ``{}``.
        instruction: text put before every anchor in training and every query at encoding (``prompt_name="query"``),
            its separator included (LLM2Vec's supervised stage: ``"Given a premise, retrieve a hypothesis that is
            entailed by the premise;\n"``), tokenized in one piece with the sentence and left out of the mean as
            LLM2Vec's ``embed_mask`` leaves it out; for a pooler that
            :attr:`~hf_cse.modeling.poolers.Pooler.leaves_out_instruction` (``avg``, ``weighted_mean``). Saved as
            sentence-transformers' ``"query"`` prompt. ``None`` (default): none.
        instruct_positives: the positives and hard negatives get :attr:`instruction` too (LLM2Vec's symmetric tasks:
            NLI's second half, Quora duplicates), and so do documents at encoding (``prompt_name="document"``).
            Defaults to ``False``: documents are encoded as they are.
    """

    pooler: str = "cls"
    mlp_only_train: bool = True
    prompt_template: str = DEFAULT_PROMPT_TEMPLATE
    normalize: bool = False
    max_seq_length: int | None = None
    mask_token_id: int | None = None
    template_denoising: bool = False
    template_prefix_length: int | None = None
    template_suffix_length: int | None = None
    pooler_kwargs: dict[str, Any] = field(default_factory=dict)
    instruction: str | None = None
    instruct_positives: bool = False

    def __post_init__(self) -> None:
        self.check_pooler_kwargs()
        try:
            pooler = self.get_pooler()  # an unknown name is a one-line UsageError saying how to register one
        except TypeError as err:  # the class's __init__ refused the kwargs
            raise ValueError(
                f"Pooler {self.pooler!r} does not take pooler_kwargs {self.pooler_kwargs}: {err}."
            ) from err
        pooler.check(self)
        if self.template_denoising and not pooler.needs_mask_token:  # the template-only pass reads the mask state
            templated = " or ".join(f"pooler={name!r}" for name in POOLERS if POOLERS[name].needs_mask_token)
            raise ValueError(f"template_denoising needs {templated}, got pooler={self.pooler!r}.")
        if self.max_seq_length is not None and self.max_seq_length < 2:
            raise ValueError(f"max_seq_length must be >= 2 or None, got {self.max_seq_length}.")
        self.check_instruction(pooler)

    def check_instruction(self, pooler: Pooler) -> None:
        """Raise one line for an :attr:`instruction` that is no text, blank, or given to a pooler that would pool it
        (a first or last token, a prompt template's mask), or :attr:`instruct_positives` without one."""
        if self.instruction is None:
            if self.instruct_positives:
                raise ValueError("instruct_positives=True needs an instruction to put before the positives.")
            return
        if not isinstance(self.instruction, str) or not self.instruction.strip():
            raise ValueError(
                f"instruction must be a non-blank text put before the anchors (or None), got {echo(self.instruction)}."
            )
        if not pooler.leaves_out_instruction:
            means = ", ".join(repr(name) for name in POOLERS if POOLERS[name].leaves_out_instruction)
            raise ValueError(
                f"An instruction is left out of a mean over the sentence's tokens; pooler={self.pooler!r} cannot "
                f"leave it out. Use pooler {means}, or no instruction."
            )

    def prompt(self, prompt_name: str | None) -> str:
        """The text put before a sentence encoded as ``prompt_name`` (:data:`PROMPT_NAMES`): ``"query"``, the
        :attr:`instruction`; ``"document"``, the instruction where :attr:`instruct_positives`; ``None`` (a sentence
        encoded as it is: evaluation, ``encode()``), nothing; ``""`` without an instruction.

        Raises:
            UsageError: an unknown ``prompt_name``, naming the valid ones.
        """
        if prompt_name is not None and prompt_name not in PROMPT_NAMES:
            raise UsageError(
                f"prompt_name={echo(prompt_name)} is no prompt of hf_cse's models; valid: "
                f"{', '.join(map(repr, PROMPT_NAMES))} or None (the sentence as it is)."
            )
        if self.instruction is None or prompt_name is None:
            return ""
        return self.instruction if prompt_name == "query" or self.instruct_positives else ""

    def sentence_transformers_prompts(self) -> dict[str, str] | None:
        """sentence-transformers' ``prompts`` (``config_sentence_transformers.json``) of a model with an
        :attr:`instruction`: ``{"query": ..., "document": ...}`` as :meth:`prompt` gives them; ``None`` without."""
        return None if self.instruction is None else {name: self.prompt(name) for name in PROMPT_NAMES}

    def get_pooler(self) -> Pooler:
        """An instance of the registered class of :attr:`pooler`, made with :attr:`pooler_kwargs` (poolers hold no
        other state: the settings are here)."""
        return pooler_class(self.pooler)(**self.pooler_kwargs)

    def check_pooler_kwargs(self) -> None:
        """Raise one line unless :attr:`pooler_kwargs` is a dict of JSON values (``config.json`` stores it); whether
        the pooler's constructor takes them is checked when ``__post_init__`` makes the pooler."""
        kwargs = self.pooler_kwargs
        try:
            if not isinstance(kwargs, dict) or not all(isinstance(key, str) for key in kwargs):
                raise TypeError("not a dict with string keys")
            json.dumps(kwargs, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"pooler_kwargs must be a JSON object (config.json stores it), got {kwargs!r}: {err}."
            ) from err

    @property
    def uses_mlp_at_inference(self) -> bool:
        return pooler_class(self.pooler).mlp_head and not self.mlp_only_train

    @property
    def uses_mlp_in_training(self) -> bool:
        return pooler_class(self.pooler).mlp_head

    def to_dict(self) -> dict[str, Any]:
        """The settings as ``config.json`` stores them; ``pooler_kwargs``, ``instruction`` and
        ``instruct_positives`` only when set, so that a checkpoint without them stays readable by an hf_cse that
        predates them."""
        values = asdict(self)
        for key in ("pooler_kwargs", "instruction", "instruct_positives"):  # added after the first release
            if not values[key]:
                del values[key]
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "the saved hf_cse settings") -> PoolingConfig:
        """Settings saved by :meth:`to_dict` (``config.json``, a run's ``hf_cse_training.json``), read back.

        Raises:
            UsageError: the pooler they name is not registered (a user's pooler whose module was not imported): one
                line naming the pooler and ``source`` and saying how to import the module.
            UsageError: ``values`` is no JSON object, or a setting is not of its field's JSON type (a pooler given as
                an object, a length as ``true``): one line naming the setting, ``source`` and the type it must have.
            ValueError: an unknown key, or a value :class:`PoolingConfig` refuses.
        """
        if not isinstance(values, dict):
            raise UsageError(
                f"The hf_cse settings of {source} are {echo(values)} (a JSON {json_type(values)}), not an object of "
                f"settings: {', '.join(f.name for f in fields(cls))}."
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(key) for key in set(values) - known)
        if unknown:
            raise ValueError(f"Unknown hf_cse pooling settings {unknown}; valid keys are: {sorted(known)}.")
        hints = typing.get_type_hints(cls)
        for key, value in values.items():
            if not json_matches(value, hints[key]):
                raise UsageError(
                    f"The hf_cse setting {key!r} of {source} is {echo(value)} (a JSON {json_type(value)}); it must be "
                    f"{describe_json_type(hints[key])}."
                )
        pooler = values.get("pooler", cls.pooler)
        if pooler not in POOLERS:
            # Trained with a user's pooler: its module registers the name, and must be imported before loading.
            raise UsageError(
                f"Pooler {echo(pooler)} of {source} is not registered; registered poolers are: {', '.join(POOLERS)}. "
                "Import the module that registers it (hf_cse.register_pooler) first; the commands take "
                "--import_module MODULE."
            )
        return cls(**values)

    @classmethod
    def from_model_config(cls, config: PretrainedConfig) -> PoolingConfig | None:
        """The settings saved in ``config`` by hf_cse, or ``None`` for a plain encoder checkpoint."""
        values = getattr(config, CONFIG_KEY, None)
        if values is None:
            return None
        source = getattr(config, "_name_or_path", "")
        where = f"the config.json of {echo(str(source))}" if source else "config.json"
        return cls.from_dict(dict(values) if isinstance(values, dict) else values, where)

    def save_to_model_config(self, config: PretrainedConfig) -> None:
        setattr(config, CONFIG_KEY, self.to_dict())
