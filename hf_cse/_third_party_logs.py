"""Third-party log lines that hf_cse does not pass on, filtered before those libraries are imported.

bitsandbytes (the ``qlora`` extra), on a CPU with AVX512-BF16 (this includes the CPUs of GPU servers), logs a warning
at every import when it cannot fetch a faster CPU 4-bit kernel from the Hub through the optional ``kernels`` package.
peft imports bitsandbytes whenever it is installed, so that line came before every hf_cse command's output, its
one-line errors included, whether or not the run used 4-bit weights. bitsandbytes then uses its own CPU kernel, and
installing ``kernels`` still gives the faster one. Only that message is dropped: bitsandbytes' other warnings pass.
"""

from __future__ import annotations

import logging

BITSANDBYTES_CPU_KERNEL_LOGGER = "bitsandbytes.backends.cpu.ops"
BITSANDBYTES_KERNELS_HINT = "Failed to load CPU gemm_4bit_forward from kernels-community"


class DropMessagesStartingWith(logging.Filter):
    """A logger filter that drops the records whose message starts with ``prefix``."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)


logging.getLogger(BITSANDBYTES_CPU_KERNEL_LOGGER).addFilter(DropMessagesStartingWith(BITSANDBYTES_KERNELS_HINT))
