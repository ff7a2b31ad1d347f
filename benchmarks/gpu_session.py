"""Every GPU measurement of issue 40 in one device call of at most 8 minutes, rehearsed on CPU by the test suite.

One command, run on the GPU machine from the repository root, that:

1. installs what the device image lacks (datasets, evaluate, jiwer and their few missing needs; bitsandbytes for
   QLoRA; and transformers and sentence-transformers at the versions the CPU tests ran, so that the GPU measures the
   tested stack) from the wheels carried in ``gpu_carry/wheels/`` into ``/tmp/hf_cse_site``, put first on
   ``PYTHONPATH`` for every stage;
2. checks the environment (imports, versions, the GPU) and stops at once if it is wrong; it also names any of
   hf_cse's requirements that is not installed (the stages that import it will fail);
3. runs the stages, each a subprocess with its own time cap inside the session's budget, most important first:

   - ``throughput_static_cudagraphs``: ``throughput.py`` on a random BERT-base, bf16, batch 64 x 32, with CUDA
     graphs over one shape (``--torch_compile --torch_compile_mode reduce-overhead --pad_to_max_seq_length``) and
     ``run_unsup.py``'s end-to-end run under the same flags: the variant the eager figures (a host-bound step, 4%
     MFU on an H200) point to, first since the first GPU session did not get to it;
   - ``throughput_eager``: the same without compiling, every arm, and the 300-step end-to-end comparison of
     ``run_unsup.py`` with sentence-transformers' trainer: the baseline, on the same machine;
   - ``profile_step``: ``profile_step.py``, where a step's time goes (host, device, synchronizations);
   - ``throughput_cudagraphs``, ``throughput_compile``: the same with CUDA graphs over dynamic shapes, and with
     ``--torch_compile`` alone;
   - ``padding_free``: ``padding_free.py``: packed against padded SimCSE steps (issue 57) for BERT-base and the ~1B
     Qwen3 with LoRA, on wiki1m's lengths and on texts of up to 256 tokens, under flex attention and, where its
     package is installed, flash attention 2, beside the padded SDPA default; its JSON travels in ``logs.tar.gz``
     (``logs/padding_free_gpu_bf16.json``: the 8 files a call brings back are taken) and its ratios in the record;
   - ``decoder_1b``: ``decoder_step.py``: a ~1B random Qwen3, bf16 weights, batch 64 x 32, LoRA with and without
     gradient checkpointing, with ``eager`` attention in place of ``sdpa``, and QLoRA (the weights loaded 4-bit NF4
     through hf_cse's ``--load_in_4bit``): step time, memory, MFU and the attention kernel each step ran; then
     ``run_unsup.py`` itself, 20 steps of QLoRA and of bf16 LoRA on a small random Qwen3: finite losses, adapters
     that moved, and how the saved root and adapter embed (issue 37; measured on an H200 on 2026-11-27, so last);
   - ``tests``: the test suite's CUDA-capable part, ``pytest -m "not slow" -v`` on 8 processes, in the time left
     (``-v``: a stage stopped at its cap still names the tests that failed so far);

4. writes every result under ``--out`` (the device call's ``$OUT``): the stages' JSON files under the names
   ``benchmarks/results/`` gives them, ``gpu_session.json`` (each stage's command, status, time and headline
   figures; the environment; the tests' counts) and ``logs.tar.gz`` (each stage's output): 8 files, what one device
   call brings back; and prints a short table last.

A stage that fails or runs out of time is recorded as such and the next one runs; one that would start with under 20
seconds left is skipped. ``--budget tiny`` runs the same stages through the same scripts on CPU with tiny random models
and 2 steps (fewer arms; the QLoRA arm and run train through bitsandbytes' CPU backend, and both LoRA runs are saved
and reloaded whole; the compile stages with dynamo's ``eager`` backend, which needs no compiler, and the end-to-end run
only in ``throughput_static_cudagraphs``, which has every flag; the tests stage on one test): the test suite runs it,
so that the first GPU call cannot fail on a typo. The wheel install is not rehearsed (this environment has the
packages, but :func:`packages_the_device_lacks`, which ``--fetch`` runs and a test asserts, checks that the wheels
carry whatever hf_cse and the tests stage need that the image lacks). ``--stages`` picks some stages.

A session's 15 device minutes hold two calls (measured on an H200, 2026-11-27: a bare machine's start took about 40
seconds, and it goes back 30 seconds after a call): the first runs everything (``--budget_s`` 470 by default; the
environment check, the static CUDA-graph stage and the eager one fit), the second what the first's table shows as
skipped or stopped, for example ``--stages profile_step throughput_cudagraphs throughput_compile tests --budget_s
300``.

    python benchmarks/gpu_session.py --fetch     # here, once: wheels and team data into gpu_carry/ (git-ignored)
    # the device call, carry ["gpu_carry"], timeout_s 540:
    PYTHONUNBUFFERED=1 python3 benchmarks/gpu_session.py --out $OUT
    python benchmarks/gpu_session.py --budget tiny --out /tmp/rehearsal   # the CPU rehearsal

``--fetch`` runs ``pip download`` for CPython 3.12 x86-64 manylinux wheels (the device's Python) of
:data:`WHEELS`, each at the version installed here, into ``gpu_carry/wheels/`` (about 21 MB); downloads bitsandbytes
at :data:`BITSANDBYTES_VERSION` and writes it there trimmed to the CUDA 13 and CPU libraries
(:func:`trim_wheel`: 7 of its 41 MB); and copies the BERT
tokenizer and the wiki1m head that the GPU runs read, and the tokenized STS sets a test reads, from the team data
folder into ``gpu_carry/data/`` (6.5 MB): the device call sends the repository, not the ``../shared`` beside it.
``gpu_carry/`` then holds about 33 MiB, which with the repository's ~4 MiB is well inside the 64 MiB a call carries.
"""

