"""Model FLOPs of a training step, counted from the encoder forwards that really ran, and model FLOPs utilization.

FLOP count (matrix multiplications only, 2 FLOPs per multiply-add), per token of one transformer layer with hidden
size ``d``, feed-forward size ``f`` and ``L`` keys per query:

- Q, K, V and output projections ``8 d^2``; feed-forward ``4 d f``; scores ``QK^T`` and ``softmax(.)V`` ``4 L d``.

The projections and feed-forward are ``2 N`` with ``N`` the layer's non-embedding weights, so a forward pass over
``T`` tokens costs ``2 N T`` plus the attention term, and training (backward = twice the forward) ``6 N T + 12
n_layers L d T``: the count of Kaplan et al. 2020 (Table 1) and of the PaLM paper (Chowdhery et al. 2022, Appendix
B), which defines MFU with it. The attention term is per row: ``4 L^2 d`` for a row of ``L`` tokens. Embedding
lookups, layer norms, softmax, biases, the pooler head and the loss's ``B x B`` similarities are left out (under
0.5% of a BERT-base step at length 32).

Bytes: the fewest bytes a step must move through device memory (:func:`step_bytes`), counted from the parameters of
the models that ran and the tokens they saw, each at its own element size:

- every forward reads each non-embedding weight once (the embedding lookups read only the rows of the step's tokens,
  left out), and a forward that builds a graph for backward reads them once more in the backward;
- each trainable parameter's gradient is written once and AdamW reads the weight, the gradient and its two moments
  and writes the weight and the moments: 8 element sizes per trainable parameter per step, embeddings included
  (AdamW updates every row);
- between layers, each layer's output (bf16) is written once and read once, and in a backward its gradient too:
  ``4 d`` bytes per token per layer forward, ``8 d`` with a backward.

Everything else (attention scores, layer norms, saved activations beyond the layer outputs) is left out, so the count
is a floor. :func:`floor_seconds` turns FLOPs and bytes into the floor time on a device: the larger of FLOPs over its
bf16 matrix rate and bytes over its memory bandwidth; no implementation of the step can run faster. The H100's two
rates are the ones measured on this workplace's H100 (:data:`H100_BF16_FLOPS`, :data:`H100_BYTES_PER_S`).

    python benchmarks/flops.py --output_json benchmarks/results/step_floor.json   # BERT-base, batch 64 x 32

Every forward of a Hugging Face base model (``PreTrainedModel`` whose ``base_model`` is itself; for
sentence-transformers 6, which calls its model's ``forward`` directly, the call of the ``Transformer`` module around
it) during a counted step is recorded by :func:`counting` with its real (non-padding) and padded token counts, and
counted x3 if it builds a graph for backward (grad enabled and some weight trainable), x1 otherwise (DCLR's frozen
complementary model). So each objective's extra forwards (OssCSE's template views and its negations and
paraphrases, DCLR's uncached complementary model, template denoising) are counted as they run, not assumed.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

# BERT-base's size (``throughput.py --random_config bert-base`` builds it with random weights).
BERT_BASE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072}
BERT_BASE_VOCAB = 30522  # bert-base-uncased

# Dense bf16 tensor-core peaks (TFLOP/s, without sparsity) from NVIDIA's data sheets, matched against
# ``torch.cuda.get_device_name()``, most specific first.
BF16_PEAK_TFLOPS: tuple[tuple[tuple[str, ...], float], ...] = (
    (("H100", "PCIE"), 756.0),  # H100 PCIe
    (("H100", "NVL"), 835.0),  # H100 NVL
    (("H100",), 989.4),  # H100 SXM5 (HBM3)
    (("H200",), 989.4),  # H200 SXM: the H100 SXM's compute with more memory
    (("GH200",), 989.4),
    (("A100",), 312.0),  # A100 SXM and PCIe
)


# The two ceilings measured on this workplace's H100 (the device tool's KINDS.md, 2026-11-13): an 8192^3 bf16 matrix
# product at 798 TFLOP/s on random data, and a device-to-device copy at about 3.0 TB/s (bytes read plus written).
H100_BF16_FLOPS = 790e12
H100_BYTES_PER_S = 3.0e12
H100_CEILINGS = {"device": "NVIDIA H100 80GB HBM3 (measured here)", "bf16_flops_per_s": H100_BF16_FLOPS,
                 "bytes_per_s": H100_BYTES_PER_S}  # fmt: skip
ACTIVATION_BYTES = 2  # bf16: one element of a layer's output under autocast
ADAMW_ELEMENTS = 8  # gradient written; AdamW reads weight, gradient, two moments and writes weight and moments


def floor_seconds(
    flops: float, bytes_moved: float, flops_per_s: float = H100_BF16_FLOPS, bytes_per_s: float = H100_BYTES_PER_S
) -> dict[str, Any]:
    """The floor time of work of ``flops`` FLOPs and ``bytes_moved`` bytes on a device of those two rates: the
    larger of the compute time and the memory time, and which one bounds it."""
    compute, memory = flops / flops_per_s, bytes_moved / bytes_per_s
    return {"floor_s": max(compute, memory), "compute_floor_s": compute, "memory_floor_s": memory,
            "bound": "compute" if compute >= memory else "memory"}  # fmt: skip


@dataclass(frozen=True)
class ParamBytes:
    """A model's weights in bytes: the non-embedding ones (read by every forward) and the trainable ones (updated
    by AdamW each step), and the trainable ones' element size."""

    non_embedding: int
    trainable: int

    @classmethod
    def of(cls, model: Any) -> ParamBytes:
        import torch

        embedding = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
        params = list(model.parameters())
        return cls(
            non_embedding=sum(p.numel() * p.element_size() for p in params if id(p) not in embedding),
            trainable=sum(p.numel() * p.element_size() for p in params if p.requires_grad),
        )


