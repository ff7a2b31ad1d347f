"""Comparing a 2-process run with one process over the global batch: the dumps of tests/distributed_equivalence.py
(and of the scripts built on it)."""

from __future__ import annotations

from rounding import LOGGED_DECIMALS, assert_equal_up_to_float64_rounding, assert_logged_losses_agree


def assert_two_processes_equal_one(single: dict, two: dict) -> None:
    """Both processes ended identical (gradients all-reduced) and equal to one process over the global batch. Both
    runs are float64 (tests/distributed_equivalence.py) and differ only in the order of their sums: every parameter
    equal up to float64 rounding, every logged loss up to its float32 logging (tests/rounding.py)."""
    assert single["dtype"] == two["dtype"] == "torch.float64"
    assert two["rank_spread"] == 0.0
    assert_logged_losses_agree(two["losses"], single["losses"], "loss", decimals=None)
    # Each logged part (per Matryoshka dimension too) is the mean over processes of their rows' losses.
    assert [sorted(parts) for parts in two["loss_parts"]] == [sorted(parts) for parts in single["loss_parts"]]
    for key in single["loss_parts"][0] if single["loss_parts"] else []:
        got, expected = ([parts[key] for parts in run["loss_parts"]] for run in (two, single))
        assert_logged_losses_agree(got, expected, key, decimals=LOGGED_DECIMALS)
    assert_equal_up_to_float64_rounding(two["parameters"], single["parameters"], "parameters")