from __future__ import annotations

import argparse
import collections
import configparser
import csv
import importlib.metadata
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO_ROOT / "benchmarks"
CARRY_DIR = REPO_ROOT / "gpu_carry"  # git-ignored; the device call carries it
WHEELS_DIR = CARRY_DIR / "wheels"
CARRIED_DATA = CARRY_DIR / "data"
SITE_DIR = Path("/tmp/hf_cse_site")
SESSION_JSON = "gpu_session.json"
LOGS = "logs.tar.gz"
PADDING_FREE_JSON = "padding_free_gpu_bf16.json"  # inside LOGS, under logs/

# What the device image lacks (KINDS.md's package list: no datasets, evaluate, jiwer and their dill, multiprocess,
# rapidfuzz; pytrec-eval-terrier for the retrieval tests), what datasets pins tighter than the image may hold (fsspec),
# and the CPU tests' transformers, sentence-transformers and peft (the image's transformers 5.17 and
# sentence-transformers 6.0.1 are older) with the regex transformers checks at import, and what transformers 5.25 added
# or raised its floor on (kernels and its tomlkit; huggingface-hub>=2.4 with its httpx2, httpcore2 and truststore,
# tokenizers>=0.23.1, safetensors>=0.8: the image's are older). Each is fetched at the version installed here.
WHEELS = ("datasets", "evaluate", "dill", "multiprocess", "fsspec", "jiwer", "rapidfuzz", "pytrec-eval-terrier",
          "lemminflect", "transformers", "sentence-transformers", "peft", "regex", "kernels", "tomlkit",
          "huggingface-hub", "httpx2", "httpcore2", "truststore", "tokenizers", "safetensors")  # fmt: skip
# The device image's Python packages (the device tool's KINDS.md, "Python packages already there", read 2026-11-17):
# what :func:`packages_the_device_lacks` counts as present. lemminflect, which hf_cse requires, is not among them: the
# first GPU session (2026-11-27) lost four of its stages to "No module named 'lemminflect'".
DEVICE_IMAGE_PACKAGES = frozenset(
    """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna
imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe
matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals
networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft
pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyre-extensions pyparsing pyproject-hooks pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope
triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl
zipp""".split()
)
# What the tests stage needs beside hf_cse's own requirements: the dev extra's test runner and the packages whose
# tests would fail, not skip, without them (its quickstart, negation and analysis packages skip their tests).
TESTS_STAGE_NEEDS = ("pytest", "pytest-xdist", "markdown-it-py", "pytrec-eval-terrier", "sentence-transformers")
# bitsandbytes, QLoRA's 4-bit kernels, which the image lacks: the version constraints.txt pins for the CPU tests (a
# test keeps the two equal; the device needs it whether or not this environment has it, hence a constant). 0.50.2
# ships libbitsandbytes_cuda130.so for the device's torch (2.11, CUDA 13.0) and meets hf_cse's qlora extra (>=0.46.1).
BITSANDBYTES_VERSION = "0.50.2"
# Its native libraries the device needs: the one for torch's CUDA 13.0 (bitsandbytes picks it by torch.version.cuda),
# 13.2's (BNB_CUDA_VERSION=132 picks it, should 13.0's fail to load) and the CPU one. The CUDA 11 and 12, ROCm and XPU
# libraries are 34 of the wheel's 41 MiB, which a device call's 64 MiB would not carry beside the rest.
BITSANDBYTES_LIBRARIES = ("libbitsandbytes_cpu.so", "libbitsandbytes_cuda130.so", "libbitsandbytes_cuda132.so")
TRIMMED_BUILD_TAG = "0cuda13"  # in the trimmed wheel's name: not PyPI's file (a build tag must start with a digit)
DEVICE_PYTHON = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")  # fmt: skip
# The team data the GPU stages read (throughput.py's --random_config tokenizer and every stage's corpus), and the STS
# folder a test reads once HF_CSE_DATA_DIR points at the carried folder (the tests needing sts/ skip without it).
DATA_FILES = ("models/bert-base-uncased-tokenizer", "wiki1m/wiki1m_for_simcse.head11914.txt", "sts_senteval_tok")

