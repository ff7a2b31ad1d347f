"""The attention kernels ``--attn_implementation`` takes, and what each needs, checked before anything loads.

transformers reports a kernel it cannot use late and at length: an unknown name after the corpus is read, in a
message that lists ``"paged|eager"``; flash attention without its package, or on the CPU, in a traceback as the
model loads; flex attention's missing backward pass on the CPU, and its refusal of attention dropout, only at the
first training step. Here each is one line, before the data or the weights load.
"""

from __future__ import annotations

import warnings

import torch
from transformers import PretrainedConfig

from ..errors import UsageError, echo

ATTENTION_KERNELS = {
    "eager": None,
    "sdpa": "_supports_sdpa",
    "flash_attention_2": "_supports_flash_attn",
    "flash_attention_3": "_supports_flash_attn",
    "flex_attention": "_supports_flex_attn",
}
"""The kernels ``--attn_implementation`` takes, by the flag of transformers' model class that says an encoder has
it (``eager``: every encoder)."""

FLASH_PACKAGES = {
    "flash_attention_2": "the flash-attn package (pip install flash-attn)",
    "flash_attention_3": "FlashAttention 3 (flash_attn_interface, built from flash-attention's hopper/ folder)",
}
"""What each flash kernel needs installed, for the message when transformers finds it missing."""


def attention_support(config: PretrainedConfig) -> dict[str, bool]:
    """The attention kernels the class ``AutoModel`` builds for ``config`` supports, as transformers' support flags
    (``_supports_sdpa``, ``_supports_flash_attn``, ``_supports_flex_attn``); empty for a config ``AutoModel`` does
    not know (building it then fails with transformers' own error)."""
    from transformers import MODEL_MAPPING

    try:
        model_class = MODEL_MAPPING[type(config)]
    except (KeyError, ValueError):
        return {}
    return {flag: bool(getattr(model_class, flag, False)) for flag in sorted(set(ATTENTION_KERNELS.values()) - {None})}


def check_kernel_name(kernel: str | None) -> None:
    """Raise :class:`~hf_cse.errors.UsageError` for a ``kernel`` not in :data:`ATTENTION_KERNELS` (``None``:
    transformers' choice, fine)."""
    if kernel is not None and kernel not in ATTENTION_KERNELS:
        raise UsageError(f"attn_implementation {echo(kernel)} is not one of: {', '.join(ATTENTION_KERNELS)}.")


def check_kernel_trains_on(kernel: str | None, device: torch.device) -> None:
    """Raise :class:`~hf_cse.errors.UsageError` when ``kernel`` cannot train on ``device``: a flash kernel off a CUDA
    GPU or without its package (transformers' own availability check), flex attention where torch's FlexAttention
    has no backward pass (:func:`flex_attention_trains_on`)."""
    if kernel in FLASH_PACKAGES:
        import transformers.utils

        if device.type != "cuda":
            raise UsageError(
                f"attn_implementation {kernel!r} runs on CUDA GPUs only, and this run trains on {device.type}: use "
                "sdpa or eager there."
            )
        if not getattr(transformers.utils, f"is_{kernel.replace('attention', 'attn')}_available")():
            raise UsageError(
                f"attn_implementation {kernel!r} needs {FLASH_PACKAGES[kernel]}, which transformers does not find "
                "here; or use sdpa."
            )
    if kernel == "flex_attention" and not flex_attention_trains_on(device):
        raise UsageError(
            f"attn_implementation 'flex_attention' cannot train on {device.type}: torch {torch.__version__}'s "
            "FlexAttention has no backward pass there. Use sdpa or eager."
        )


def flex_attention_trains_on(device: torch.device) -> bool:
    """Whether torch's FlexAttention takes inputs that need gradients on ``device``: a probe of 16 positions (torch
    refuses them on the CPU before computing anything)."""
    from torch.nn.attention.flex_attention import flex_attention

    probe = torch.zeros(1, 1, 16, 16, device=device, requires_grad=True)
    try:
        with warnings.catch_warnings():  # "called without torch.compile": this probe needs no fused kernel
            warnings.simplefilter("ignore")
            flex_attention(probe, probe, probe)
    except NotImplementedError:
        return False
    return True


def check_kernel_fits(kernel: str | None, config: PretrainedConfig, attention_dropout: dict[str, float]) -> None:
    """Raise :class:`~hf_cse.errors.UsageError` when the encoder ``config`` builds does not support ``kernel`` (its
    class's flag, :func:`attention_support`), or for flex attention with ``attention_dropout`` (the config's attention
    dropout fields, ``{field: probability}``), which it refuses in training (SimCSE's dropout views on a decoder need
    that dropout: sdpa or eager then)."""
    if kernel is None or ATTENTION_KERNELS[kernel] is None:
        return
    support = attention_support(config)
    if support and not support[ATTENTION_KERNELS[kernel]]:
        usable = [name for name, flag in ATTENTION_KERNELS.items() if flag is None or support[flag]]
        raise UsageError(
            f"attn_implementation {kernel!r}: transformers' {config.model_type!r} model does not support it; it "
            f"supports: {', '.join(usable)}."
        )
    if kernel == "flex_attention" and any(attention_dropout.values()):
        named = ", ".join(f"{key}={value:g}" for key, value in attention_dropout.items() if value)
        raise UsageError(
            f"attn_implementation 'flex_attention' does not support attention dropout in training ({named}): use "
            "sdpa or eager, or --dropout 0."
        )
