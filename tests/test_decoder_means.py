"""What decoders pool over (issue 54, items 3 and 6), against references written from the released code, on tiny
random Qwen3, Llama and Gemma 3 models with decoder tokenizers built in-process (tests/common/decoder_tokenizers.py):

- ``avg`` on a decoder is LLM2Vec's ``mean`` (McGill-NLP/llm2vec, ``llm2vec.py``: ``tokenize`` builds ``embed_mask``
  from the text tokenized alone, ``get_pooling`` averages the last ``n`` tokens of the left-padded row, so the BOS is
  left out); on an encoder it stays SimCSE's (every attended token, ``[CLS]`` and ``[SEP]`` included); ``tokens``
  names either choice;
- ``weighted_mean`` is LLM2Vec's ``weighted_mean`` (weights ``arange(n) + 1`` over the same tokens, normalized);
- ``echo`` is Echo embeddings (jakespringer/echo-embeddings, ``echo_embeddings.py``: ``EchoParser`` tokenizes the
  template's pieces apart, ``EchoPooling`` averages or takes the last of the ``embed_mask`` tokens: the second copy
  and the ``</s>`` after it).

Everything in float64: hf_cse batches right-padded rows whose positions count from the first real token, the
references run one sentence at a time, so the two differ only in the rounding of sums over other padding widths; the
bound is 2^10 float64 ulps of the embeddings' scale, where a wrong token set moves them by percents (checked).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch
from common.decoder_tokenizers import ARCHITECTURES, FAMILIES, QUOTED_SENTENCES, decoder_tokenizer, save_decoder
from conftest import SENTENCES
from transformers import AutoModel, AutoTokenizer

from hf_cse import CSEModel, PoolingConfig, SentenceEncoder
from hf_cse.export.model_card.snippets import transformers_snippet
from hf_cse.modeling.poolers import ECHO_TEMPLATE, masked_mean
from hf_cse.modeling.tokenization import SentenceTokenizer, use_eos_for_padding

FLOAT64_EPS = torch.finfo(torch.float64).eps
TEXTS = [*QUOTED_SENTENCES, *SENTENCES[:4]]


def close(got: torch.Tensor, expected: torch.Tensor) -> bool:
    return bool(((got - expected).abs() <= 2**10 * FLOAT64_EPS * expected.abs().max()).all())


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a - b).norm(dim=1) / b.norm(dim=1)).min())


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {family: save_decoder(tmp_path_factory.mktemp(f"means_{family}"), family) for family in FAMILIES}


def plain_model(folder: Path) -> Any:
    return AutoModel.from_pretrained(folder).double().eval()


def encode(folder: Path, pooling: PoolingConfig, texts: list[str], max_seq_length: int | None = None) -> torch.Tensor:
    """hf_cse's float64 embeddings: the texts as SentenceEncoder tokenizes them, in one right-padded batch."""
    model = CSEModel.from_pretrained(folder, pooling=pooling).double().eval()
    tokenizer = SentenceTokenizer(AutoTokenizer.from_pretrained(folder), model.pooling, max_seq_length, inference=True)
    with torch.no_grad():
        return model(**tokenizer.batch(texts)).embeddings


# --- LLM2Vec (llm2vec/llm2vec.py), one text at a time ---------------------------------------------------------