ENV_CHECK = """
import json, sys
import torch, transformers, datasets, evaluate, peft, accelerate, sentence_transformers, hf_cse, pyarrow, fsspec
cuda = torch.cuda.is_available()
try:  # QLoRA's alone: its absence or failure (a wheel without the device's library) is the decoder stage's to report
    import bitsandbytes
    bnb = bitsandbytes.__version__
except Exception as error:
    bnb = f"not importable: {type(error).__name__}: {error}".splitlines()[0]
import importlib.metadata
from packaging.requirements import Requirement
sys.path.insert(0, "benchmarks")
from gpu_session import hf_cse_requirements  # the list --fetch checks the image and the carried wheels against
missing = []  # hf_cse's requirements not installed: the stages that import them fail; the record names them
for name in (Requirement(line).name for line in hf_cse_requirements()):
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        missing.append(name)
print(json.dumps({"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda,
                  "gpu": torch.cuda.get_device_name() if cuda else None, "bitsandbytes": bnb,
                  **{m.__name__: m.__version__ for m in (transformers, datasets, evaluate, peft, accelerate,
                                                         sentence_transformers, pyarrow, fsspec)},
                  "missing_requirements": " ".join(missing) or None}))
if "--need_cuda" in sys.argv and not cuda:
    sys.exit("no CUDA device: the GPU session stops here")
"""


@dataclass
class Stage:
    """One measurement: the command (run with this Python from the repository root), its time cap, the JSON it
    writes under the output folder, and what happened."""

    name: str
    argv: list[str]
    cap_s: float
    output: str | None = None
    status: str = "not run"
    returncode: int | None = None
    seconds: float | None = None
    summary: dict[str, Any] = field(default_factory=dict)