def forward_bytes(params: ParamBytes, config: Any, tokens: int, trained: bool) -> float:
    """Bytes one forward must move (:func:`step_bytes`' first and third items): weights read once (twice with a
    backward) and each layer's output written and read once (and its gradient, with a backward)."""
    passes = 2 if trained else 1
    activations = passes * 2 * ACTIVATION_BYTES * config.hidden_size * config.num_hidden_layers * tokens
    return float(passes * params.non_embedding + activations)


def step_bytes(params: ParamBytes) -> float:
    """Bytes the optimizer part of a step must move for a model's trainable weights (gradient, AdamW)."""
    return float(ADAMW_ELEMENTS * params.trainable)


def bf16_peak_flops(device_name: str | None) -> tuple[float | None, str | None]:
    """The device's dense bf16 peak in FLOP/s and ``None``, or ``None`` and why there is none."""
    if not device_name:
        return None, "no GPU: MFU is defined against a GPU's bf16 tensor-core peak"
    upper = device_name.upper()
    for keys, tflops in BF16_PEAK_TFLOPS:
        if all(key in upper for key in keys):
            return tflops * 1e12, None
    return None, f"unknown device {device_name!r}: no bf16 peak in benchmarks/flops.py BF16_PEAK_TFLOPS"


def mfu(flops_per_step: float, step_s: float, device_name: str | None) -> tuple[float | None, str | None]:
    """Model FLOPs utilization ``flops_per_step / step_s / peak`` and ``None``, or ``None`` and the reason."""
    peak, reason = bf16_peak_flops(device_name)
    if peak is None:
        return None, reason
    return flops_per_step / step_s / peak, None


def layer_matmul_flops_per_token(hidden: int, intermediate: int) -> int:
    """Forward FLOPs of one layer's projections and feed-forward per token: ``8 d^2 + 4 d f`` (``2 N``)."""
    return 8 * hidden * hidden + 4 * hidden * intermediate


def forward_flops(config: Any, lengths: list[int], padded_length: int) -> tuple[float, float]:
    """Forward FLOPs of an encoder over rows of ``lengths`` real tokens: (real tokens only, padded rows).

    ``config`` needs ``hidden_size``, ``num_hidden_layers`` and ``intermediate_size`` (BERT, RoBERTa, MPNet...).
    """
    d, layers, f = config.hidden_size, config.num_hidden_layers, config.intermediate_size
    per_token = layer_matmul_flops_per_token(d, f)
    real = layers * sum(per_token * n + 4 * n * n * d for n in lengths)
    padded = layers * len(lengths) * (per_token * padded_length + 4 * padded_length**2 * d)
    return float(real), float(padded)