def llm2vec_embeddings(folder: Path, texts: list[str], pooling_mode: str, instruction: str = "") -> torch.Tensor:
    """``LLM2Vec.encode`` with ``skip_instruction=True`` (its default), each text alone (a batch of one: no padding,
    so positions need no left-padding care): ``_convert_to_str``, ``tokenize`` (``embed_mask``), ``forward``
    (``embed_mask`` popped before the model), ``get_pooling``."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model = plain_model(folder)
    separator = "!@#$%^&*()"
    embeddings = []
    for text in texts:
        joined = f"{instruction.strip()} {separator}{text}" if instruction else f"{separator}{text}"
        t = joined.split(separator)
        text_2, original_text = t[1] if len(t) > 1 else "", "".join(t)
        original = tokenizer([original_text], return_tensors="pt", padding=True, truncation=True, max_length=512)
        ids = tokenizer([text_2], return_tensors="pt", padding=True, truncation=True, max_length=512,
                        add_special_tokens=False)  # fmt: skip
        embed_mask = torch.zeros_like(original["attention_mask"][0])
        if len(ids["input_ids"][0]) > 0:
            embed_mask[-len(ids["input_ids"][0]) :] = torch.ones(len(ids["input_ids"][0]))
        with torch.no_grad():
            states = model(**original).last_hidden_state
        seq_lengths = embed_mask.unsqueeze(0).sum(dim=-1)
        if pooling_mode == "mean":
            pooled = torch.stack([states[i, -length:, :].mean(dim=0) for i, length in enumerate(seq_lengths)])
        elif pooling_mode == "weighted_mean":
            bs, l, _ = states.shape  # noqa: E741 - LLM2Vec's names
            complete_weights = torch.zeros(bs, l, dtype=states.dtype)
            for i, seq_l in enumerate(seq_lengths):
                if seq_l > 0:
                    complete_weights[i, -seq_l:] = torch.arange(seq_l) + 1
                    complete_weights[i] /= torch.clamp(complete_weights[i].sum(), min=1e-9)
            pooled = torch.sum(states * complete_weights.unsqueeze(-1), dim=1)
        else:
            raise ValueError(pooling_mode)
        embeddings.append(pooled[0])
    return torch.stack(embeddings)


@pytest.mark.parametrize("family", FAMILIES)
def test_avg_on_a_decoder_is_llm2vecs_mean(family: str, family_dirs: dict[str, Path]) -> None:
    """The BOS (Llama's, Gemma's) is left out as LLM2Vec's ``embed_mask`` leaves it out; averaging it too (SimCSE's
    ``avg``, ``tokens: all``) is another embedding (the issue's 13-14%); Qwen's tokenizer adds none, so the two
    agree there."""
    folder = family_dirs[family]
    expected = llm2vec_embeddings(folder, TEXTS, "mean")
    assert close(encode(folder, PoolingConfig(pooler="avg"), TEXTS), expected)
    assert close(encode(folder, PoolingConfig(pooler="avg", pooler_kwargs={"tokens": "sentence"}), TEXTS), expected)
    every = encode(folder, PoolingConfig(pooler="avg", pooler_kwargs={"tokens": "all"}), TEXTS)
    if decoder_tokenizer(family).bos_token is None:
        assert close(every, expected)
    else:
        assert relative_difference(every, expected) > 1e-3


@pytest.mark.parametrize("family", FAMILIES)
def test_weighted_mean_is_llm2vecs_weighted_mean(family: str, family_dirs: dict[str, Path]) -> None:
    folder = family_dirs[family]
    expected = llm2vec_embeddings(folder, TEXTS, "weighted_mean")
    got = encode(folder, PoolingConfig(pooler="weighted_mean"), TEXTS)
    assert close(got, expected)
    assert relative_difference(got, llm2vec_embeddings(folder, TEXTS, "mean")) > 1e-3


def test_avg_on_an_encoder_stays_simcses_mean_and_tokens_sentence_leaves_cls_and_sep_out(
    tiny_encoder_dir: Path,
) -> None:
    """SimCSE's ``avg`` (``cl_forward``: ``(last_hidden * attention_mask).sum(1) / attention_mask.sum(-1)``) counts
    ``[CLS]`` and ``[SEP]``: BERT's tokenizer ends every sentence in ``[SEP]``, so ``avg`` unset stays it."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        states = AutoModel.from_pretrained(tiny_encoder_dir).double().eval()(**batch).last_hidden_state
    mask = batch["attention_mask"]
    simcse = (states * mask.unsqueeze(-1)).sum(1) / mask.sum(-1).unsqueeze(-1)
    pooling = PoolingConfig(pooler="avg")
    assert close(encode(tiny_encoder_dir, pooling, SENTENCES), simcse)
    assert pooling.template_prefix_length is None and pooling.template_suffix_length is None
    inner = mask.clone()
    inner[:, 0] = 0
    inner[torch.arange(len(inner)), mask.sum(1) - 1] = 0
    sentence_only = encode(
        tiny_encoder_dir, PoolingConfig(pooler="avg", pooler_kwargs={"tokens": "sentence"}), SENTENCES
    )
    assert close(sentence_only, masked_mean(states, inner))


@pytest.mark.parametrize("family", FAMILIES)
def test_the_span_is_saved_with_the_model_and_padding_on_either_side_gives_it(
    family: str, family_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """The tokens left out are counted from the tokenizer whenever it tokenizes for the model (a reloaded model
    gets them back); the pooler finds them by rank among the real tokens, so a left-padded batch gives the
    right-padded one's embeddings (to rounding)."""
    folder = family_dirs[family]
    pooling = PoolingConfig(pooler="avg")
    model = CSEModel.from_pretrained(folder, pooling=pooling).double().eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    SentenceTokenizer(tokenizer, model.pooling)
    lead = int(tokenizer.bos_token is not None)
    assert (model.pooling.template_prefix_length, model.pooling.template_suffix_length) == (
        (lead, 0) if lead else (None, None)
    )
    model.save_pretrained(tmp_path / "out")
    tokenizer.save_pretrained(tmp_path / "out")
    reloaded = SentenceEncoder.from_pretrained(tmp_path / "out", device="cpu")
    assert reloaded.model.pooling.template_prefix_length == (lead or None)
    use_eos_for_padding(tokenizer)
    right = tokenizer(TEXTS, padding=True, padding_side="right", return_tensors="pt")
    left = tokenizer(TEXTS, padding=True, padding_side="left", return_tensors="pt")
    with torch.no_grad():
        assert close(model(**left).embeddings, model(**right).embeddings)


# --- Echo embeddings (echo_embeddings.py), one text at a time -------------------------------------------------------


def echo_parse(tokenizer: Any, template: str, text: str, max_length: int | None = None) -> dict[str, torch.Tensor]:
    """``EchoParser._parse_template`` and ``_tokenize_from_pieces`` for one text (``x = {"text": text}``), the
    tokenizer called without special tokens, as ``AutoTokenizer.from_pretrained(path, add_bos_token=False,
    add_eos_token=False)`` loads it."""
    matches = list(re.finditer(r"\{(.|\n|\r|\t)+?\}", template))
    template_pieces = []
    for i, m in enumerate(matches):
        template_pieces.append(template[: m.start()] if i == 0 else template[matches[i - 1].end() : m.start()])
        template_pieces.append(m.group())
    template_pieces.append(template[matches[-1].end() :])
    template_pieces = [t for t in template_pieces if t]
    tokenized_pieces: list[Any] = []
    for piece in template_pieces:
        if piece.startswith("{") and piece.endswith("}"):
            tokenized_pieces.append(piece[1:-1])
        else:
            tokenized_pieces.append(tokenizer(piece, add_special_tokens=False)["input_ids"])
    parts = []
    for piece in tokenized_pieces:
        if isinstance(piece, str):
            value = 1
            if piece.startswith("!"):
                piece, value = piece[1:], 0
            piece = piece.replace("%%text%%", text)
            ids = tokenizer(piece, add_special_tokens=False)["input_ids"]
            ids = ids[:max_length] if max_length is not None else ids
            parts.append((ids, [value] * len(ids)))
        else:
            ids = piece[:max_length] if max_length is not None else piece
            parts.append((ids, [0] * len(ids)))
    return {
        "input_ids": torch.tensor([i for ids, _ in parts for i in ids]),
        "embed_mask": torch.tensor([m for _, mask in parts for m in mask]),
    }


def echo_embeddings(folder: Path, texts: list[str], strategy: str, max_length: int | None = None) -> torch.Tensor:
    """``EchoPooling(strategy)(EchoEmbeddingsMistral(model)(parser(...)))`` on the released document template, with
    this tokenizer's BOS and EOS for ``<s>`` and ``</s>`` (Qwen's tokenizer has no BOS: none written)."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    template = (
        f"{tokenizer.bos_token or ''}Document:{{!%%text%%}}\nDocument again:{{%%text%%}}{{{tokenizer.eos_token}}}"
    )
    model = plain_model(folder)
    pooled = []
    for text in texts:
        parsed = echo_parse(tokenizer, template, text, max_length)
        with torch.no_grad():
            token_embeddings = model(input_ids=parsed["input_ids"][None]).last_hidden_state
        embed_mask = parsed["embed_mask"][None]
        if strategy == "mean":
            out = torch.sum(token_embeddings * embed_mask.unsqueeze(-1), dim=1) / torch.sum(
                embed_mask, dim=1
            ).unsqueeze(-1)
        else:
            last = int((embed_mask[0] == 1).nonzero(as_tuple=True)[0].max())
            out = token_embeddings[:, last]
        pooled.append(out[0])
    return torch.stack(pooled)


@pytest.mark.parametrize("strategy", ["mean", "last"])
@pytest.mark.parametrize("family", FAMILIES)
def test_echo_is_the_released_echo_embeddings(family: str, strategy: str, family_dirs: dict[str, Path]) -> None:
    """The released parser's ids for the document template, and its pooling over the second copy and ``</s>``;
    the first copy's mean is another embedding."""
    folder = family_dirs[family]
    pooling = PoolingConfig(pooler="echo", pooler_kwargs={"strategy": strategy})
    tokenizer = AutoTokenizer.from_pretrained(folder)
    rows = SentenceTokenizer(tokenizer, pooling)(TEXTS)["input_ids"]
    assert rows == [echo_parse(tokenizer, _released(tokenizer), text)["input_ids"].tolist() for text in TEXTS]
    got = encode(folder, pooling, TEXTS)
    assert close(got, echo_embeddings(folder, TEXTS, strategy))
    if strategy == "mean":
        whole = encode(folder, PoolingConfig(pooler="avg", pooler_kwargs={"tokens": "all"}), TEXTS)
        assert relative_difference(got, whole) > 1e-3


def _released(tokenizer: Any) -> str:
    return f"{tokenizer.bos_token or ''}Document:{{!%%text%%}}\nDocument again:{{%%text%%}}{{{tokenizer.eos_token}}}"


@pytest.mark.parametrize("family", FAMILIES)
def test_echo_truncation_cuts_both_copies_alike_and_keeps_the_template(
    family: str, family_dirs: dict[str, Path]
) -> None:
    """Each copy keeps ``(max_seq_length - template tokens) // 2`` of the sentence's tokens, as the released parser
    cuts each copy at its ``max_length``: the same embedding as the released code at that ``max_length`` (one no
    shorter than the template's own pieces, which the released parser cuts too)."""
    folder = family_dirs[family]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    pooling = PoolingConfig(pooler="echo")
    long_text = "A man is playing a guitar. " * 4
    fixed = len(echo_parse(tokenizer, _released(tokenizer), "")["input_ids"])
    for limit in (fixed + 10, fixed + 17):
        (row,) = SentenceTokenizer(tokenizer, pooling, limit)([long_text])["input_ids"]
        per_copy = (limit - fixed) // 2
        assert row == echo_parse(tokenizer, _released(tokenizer), long_text, per_copy)["input_ids"].tolist()
        got = encode(folder, pooling, [long_text], max_seq_length=limit)
        assert close(got, echo_embeddings(folder, [long_text], "mean", per_copy))


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"template": "{sentence} once"}, "must contain {sentence} exactly twice (found 1)"),
        ({"template": "{sentence} and {sentence} after"}, "must end with its second {sentence}"),
        ({"strategy": "max"}, "echo's strategy must be one of mean, last, got 'max'"),
    ],
)
def test_an_echo_setting_it_cannot_use_is_one_line(kwargs: dict[str, str], said: str) -> None:
    with pytest.raises(ValueError) as error:
        PoolingConfig(pooler="echo", pooler_kwargs=kwargs)
    assert said in str(error.value) and "\n" not in str(error.value)


