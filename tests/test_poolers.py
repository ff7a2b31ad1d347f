"""The pooler registry: every built-in pooler is a registered class whose declarations the model, the
sentence-transformers files and the card read; a user's pooler (the README's example), defined in a module outside
the package, trains, saves, reloads in ``AutoModel``, hf_cse and sentence-transformers, gets a card whose code runs,
and loads in the commands through ``--import_module``; one that sentence-transformers cannot express gets a
``modules.json`` that stops sentence-transformers in one line, and a card that says so.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from conftest import REPO_ROOT, SENTENCES, run_unsup, training_args, write_config, write_stsb_dev, write_train_file
from datasets import Dataset
from markdown_it import MarkdownIt
from transformers import AutoModel, AutoTokenizer

import hf_cse
from hf_cse import CSEModel, CSETrainer, Pooler, PoolingConfig, SentenceEncoder, build_objective, register_pooler
from hf_cse.commands.eval import main as eval_main
from hf_cse.commands.push import main as push_main
from hf_cse.errors import UsageError
from hf_cse.export.model_card import render_card_from_summary, summarize_training
from hf_cse.export.sentence_transformers_files import write_sentence_transformers_files
from hf_cse.inputs.complementary import ComplementarySimilarities
from hf_cse.modeling.poolers import (
    ECHO_CITATION,
    LLM2VEC_CITATION,
    PROMPTBERT_CITATION,
    PROMPTEOL_CITATION,
    masked_mean,
)
from hf_cse.modeling.tokenization import SentenceTokenizer
from hf_cse.registry import POOLERS
from hf_cse.training.record.run_arguments import training_arguments_record

SAVED_POOLING_LOGGER = "hf_cse.modeling.saved_pooling"
BUILT_IN = [
    "cls",
    "cls_before_pooler",
    "avg",
    "avg_first_last",
    "avg_top2",
    "weighted_mean",
    "mask",
    "last_token",
    "prompt_last_token",
    "echo",
]


def readme_pooler_example() -> str:
    """The docs' worked example of a user pooler (``max_tokens``, examples/python/my_poolers.py), as printed."""
    return (REPO_ROOT / "examples" / "python" / "my_poolers.py").read_text(encoding="utf-8")


# A user's module, written outside the package and imported by name, as `run_unsup.py --import_module my_poolers`
# does: the README's `max_tokens` declares sentence-transformers' "max" mode and plain-transformers code; `layer_mean`
# (every layer's mean) declares neither, and a paper.
LAYER_MEAN = '''

from hf_cse.modeling.poolers import masked_mean

LAYER_MEAN_CITATION = """@misc{someone2026layers,
    title = "Every Layer Counts",
    author = "Someone, A.",
    year = "2026",
}"""


@register_pooler("layer_mean")
class LayerMean(Pooler):
    """The mean over tokens of the average of the last ``layers`` transformer layers' outputs (all by default)."""

    needs_all_layers = True
    citations = (LAYER_MEAN_CITATION,)
    description = "the mean over tokens of every layer's average"

    def __init__(self, layers: int | None = None) -> None:
        self.layers = layers

    def pool(self, inputs: PoolerInputs, model) -> torch.Tensor:
        layers = torch.stack(inputs.hidden_states[1:][-(self.layers or len(inputs.hidden_states)) :]).mean(dim=0)
        return masked_mean(layers, inputs.attention_mask)
'''


