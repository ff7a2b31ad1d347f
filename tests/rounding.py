"""The tolerance of every test that compares two computations of the same value done in a different order: 2
processes against 1 over the global batch, gradient caching against one pass, a gathered gradient against one
process's.

Those computations run in float64. Their two sides then differ only in the order of their sums (an all-reduce over
processes, matrix products over 4 rows or 8, an encoding in chunks), and a reordered sum of ``n`` terms moves by at
most about ``n * eps`` of the terms' magnitudes (``eps = 2**-52 = 2.2e-16``, float64's machine epsilon): with
``n`` in the hundreds here (hidden size 32, 8 sentences of ~10 tokens, 3 steps) that is ~1e-13 of the run's scale;
the 2-process runs of tests/distributed_equivalence.py measured at most 2.5e-14 (PromptBERT's parameters after 3
steps; 5e-17 to 4e-16 for the others). A real difference (a row's gradient lost or counted twice, a random draw
not shared between processes, a term computed per process where one process computes it over the global batch)
changes the result by at least one row's share of it, ~1e-3 of the run's scale or more.

:data:`AGREEMENT`, ``sqrt(eps) = 1.5e-8`` (half of float64's digits), sits ~10^5 above the first and ~10^5 below
the second, so whether a comparison passes depends neither on the machine's rounding nor on luck. It is relative to
the largest magnitude among all the compared values (every parameter of a model, every gradient, every logged
loss): relative to each tensor alone, a mathematically zero quantity (a gradient that cancels, as the last
LayerNorm's bias under template denoising) would be compared against its own rounding noise.

In float32 the same runs differ by ~1e-7 of their scale, times the learning rate and the steps for parameters after
SGD (and a 1e-5 tolerance fails on one machine and passes on another): hence float64, whose runs the helpers check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

FLOAT64_EPS = torch.finfo(torch.float64).eps
"""float64's machine epsilon, ``2**-52``."""

AGREEMENT = math.sqrt(FLOAT64_EPS)
"""How far, relative to the compared values' largest magnitude, two float64 computations of one value that sum in
different orders may differ: ``sqrt(eps) = 1.5e-8`` (see the module's docstring for why)."""


def as_float64(values: torch.Tensor | Sequence) -> torch.Tensor:
    """``values`` (a tensor, or the nested lists a run's JSON holds) as a float64 tensor; a tensor of another dtype is
    refused in one line, since only float64 runs differ by float64 rounding alone."""
    if isinstance(values, torch.Tensor):
        if values.dtype != torch.float64:
            raise TypeError(f"expected a float64 tensor (the run must be float64), got {values.dtype}.")
        return values
    return torch.tensor(values, dtype=torch.float64)  # JSON numbers are float64: read back exactly


def assert_equal_up_to_float64_rounding(
    got: Mapping[str, torch.Tensor | Sequence], expected: Mapping[str, torch.Tensor | Sequence], what: str
) -> None:
    """Every entry of ``got`` equal to ``expected``'s within :data:`AGREEMENT` times the largest magnitude of all of
    ``expected`` (``what`` names them in the message: "parameters", "gradients", "losses")."""
    assert got.keys() == expected.keys(), (what, sorted(got), sorted(expected))
    expected_tensors = {name: as_float64(value) for name, value in expected.items()}
    scale = max((tensor.abs().max().item() for tensor in expected_tensors.values() if tensor.numel()), default=0.0)
    tolerance = AGREEMENT * scale
    for name, value in expected_tensors.items():
        other = as_float64(got[name])
        assert other.shape == value.shape, f"{what} {name}: shape {tuple(other.shape)}, expected {tuple(value.shape)}"
        error = (other - value).abs().max().item() if value.numel() else 0.0
        assert error <= tolerance, f"{what} {name}: differ by {error:.3g}, beyond sqrt(eps) x {scale:.3g}"


FLOAT32_EPS = torch.finfo(torch.float32).eps
"""float32's machine epsilon, ``2**-23``."""

LOGGED_FLOAT32_ROUNDINGS = 12
"""How many times a logged loss of a float64 run is rounded to float32, on both sides of a comparison together: the
Trainer's running loss is a float32 tensor, and ``CSETrainer.log`` averages each loss part in float32. On each side,
at most: each of two micro-batches' values cast, the float32 sum and division of their mean, and the float32 sum and
division of the mean over processes; 6 each."""

LOGGED_DECIMALS = 6
"""``CSETrainer.log`` rounds each logged loss part (``loss_simcse``, ``loss_bml``, ...) to 6 decimal places."""


def assert_logged_losses_agree(
    got: Sequence[float], expected: Sequence[float], what: str, decimals: int | None
) -> None:
    """Losses the trainer logged in two float64 runs of the same steps, equal up to their logging's rounding. The
    losses are nonnegative and every rounded quantity (a micro-batch's value, a process's mean, a sum) enters the
    logged value divided by the number of values it averages, so each of :data:`LOGGED_FLOAT32_ROUNDINGS` float32
    roundings moves it by at most ``eps32 / 2`` of it (of the largest logged value, here); rounding to ``decimals``
    places (``None``: none) moves each side by at most half a unit of the last place. The float64 difference
    underneath (~1e-15 of the values) is far below both."""
    assert len(got) == len(expected), (what, len(got), len(expected))
    scale = max((abs(value) for value in expected), default=0.0)
    tolerance = LOGGED_FLOAT32_ROUNDINGS * FLOAT32_EPS / 2 * scale + (10.0**-decimals if decimals is not None else 0.0)
    for step, (a, b) in enumerate(zip(got, expected, strict=True)):
        assert abs(a - b) <= tolerance, f"{what} at step {step + 1}: {a} and {b} differ beyond {tolerance:.3g}"