def test_a_tokens_setting_that_is_no_choice_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"avg pooler's tokens must be one of all, sentence .* got 'bos'"):
        PoolingConfig(pooler="avg", pooler_kwargs={"tokens": "bos"})


@pytest.mark.parametrize("pooler", ["avg", "weighted_mean"])
@pytest.mark.parametrize("family", FAMILIES)
def test_the_cards_transformers_code_gives_the_decoder_means(
    family: str, pooler: str, family_dirs: dict[str, Path], tmp_path: Path
) -> None:
    folder = tmp_path / "out"
    model = CSEModel.from_pretrained(family_dirs[family], pooling=PoolingConfig(pooler=pooler)).double()
    tokenizer = AutoTokenizer.from_pretrained(family_dirs[family])
    with torch.no_grad():
        expected = model.eval()(**SentenceTokenizer(tokenizer, model.pooling).batch(TEXTS)).embeddings
    model.float().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    code = transformers_snippet(str(folder), model.pooling).split("```python\n")[1].split("```")[0]
    code = re.sub(r"^sentences = .*$", f"sentences = {TEXTS!r}", code, count=1, flags=re.M)
    namespace: dict[str, Any] = {}
    exec(code.replace(".eval()", ".double().eval()"), namespace)  # noqa: S102 - the card's own snippet
    assert close(namespace["embeddings"], expected)


def test_the_default_echo_template_is_the_released_document_template() -> None:
    released = "<s>Document:{!%%text%%}\nDocument again:{%%text%%}{</s>}"
    ours = ECHO_TEMPLATE.replace("[BOS]", "<s>").replace("[EOS]", "{</s>}")
    assert ours.replace("{sentence}", "{!%%text%%}", 1).replace("{sentence}", "{%%text%%}") == released
    assert set(ARCHITECTURES) == set(FAMILIES)
