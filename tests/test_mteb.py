"""MTEB without glue: an hf_cse checkpoint run by ``mteb.evaluate`` through :class:`MTEBEncoder` and by
``python -m hf_cse.eval --mteb_tasks``, on a task of the test's own (mteb's custom-task route: an ``AbsTaskSTS``
subclass whose data are built here), scores checked against Spearman's correlation computed directly; no download."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from conftest import SENTENCES, run_unsup, write_config, write_stsb_dev, write_train_file
from scipy.stats import spearmanr
from transformers import AutoTokenizer

from hf_cse import SentenceEncoder
from hf_cse.commands.cli import import_user_file
from hf_cse.commands.eval import main as eval_main
from hf_cse.errors import UsageError

mteb = pytest.importorskip("mteb")
from hf_cse.evaluation.mteb_encoder import MTEBEncoder  # noqa: E402  (needs mteb)

TASK_NAME = "HfCseTinySTS"
# Sentence i against sentence 5i+1 (mod 12): never a sentence with itself, never a pair and its reverse, so the
# cosine similarities have no built-in ties.
PAIRS = [(SENTENCES[i], SENTENCES[(5 * i + 1) % len(SENTENCES)], float((7 * i) % 6)) for i in range(len(SENTENCES))]
TASK_MODULE = f'''"""A local STS task for mteb: its data are built here, nothing is downloaded."""
from datasets import Dataset, DatasetDict
from mteb.abstasks.sts import AbsTaskSTS
from mteb.abstasks.task_metadata import TaskMetadata

PAIRS = {PAIRS!r}


class {TASK_NAME}(AbsTaskSTS):
    metadata = TaskMetadata(
        type="STS",
        name="{TASK_NAME}",
        main_score="cosine_spearman",
        description="Twelve sentence pairs built by hf_cse's tests.",
        reference=None,
        dataset={{"path": "local/hf-cse-tiny-sts", "revision": "1"}},
        category="t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        date=None,
        domains=None,
        task_subtypes=None,
        license=None,
        annotations_creators=None,
        dialect=None,
        sample_creation=None,
        bibtex_citation=None,
    )
    min_score = 0
    max_score = 5

    def load_data(self, **kwargs):
        first, second, score = zip(*PAIRS)
        columns = {{"sentence1": list(first), "sentence2": list(second), "score": list(score)}}
        self.dataset = DatasetDict({{"test": Dataset.from_dict(columns)}})
        self.data_loaded = True
'''
TRAINED_DIMS = [32, 16]


@pytest.fixture(scope="module")
def matryoshka_checkpoint(tiny_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An hf_cse checkpoint of the tiny model (``avg`` pooling) trained with Matryoshka dimensions 32 and 16, its
    card's model-index holding its STS-B dev score."""
    work = tmp_path_factory.mktemp("mteb_run")
    config = write_config(
        work,
        tiny_encoder_dir,
        write_train_file(work, SENTENCES),
        pooler="avg",
        matryoshka_dims=TRAINED_DIMS,
        eval_strategy="steps",
        eval_steps=2,
        sts_dir=str(write_stsb_dev(work / "sts")),
        eval_sts_tasks=["stsb"],
    )
    run_unsup.main(["--config", str(config)])
    return work / "out"