@pytest.fixture
def user_poolers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """``my_poolers`` imported from a folder outside the package; its poolers are unregistered afterwards (the
    registry is restored), so no other test sees them."""
    folder = tmp_path / "user_code"
    folder.mkdir()
    (folder / "my_poolers.py").write_text(readme_pooler_example() + LAYER_MEAN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(POOLERS, "_classes", dict(POOLERS._classes))
    yield importlib.import_module("my_poolers")
    sys.modules.pop("my_poolers", None)


def python_blocks(card: str) -> list[str]:
    return [t.content for t in MarkdownIt().parse(card) if t.type == "fence" and t.info == "python"]


def test_the_built_in_poolers_are_registered_classes_in_their_order() -> None:
    assert list(POOLERS) == BUILT_IN and hf_cse.POOLERS is POOLERS
    assert "avg" in hf_cse.POOLERS and "mean" not in hf_cse.POOLERS
    assert all(issubclass(POOLERS[name], Pooler) and POOLERS[name].name == name for name in POOLERS)
    declared = {
        name: (
            POOLERS[name].needs_all_layers,
            POOLERS[name].mlp_head,
            POOLERS[name].uses_prompt_template,
            POOLERS[name].needs_mask_token,
            POOLERS[name].needs_bidirectional_attention,
            POOLERS[name].sentence_transformers_mode,
        )
        for name in POOLERS
    }
    assert declared == {
        "cls": (False, True, False, False, True, "cls"),
        "cls_before_pooler": (False, False, False, False, True, "cls"),
        "avg": (False, False, False, False, False, "mean"),
        "avg_first_last": (True, False, False, False, False, None),
        "avg_top2": (True, False, False, False, False, None),
        "weighted_mean": (False, False, False, False, False, "weightedmean"),
        "mask": (False, False, True, True, False, None),
        "last_token": (False, False, False, False, False, "lasttoken"),
        "prompt_last_token": (False, False, True, False, False, None),
        "echo": (False, False, True, False, False, None),
    }
    cited = {"mask": PROMPTBERT_CITATION, "prompt_last_token": PROMPTEOL_CITATION}
    cited |= {"weighted_mean": LLM2VEC_CITATION, "echo": ECHO_CITATION}
    assert {name: POOLERS[name].citations for name in cited} == {name: (bib,) for name, bib in cited.items()}
    assert all(POOLERS[name].citations == () for name in BUILT_IN if name not in cited)


@pytest.mark.parametrize("name", BUILT_IN)
def test_the_model_runs_the_encoder_as_the_pooler_declares(
    name: str, tiny_encoder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every layer's output only for a pooler that needs them (they cost memory); embeddings ``[B, H]``."""
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler=name)).eval()
    batch = SentenceTokenizer(AutoTokenizer.from_pretrained(tiny_encoder_dir), model.pooling).batch(SENTENCES[:3])
    calls: list[bool] = []
    forward = model.encoder_model.forward
    monkeypatch.setattr(
        model.encoder_model,
        "forward",
        lambda *args, **kwargs: calls.append(kwargs["output_hidden_states"]) or forward(*args, **kwargs),
    )
    with torch.no_grad():
        embeddings = model(**batch).embeddings
    assert calls == [POOLERS[name].needs_all_layers] and embeddings.shape == (3, model.config.hidden_size)


