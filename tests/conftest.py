"""Shared fixtures: a tiny random BERT with a WordPiece vocabulary written in-process (no network, no ../shared)."""

from __future__ import annotations

import json
import os
import re
import socket
import string
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# pytest-xdist's workers share the cores (addopts: -n auto). With torch's default of one thread per core in every
# worker, OpenMP threads wait for cores the other workers hold, and on the tiny test models one thread does the same
# work: on 2 idle cores, 2 workers ran 184 in-process tests in 22 s with one thread each, 31 s with two (twice the
# CPU time on a loaded machine). The command lines the tests start inherit the limit.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ and "OMP_NUM_THREADS" not in os.environ:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    os.environ["OMP_NUM_THREADS"] = str(max(1, cores // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


# After the environment above: transformers and datasets read it when imported.
from datasets import Dataset  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig  # noqa: E402
from hf_cse.evaluation import STS_SUBSETS  # noqa: E402
from hf_cse.inputs import ComplementarySimilarities  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA_DIR = Path(os.environ.get("HF_CSE_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))

WORDS = (
    "a an the man woman dog cat is are was plays playing guitar piano runs running in on park street house "
    "sentence this means not does do did like likes good bad big small red blue car cars child children eats food"
).split()

SENTENCES = [
    "a man is playing a guitar",
    "a woman plays the piano",
    "the dog runs in the park",
    "a cat is in the house",
    "children eat food on the street",
    "the red car is big",
    "a small blue car",
    "the child likes the dog",
    "a man eats good food",
    "the woman is running",
    "this cat is bad",
    "a dog is not a cat",
]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (addopts) for tests of a single file: no workers, the tests run in this process. ``--dist
    loadfile`` would give the file to one worker anyway, and every worker spends ~10 s importing torch and
    transformers before its first test. Otherwise (``None``), pytest-xdist's default: one worker per core."""
    files = {arg.split("::")[0] for arg in config.args}
    return 0 if len(files) == 1 and next(iter(files)).endswith(".py") else None


def build_vocab() -> list[str]:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    tokens = specials + WORDS + chars + [f"##{c}" for c in string.ascii_lowercase + string.digits]
    return list(dict.fromkeys(tokens))  # a token listed twice would shift every id after it


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import BertTokenizer

    directory = tmp_path_factory.mktemp("tiny_tokenizer")
    vocab_file = directory / "vocab.txt"
    vocab_file.write_text("\n".join(build_vocab()) + "\n", encoding="utf-8")
    BertTokenizer(str(vocab_file), model_max_length=128).save_pretrained(directory)
    return directory


def tiny_config(config_class: type, max_position_embeddings: int = 128, **overrides: int) -> Any:
    """The tiny encoder's config (hidden 32, 2 layers) over the test vocabulary."""
    values = {
        "vocab_size": len(build_vocab()),
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": max_position_embeddings,
        "pad_token_id": 0,
    }
    return config_class(**{**values, **overrides})


def save_tiny_encoder(directory: Path, tokenizer_dir: Path, architecture: str = "bert") -> Path:
    """Save a randomly initialized 2-layer encoder (hidden 32, seed 0) with the test tokenizer, like a Hub
    checkpoint. ``architecture``: ``bert``, or ``roberta`` (positions counted from ``padding_idx + 1``)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel, RobertaConfig, RobertaModel

    classes = {"bert": (BertConfig, BertModel, 128), "roberta": (RobertaConfig, RobertaModel, 140)}
    config_class, model_class, max_positions = classes[architecture]
    torch.manual_seed(0)
    model_class(tiny_config(config_class, max_positions)).save_pretrained(directory)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer_dir: Path) -> Path:
    """A randomly initialized 2-layer BERT (hidden 32) saved with its tokenizer, like a Hub checkpoint."""
    return save_tiny_encoder(tmp_path_factory.mktemp("tiny_encoder"), tiny_tokenizer_dir)


DECODER_ARCHITECTURES = ("qwen3", "llama", "gemma3_text")
"""The decoder families of the decoder tests: Qwen3 (no BOS, no pad token), Llama (a BOS, no pad token) and Gemma 3's
text model (a BOS, a pad and a mask token; ``use_bidirectional_attention``)."""

_DECODER_TOKENS = {
    "qwen3": {"eos_token": "<|endoftext|>"},
    "llama": {"bos_token": "<s>", "eos_token": "</s>"},
    "gemma3_text": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "mask_token": "<mask>"},
}
# Gemma 1 and 2: the field use_bidirectional_attention without its effect on a padded batch; Gemma 2 has no SDPA.
_DECODER_TOKENS["gemma"] = _DECODER_TOKENS["gemma2"] = _DECODER_TOKENS["gemma3_text"]


def tiny_decoder_tokenizer(architecture: str) -> Any:
    """A word-level fast tokenizer over the test words with the special tokens of ``architecture``'s family: a BOS
    put before every sentence where the family has one, no pad token for Qwen3 and Llama (hf_cse pads with eos)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = _DECODER_TOKENS[architecture]
    vocab = list(dict.fromkeys([*specials.values(), "<unk>", *WORDS, *string.ascii_lowercase, *string.punctuation]))
    backend = Tokenizer(models.WordLevel({token: i for i, token in enumerate(vocab)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    if "bos_token" in specials:
        bos = specials["bos_token"]
        backend.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", special_tokens=[(bos, vocab.index(bos))]
        )
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", model_max_length=128, **specials)


def save_tiny_decoder(directory: Path, architecture: str, **config_overrides: Any) -> Path:
    """:func:`save_random_decoder` of ``architecture`` with :func:`tiny_decoder_tokenizer`, like a Hub checkpoint of
    that family."""
    return save_random_decoder(directory, architecture, tiny_decoder_tokenizer(architecture), **config_overrides)


def save_random_decoder(directory: Path, architecture: str, tokenizer: Any, **config_overrides: Any) -> Path:
    """Save a randomly initialized 2-layer ``architecture`` causal LM (hidden 32, 2 query heads over 1 key/value head,
    seed 0) sized for ``tokenizer`` and its special tokens, with it."""
    from transformers import AutoConfig, AutoModelForCausalLM

    values = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "intermediate_size": 64,
        "max_position_embeddings": 128,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        **config_overrides,
    }
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.for_model(architecture, **values)).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_decoder_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """:func:`save_tiny_decoder` of every architecture in :data:`DECODER_ARCHITECTURES`, by architecture."""
    return {name: save_tiny_decoder(tmp_path_factory.mktemp(f"tiny_{name}"), name) for name in DECODER_ARCHITECTURES}


@pytest.fixture(scope="session")
def tiny_roberta_dir(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer_dir: Path) -> Path:
    """A tiny random RoBERTa (positions counted from padding_idx + 1) with the WordPiece test tokenizer."""
    return save_tiny_encoder(tmp_path_factory.mktemp("tiny_roberta"), tiny_tokenizer_dir, "roberta")


def write_stsb_dev(sts_dir: Path, n_pairs: int = 24) -> Path:
    """A small STS-B dev file in the SentEval layout (tab-separated, score in column 5)."""
    folder = sts_dir / "STSBenchmark"
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n_pairs):
        first = SENTENCES[i % len(SENTENCES)]
        second = SENTENCES[(i * 5 + 1) % len(SENTENCES)] if i % 2 else first
        score = 5.0 if first == second else (i % 5)
        lines.append(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{score:.3f}\t{first}\t{second}")
    (folder / "sts-dev.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return sts_dir


@pytest.fixture
def tiny_sts_dir(tmp_path: Path) -> Path:
    return write_stsb_dev(tmp_path / "sts")


@pytest.fixture
def shared_data_dir() -> Path:
    if not SHARED_DATA_DIR.is_dir():
        pytest.skip(f"team data folder {SHARED_DATA_DIR} is absent (set HF_CSE_DATA_DIR to point at it)")
    return SHARED_DATA_DIR


# The crash-consistency sweeps (tests/common/crash_sweep.py): once per module of tests/test_crash_consistency*.py.
# common.crash_sweep imports this module, hence the imports inside the fixtures.


@pytest.fixture(scope="module")
def straight_runs(tiny_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Each way of saving's final weights without a fault, by run name (``crash_sweep.RUNS``)."""
    from common import crash_sweep

    return crash_sweep.straight_runs(tiny_encoder_dir, tmp_path_factory)


@pytest.fixture(scope="module")
def operation_counts(tiny_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], int]:
    """``(run, phase) -> `` the number of file operations of that save."""
    from common import crash_sweep

    return crash_sweep.operation_counts(tiny_encoder_dir, tmp_path_factory)


# ---------------------------------------------------------------------------------------------------------------
# Training helpers: arguments, config files and trainers on the tiny encoder
# ---------------------------------------------------------------------------------------------------------------

sys.path.insert(0, str(REPO_ROOT))
import run_unsup  # noqa: E402, F401  (tests import it from here)


def training_args(output_dir: Path, **overrides: object) -> CSETrainingArguments:
    values = {
        "output_dir": str(output_dir),
        "per_device_train_batch_size": 4,
        "learning_rate": 1e-3,
        "max_steps": 3,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "seed": 0,
    }
    values.update(overrides)
    return CSETrainingArguments(**values)


def write_config(tmp_path: Path, tiny_encoder_dir: Path, train_file: Path, **overrides: object) -> Path:
    values = {
        "model_name_or_path": str(tiny_encoder_dir),
        "train_file": str(train_file),
        "pooler": "cls",
        "per_device_train_batch_size": 4,
        "max_steps": 2,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "output_dir": str(tmp_path / "out"),
    }
    values.update(overrides)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return path


def write_train_file(tmp_path: Path, lines: list[str], name: str = "train.txt") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def dclr_trainer(tiny_encoder_dir: Path, tmp_path: Path, **overrides: object) -> CSETrainer:
    torch.manual_seed(0)  # the MLP head is initialized before the Trainer seeds
    return CSETrainer(
        model=CSEModel.from_pretrained(tiny_encoder_dir, pooling=PoolingConfig(pooler="cls")),
        args=training_args(
            tmp_path,
            objective="dclr",
            objective_kwargs={"phi": 0.8, "phi_mode": "quantile"},
            learning_rate=1e-4,
            **overrides,
        ),
        train_dataset=Dataset.from_dict({"text": SENTENCES}),
        processing_class=AutoTokenizer.from_pretrained(tiny_encoder_dir),
    )


def free_port() -> int:
    """A port nobody listens on now: the 2-process runs' rendezvous, so that parallel test workers (pytest-xdist)
    never share one (a fixed default such as accelerate's 29500 would make the second run fail or join the first)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def split_runs(argv: list[str]) -> list[list[str]]:
    """A launched script's command line (after its name) as the arguments of each of its runs: the ``--then``
    separators :func:`launch_two_process_runs` puts between them removed."""
    runs: list[list[str]] = [[]]
    for arg in argv:
        if arg == "--then":
            runs.append([])
        else:
            runs[-1].append(arg)
    return runs


def launch_two_process_runs(
    script: str, model_dir: Path | Mapping[str, Path], out_dir: Path, runs: dict[str, list[str]]
) -> tuple[dict[str, dict], str]:
    """Every run of ``runs`` (name -> the arguments ``tests/SCRIPT`` takes after ``MODEL_DIR OUT.json``) in 2 CPU
    processes (gloo), one after the other in one launch (``--then``): the launcher and each process spend ~10 s
    importing hf_cse, ten times the training. One run failing fails them all (its rank's exception heads the message).
    ``model_dir``: every run's ``MODEL_DIR``, or one per run name.

    Returns each run's ``OUT.json`` (``world_size`` 2 checked) and the launch's standard error.
    """
    # The script's own folder (tests/) heads its sys.path, not the repository: without this, an installed hf_cse (an
    # editable install of another checkout) would be the one under test.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    # accelerate 1.x starts ONE process for `--cpu --num_processes 2`; `--multi_gpu` on a machine without GPUs starts
    # CPU data parallelism over gloo.
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
    launch += ["--main_process_port", str(free_port()), str(REPO_ROOT / "tests" / script)]
    model_dirs = model_dir if isinstance(model_dir, Mapping) else dict.fromkeys(runs, model_dir)
    arguments = [[str(model_dirs[run]), str(out_dir / f"{run}.json"), *args] for run, args in runs.items()]
    done = subprocess.run(
        [*launch, *[arg for run in arguments for arg in ["--then", *run]][1:]],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env=env,
    )
    # Each rank's exception line, then the tail (the launcher's report, which hides the ranks' tracebacks).
    errors = [line for line in done.stderr.splitlines() if re.match(r"\[rank\d+\]: \w+(Error|Exception)\b", line)]
    assert done.returncode == 0, "\n".join([*errors, done.stderr[-3000:]])
    results = {run: json.loads((out_dir / f"{run}.json").read_text()) for run in runs}
    assert all(result["world_size"] == 2 for result in results.values())
    return results, done.stderr


def complementary_of(trainer: CSETrainer) -> ComplementarySimilarities:
    """The frozen complementary model's similarity table of a DCLR trainer."""
    return trainer.input_providers["complementary_similarities"].similarities


# ---------------------------------------------------------------------------------------------------------------
# Synthetic SentEval-layout folder
# ---------------------------------------------------------------------------------------------------------------

SENTEVAL_WORDS = (
    "man woman dog cat guitar piano park street house car food plays runs eats sleeps big small red blue old".split()
)
PAIRS_PER_SUBSET = 4
UNSCORED_PER_SUBSET = 2  # STS15/16 subsets get this many extra input lines with an empty gold line
STSB_SIZES = {"train": 5, "dev": 4, "test": 6}
SICK_SIZES = {"train": 5, "trial": 3, "test": 4}


def make_sentence(i: int) -> str:
    """A deterministic sentence; index ``i`` and ``i + 60`` give the same one, so tasks share sentences."""
    i %= 60
    words = SENTEVAL_WORDS
    return f"the {words[i % 7]} {words[11 + i % 4]} near the {words[(i // 7) % 11]} {words[15 + i % 5]}"


def make_score(i: int) -> float:
    return round((i * 37 % 51) / 10, 1)  # 0.0-5.0, varied


def write_senteval_dir(root: Path) -> Path:
    """Write all 7 tasks, with the traps of the real files: empty gold lines, 4-column STS16 inputs, STS-B lines
    with quotes and extra fields, SICK test with CRLF."""
    counter = 0
    for task, subsets in STS_SUBSETS.items():
        folder = root / f"STS{task[3:]}-en-test"
        folder.mkdir(parents=True)
        for name in subsets:
            inputs, gold = [], []
            n_unscored = UNSCORED_PER_SUBSET if task in ("sts15", "sts16") else 0
            # Unscored pairs in the 2nd and the last line, like the real STS15/16 files (empty gold line).
            unscored = {1, PAIRS_PER_SUBSET + n_unscored - 1} if n_unscored else set()
            for j in range(PAIRS_PER_SUBSET + n_unscored):
                s1, s2 = make_sentence(counter), make_sentence(counter * 7 + 3)
                counter += 1
                extra = "\tsource-a\tsource-b" if task == "sts16" else ""  # like STS2016's attribution columns
                inputs.append(f"{s1}\t{s2}{extra}")
                gold.append("" if j in unscored else f"{make_score(counter):.3f}")
            (folder / f"STS.input.{name}.txt").write_text("\n".join(inputs) + "\n", encoding="utf-8")
            (folder / f"STS.gs.{name}.txt").write_text("\n".join(gold) + "\n", encoding="utf-8")

    stsb = root / "STSBenchmark"
    stsb.mkdir()
    for split, n in STSB_SIZES.items():
        lines = []
        for i in range(n):
            s1, s2 = make_sentence(i + 5), make_sentence(i * 3 + 1)
            if i == 0:  # unbalanced quotes: a csv reader with default quoting would swallow the next lines
                s1 = 'A "quoted man said "hi.'
            line = f"main-captions\tMSRvid\t2012test\t{i:04d}\t{make_score(i):.3f}\t{s1}\t{s2}"
            if i == 1:  # some real lines carry 2 licence/source fields after sentence2
                line += "\tsource-licence\tsource-file"
            lines.append(line)
        (stsb / f"sts-{split}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")

    sick = root / "SICK"
    sick.mkdir()
    files = {"train": "SICK_train.txt", "trial": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
    for split, n in SICK_SIZES.items():
        rows = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
        for i in range(n):
            score = 1 + (i * 13 % 41) / 10
            rows.append(f"{i + 1}\t{make_sentence(i + 20)}\t{make_sentence(i * 11 + 2)}\t{score:.1f}\tNEUTRAL")
        newline = "\r\n" if split == "test" else "\n"  # the real SICK_test_annotated.txt has CRLF line ends
        with open(sick / files[split], "w", encoding="utf-8", newline="") as f:
            f.write(newline.join(rows) + newline)
    return root


def write_senteval_downstream(root: Path) -> Path:
    """SentEval's own layout, as SimCSE's ``senteval.tar`` unpacks: ``root/SentEval/data/downstream/STS/`` (STS12-16,
    STSBenchmark) with ``SICK/`` beside it, not inside. Returns the ``STS`` folder, the paper configs' ``sts_dir``.

    STS-B dev gets one pair more than :func:`write_senteval_dir`'s, scored 5.0: every evaluation during training also
    measures alignment, which needs a pair with a gold score of at least 4."""
    sts_dir = write_senteval_dir(root / "SentEval" / "data" / "downstream" / "STS")
    (sts_dir / "SICK").rename(sts_dir.parent / "SICK")
    sentence = make_sentence(7)
    with open(sts_dir / "STSBenchmark" / "sts-dev.csv", "a", encoding="utf-8") as f:
        f.write(f"main-captions\tMSRvid\t2012test\t9999\t5.000\t{sentence}\t{sentence}\n")
    return sts_dir


HANG_GUARD_S = 900
"""How long a test waits on another process or thread before calling it hung. CI runs on a loaded machine, so no test
waits for something to happen *within* a time: only a hang reaches this bound, and a helper process that must outlive
its test sleeps this long."""


def shows_finished_encoding_bar(err: str, num_sentences: int) -> bool:
    """Whether ``err`` (captured stderr) holds hf_cse's ``Encoding`` bar at ``num_sentences``/``num_sentences``. The
    rate is read in either of tqdm's forms, ``N sentences/s`` or, below one sentence a second (a stalled, loaded
    machine), ``N s/ sentences``: a test of the bar must not depend on the machine's speed."""
    pattern = rf"Encoding: 100%.*\b{num_sentences}/{num_sentences} \[.*( sentences/s|s/ sentences)\]"
    return re.search(pattern, err) is not None


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` every 0.05 s until it holds; fail, naming ``what``, only past :data:`HANG_GUARD_S`."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"hung: waited {HANG_GUARD_S} s for {what}")
        time.sleep(0.05)


def hold_lock(folder: Path, holder: str = "training run") -> subprocess.Popen:
    """Another process holding ``folder``'s lock (until killed); returns once it holds it."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from hf_cse.folder_lock import FolderLock\n"
            f"with FolderLock({str(folder)!r}, {holder!r}):\n"
            f"    print('locked', flush=True); time.sleep({HANG_GUARD_S})",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    assert process.stdout.readline().strip() == "locked"
    return process


def make_tiny_trainer(
    encoder_dir: Path, output_dir: Path, pooling: Any = None, model_kwargs: dict | None = None, **overrides: Any
) -> Any:
    """A ``CSETrainer`` of the tiny encoder (``pooling``, default the cls pooler; ``model_kwargs`` for
    ``CSEModel.from_pretrained``, e.g. a ``config``) on ``SENTENCES * 2``: batch 4, 6 steps, a checkpoint every 2
    steps, seed 0, on the CPU; ``overrides`` replace any training argument."""
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer

    from hf_cse import CSEModel, CSETrainer, CSETrainingArguments, PoolingConfig

    values = {
        "output_dir": str(output_dir),
        "per_device_train_batch_size": 4,
        "learning_rate": 1e-3,
        "max_steps": 6,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": 2,
        "report_to": "none",
        "use_cpu": True,
        "seed": 0,
        **overrides,
    }
    torch.manual_seed(0)  # the MLP head is initialized before the Trainer seeds
    return CSETrainer(
        model=CSEModel.from_pretrained(
            encoder_dir, pooling=pooling or PoolingConfig(pooler="cls"), **(model_kwargs or {})
        ),
        args=CSETrainingArguments(**values),
        train_dataset=Dataset.from_dict({"text": SENTENCES * 2}),
        processing_class=AutoTokenizer.from_pretrained(encoder_dir),
    )