@pytest.fixture(scope="module")
def task_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The task's module, one file for the module's tests: a module name is imported once per process."""
    path = tmp_path_factory.mktemp("mteb_task") / "hf_cse_tiny_mteb_task.py"
    path.write_text(TASK_MODULE, encoding="utf-8")
    return path


def direct_spearman(encoder: SentenceEncoder, dim: int) -> float:
    """Spearman x 100 of the cosine similarities of the first ``dim`` dimensions with the gold scores, computed here;
    first checked to hold no two cosines closer than float32 rounding, so that any correct computation ranks them
    alike and the correlation is the same up to float64 rounding."""
    first = encoder.encode([pair[0] for pair in PAIRS])[:, :dim]
    second = encoder.encode([pair[1] for pair in PAIRS])[:, :dim]
    cosines = torch.nn.functional.cosine_similarity(first.double(), second.double())
    assert (cosines.sort().values.diff() > 1e3 * torch.finfo(torch.float32).eps).all()
    return 100.0 * float(spearmanr(cosines.numpy(), [pair[2] for pair in PAIRS]).statistic)


def test_eval_mteb_tasks_scores_like_a_direct_computation_and_fills_the_card(
    matryoshka_checkpoint: Path, task_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    output_json = tmp_path / "mteb.json"
    argv = ["--model_name_or_path", str(matryoshka_checkpoint), "--import_module", str(task_file)]
    argv += ["--mteb_tasks", TASK_NAME, "--truncate_dim", *map(str, TRAINED_DIMS), "--device", "cpu"]
    output = eval_main([*argv, "--output_json", str(output_json), "--disable_tqdm"])
    encoder = SentenceEncoder.from_pretrained(matryoshka_checkpoint, device="cpu")
    expected = {dim: direct_spearman(encoder, dim) for dim in TRAINED_DIMS}
    assert expected[32] != expected[16]  # the truncation changes the score, so equality below checks it
    records = output["mteb"]
    assert [(record["task"], record["truncate_dim"]) for record in records] == [(TASK_NAME, 32), (TASK_NAME, 16)]
    for record in records:
        assert record["score"] == pytest.approx(expected[record["truncate_dim"]], abs=1e-9)
    assert "sts12" not in output and json.loads(output_json.read_text())["mteb"] == records  # no STS set asked for
    assert TASK_NAME in capsys.readouterr().out

    # The card's model-index: the STS-B dev entry of training kept, one MTEB entry per dimension beside it.
    card = mteb_card_entries(matryoshka_checkpoint)
    assert [entry["dataset"]["name"] for entry in card if "STS-B" in entry["dataset"]["name"]] == ["STS-B (dev)"]
    metrics = [
        metric for entry in card if entry["dataset"]["type"] == "local/hf-cse-tiny-sts" for metric in entry["metrics"]
    ]
    assert [metric["args"] for metric in metrics] == [{"truncate_dim": dim} for dim in TRAINED_DIMS]
    assert [metric["value"] for metric in metrics] == [round(expected[dim], 2) for dim in TRAINED_DIMS]
    # Run again: the entries are replaced, not repeated.
    eval_main([*argv, "--disable_tqdm"])
    assert mteb_card_entries(matryoshka_checkpoint) == card


def mteb_card_entries(checkpoint: Path) -> list[dict]:
    """The results of the model-index of ``checkpoint``'s card, as the Hub reads its YAML front matter."""
    import yaml

    front_matter = (checkpoint / "README.md").read_text(encoding="utf-8").split("---\n")[1]
    (model,) = yaml.safe_load(front_matter)["model-index"]
    return model["results"]


def test_mteb_evaluate_runs_a_checkpoint_with_no_user_code(matryoshka_checkpoint: Path, task_file: Path) -> None:
    """``mteb.evaluate(MTEBEncoder.from_pretrained(FOLDER), tasks)``: the pooler, template and trained dimensions
    come from the checkpoint."""
    import_user_file(str(task_file))
    task = getattr(sys.modules[task_file.stem], TASK_NAME)()
    model = MTEBEncoder.from_pretrained(matryoshka_checkpoint, truncate_dim=16, device="cpu")
    assert model.mteb_model_meta.embed_dim == TRAINED_DIMS and model.mteb_model_meta.experiment_kwargs == {
        "truncate_dim": 16
    }
    (result,) = mteb.evaluate(model, [task], cache=None, show_progress_bar=False).task_results
    expected = direct_spearman(SentenceEncoder.from_pretrained(matryoshka_checkpoint, device="cpu"), 16)
    assert 100.0 * result.get_score() == pytest.approx(expected, abs=1e-9)
    # Its sentence-transformers files are the other door, for the poolers they express: the same score.
    sentence_transformers = pytest.importorskip("sentence_transformers")
    st_model = sentence_transformers.SentenceTransformer(str(matryoshka_checkpoint), device="cpu", truncate_dim=16)
    (st_result,) = mteb.evaluate(st_model, [task], cache=None, show_progress_bar=False).task_results
    assert 100.0 * st_result.get_score() == pytest.approx(expected, abs=1e-9)