def test_an_unknown_pooler_lists_the_registered_ones_and_a_checkpoint_names_how_to_register_it(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(
        ValueError, match=re.escape(f"Unknown pooler 'nope'; valid poolers are: {', '.join(BUILT_IN)}.")
    ):
        PoolingConfig(pooler="nope")
    with pytest.raises(
        ValueError,
        match=re.escape("Unknown pooler 'lasttoken' (sentence-transformers' name: hf_cse's is last_token); valid"),
    ):
        PoolingConfig(pooler="lasttoken")
    out = tmp_path / "out"
    CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="avg")).save_pretrained(out)
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    config["hf_cse"]["pooler"] = "gone"
    (out / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for load in (CSEModel.from_pretrained, SentenceEncoder.from_pretrained):
        with pytest.raises(UsageError) as raised:
            load(out)
        message = str(raised.value)
        assert "\n" not in message and f"Pooler 'gone' of the config.json of '{out}' is not registered" in message
        assert "hf_cse.register_pooler" in message and "--import_module MODULE" in message
    assert type(AutoModel.from_pretrained(out)).__name__ == "BertModel"  # the encoder needs no hf_cse


def test_a_user_pooler_trains_saves_reloads_and_gets_a_card(
    user_poolers: ModuleType, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    tokenizer = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    torch.manual_seed(0)
    trainer = CSETrainer(
        model=CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="max_tokens")),
        args=training_args(out, max_steps=3),
        train_dataset=Dataset.from_dict({"text": SENTENCES}),
        processing_class=tokenizer,
    )
    model = trainer.model
    before = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
    trainer.train()
    assert model.mlp is None  # no SimCSE head: the pooler does not declare one
    assert all(not torch.equal(before[name], p) for name, p in model.named_parameters() if p.requires_grad)
    trainer.save_model()
    trainer.create_model_card()
    expected = SentenceEncoder(model, tokenizer).encode(SENTENCES)

    # The saved config names the pooler; plain AutoModel loads the trained encoder, every weight equal.
    assert json.loads((out / "config.json").read_text(encoding="utf-8"))["hf_cse"]["pooler"] == "max_tokens"
    plain = AutoModel.from_pretrained(out).eval()  # no trust_remote_code
    trained = model.encoder_model.state_dict()
    assert plain.state_dict().keys() == trained.keys()
    assert all(torch.equal(value, trained[key]) for key, value in plain.state_dict().items())
    # The embedding is the max over real tokens, computed here from AutoModel's own output.
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = plain(**batch).last_hidden_state
    padding = batch["attention_mask"].unsqueeze(-1) == 0
    torch.testing.assert_close(expected, hidden.masked_fill(padding, -1e9).amax(dim=1), atol=1e-5, rtol=1e-5)

    # hf_cse reloads it with the pooler from the registry.
    assert CSEModel.from_pretrained(out).pooling.pooler == "max_tokens"
    torch.testing.assert_close(SentenceEncoder.from_pretrained(out, device="cpu").encode(SENTENCES), expected)

    # sentence-transformers builds Transformer -> Pooling("max") from the written files and encodes the same.
    pooling_config = json.loads((out / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
    assert [key for key, value in pooling_config.items() if value is True] == ["pooling_mode_max_tokens"]
    sentence_transformers = pytest.importorskip("sentence_transformers")
    st_model = sentence_transformers.SentenceTransformer(str(out), device="cpu")
    torch.testing.assert_close(torch.as_tensor(st_model.encode(SENTENCES)), expected, atol=1e-5, rtol=1e-5)

    # The card names the pooler and what it computes; its three snippets reproduce the embeddings.
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "Sentence embedding: `max_tokens` pooler: the maximum over the sentence's tokens of the last layer." in card
    assert "library_name: sentence-transformers" in card and "cannot express" not in card
    assert f"python -m hf_cse.eval --model_name_or_path {out} --import_module my_poolers --sts_dir" in card
    transformers_code, st_code, hf_cse_code = python_blocks(card)
    namespace: dict[str, Any] = {}
    exec(re.sub(r"^sentences = .*$", f"sentences = {SENTENCES!r}", transformers_code, flags=re.M), namespace)  # noqa: S102
    torch.testing.assert_close(namespace["embeddings"], expected, atol=1e-5, rtol=1e-5)
    exec(re.sub(r"model\.encode\(.*\)", f"model.encode({SENTENCES!r})", st_code), namespace)  # noqa: S102
    torch.testing.assert_close(torch.as_tensor(namespace["embeddings"]), expected, atol=1e-5, rtol=1e-5)
    assert hf_cse_code.startswith("import my_poolers  # registers the 'max_tokens' pooler")
    exec(re.sub(r"encoder\.encode\(.*\)", f"encoder.encode({SENTENCES!r})", hf_cse_code), namespace)  # noqa: S102
    torch.testing.assert_close(namespace["embeddings"], expected)


def test_a_saved_user_pooler_loads_only_once_its_module_is_imported(
    user_poolers: ModuleType, tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="max_tokens")).save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_encoder_dir).save_pretrained(out)
    with monkeypatch.context() as not_imported:  # as in a fresh process that has not imported my_poolers
        not_imported.delitem(POOLERS._classes, "max_tokens")
        with pytest.raises(
            UsageError, match="Pooler 'max_tokens' of the config.json of .* is not registered; registered poolers"
        ):
            SentenceEncoder.from_pretrained(out, device="cpu")
    assert SentenceEncoder.from_pretrained(out, device="cpu").model.pooling.pooler == "max_tokens"


