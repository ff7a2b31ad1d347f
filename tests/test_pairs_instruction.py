"""LLM2Vec's supervised stage (issue 52 item 4): an instruction before the anchors, left out of the mean, applied to
queries at encoding, saved as sentence-transformers' prompts. Checked against a naive reference that pools, sentence by
sentence, only the tokens after the instruction's own (float64), on BERT's WordPiece and on the decoder-style
tokenizers built in-process, right- and left-padded; through the training views of labelled pairs; after a save and a
reload, in hf_cse and in sentence-transformers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from common.commands import run_unsup_in_process
from common.decoder_tokenizers import FAMILIES, QUOTED_SENTENCES, save_decoder
from common.triplets import TRIPLETS, write_triplets
from conftest import SENTENCES, make_tiny_trainer, run_unsup, training_args, write_config, write_train_file
from datasets import Dataset
from rounding import AGREEMENT, assert_equal_up_to_float64_rounding
from transformers import AutoModel, AutoTokenizer

from hf_cse import CSEModel, CSETrainer, PoolingConfig, SentenceEncoder
from hf_cse.errors import UsageError
from hf_cse.export.sentence_transformers_files import write_sentence_transformers_files
from hf_cse.inputs.base import SENTENCES as SENTENCES_GROUP
from hf_cse.inputs.base import TrainingSetup
from hf_cse.inputs.labelled_pairs import INSTRUCTED_ANCHORS, POSITIVES, LabelledPairs, negative_column
from hf_cse.modeling.tokenization import SentenceTokenizer
from hf_cse.objectives import build_objective

INSTRUCTION = "Given a premise, retrieve a hypothesis that is entailed by the premise;\n"
"""LLM2Vec's NLI instruction, ended by a newline: its ``"; "`` would join the space to the sentence's first word on the
decoder tokenizers (``▁A``), which hf_cse refuses
(:func:`test_an_instruction_the_tokenizer_joins_to_the_sentence_is_one_line`)."""
TEXTS = [*QUOTED_SENTENCES, *SENTENCES[:4]]
FLOAT32_ROUNDING = 2.0**-24
"""The largest relative change of rounding a float64 value to float32 (half of float32's epsilon): what
``SentenceEncoder.encode``'s float32 output adds to a float64 model's embedding."""
FOLDERS = ("bert", *FAMILIES)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory, tiny_encoder_dir: Path) -> dict[str, Path]:
    made = {family: save_decoder(tmp_path_factory.mktemp(f"instruction_{family}"), family) for family in FAMILIES}
    return {"bert": tiny_encoder_dir, **made}


def assert_matches(got: torch.Tensor, expected: torch.Tensor) -> None:
    """``got`` (float32 from ``encode``, or float64) equals the float64 ``expected`` up to float32 rounding of each
    value and float64 reordering (:data:`~rounding.AGREEMENT`), relative to the largest magnitude."""
    bound = (FLOAT32_ROUNDING + AGREEMENT) * float(expected.abs().max())
    assert float((got.double() - expected).abs().max()) <= bound


def naive_embeddings(folder: Path, texts: list[str], instruction: str, pooler: str) -> torch.Tensor:
    """Each text alone after ``instruction`` (one call, no padding) through the plain encoder in float64; the mean
    (``weighted_mean``: token ``i`` of the sentence weighted ``i``) over the tokens after the instruction's own ids,
    the instruction tokenized alone with the tokenizer's special tokens, less a trailing one (``[SEP]``), which the
    mean keeps as ``avg`` keeps it on BERT."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).double().eval()
    prefix = tokenizer(instruction)["input_ids"]
    if prefix[-1] in tokenizer.all_special_ids:
        prefix = prefix[:-1]
    rows = []
    for text in texts:
        ids = tokenizer(instruction + text)["input_ids"]
        assert ids[: len(prefix)] == prefix
        with torch.no_grad():
            states = model(input_ids=torch.tensor([ids])).last_hidden_state[0, len(prefix) :]
        weights = torch.ones(len(states), dtype=torch.float64)
        if pooler == "weighted_mean":
            weights = torch.arange(1, len(states) + 1, dtype=torch.float64)
        rows.append((states * weights[:, None]).sum(0) / weights.sum())
    return torch.stack(rows)


def float64_encoder(folder: Path, **settings: Any) -> SentenceEncoder:
    pooling = PoolingConfig(instruction=INSTRUCTION, **{"pooler": "avg", **settings})
    model = CSEModel.from_pretrained(folder, pooling=pooling).double()
    return SentenceEncoder(model, AutoTokenizer.from_pretrained(folder))


@pytest.mark.parametrize("pooler", ["avg", "weighted_mean"])
@pytest.mark.parametrize("name", FOLDERS)
def test_queries_average_the_tokens_after_the_instruction_on_either_padding_side(
    name: str, pooler: str, folders: dict[str, Path]
) -> None:
    folder = folders[name]
    encoder = float64_encoder(folder, pooler=pooler)
    expected = naive_embeddings(folder, TEXTS, INSTRUCTION, pooler)
    assert_matches(encoder.encode(TEXTS, batch_size=4, prompt_name="query"), expected)
    tokenizer = encoder.prompt_tokenizer("query")
    if name != "bert":  # BERT numbers positions by column: left padding is another input there
        # Left-padded, as a caller padding a decoder's rows to the left would give them: each row's span counts its
        # real tokens, whichever side the padding is on.
        features = tokenizer(TEXTS)
        left = tokenizer.tokenizer.pad(
            [dict(zip(features, row, strict=True)) for row in zip(*features.values(), strict=True)],
            padding_side="left",
            return_tensors="pt",
        )
        assert not left["attention_mask"][:, 0].all()
        encoder.model.eval()
        with torch.no_grad():
            got = encoder.model(**left, template_lengths=torch.tensor([tokenizer.row_span]).expand(len(TEXTS), 2))
        assert_matches(got.embeddings, expected)
    # Documents are encoded as they are, the instruction nowhere.
    plain = SentenceEncoder(
        CSEModel.from_pretrained(folder, pooling=PoolingConfig(pooler=pooler)).double(), tokenizer.tokenizer
    )
    assert torch.equal(encoder.encode(TEXTS, prompt_name="document"), plain.encode(TEXTS))
    assert torch.equal(encoder.encode(TEXTS), plain.encode(TEXTS))


def test_instruct_positives_puts_the_instruction_before_documents_too(folders: dict[str, Path]) -> None:
    encoder = float64_encoder(folders["qwen"], instruct_positives=True)
    assert torch.equal(encoder.encode(TEXTS, prompt_name="document"), encoder.encode(TEXTS, prompt_name="query"))
    assert encoder.model.pooling.sentence_transformers_prompts() == {"query": INSTRUCTION, "document": INSTRUCTION}


@pytest.mark.parametrize("name", ["bert", "llama"])
def test_the_training_views_pool_anchors_as_queries_and_positives_as_documents(
    name: str, folders: dict[str, Path], tmp_path: Path
) -> None:
    """The stacked views of labelled pairs (anchors, positives, hard negatives in one forward pass, rows with and
    without the instruction side by side) give each row the embedding ``encode`` gives it."""
    folder = folders[name]
    encoder = float64_encoder(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    args = training_args(tmp_path, num_hard_negatives=1, max_seq_length=128)
    sentence_tokenizer = SentenceTokenizer(tokenizer, encoder.model.pooling)
    setup = TrainingSetup(args, encoder.model, tokenizer, sentence_tokenizer, build_objective("simcse"))
    provider = LabelledPairs(setup)
    anchors, positives, negatives = (TRIPLETS[column][:6] for column in ("sent0", "sent1", "hard_neg"))
    columns = {"text": anchors, "positive": positives, negative_column(1): negatives}
    batch = {SENTENCES_GROUP: sentence_tokenizer.batch(anchors)}
    for group, (column, group_tokenizer) in provider.token_groups.items():
        batch[group] = group_tokenizer.batch(columns[column])
    assert set(batch) == {SENTENCES_GROUP, INSTRUCTED_ANCHORS, POSITIVES, negative_column(1)}
    encoder.model.eval()
    with torch.no_grad():
        stacked = encoder.model(**provider.stack_views(batch, 3)).embeddings
    assert_matches(stacked[:6], encoder.encode(anchors, prompt_name="query").double())
    assert_matches(stacked[6:12], encoder.encode(positives).double())
    assert_matches(stacked[12:], encoder.encode(negatives).double())


def test_training_on_triplets_with_the_instruction_changes_the_parameters_and_differs_from_none(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    triplets = write_triplets(tmp_path / "nli.csv")
    params = {}
    for label, extra in (("instructed", {"instruction": INSTRUCTION}), ("plain", {})):
        run_dir = tmp_path / label
        run_dir.mkdir()
        config = write_config(
            run_dir, tiny_encoder_dir, triplets, pooler="avg", max_steps=2, max_seq_length=128, seed=0, **extra
        )
        run_unsup.main(["--config", str(config)])
        params[label] = CSEModel.from_pretrained(run_dir / "out").state_dict()
    before = CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="avg")).state_dict()
    trained = [key for key in before if key in params["instructed"]]
    assert any(not torch.equal(before[key], params["instructed"][key]) for key in trained)
    assert any(not torch.equal(params["plain"][key], params["instructed"][key]) for key in trained)
    saved = json.loads((tmp_path / "instructed" / "out" / "config.json").read_text())["hf_cse"]
    assert saved["instruction"] == INSTRUCTION
    prompts = json.loads((tmp_path / "instructed" / "out" / "config_sentence_transformers.json").read_text())
    assert prompts == {"prompts": {"query": INSTRUCTION, "document": ""}, "default_prompt_name": None}


@pytest.mark.parametrize("name", ["bert", "qwen"])
def test_a_saved_model_encodes_queries_alike_in_hf_cse_and_sentence_transformers(
    name: str, folders: dict[str, Path], tmp_path: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    encoder = float64_encoder(folders[name])
    queries = encoder.encode(TEXTS, prompt_name="query")
    documents = encoder.encode(TEXTS)
    encoder.model.save_pretrained(tmp_path)
    encoder.sentence_tokenizer.tokenizer.save_pretrained(tmp_path)
    assert write_sentence_transformers_files(tmp_path, encoder.model, encoder.sentence_tokenizer.max_seq_length)
    reloaded = SentenceEncoder.from_pretrained(tmp_path, device="cpu")
    reloaded.model.double()
    assert torch.equal(reloaded.encode(TEXTS, prompt_name="query"), queries)
    assert torch.equal(reloaded.encode(TEXTS), documents)
    theirs = SentenceTransformer(str(tmp_path), device="cpu").double()
    assert json.loads((tmp_path / "1_Pooling" / "config.json").read_text())["include_prompt"] is False
    expected = naive_embeddings(folders[name], TEXTS, INSTRUCTION, "avg")
    assert_matches(torch.as_tensor(theirs.encode_query(TEXTS, convert_to_tensor=True)), expected)
    assert_matches(torch.as_tensor(theirs.encode(TEXTS, prompt_name="query", convert_to_tensor=True)), expected)
    assert_matches(torch.as_tensor(theirs.encode(TEXTS, convert_to_tensor=True)), documents.double())


def test_weighted_mean_with_an_instruction_stops_sentence_transformers(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    """sentence-transformers' weightedmean weights the sentence's first token ``prompt length + 1``; LLM2Vec's
    weights it 1: the folder stops it in one line rather than embed otherwise."""
    encoder = float64_encoder(folders["qwen"], pooler="weighted_mean")
    assert not write_sentence_transformers_files(tmp_path, encoder.model, 64)
    assert not (tmp_path / "config_sentence_transformers.json").exists()


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"instruction": ""}, "instruction must be a non-blank text put before the anchors (or None), got ''."),
        ({"instruction": " \n"}, "instruction must be a non-blank text"),
        ({"instruction": 3}, "instruction must be a non-blank text put before the anchors (or None), got 3."),
        ({"instruction": INSTRUCTION, "pooler": "cls"}, "pooler='cls' cannot leave it out. Use pooler 'avg', "),
        ({"instruction": INSTRUCTION, "pooler": "mask"}, "pooler='mask' cannot leave it out."),
        ({"instruction": INSTRUCTION, "pooler": "last_token"}, "pooler='last_token' cannot leave it out."),
        ({"instruct_positives": True}, "instruct_positives=True needs an instruction to put before the positives."),
    ],
)
def test_an_instruction_a_setting_cannot_use_is_one_line(settings: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError) as error:
        PoolingConfig(**{"pooler": "avg", **settings})
    assert said in str(error.value) and "\n" not in str(error.value)


