"""A host tensor's copies on the devices a training step asks for it on, each made once.

A step that copies host data to a GPU (``torch.tensor(ids, device=...)``, ``host_tensor.to(device)``) makes the host
wait for the copy, and so for every kernel queued before it: constants a step needs on the device (special token
ids, template lengths) are copied there the first time and kept.
"""

from __future__ import annotations

import torch


class DeviceCopies:
    """``host`` and its copy on each device :meth:`on` was asked for, made at the first ask."""

    def __init__(self, host: torch.Tensor) -> None:
        self.host = host
        self._copies: dict[torch.device, torch.Tensor] = {}

    def on(self, device: torch.device) -> torch.Tensor:
        """``host`` on ``device`` (the same tensor at every call for one device)."""
        if device not in self._copies:
            self._copies[device] = self.host.to(device)
        return self._copies[device]
