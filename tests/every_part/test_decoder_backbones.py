"""Every registered objective and every pooler that applies, on tiny random Qwen3, Llama and Gemma 3 text models
(issue 37, item 6): 2 training steps from ``run_unsup.py``, and a saved root that loads in ``AutoModel`` with
exactly the trained weights and in sentence-transformers with hf_cse's embeddings (bidirectional Gemma and a LoRA
run's merged model included).

The grid: each objective on each architecture with the pooler it is meant for on a decoder (``last_token``; the
prompt objectives under templates: ``mask`` where the tokenizer has a mask token, PromptEOL's ``prompt_last_token``
elsewhere), and SimCSE with every pooler that applies on each architecture (those that see the whole sentence under
causal attention and whose tokenizer needs are met).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from common.decoder_runs import HAS_MASK_TOKEN, objective_pooler, train
from conftest import DECODER_ARCHITECTURES, SENTENCES, save_tiny_decoder
from safetensors.torch import load_file
from transformers import AutoModel

from hf_cse import OBJECTIVES, POOLERS, SentenceEncoder
from hf_cse.errors import UsageError
from hf_cse.export.sentence_transformers_files import expresses
from hf_cse.modeling.configuration_cse import PoolingConfig

FLOAT64_EPS = torch.finfo(torch.float64).eps
FLOAT32_EPS = torch.finfo(torch.float32).eps


def applicable_poolers(architecture: str) -> list[str]:
    """The registered poolers that see the whole sentence on a causal decoder and whose tokenizer needs are met."""
    return [
        name
        for name, pooler in POOLERS.items()
        if not pooler.needs_bidirectional_attention and (HAS_MASK_TOKEN[architecture] or not pooler.needs_mask_token)
    ]


GRID = [
    (objective, architecture, *objective_pooler(objective, architecture))
    for objective in sorted(OBJECTIVES)
    for architecture in DECODER_ARCHITECTURES
] + [
    ("simcse", architecture, pooler, {})
    for architecture in DECODER_ARCHITECTURES
    for pooler in applicable_poolers(architecture)
    if pooler != "last_token"
]


def assert_loads_as_trained(out: Path) -> None:
    """``AutoModel`` finds exactly the saved weights (none missing, none unexpected) and sentence-transformers, where
    it can express the pooler, gives hf_cse's embeddings. Both models run in float64 and encode in other batches and
    paddings, so they may differ by float64 rounding (bounded by 2^10 ulps of the embeddings' scale), plus the one
    float32 rounding of ``SentenceEncoder.encode``'s output (half a float32 ulp of each value): far below any
    difference of weights or pooling (the tiny model's states are of order 1)."""
    model, loading = AutoModel.from_pretrained(out, output_loading_info=True)
    assert {key: value for key, value in loading.items() if value} == {}
    saved = load_file(out / "model.safetensors")
    assert all(torch.equal(tensor, saved[f"model.{name}"]) for name, tensor in model.state_dict().items())
    # Loaded in float64 as sentence-transformers loads it: ``.double()`` would also cast the float32 rotary buffers.
    encoder = SentenceEncoder.from_pretrained(out, device="cpu", dtype=torch.float64)
    expected = encoder.encode(SENTENCES)
    if not expresses(encoder.model.pooling):  # the folder stops sentence-transformers in one line
        assert "hf_cse:" in (out / "1_Pooling" / "config.json").read_text(encoding="utf-8")
        return
    sentence_transformers = pytest.importorskip("sentence_transformers")
    st_model = sentence_transformers.SentenceTransformer(str(out), device="cpu", model_kwargs={"dtype": torch.float64})
    got = torch.as_tensor(st_model.encode(SENTENCES, convert_to_numpy=True, batch_size=5))
    bound = FLOAT32_EPS / 2 * expected.abs() + 2**10 * FLOAT64_EPS * expected.abs().max()
    assert ((got - expected).abs() <= bound).all()


@pytest.mark.parametrize(
    ("objective", "architecture", "pooler", "kwargs"), GRID, ids=[f"{o}-{a}-{p}" for o, a, p, _ in GRID]
)
def test_every_objective_and_pooler_trains_on_a_decoder_and_loads_as_trained(
    objective: str,
    architecture: str,
    pooler: str,
    kwargs: dict,
    tiny_decoder_dirs: dict[str, Path],
    tmp_path: Path,
) -> None:
    out = train(tmp_path, tiny_decoder_dirs[architecture], objective, pooler, kwargs)
    state = json.loads((out / "trainer_state.json").read_text())
    logged = [entry[f"loss_{objective}"] for entry in state["log_history"] if f"loss_{objective}" in entry]
    assert len(logged) == 2 and all(math.isfinite(loss) for loss in logged)
    before = AutoModel.from_pretrained(tiny_decoder_dirs[architecture]).state_dict()
    after = AutoModel.from_pretrained(out).state_dict()
    assert any(not torch.equal(before[name], after[name]) for name in before)
    assert_loads_as_trained(out)


def test_the_grid_covers_every_objective_and_every_applicable_pooler() -> None:
    assert {objective for objective, *_ in GRID} == set(OBJECTIVES)
    for architecture in DECODER_ARCHITECTURES:
        assert {p for _, a, p, _ in GRID if a == architecture} == set(applicable_poolers(architecture))


@pytest.mark.parametrize("architecture", [a for a in DECODER_ARCHITECTURES if not HAS_MASK_TOKEN[a]])
def test_the_mask_pooler_on_a_tokenizer_without_a_mask_token_names_the_missing_piece(
    architecture: str, tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="needs a tokenizer with a mask token") as error:
        train(tmp_path, tiny_decoder_dirs[architecture], "promptbert", "mask", {})
    assert "\n" not in str(error.value)


def test_a_second_template_with_a_mask_under_prompteol_is_one_line(
    tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """OssCSE's default second template is PromptBERT's ([MASK]): PromptEOL's pooler reads no mask."""
    with pytest.raises(ValueError, match=r"holds \[MASK\], the mask pooler's placeholder"):
        train(tmp_path, tiny_decoder_dirs["qwen3"], "osscse", "prompt_last_token", {})


def test_bidirectional_gemma_loads_as_trained(tiny_decoder_dirs: dict[str, Path], tmp_path: Path) -> None:
    out = train(tmp_path, tiny_decoder_dirs["gemma3_text"], "simcse", "avg", {}, bidirectional=True)
    assert AutoModel.from_pretrained(out).config.use_bidirectional_attention is True
    assert_loads_as_trained(out)


def test_a_decoder_without_sdpa_trains_with_eager_attention_and_loads_as_trained(tmp_path: Path) -> None:
    """Gemma 2 has no SDPA kernel in transformers: the run takes its eager attention, as AutoModel does."""
    model_dir = save_tiny_decoder(tmp_path / "gemma2", "gemma2")
    out = train(tmp_path, model_dir, "simcse", "avg", {})
    assert AutoModel.from_pretrained(out).config._attn_implementation == "eager"
    assert_loads_as_trained(out)


@pytest.mark.parametrize("architecture", DECODER_ARCHITECTURES)
def test_a_lora_run_merges_every_projection_and_loads_as_trained(
    architecture: str, tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    out = train(tmp_path, tiny_decoder_dirs[architecture], "simcse", "last_token", {}, lora_r=4, lora_alpha=8)
    adapter = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert set(adapter["target_modules"]) == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }
    assert_loads_as_trained(out)


def test_the_prompteol_card_says_sentence_transformers_cannot_express_it_and_gives_transformers_code(
    tiny_decoder_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """The card's plain-transformers code, run as written but in float64 (its model loaded from the folder), gives
    hf_cse's embeddings within the bound of :func:`assert_loads_as_trained`."""
    out = train(tmp_path, tiny_decoder_dirs["llama"], "simcse", "prompt_last_token", {})
    card = (out / "README.md").read_text()
    assert "sentence-transformers cannot express the `prompt_last_token` pooler" in card
    code = card.split("```python\n")[1].split("```")[0]
    assert 'padding_side="right"' in code and ".eval()" in code
    namespace: dict[str, Any] = {}
    exec(code.replace(".eval()", ".double().eval()"), namespace)  # noqa: S102 - the card's own snippet
    encoder = SentenceEncoder.from_pretrained(out, device="cpu")
    encoder.model.double()
    expected = encoder.encode(namespace["sentences"])
    got = namespace["embeddings"]
    bound = FLOAT32_EPS / 2 * expected.abs() + 2**10 * FLOAT64_EPS * expected.abs().max()
    assert got.dtype == torch.float64 and ((got - expected).abs() <= bound).all()


def test_an_unknown_pooler_setting_of_prompteol_is_one_line() -> None:
    with pytest.raises((ValueError, UsageError), match="does not take pooler_kwargs"):
        PoolingConfig(pooler="prompt_last_token", pooler_kwargs={"prompt": "x {sentence}"})
