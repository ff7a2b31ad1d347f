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

Every forward of a Hugging Face base model (``PreTrainedModel`` whose ``base_model`` is itself) during a counted
step is recorded by :func:`counting` with its real (non-padding) and padded token counts, and counted
x3 if it builds a graph for backward (grad enabled and some weight trainable), x1 otherwise (DCLR's frozen
complementary model). So each objective's extra forwards (OssCSE's template views and its negations and
paraphrases, DCLR's uncached complementary model, template denoising) are counted as they run, not assumed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

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
    forwards: list[dict[str, Any]] = field(default_factory=list)
    pending: list[tuple[Any, Any, int, int, bool]] = field(default_factory=list)

    def add(self, config: Any, lengths: list[int], padded_length: int, trained: bool) -> None:
        real, padded = forward_flops(config, lengths, padded_length)
        factor = 3 if trained else 1  # backward = 2x forward (Kaplan et al. 2020, section 2.1)
        self.real_tokens += sum(lengths)
        self.padded_tokens += len(lengths) * padded_length
        self.flops += factor * padded
        self.real_flops += factor * real
        self.forwards.append({"rows": len(lengths), "length": padded_length, "trained": trained})

    def resolve(self) -> StepFlops:
        """Read the recorded row lengths on the host (call after the step was timed) and add them up."""
        for config, lengths, rows, padded_length, trained in self.pending:
            values = [padded_length] * rows if lengths is None else [int(n) for n in lengths.tolist()]
            self.add(config, values, padded_length, trained)
        self.pending.clear()
        return self


def _is_base_model(module: Any) -> bool:
    from transformers import PreTrainedModel

    return isinstance(module, PreTrainedModel) and getattr(module, "base_model", None) is module


def find_base_models(step: Any) -> list[Any]:
    """The Hugging Face base models (``PreTrainedModel`` whose ``base_model`` is itself) that ``step()`` runs."""
    import torch

    found: list[Any] = []

    def discover(module: Any, args: tuple[Any, ...]) -> None:
        if _is_base_model(module) and not any(module is m for m in found):
            found.append(module)

    handle = torch.nn.modules.module.register_module_forward_pre_hook(discover)
    try:
        step()
    finally:
        handle.remove()
    return found


@contextmanager
def counting(models: list[Any]) -> Iterator[StepFlops]:
    """Record every forward of ``models`` run inside; :meth:`StepFlops.resolve` the result afterwards.

    The hook only queues a row-length sum on the device (no host read, so no synchronization while timing); a
    forward counts x3 when it builds a graph for backward (grad enabled and some weight trainable).
    """
    import torch

    step = StepFlops()

    def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        inputs = kwargs.get("input_ids", args[0] if args else None)
        if inputs is None:
            inputs = kwargs.get("inputs_embeds")
        if inputs is None:
            return
        mask = kwargs.get("attention_mask")
        lengths = mask.sum(dim=1) if mask is not None and mask.dim() == 2 else None
        trained = torch.is_grad_enabled() and any(p.requires_grad for p in module.parameters())
        step.pending.append((module.config, lengths, inputs.shape[0], inputs.shape[1], trained))

    handles = [model.register_forward_pre_hook(hook, with_kwargs=True) for model in models]
    try:
        yield step
    finally:
        for handle in handles:
            handle.remove()