@dataclass
class StepFlops:
    """What the counted forwards of a step add up to (after :meth:`resolve`)."""

    real_tokens: int = 0
    padded_tokens: int = 0
    flops: float = 0.0  # padded: what the device computes
    real_flops: float = 0.0  # non-padding tokens only
    bytes: float = 0.0  # the floor of bytes moved (padded tokens), when the models' parameters were given
    forwards: list[dict[str, Any]] = field(default_factory=list)
    pending: list[tuple[Any, Any, int, int, bool, Any]] = field(default_factory=list)
    trained_models: dict[int, ParamBytes] = field(default_factory=dict)

    def add(
        self, config: Any, lengths: list[int], padded_length: int, trained: bool, params: ParamBytes | None = None
    ) -> None:
        real, padded = forward_flops(config, lengths, padded_length)
        factor = 3 if trained else 1  # backward = 2x forward (Kaplan et al. 2020, section 2.1)
        self.real_tokens += sum(lengths)
        self.padded_tokens += len(lengths) * padded_length
        self.flops += factor * padded
        self.real_flops += factor * real
        if params is not None:
            self.bytes += forward_bytes(params, config, len(lengths) * padded_length, trained)
            if trained and id(params) not in self.trained_models:  # the optimizer's bytes: once per model per step
                self.trained_models[id(params)] = params
                self.bytes += step_bytes(params)
        self.forwards.append({"rows": len(lengths), "length": padded_length, "trained": trained})

    def resolve(self) -> StepFlops:
        """Read the recorded row lengths on the host (call after the step was timed) and add them up."""
        for config, lengths, rows, padded_length, trained, params in self.pending:
            values = [padded_length] * rows if lengths is None else [int(n) for n in lengths.tolist()]
            self.add(config, values, padded_length, trained, params)
        self.pending.clear()
        return self


def _is_base_model(module: Any) -> bool:
    from transformers import PreTrainedModel

    return isinstance(module, PreTrainedModel) and getattr(module, "base_model", None) is module


def _wrapped_base_model(module: Any) -> Any:
    """The base model a sentence-transformers ``Transformer`` module runs (``auto_model``), else ``None``: since
    sentence-transformers 6 it calls the model's ``forward`` directly, which no module hook sees, so the wrapper's own
    call is the one counted."""
    inner = getattr(module, "auto_model", None)
    return inner if inner is not module and _is_base_model(inner) else None


def find_base_models(step: Any) -> list[Any]:
    """The Hugging Face base models (``PreTrainedModel`` whose ``base_model`` is itself) that ``step()`` runs, or
    the sentence-transformers ``Transformer`` module around one whose hook-free call :func:`counting` counts.
    ``step()`` runs eagerly: a compiled model is compiled by the steps after it."""
    import torch

    found: list[Any] = []
    called: list[Any] = []  # base models seen through their own call

    def discover(module: Any, args: tuple[Any, ...]) -> None:
        if (_is_base_model(module) or _wrapped_base_model(module) is not None) and not any(module is m for m in found):
            found.append(module)
        if _is_base_model(module):
            called.append(module)

    handle = torch.nn.modules.module.register_module_forward_pre_hook(discover)
    try:
        # Eagerly, even for a compiled model: dynamo guards on the number of global hooks, so compiling with this one
        # in place compiled every graph twice (again at the next step, without it), a compile stage's time cap spent.
        with torch.compiler.set_stance("force_eager"):
            step()
    finally:
        handle.remove()
    # A wrapper whose model was called through its own call too (an older sentence-transformers) would count twice.
    return [m for m in found if not any(_wrapped_base_model(m) is c for c in called)]