def test_an_unknown_prompt_name_is_one_line(folders: dict[str, Path]) -> None:
    encoder = float64_encoder(folders["bert"])
    with pytest.raises(UsageError, match=r"^prompt_name='queries' is no prompt of hf_cse's models; valid: 'query', "):
        encoder.encode(TEXTS, prompt_name="queries")


@pytest.mark.parametrize("family", FAMILIES)
def test_an_instruction_the_tokenizer_joins_to_the_sentence_is_one_line(family: str, folders: dict[str, Path]) -> None:
    """LLM2Vec's ``"; "`` before a sentence: the decoder tokenizers give ``▁A`` (``ĠA``) where the instruction alone
    ends in ``▁`` (``Ġ``), so the tokens sentence-transformers counts as the prompt's would take the sentence's first
    word; refused as the tokenizer is made (a probe sentence), not at the first batch."""
    pooling = PoolingConfig(pooler="avg", instruction=INSTRUCTION.replace(";\n", "; "))
    tokenizer = AutoTokenizer.from_pretrained(folders[family])
    with pytest.raises(UsageError, match="joins the end of the instruction") as error:
        SentenceTokenizer(tokenizer, pooling, prompt_name="query")
    assert "\n" not in str(error.value) and "a newline instead of a trailing space" in str(error.value)
    # BERT's WordPiece drops the space: the same instruction is whole there.
    SentenceTokenizer(AutoTokenizer.from_pretrained(folders["bert"]), pooling, prompt_name="query")