def test_a_pooler_sentence_transformers_cannot_express_gets_no_files_and_a_card_that_says_so(
    user_poolers: ModuleType, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="layer_mean")).eval()
    tokenizer = SentenceTokenizer(AutoTokenizer.from_pretrained(tiny_encoder_dir), model.pooling)
    batch = tokenizer.batch(SENTENCES[:4])
    with torch.no_grad():
        layers = model.encoder_model(**batch, output_hidden_states=True).hidden_states
        embeddings = model(**batch).embeddings
    torch.testing.assert_close(embeddings, masked_mean(torch.stack(layers[1:]).mean(0), batch["attention_mask"]))

    (tmp_path / "2_Dense").mkdir()  # an earlier save's files are removed
    assert not write_sentence_transformers_files(tmp_path, model, tokenizer.max_seq_length)
    assert not (tmp_path / "2_Dense").exists()
    assert "hf_cse:layer_mean" in (tmp_path / "1_Pooling" / "config.json").read_text(encoding="utf-8")

    args = training_arguments_record(training_args(tmp_path / "out"))
    summary = summarize_training(model.pooling, args, build_objective("simcse"), {}, [], base_model="tiny")
    card = render_card_from_summary(summary, "someone/tiny-layer-mean")
    assert "`layer_mean` pooler: the mean over tokens of every layer's average" in card
    assert "library_name: transformers" in card and "- sentence-transformers" not in card
    # The poolers that declare a mode.
    supported = "`cls`, `cls_before_pooler`, `avg`, `weighted_mean`, `last_token`, `max_tokens`"
    assert (
        f"sentence-transformers cannot express the `layer_mean` pooler as this model uses it (it expresses {supported}"
        in card
    )
    assert "The `layer_mean` pooler (`my_poolers.LayerMean`) gives no plain-transformers code; use hf_cse" in card
    assert "With transformers (reproduces" not in card
    assert user_poolers.LAYER_MEAN_CITATION in card  # the pooler's paper, after the objective's
    (hf_cse_code,) = python_blocks(card)
    assert hf_cse_code.startswith("import my_poolers  # registers the 'layer_mean' pooler")


def test_a_pooler_declaring_a_mode_sentence_transformers_lacks_is_a_one_line_error(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(POOLERS, "_classes", dict(POOLERS._classes))

    @register_pooler("median_tokens")
    class MedianTokens(Pooler):
        sentence_transformers_mode = "median"

        def pool(self, inputs: Any, model: Any) -> torch.Tensor:
            return inputs.last_hidden_state.median(dim=1).values

    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="median_tokens"))
    with pytest.raises(ValueError, match="Pooler 'median_tokens' declares sentence_transformers_mode='median'; ") as e:
        write_sentence_transformers_files(tmp_path, model, 32)
    assert "\n" not in str(e.value) and "modes are: cls, mean, max, mean_sqrt_len_tokens" in str(e.value)


def test_a_pooler_without_pool_says_what_to_implement(tiny_encoder_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(POOLERS, "_classes", dict(POOLERS._classes))
    register_pooler("unfinished")(type("Unfinished", (Pooler,), {}))
    model = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="unfinished"))
    batch = SentenceTokenizer(AutoTokenizer.from_pretrained(tiny_encoder_dir), model.pooling).batch(SENTENCES[:2])
    with pytest.raises(NotImplementedError, match=r"Unfinished must implement pool\(inputs, model\)"):
        model(**batch)