def build_stages(budget: str, out: Path) -> list[Stage]:
    """The session's stages, most important first: GPU settings (``gpu``) or their CPU rehearsal (``tiny``)."""
    tiny = budget == "tiny"
    if tiny:
        model = ["--random_config", "tiny", "--bf16", "--batch_size", "4", "--steps", "2", "--warmup", "1"]
        eager = [*model, "--arms", "bare", "simcse", "--no_memory", "--end_to_end_steps", "2"]
        # The end-to-end run under compile flags in the static CUDA-graph variant only, which has them all: dynamo's
        # tracing is most of a CPU rehearsal's time.
        variant = [*model, "--arms", "bare", "simcse", "--no_memory"]
        compile_flag = ["--torch_compile_backend", "eager"]  # dynamo without a C++ compiler: the CPU stand-in
        profile = ["--random_config", "tiny", "--bf16", "--batch_size", "4", "--steps", "2", "--warmup", "1",
                   "--arms", "simcse"]  # fmt: skip
        decoder = ["--device", "cpu", "--size", "tiny", "--batch_size", "4", "--steps", "2", "--warmup", "1",
                   "--no_memory", "--qlora_run_steps", "2", "--qlora_run_size", "tiny"]  # fmt: skip
        tests = ["-n", "0", "-q", "tests/test_benchmarks.py::test_mean_std_is_the_sample_standard_deviation"]
        # Eager attention stands in for the packing kernels, which cannot train on a CPU (its speed means nothing).
        packing = ["--device", "cpu", "--size", "tiny", "--kernels", "eager", "--steps", "2", "--warmup", "1",
                   "--batch_size", "4", "--long_batch_size", "2"]  # fmt: skip
        caps = dict.fromkeys(
            ("env", "throughput", "decoder", "profile", "variant", "static", "packing", "tests"), 900
        )  # slow CPU
    else:
        model = ["--random_config", "bert-base", "--bf16", "--batch_size", "64", "--max_seq_length", "32"]
        eager = [*model, "--steps", "30", "--warmup", "5", "--end_to_end_steps", "300"]
        variant = [*model, "--steps", "30", "--warmup", "10", "--arms", "bare", "simcse", "dclr_cached", "osscse",
                   "--end_to_end_steps", "300"]  # fmt: skip
        compile_flag = ["--torch_compile"]
        profile = [*model, "--steps", "10", "--warmup", "3"]
        decoder = ["--device", "cuda", "--size", "1b", "--batch_size", "64", "--steps", "10", "--warmup", "3",
                   "--qlora_run_steps", "20"]  # fmt: skip
        tests = ["-n", "8", "-v"]  # -v: each result as it comes, so a stage stopped at its cap still names failures
        # Measured on an H200 (2026-11-27): env 25 s, throughput_eager 124 s, decoder_1b 120 s; profile_step was
        # stopped at its former cap of 75 s in its third arm (under the profiler an arm takes about 30 s).
        # The static CUDA-graph stage compiles BERT-base's forward and backward for 4 arms and an end-to-end run,
        # cold: 120 s were judged too few for it (its eager stage alone took 124 s).
        # Padding-free batches (issue 57): never run on a GPU yet; flex attention compiles for each model.
        packing = ["--device", "cuda", "--size", "gpu", "--bf16", "--kernels", "flex_attention", "flash_attention_2",
                   "--steps", "10", "--warmup", "3"]  # fmt: skip
        caps = {"env": 90, "throughput": 200, "decoder": 180, "profile": 150, "variant": 120, "static": 300,
                "packing": 240, "tests": 600}  # fmt: skip
    hf_cse_only = ["--end_to_end_runs", "hf_cse_simcse"]  # sentence-transformers' run is the eager stage's
    graphs = ["--torch_compile_mode", "reduce-overhead"]
    decoder += ["--dtype", "bfloat16", "--bf16", "--arms", "lora", "lora_gc", "lora_eager", "qlora"]
    script_stages = [
        ("throughput_static_cudagraphs", "throughput.py",
         [*variant, *compile_flag, *graphs, "--pad_to_max_seq_length", *hf_cse_only,
          *(["--end_to_end_steps", "2"] if tiny else [])],
         "throughput_gpu_bf16_static_cudagraphs.json", caps["static"]),
        ("throughput_eager", "throughput.py", eager, "throughput_gpu_bf16.json", caps["throughput"]),
        ("profile_step", "profile_step.py", profile, "profile_step_gpu_bf16.json", caps["profile"]),
        ("throughput_cudagraphs", "throughput.py", [*variant, *compile_flag, *graphs, *hf_cse_only],
         "throughput_gpu_bf16_cudagraphs.json", caps["variant"]),
        ("throughput_compile", "throughput.py", [*variant, *compile_flag, *hf_cse_only],
         "throughput_gpu_bf16_compile.json", caps["variant"]),
        # Last of the measurements: issue 37's figures, taken on an H200 (2026-11-27); a rerun on another card.
        ("decoder_1b", "decoder_step.py", decoder, "decoder_step_gpu_1b.json", caps["decoder"]),
    ]  # fmt: skip
    stages = [Stage("env", ["-c", ENV_CHECK, *([] if tiny else ["--need_cuda"])], caps["env"])]
    for name, script, flags, output, cap in script_stages:
        stages.append(Stage(name, [f"benchmarks/{script}", *flags, "--output_json", str(out / output)], cap, output))
    # Before the decoder stage. Its JSON goes into the logs' archive: a device call brings back 8 files, all taken.
    packing_json = ["--output_json", str(out / "logs" / PADDING_FREE_JSON)]
    stages.insert(-1, Stage("padding_free", ["benchmarks/padding_free.py", *packing, *packing_json], caps["packing"]))
    pytest = ["-m", "pytest", "-m", "not slow", *tests, "-rfE", "-p", "no:cacheprovider"]
    return [*stages, Stage("tests", pytest, caps["tests"])]


def install_command(wheels: list[Path], site: Path) -> list[str]:
    """The device README's install: every carried wheel, no index, no dependency resolution, into ``site``."""
    return [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir",
            "--upgrade", "--target", str(site), *map(str, wheels)]  # fmt: skip