@contextmanager
def counting(models: list[Any]) -> Iterator[StepFlops]:
    """Record every forward of ``models`` run inside; :meth:`StepFlops.resolve` the result afterwards.

    The hook only queues a row-length sum on the device (no host read, so no synchronization while timing); a
    forward counts x3 when it builds a graph for backward (grad enabled and some weight trainable).
    """
    import torch

    step = StepFlops()
    base = {id(model): _wrapped_base_model(model) or model for model in models}
    params = {id(model): ParamBytes.of(base[id(model)]) for model in models}  # before timing: no work in the hook

    def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if base[id(module)] is not module:  # a sentence-transformers Transformer: its features dict
            kwargs = args[0] if args and isinstance(args[0], dict) else kwargs
            args = ()
        inputs = kwargs.get("input_ids", args[0] if args else None)
        if inputs is None:
            inputs = kwargs.get("inputs_embeds")
        if inputs is None:
            return
        mask = kwargs.get("attention_mask")
        if mask is not None and mask.dim() == 4 and mask.shape[1] == mask.shape[2] == 1:
            mask = mask[:, 0, 0, :]  # a key mask prepared as [B, 1, 1, L] (CSEModel under SDPA): its rows' lengths
        lengths = mask.sum(dim=1) if mask is not None and mask.dim() == 2 else None
        model = base[id(module)]
        trained = torch.is_grad_enabled() and any(p.requires_grad for p in model.parameters())
        step.pending.append((model.config, lengths, inputs.shape[0], inputs.shape[1], trained, params[id(module)]))

    handles = [model.register_forward_pre_hook(hook, with_kwargs=True) for model in models]
    try:
        yield step
    finally:
        for handle in handles:
            handle.remove()


def simcse_step_floor(batch_size: int, max_seq_length: int, sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """FLOPs, bytes and the H100 floor of one hf_cse SimCSE step (``[CLS]`` pooling and its MLP head, as the
    ``simcse`` arm of ``throughput.py``): one trained forward over ``2 x batch_size`` rows of ``max_seq_length``
    tokens (every row at full length: the floor of a batch padded to ``max_seq_length``) and an AdamW step. The model
    is built on the meta device: its parameters are counted, none is allocated."""
    import torch
    from _common import REPO_ROOT  # noqa: F401 (puts this checkout's hf_cse first on sys.path)
    from transformers import BertConfig

    from hf_cse import CSEModel, PoolingConfig

    sizes = {**BERT_BASE, "vocab_size": BERT_BASE_VOCAB, **(sizes or {})}
    config = BertConfig(**sizes)
    with torch.device("meta"):
        model = CSEModel(config, pooling=PoolingConfig(pooler="cls"))
    params = ParamBytes.of(model)
    step = StepFlops()
    step.add(config, [max_seq_length] * 2 * batch_size, max_seq_length, trained=True, params=params)
    floor = floor_seconds(step.flops, step.bytes)
    return {
        "model": {"model_type": "bert", **sizes, "parameters": sum(p.numel() for p in model.parameters()),
                  "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad)},
        "batch_size": batch_size,
        "max_seq_length": max_seq_length,
        "tokens_per_step": step.padded_tokens,
        "model_flops_per_step": step.flops,
        "bytes_per_step": step.bytes,
        "parameter_bytes": {"non_embedding": params.non_embedding, "trainable": params.trainable},
        **floor,
        "max_steps_per_s": 1 / floor["floor_s"],
        "minutes_per_1m_sentences": 1e6 / batch_size * floor["floor_s"] / 60,
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from _common import command_line, environment, write_json_atomic

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--max_seq_length", type=int, default=32)
    parser.add_argument("--output_json", default=None)
    args = parser.parse_args(argv)
    result = {
        "command": command_line(None if argv is None else [__file__, *argv]),
        "environment": environment(),
        "ceilings": H100_CEILINGS,
        "simcse_bert_base": simcse_step_floor(args.batch_size, args.max_seq_length),
    }
    step = result["simcse_bert_base"]
    print(f"SimCSE step, BERT-base, batch {args.batch_size} x {args.max_seq_length}: "
          f"{step['model_flops_per_step'] / 1e12:.3f} TFLOP, {step['bytes_per_step'] / 1e9:.3f} GB; floor on an H100 "
          f"{1e3 * step['floor_s']:.2f} ms ({step['bound']}-bound; compute {1e3 * step['compute_floor_s']:.2f} ms, "
          f"memory {1e3 * step['memory_floor_s']:.2f} ms): at most {step['max_steps_per_s']:.0f} steps/s, "
          f"a 1M-sentence epoch in {step['minutes_per_1m_sentences']:.2f} min at least")  # fmt: skip
    if args.output_json:
        write_json_atomic(args.output_json, result)
    return result


if __name__ == "__main__":
    main()