def test_the_encoder_commands_load_a_user_pooler_with_import_module(
    user_poolers: ModuleType, tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m hf_cse.eval`` (like ``hf_cse.transfer`` and ``hf_cse.report``) imports ``--import_module`` before
    it loads the checkpoint, and checks ``--pooler`` against the registry after."""
    out = tmp_path / "out"
    CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="max_tokens")).save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_encoder_dir).save_pretrained(out)
    argv = ["--model_name_or_path", str(out), "--sts_dir", str(write_stsb_dev(tmp_path / "sts")), "--tasks", "stsb"]
    argv += ["--stsb_split", "dev", "--device", "cpu", "--disable_tqdm"]
    registered = eval_main(argv)  # my_poolers imported (by the fixture), max_tokens registered
    assert registered["details"]["settings"]["pooler"] == "max_tokens"
    with monkeypatch.context() as fresh:  # as in a fresh process: my_poolers not imported, max_tokens not registered
        fresh.delitem(POOLERS._classes, "max_tokens")
        fresh.delitem(sys.modules, "my_poolers")
        with pytest.raises(UsageError, match="Pooler 'max_tokens' of the config.json of .* is not registered"):
            eval_main(argv)
        with pytest.raises(ValueError, match="Unknown pooler 'max_tokens'; valid poolers are: cls, "):
            eval_main([*argv, "--pooler", "max_tokens"])
        imported = eval_main([*argv, "--import_module", "my_poolers", "--pooler", "max_tokens"])
        assert sys.modules["my_poolers"] is not user_poolers  # imported again, by the flag
    assert imported["stsb"] == registered["stsb"] and imported["details"]["settings"]["pooler"] == "max_tokens"


@pytest.mark.parametrize(
    ("modes", "pooler", "level", "why"),
    [
        (
            {"pooling_mode_mean_tokens": True},
            "avg",
            logging.INFO,
            "and its sentence-transformers Pooling module (1_Pooling/config.json) pools with mean (pass a pooler to "
            "choose another).",
        ),
        (
            {"pooling_mode_lasttoken": True},
            "last_token",
            logging.INFO,
            "and its sentence-transformers Pooling module (1_Pooling/config.json) pools with lasttoken (pass a pooler "
            "to choose another).",
        ),
        (
            {"pooling_mode_max_tokens": True},
            "cls",
            logging.WARNING,
            "and its sentence-transformers pooling (1_Pooling/config.json: max) is none of hf_cse's poolers; pass a "
            "pooler to choose one.",
        ),
        (
            None,
            "cls",
            logging.INFO,
            "and it has no sentence-transformers Pooling module (pass a pooler to choose another).",
        ),
    ],
    ids=["mean", "lasttoken", "max", "no-modules-json"],
)
def test_every_loader_pools_a_checkpoint_without_hf_cse_settings_as_its_sentence_transformers_pooling_says(
    modes: dict[str, bool] | None,
    pooler: str,
    level: int,
    why: str,
    tiny_encoder_dir: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A sentence-transformers checkpoint (all-MiniLM-L6-v2: mean pooling) was pooled with cls unless --pooler said
    otherwise: 73.50 on STS-B test instead of its 82.03. Its 1_Pooling/config.json now decides, where neither a pooler
    nor hf_cse settings in its config.json do: in the commands, in ``SentenceEncoder.from_pretrained`` and for DCLR's
    complementary model (which only the commands did before); training's default (cls) is not this code's."""
    folder = tmp_path / "st_model"
    shutil.copytree(tiny_encoder_dir, folder)
    assert "hf_cse" not in json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if modes is not None:
        (folder / "1_Pooling").mkdir()
        settings = {"word_embedding_dimension": 32, "pooling_mode_cls_token": False, **modes}
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(settings), encoding="utf-8")
        modules = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        ]
        (folder / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    argv = ["--model_name_or_path", str(folder), "--sts_dir", str(write_stsb_dev(tmp_path / "sts")), "--tasks", "stsb"]
    argv += ["--stsb_split", "dev", "--device", "cpu", "--disable_tqdm"]
    with caplog.at_level(logging.INFO, logger=SAVED_POOLING_LOGGER):
        taken = eval_main(argv)
    said = [(record.levelno, record.getMessage()) for record in caplog.records if record.name == SAVED_POOLING_LOGGER]
    assert said == [(level, f"Pooling {str(folder)!r} with {pooler}: its config.json has no hf_cse settings, {why}")]
    assert taken["details"]["settings"]["pooler"] == pooler
    assert SentenceEncoder.from_pretrained(folder, device="cpu").model.pooling.pooler == pooler
    complementary = ComplementarySimilarities.from_pretrained(str(folder), SENTENCES[:4], device="cpu")
    assert complementary.encoder.model.pooling.pooler == pooler
    assert SentenceEncoder.from_pretrained(folder, pooler="avg_top2", device="cpu").model.pooling.pooler == "avg_top2"
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=SAVED_POOLING_LOGGER):
        assert eval_main([*argv, "--pooler", pooler])["stsb"] == taken["stsb"]  # the same scores as asked by flag
        assert eval_main([*argv, "--pooler", "avg_top2"])["details"]["settings"]["pooler"] == "avg_top2"
        # hf_cse settings in config.json outrank the sentence-transformers files, as before.
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        config["hf_cse"] = PoolingConfig(pooler="avg_first_last").to_dict()
        (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
        assert eval_main(argv)["details"]["settings"]["pooler"] == "avg_first_last"
    assert [record for record in caplog.records if record.name == SAVED_POOLING_LOGGER] == []


@pytest.mark.parametrize(("mode", "pooler"), [("mean", "avg"), ("cls", "cls"), ("lasttoken", "last_token")])
def test_a_checkpoint_sentence_transformers_itself_saved_is_pooled_as_it_pools(
    mode: str, pooler: str, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """sentence-transformers 6 writes its Pooling config as ``"pooling_mode": "mean"``, not the boolean keys of the
    releases before (which hf_cse writes and 6 still reads): hf_cse read only the old keys and pooled every model
    sentence-transformers 6 saved with cls (all-MiniLM-L6-v2 re-saved: 73.50 on STS-B test instead of 82.03). The
    folder here is what the installed sentence-transformers writes; the embeddings must equal its own. Its
    max_seq_length (5 tokens, shorter than the sentences) is read too: hf_cse truncated at the tokenizer's limit
    (all-MiniLM-L6-v2: 512 where sentence-transformers reads 256)."""
    from sentence_transformers import SentenceTransformer, models

    transformer = models.Transformer(str(tiny_encoder_dir), max_seq_length=5)
    pooling = models.Pooling(transformer.get_embedding_dimension(), pooling_mode=mode)
    model = SentenceTransformer(modules=[transformer, pooling], device="cpu")
    model.save_pretrained(str(tmp_path / "st"))
    # As all-MiniLM-L6-v2 ships (saved by sentence-transformers 2): max_seq_length in sentence_bert_config.json,
    # shorter than the tokenizer's own limit. sentence-transformers 6 writes the limit into the tokenizer's config.
    tokenizer_config = tmp_path / "st" / "tokenizer_config.json"
    tokenizer_config.write_text(json.dumps({**json.loads(tokenizer_config.read_text()), "model_max_length": 128}))
    (tmp_path / "st" / "sentence_bert_config.json").write_text('{"max_seq_length": 5, "do_lower_case": false}')
    model = SentenceTransformer(str(tmp_path / "st"), device="cpu")
    assert model.max_seq_length == 5
    encoder = SentenceEncoder.from_pretrained(tmp_path / "st", device="cpu")
    assert encoder.model.pooling.pooler == pooler
    assert encoder.sentence_tokenizer.max_seq_length == 5
    assert min(len(ids) for ids in encoder.sentence_tokenizer.tokenizer(SENTENCES[:4])["input_ids"]) > 5
    theirs = model.encode(SENTENCES[:4], convert_to_tensor=True)
    # One batch each, padded alike, the same float32 forward and pooling arithmetic: equal to the bit.
    assert torch.equal(encoder.encode(SENTENCES[:4]), theirs.cpu())


def test_run_unsup_trains_a_user_pooler_named_by_flag_after_import_module_and_push_renders_its_card(
    user_poolers: ModuleType, tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's command: ``--import_module my_poolers --pooler max_tokens``; ``hf_cse.push --import_module``."""
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), pooler="max_tokens")
    run_unsup.main(["--config", str(config), "--import_module", "my_poolers"])
    out = tmp_path / "out"
    assert json.loads((out / "config.json").read_text(encoding="utf-8"))["hf_cse"]["pooler"] == "max_tokens"
    assert "`max_tokens` pooler: the maximum over the sentence's tokens" in (out / "README.md").read_text("utf-8")
    assert (out / "modules.json").is_file()

    # hf_cse.push re-renders the card from the run's record, which names the pooler: it imports the module first.
    argv = [str(out), "--repo_id", "someone/tiny-max-tokens", "--dry_run"]
    with monkeypatch.context() as fresh:  # as in a fresh process
        fresh.delitem(POOLERS._classes, "max_tokens")
        fresh.delitem(sys.modules, "my_poolers")
        with pytest.raises(UsageError, match="Pooler 'max_tokens' of the saved hf_cse settings is not registered;"):
            push_main(argv)
        push_main([*argv, "--import_module", "my_poolers"])
        card = (out / "README.md").read_text("utf-8")
    assert "python -m hf_cse.push RUN_DIR --repo_id someone/tiny-max-tokens --import_module my_poolers" in card
    assert 'SentenceEncoder.from_pretrained("someone/tiny-max-tokens")' in card and "import my_poolers" in card


def test_a_user_poolers_own_settings_train_save_and_reload_with_it(
    user_poolers: ModuleType, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """``--pooler_kwargs`` reaches the pooler's constructor, is saved in ``config.json`` (only when set: a checkpoint
    without it stays readable by an hf_cse that predates it) and comes back with the checkpoint; a setting the pooler
    does not take, or a value JSON cannot hold, is one line."""
    config = write_config(tmp_path, tiny_encoder_dir, write_train_file(tmp_path, SENTENCES), pooler="layer_mean")
    run_unsup.main(["--config", str(config), "--import_module", "my_poolers", "--pooler_kwargs", '{"layers": 1}'])
    out = tmp_path / "out"
    assert json.loads((out / "config.json").read_text(encoding="utf-8"))["hf_cse"]["pooler_kwargs"] == {"layers": 1}
    encoder = SentenceEncoder.from_pretrained(out, device="cpu")
    assert encoder.model.pooling.pooler_kwargs == {"layers": 1}
    # The last layer only: the mean of the last hidden state, computed here from AutoModel's own output.
    tokenizer = AutoTokenizer.from_pretrained(out)
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = AutoModel.from_pretrained(out).eval()(**batch).last_hidden_state
    expected = user_poolers.masked_mean(hidden, batch["attention_mask"])
    torch.testing.assert_close(encoder.encode(SENTENCES), expected, atol=1e-5, rtol=1e-5)
    every_layer = CSEModel.from_pretrained(out, pooling=PoolingConfig(pooler="layer_mean")).eval()
    assert not torch.allclose(SentenceEncoder(every_layer, tokenizer).encode(SENTENCES), expected, atol=1e-3)
    assert "pooler_kwargs" not in PoolingConfig(pooler="layer_mean").to_dict()
    # Another pooler named when loading leaves the saved pooler's settings behind.
    assert SentenceEncoder.from_pretrained(out, pooler="avg", device="cpu").model.pooling.pooler_kwargs == {}

    with pytest.raises(ValueError, match="Pooler 'layer_mean' does not take pooler_kwargs {'depth': 2}: ") as err:
        PoolingConfig(pooler="layer_mean", pooler_kwargs={"depth": 2})
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="Pooler 'avg' does not take pooler_kwargs {'layers': 1}: "):
        PoolingConfig(pooler="avg", pooler_kwargs={"layers": 1})
    with pytest.raises(ValueError, match="pooler_kwargs must be a JSON object .*got {'layers': nan}"):
        PoolingConfig(pooler="layer_mean", pooler_kwargs={"layers": float("nan")})


@pytest.mark.parametrize(
    ("template", "method"),
    [(None, "(PromptEOL)"), ('Sum up "{sentence}" in a word:"', "(PromptEOL's method, another template)")],
    ids=["promptEOL", "another"],
)
def test_the_card_calls_only_promptEOLs_own_template_promptEOL(template: str | None, method: str) -> None:
    """A template of the user's was described on the card as "(PromptEOL)", a method whose numbers are for its own
    template."""
    pooling = PoolingConfig(
        pooler="prompt_last_token", pooler_kwargs={} if template is None else {"template": template}
    )
    description = pooling.get_pooler().describe(pooling)
    assert description.startswith("the last layer's state at the last token of the prompt `")
    assert description.endswith(f"` {method}")