def stage_environment(site: Path | None) -> dict[str, str]:
    """The stages' environment: the installed wheels and this checkout first on ``PYTHONPATH``, the carried team
    data as ``HF_CSE_DATA_DIR`` when it was fetched, everything offline, output unbuffered."""
    env = dict(os.environ)
    paths = [str(site)] if site is not None else []
    paths += [str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    if CARRIED_DATA.is_dir() and "HF_CSE_DATA_DIR" not in env:
        env["HF_CSE_DATA_DIR"] = str(CARRIED_DATA)
    env |= {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
            "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
    return env


def run_logged(argv: list[str], log: Path, timeout: float, env: dict[str, str]) -> tuple[int | None, str]:
    """Run ``argv`` from the repository root, its output into ``log``; kill its whole process group at ``timeout``
    seconds. The exit status (``None`` when killed) and the output's last 4,000 characters."""
    with open(log, "w", encoding="utf-8") as handle:
        process = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
        try:
            returncode: int | None = process.wait(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the stage and its children (pytest's workers, a compile pool)
            process.wait()
            returncode = None
    return returncode, log.read_text(encoding="utf-8", errors="replace")[-4000:]


def headline(stage: Stage, out: Path, log_text: str) -> dict[str, Any]:
    """The few figures of a stage the table shows, read from its JSON (or, for the tests and the environment check,
    from ``log_text``, the stage's output)."""
    if stage.name == "tests":
        return tests_headline(log_text)
    if stage.name == "env":  # its one JSON line, among any warnings the imports printed
        for line in reversed(log_text.strip().splitlines()):
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    pass
        return {}
    try:
        data = json.loads((out / stage.output).read_text(encoding="utf-8")) if stage.output else {}
    except (OSError, ValueError):
        return {}
    arms = {row.get("arm"): row for row in data.get("arms", [])}
    if stage.name == "decoder_1b":
        return decoder_headline(arms, (data.get("qlora_run") or {}).get("runs", {}))
    if stage.name == "padding_free":
        return padding_free_headline(out / "logs" / PADDING_FREE_JSON)
    if stage.name == "profile_step":
        return {name: {"step_ms": 1e3 * row["median_step_s"], "syncs": row.get("syncs_per_step"),
                       "gpu_idle": row.get("gpu_idle_share"), "kernels": row.get("kernels_per_step")}
                for name, row in arms.items()}  # fmt: skip
    figures: dict[str, Any] = {}
    bare = (arms.get("bare") or {}).get("median_step_s")
    for name in ("simcse", "dclr_cached", "osscse"):
        if bare and name in arms:
            figures[f"{name}/bare"] = arms[name]["median_step_s"] / bare
    if "simcse" in arms:
        figures |= {"simcse_step_ms": 1e3 * arms["simcse"]["median_step_s"], "simcse_mfu": arms["simcse"].get("mfu")}
    for name, entry in (data.get("end_to_end") or {}).items():
        for key in ("steps_per_s", "steady_steps_per_s"):
            if entry.get(key) is not None:
                figures[f"end_to_end_{name}_{key}"] = entry[key]
    return figures


def padding_free_headline(path: Path) -> dict[str, Any]:
    """Per model and texts (``encoder_wiki1m``, ...), the packed arms' step time over the padded ones' and the real
    tokens' share of the padded batches, from ``benchmarks/padding_free.py``'s JSON at ``path``; the kernels that
    could not run, with why."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    figures: dict[str, Any] = {f"{case['model']}_{case['texts']}": {"real_token_share": case["real_token_share"],
                                                                     **case["ratios"]}
                               for case in data.get("cases", [])}  # fmt: skip
    return figures | ({"skipped": data["settings"]["skipped_kernels"]} if data["settings"]["skipped_kernels"] else {})


def error_line(tail: str, returncode: int | None, cap_s: float) -> str:
    """What a stage that did not pass says: its output's last line that is no progress bar (a bar's ``\r`` updates
    end in ``it/s]`` or ``/s]``), after ``stopped at its cap of N s`` when it was stopped."""
    lines = [
        line for line in tail.replace("\r", "\n").splitlines() if line.strip() and not line.rstrip().endswith("/s]")
    ]
    last = lines[-1].strip()[-300:] if lines else ""
    return f"stopped at its cap of {cap_s:.0f} s; last output: {last}" if returncode is None else last


def tests_headline(log_text: str) -> dict[str, Any]:
    """pytest's summary line (``None`` when the stage was stopped before it), the tests that failed or errored, from
    ``-rfE``'s summary or from ``-v``'s line per test (``[gw3] [ 12%] FAILED tests/...``), which a stopped stage
    leaves too, and how many tests each ``-v`` outcome counted."""
    summary = [line for line in log_text.splitlines() if " in " in line and ("passed" in line or "failed" in line)]
    outcomes: dict[str, int] = collections.Counter()
    failed: dict[str, None] = {}  # ordered, without repeats: a failure is named by -v and again by -rfE
    for line in log_text.splitlines():
        words = line.split()
        if words and words[0].startswith("[gw"):  # -v under xdist: [gw3] [ 12%] OUTCOME tests/...
            at = next((i for i, word in enumerate(words) if word.isupper() and word.isalpha()), None)
            if at is not None:
                outcomes[words[at].lower()] += 1
                if words[at] in ("FAILED", "ERROR"):
                    failed[" ".join(words[at + 1 :])] = None
        elif len(words) > 1 and words[0] in ("FAILED", "ERROR"):  # -rfE's summary: FAILED tests/... - message
            failed[line.split(maxsplit=1)[1].split(" - ")[0].strip()] = None
    return {"result": summary[-1].strip("= ") if summary else None, "failed": list(failed), "counted": dict(outcomes)}


def decoder_headline(arms: dict[str, dict[str, Any]], runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The decoder stage's figures: each arm's step time, MFU, memory and attention kernel (or its error), and each
    ``run_unsup.py`` run's exit status (or error line), finite losses, moved adapters and embedding gaps."""
    figures: dict[str, Any] = {
        name: {"error": row["error"][:300]} if row.get("error") else
        {"step_ms": 1e3 * row["median_step_s"], "mfu": row.get("mfu"), "memory_gib": row.get("peak_memory_gib"),
         "attention": row.get("attention_backend")}
        for name, row in arms.items()
    }  # fmt: skip
    for name, run in runs.items():
        if run.get("error"):
            figures[f"run_{name}"] = {"exit": run["returncode"], "error": run["error"][:300]}
            continue
        embeddings = run.get("embeddings") or {}
        figures[f"run_{name}"] = {
            "losses_finite": run["losses_finite"],
            "lora_B_moved": f"{run['lora_B_moved']}/{run['lora_B_matrices']}",
            "steps_per_s": run.get("steps_per_s"),
            "root_4bit": bool(run.get("root_quantization_config")),
            **{key: embeddings[key] for key in ("root_vs_adapter", "adapter_vs_base", "root_load_error")
               if key in embeddings},
        }  # fmt: skip
    return figures


def stage_record(stage: Stage) -> dict[str, Any]:
    keys = ("name", "status", "returncode", "seconds", "output", "summary")
    return {**{key: getattr(stage, key) for key in keys}, "command": command_text(stage)}


def command_text(stage: Stage) -> str:
    """The stage's command as typed from the repository root (the environment check's script left out)."""
    return "python -c ENV_CHECK" if stage.name == "env" else " ".join(["python", *stage.argv])


def figure(key: str, value: Any) -> str:
    """``key value``: a float to 3 significant digits, anything else as it prints."""
    return f"{key} {value:.3g}" if isinstance(value, float) else f"{key} {value}"


def table_line(stage: Stage) -> str:
    figures = ", ".join(figure(key, value) for key, value in stage.summary.items()
                        if not isinstance(value, (dict, list)) and value is not None)  # fmt: skip
    if stage.name == "tests":  # stopped at its cap, it has no summary line: the outcomes -v printed so far
        counted = ", ".join(f"{outcome} {n}" for outcome, n in stage.summary.get("counted", {}).items())
        figures = stage.summary.get("result") or (f"stopped after {counted}" if counted else "")
        figures += f"; failed: {' '.join(stage.summary['failed'])}" if stage.summary.get("failed") else ""
    if stage.name in ("decoder_1b", "profile_step"):
        figures = "; ".join(f"{arm}: " + ", ".join(figure(k, v) for k, v in values.items() if v is not None)
                            for arm, values in stage.summary.items() if isinstance(values, dict))  # fmt: skip
    seconds = f"{stage.seconds:6.1f}" if stage.seconds is not None else f"{'-':>6}"
    return f"{stage.name:<30}{stage.status:<12}{seconds}  {figures}"[:240]


def run_session(budget: str, out: Path, budget_s: float, names: list[str] | None = None) -> dict[str, Any]:
    """Install, check, run the stages within ``budget_s`` seconds, write ``gpu_session.json`` and ``logs.tar.gz``
    under ``out`` and print the table; the session record."""
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    logs = out / "logs"
    logs.mkdir(exist_ok=True)
    wheels = sorted(WHEELS_DIR.glob("*.whl"))
    site = None
    install: dict[str, Any] = {"wheels": [w.name for w in wheels]}
    if not wheels and budget != "tiny":
        install["note"] = f"no wheels in {WHEELS_DIR}: run python benchmarks/gpu_session.py --fetch before the call"
        print(install["note"], flush=True)
    if wheels and budget != "tiny":  # the rehearsal's environment already holds them
        returncode, tail = run_logged(install_command(wheels, SITE_DIR), logs / "install.log", 120, dict(os.environ))
        install |= {"returncode": returncode, "tail": tail[-1000:] if returncode else ""}
        site = SITE_DIR if returncode == 0 else None
    env = stage_environment(site)
    stages = [s for s in build_stages(budget, out) if names is None or s.name in names or s.name == "env"]
    reserve = 15.0  # packing the logs and writing the record
    for stage in stages:
        left = budget_s - (time.monotonic() - started) - reserve
        if stages[0].status not in ("ok", "not run") and stage is not stages[0]:
            stage.status = "skipped"
            stage.summary = {"why": "the environment check failed"}
            continue
        if left < 20:
            stage.status = "skipped"
            stage.summary = {"why": f"out of time ({left:.0f} s left)"}
            continue
        begin = time.monotonic()
        log = logs / f"{stage.name}.log"
        returncode, tail = run_logged([sys.executable, *stage.argv], log, min(stage.cap_s, left), env)
        stage.seconds = time.monotonic() - begin
        stage.returncode = returncode
        stage.status = "ok" if returncode == 0 else "timeout" if returncode is None else "failed"
        stage.summary = headline(stage, out, log.read_text(encoding="utf-8", errors="replace"))
        if stage.status != "ok" and stage.name != "tests":
            stage.summary["error"] = error_line(tail, returncode, min(stage.cap_s, left))
    with tarfile.open(out / LOGS, "w:gz") as archive:
        archive.add(logs, arcname="logs")
    shutil.rmtree(logs)
    record = {
        "command": " ".join(["python", "benchmarks/gpu_session.py", *sys.argv[1:]]),
        "budget": budget,
        "budget_s": budget_s,
        "seconds": time.monotonic() - started,
        "install": install,
        "environment": stages[0].summary if stages and stages[0].name == "env" else {},
        "stages": [stage_record(stage) for stage in stages],
    }
    (out / SESSION_JSON).write_text(json.dumps(record, indent=1), encoding="utf-8")
    print(f"{'stage':<30}{'status':<12}{'s':>6}  headline")
    for stage in stages:
        print(table_line(stage))
    print(f"{len(list(out.iterdir()))} files in {out}, {record['seconds']:.0f} s in all")
    return record


def hf_cse_requirements() -> list[str]:
    """setup.cfg's ``install_requires``: what every stage imports through hf_cse."""
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / "setup.cfg", encoding="utf-8")
    return [line.strip() for line in config["options"]["install_requires"].splitlines() if line.strip()]


