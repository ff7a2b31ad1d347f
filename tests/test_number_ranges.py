""":func:`hf_cse.number_ranges.check_setting`, the check of an objective's, loss form's or auxiliary loss's
hyperparameters: the same :class:`~hf_cse.number_ranges.NumberRange` as the flags and argument fields (issue 53, one
range validator), in the words of a Python API's error."""

from __future__ import annotations

import math

import pytest

from hf_cse.number_ranges import NumberRange, check_setting


def test_an_accepted_value_comes_back_as_the_range_s_kind() -> None:
    count = check_setting("ascent_steps", 3, NumberRange(low=0, high=100, integer=True))
    rate = check_setting("phi", 1, NumberRange(low=0, low_open=True, high=1))
    assert (count, type(count)) == (3, int)
    assert (rate, type(rate)) == (1.0, float)


@pytest.mark.parametrize(
    ("value", "valid", "message"),
    [
        (0, NumberRange(low=0, low_open=True, high=1), r"^phi must be a number in \(0, 1\], got 0\.$"),
        (math.nan, NumberRange(low=0, high=1), r"^phi must be a number in \[0, 1\], got nan\.$"),
        ("0.5", NumberRange(low=0, high=1), r"^phi must be a number in \[0, 1\], got '0\.5'\.$"),
        (True, NumberRange(low=0, high=1), r"^phi must be a number in \[0, 1\], got True\.$"),
        # an integer setting takes an int: 2.0 is refused, as the flags and argument fields refuse it
        (2.0, NumberRange(low=1, high=16, integer=True), r"^phi must be an integer in \[1, 16\], got 2\.0\.$"),
        (1e-3 / 2, NumberRange(low=1e-3, high=10), r"^phi must be a number in \[0\.001, 10\], got 0\.0005\.$"),
    ],
)
def test_a_refused_value_is_one_line_naming_it_and_the_range(value: object, valid: NumberRange, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_setting("phi", value, valid)