def test_an_unknown_mteb_task_is_one_line_naming_the_closest_before_the_model_loads(
    task_file: Path, tmp_path: Path
) -> None:
    argv = ["--model_name_or_path", str(tmp_path / "no_model"), "--import_module", str(task_file)]
    with pytest.raises(
        UsageError, match=rf"--mteb_tasks 'HfCseTinySTs': no MTEB task of that name; did you mean {TASK_NAME}"
    ):
        eval_main([*argv, "--mteb_tasks", "HfCseTinySTs"])


def test_mteb_tasks_without_mteb_installed_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "mteb", None)  # what an import of a package that is not installed meets
    monkeypatch.delitem(sys.modules, "hf_cse.evaluation.mteb_encoder")
    with pytest.raises(UsageError, match=r'MTEB needs the mteb package .*: pip install "hf_cse\[mteb\]"'):
        eval_main(["--model_name_or_path", str(tmp_path / "no_model"), "--mteb_tasks", TASK_NAME])


def test_the_mteb_model_encodes_as_the_checkpoint_does_prompt_template_included(tiny_encoder_dir: Path) -> None:
    """A ``mask``-pooled encoder (its template around each sentence, no sentence-transformers files): mteb's batches
    come back as :meth:`SentenceEncoder.encode` embeds the sentences, in order, and truncated to ``truncate_dim``."""
    encoder = SentenceEncoder.from_pretrained(tiny_encoder_dir, pooler="mask", device="cpu")
    batches = [{"text": SENTENCES[:5]}, {"text": SENTENCES[5:]}]
    model = MTEBEncoder(encoder, "tiny", truncate_dim=8)
    embeddings = model.encode(batches, task_metadata=None, hf_split="test", hf_subset="default", batch_size=3)
    assert embeddings.dtype == "float32"
    assert torch.equal(torch.from_numpy(embeddings), encoder.encode(SENTENCES, batch_size=3)[:, :8])
    with pytest.raises(UsageError, match=r"truncate_dim=33: use an integer in \[1, 32\]"):
        MTEBEncoder(encoder, "tiny", truncate_dim=33)


def test_a_model_with_an_instruction_gets_it_before_mteb_queries_only(tiny_encoder_dir: Path) -> None:
    """LLM2Vec's supervised stage in MTEB: ``mteb``'s query texts are encoded as queries (the instruction before
    them, left out of the mean), its documents and a task's texts without a role as documents, as in training; a
    model without an instruction encodes every text as it is, whatever the role."""
    from mteb.types import PromptType

    from hf_cse import CSEModel, PoolingConfig

    instructed = SentenceEncoder(
        CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="avg", instruction="query: ")),
        AutoTokenizer.from_pretrained(tiny_encoder_dir),
    )
    plain = SentenceEncoder.from_pretrained(tiny_encoder_dir, pooler="avg", device="cpu")
    batches = [{"text": SENTENCES[:5]}, {"text": SENTENCES[5:]}]
    for encoder in (instructed, plain):
        model = MTEBEncoder(encoder, "tiny")
        for prompt_type, prompt_name in ((PromptType.query, "query"), (PromptType.document, "document"), (None, None)):
            embeddings = model.encode(
                batches, task_metadata=None, hf_split="test", hf_subset="default", prompt_type=prompt_type
            )
            expected = encoder.encode(SENTENCES, prompt_name=prompt_name if encoder is instructed else None)
            assert torch.equal(torch.from_numpy(embeddings), expected)
    queries = MTEBEncoder(instructed, "tiny").encode(
        batches, task_metadata=None, hf_split="test", hf_subset="default", prompt_type=PromptType.query
    )
    assert not torch.equal(torch.from_numpy(queries), instructed.encode(SENTENCES))