def packages_the_device_lacks() -> list[str]:
    """The packages the stages need that neither the device image (:data:`DEVICE_IMAGE_PACKAGES`) nor the carried
    wheels (:data:`WHEELS`, bitsandbytes) provide, each as ``name (needed by X)``.

    Walks hf_cse's requirements and :data:`TESTS_STAGE_NEEDS` through this environment's installed metadata: a carried
    package's own requirements are followed (this environment's version is the one carried), an image package's are
    not (the image holds it with what it needs)."""
    carried = {canonicalize_name(name) for name in (*WHEELS, "bitsandbytes")}
    image = {canonicalize_name(name) for name in DEVICE_IMAGE_PACKAGES}
    pending = [(Requirement(line), "hf_cse") for line in hf_cse_requirements()]
    pending += [(Requirement(name), "the tests stage") for name in TESTS_STAGE_NEEDS]
    seen: set[str] = set()
    lacking = []
    while pending:
        requirement, needed_by = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in seen:
            continue
        seen.add(name)
        if name not in carried | image:
            lacking.append(f"{name} (needed by {needed_by})")
        if name in image and name not in carried:
            continue
        for line in importlib.metadata.requires(requirement.name) or []:
            nested = Requirement(line)
            if nested.marker is None or nested.marker.evaluate({"extra": ""}):
                pending.append((nested, name))
    return sorted(lacking)


