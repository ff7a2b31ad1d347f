"""Third-party log lines that hf_cse does not pass on, filtered before those libraries are imported.

bitsandbytes (the ``qlora`` extra), on a CPU with AVX512-BF16 (this includes the CPUs of GPU servers), tries at every
import to fetch a faster CPU 4-bit kernel from the Hub through the ``kernels`` package, and logs a warning when it
cannot. peft imports bitsandbytes whenever it is installed, so those lines came before every hf_cse command's output,
its one-line errors included, whether or not the run used 4-bit weights:

- bitsandbytes' own "Failed to load CPU gemm_4bit_forward from kernels-community" (``kernels`` missing, or the kernel
  not to be had): bitsandbytes then uses its own CPU kernel;
- since transformers 5.25 requires ``kernels``, kernels' "Skipping publisher trust check for
  'kernels-community/quantization-bitsandbytes'" whenever the Hub is offline (``HF_HUB_OFFLINE=1``).

Only those messages are dropped: bitsandbytes' and kernels' other warnings pass.

:func:`errors_only` quiets named loggers for a block instead (huggingface_hub's retries, a sweep's argument check).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

BITSANDBYTES_CPU_KERNEL_LOGGER = "bitsandbytes.backends.cpu.ops"
BITSANDBYTES_KERNELS_HINT = "Failed to load CPU gemm_4bit_forward from kernels-community"
KERNELS_HUB_LOGGER = "kernels._internals.hf_hub"
KERNELS_OFFLINE_TRUST_NOTE = "Skipping publisher trust check for 'kernels-community/quantization-bitsandbytes'"


# A callable is a logging filter: each drops the records whose message starts with its prefix.
for _logger, _prefix in (
    (BITSANDBYTES_CPU_KERNEL_LOGGER, BITSANDBYTES_KERNELS_HINT),
    (KERNELS_HUB_LOGGER, KERNELS_OFFLINE_TRUST_NOTE),
):
    logging.getLogger(_logger).addFilter(lambda record, prefix=_prefix: not str(record.msg).startswith(prefix))


@contextlib.contextmanager
def errors_only(*names: str) -> Iterator[None]:
    """Only errors from the named loggers inside the block; their levels as they were after it."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