def test_a_sentence_with_no_token_after_the_instruction_is_one_line(folders: dict[str, Path]) -> None:
    encoder = float64_encoder(folders["qwen"])
    with pytest.raises(UsageError, match=r"^The sentence '' gives no token after the instruction"):
        encoder.encode(["a dog runs", ""], prompt_name="query")


def test_run_unsup_refuses_an_instruction_on_one_sentence_a_row(
    tiny_encoder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    train_file = write_train_file(tmp_path, SENTENCES)
    config = write_config(tmp_path, tiny_encoder_dir, train_file, pooler="avg", instruction=INSTRUCTION)
    status, line = run_unsup_in_process(monkeypatch, capsys, ["--config", str(config)])
    assert status != 0
    assert "goes before the anchors of labelled pairs" in line and "holds one sentence a row" in line


def test_csetrainer_refuses_an_instruction_on_one_sentence_a_row(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """The Python door says what run_unsup.py says: a dataset of one sentence a row has no anchors for it."""
    with pytest.raises(UsageError, match=r"^instruction=.* the training dataset holds one sentence a row"):
        make_tiny_trainer(tiny_encoder_dir, tmp_path / "out", pooling=PoolingConfig(pooler="avg", instruction="q: "))


def test_a_streamed_run_on_triplets_puts_the_instruction_before_its_anchors(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """The stream's batches carry the instructed anchors' token group as the in-memory ones do: a streamed run with the
    instruction trains to other weights than the same streamed run without it."""
    triplets = write_triplets(tmp_path / "nli.csv")
    params = {}
    for label, extra in (("instructed", {"instruction": INSTRUCTION}), ("plain", {})):
        run_dir = tmp_path / label
        run_dir.mkdir()
        values = {"pooler": "avg", "max_steps": 2, "max_seq_length": 128, "seed": 0, "streaming": True}
        config = write_config(run_dir, tiny_encoder_dir, triplets, **values, **extra)
        run_unsup.main(["--config", str(config)])
        params[label] = CSEModel.from_pretrained(run_dir / "out").state_dict()
    assert any(not torch.equal(params["plain"][key], params["instructed"][key]) for key in params["plain"])


def test_gradient_caching_with_the_instruction_gives_the_uncached_gradients(
    tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    """Each chunk of a cached step gets its own rows' spans (the anchors' with the instruction, the others'
    without): without dropout, the cached step's gradients are the uncached step's (float64, reordered sums)."""
    gradients = []
    for chunk_size in (3, None):
        model = CSEModel.from_pretrained(
            tiny_encoder_dir,
            pooling=PoolingConfig(pooler="avg", instruction=INSTRUCTION),
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        ).double()
        trainer = CSETrainer(
            model=model,
            args=training_args(tmp_path, max_seq_length=128, gradient_cache_chunk_size=chunk_size),
            train_dataset=Dataset.from_dict(TRIPLETS),
            processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
        )
        batch = trainer.data_collator([trainer.train_dataset[i] for i in range(8)])
        trainer.compute_loss(trainer.model.train(), batch).backward()
        gradients.append({name: p.grad.clone() for name, p in model.named_parameters() if p.requires_grad})
    assert_equal_up_to_float64_rounding(gradients[0], gradients[1], "gradients")
    assert any(grad.abs().sum() > 0 for grad in gradients[0].values())