def download_command(pins: list[str], folder: Path) -> list[str]:
    """``pip download`` of ``pins`` as wheels for the device (:data:`DEVICE_PYTHON`, :data:`PLATFORMS`) into
    ``folder``."""
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
            DEVICE_PYTHON, "--implementation", "cp", *(f"--platform={p}" for p in PLATFORMS), "-d", str(folder),
            *pins]  # fmt: skip


def trim_wheel(wheel: Path, folder: Path, keep: Collection[str], build_tag: str) -> Path:
    """Copy ``wheel`` into ``folder`` without the native libraries (``*.so``) whose file name is not in ``keep``, its
    ``RECORD`` rewritten without them (every other entry, hashes and sizes included, unchanged: the files are), and
    ``build_tag`` in its name. Returns the new wheel's path.

    Raises:
        SystemExit: a library of ``keep`` is not in the wheel (another release may name them otherwise).
    """
    with zipfile.ZipFile(wheel) as source:
        infos = source.infolist()
        libraries = {Path(info.filename).name for info in infos if info.filename.endswith(".so")}
        if missing := sorted(set(keep) - libraries):
            raise SystemExit(
                f"{wheel.name} has no {', '.join(missing)}; its libraries: {', '.join(sorted(libraries))}"
            )
        dropped = {
            info.filename for info in infos if info.filename.endswith(".so") and Path(info.filename).name not in keep
        }
        record = next(info.filename for info in infos if info.filename.endswith(".dist-info/RECORD"))
        rows = [
            row
            for row in csv.reader(io.StringIO(source.read(record).decode("utf-8")))
            if row and row[0] not in dropped
        ]
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(rows)
        name, version, *tags = wheel.name.removesuffix(".whl").split("-")
        target = folder / f"{'-'.join([name, version, build_tag, *tags[-3:]])}.whl"
        partial = target.with_suffix(".part")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as trimmed:
            for info in infos:
                if info.filename not in dropped:
                    data = text.getvalue().encode("utf-8") if info.filename == record else source.read(info)
                    trimmed.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    os.replace(partial, target)
    return target


def fetch_bitsandbytes(wheels_dir: Path) -> Path:
    """The trimmed bitsandbytes wheel (:data:`BITSANDBYTES_VERSION`, :data:`BITSANDBYTES_LIBRARIES`) in
    ``wheels_dir``: downloaded and trimmed unless it is there; any other version of it removed (two versions of one
    package stop the device's install)."""
    present = sorted(wheels_dir.glob("bitsandbytes-*.whl"))
    current = [wheel for wheel in present if wheel.name.startswith(f"bitsandbytes-{BITSANDBYTES_VERSION}-")]
    for stale in set(present) - set(current):
        stale.unlink()
    if current:
        return current[0]
    with tempfile.TemporaryDirectory(prefix="hf_cse_bitsandbytes-") as tmp:
        subprocess.run(download_command([f"bitsandbytes=={BITSANDBYTES_VERSION}"], Path(tmp)), check=True)
        (wheel,) = Path(tmp).glob("bitsandbytes-*.whl")
        return trim_wheel(wheel, wheels_dir, BITSANDBYTES_LIBRARIES, TRIMMED_BUILD_TAG)


def fetch(wheels_dir: Path = WHEELS_DIR, data_dir: Path = CARRIED_DATA) -> None:
    """Download the device's wheels of :data:`WHEELS` at this environment's versions and the trimmed bitsandbytes
    (:func:`fetch_bitsandbytes`), and copy the team data; first stop, naming them, if the stages need packages that
    neither the image nor :data:`WHEELS` provide (:func:`packages_the_device_lacks`)."""
    if lacking := packages_the_device_lacks():
        raise SystemExit(f"The device image lacks {', '.join(lacking)}: add it to WHEELS in {Path(__file__).name}.")
    wheels_dir.mkdir(parents=True, exist_ok=True)
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in WHEELS]
    subprocess.run(download_command(pins, wheels_dir), check=True)
    bitsandbytes = fetch_bitsandbytes(wheels_dir)
    shared = Path(os.environ.get("HF_CSE_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))
    for relative in DATA_FILES:
        source, target = shared / relative, data_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)
    size = sum(p.stat().st_size for p in CARRY_DIR.rglob("*") if p.is_file()) / 2**20
    print(f"{CARRY_DIR}: {size:.1f} MiB ({', '.join(pins)}, {bitsandbytes.name})")


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT"), help="output folder (default: $OUT)")
    parser.add_argument("--budget", choices=["gpu", "tiny"], default="gpu")
    parser.add_argument("--budget_s", type=float, default=None, help="seconds in all (gpu: 470, tiny: 3600)")
    parser.add_argument("--stages", nargs="+", default=None, help="run only these stages (and the environment check)")
    parser.add_argument("--fetch", action="store_true", help="download the wheels and copy the data into gpu_carry/")
    args = parser.parse_args(argv)
    if args.fetch:
        fetch()
        return None
    if not args.out:
        parser.error("--out is required (or $OUT, as on the device machine)")
    budget_s = args.budget_s or (470.0 if args.budget == "gpu" else 3600.0)
    return run_session(args.budget, Path(args.out), budget_s, args.stages)


if __name__ == "__main__":
    main()
