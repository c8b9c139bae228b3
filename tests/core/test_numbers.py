"""Whole numbers out of what a server sent: digits to `str.isdigit` are not all digits to
`int()` (`core.numbers`)."""

from __future__ import annotations

import pytest

from prober.core.numbers import decimal_or_none, micro_floats


@pytest.mark.parametrize(
    ("text", "number"),
    [("7", 7), ("0", 0), ("123456", 123456), ("", None), ("-1", None), ("1.5", None),
     (" 7", None), ("\u00b2", None), ("\u0661", None), ("9" * 21, None)],
)  # fmt: skip
def test_only_ascii_digits_are_a_number(text: str, number: int | None) -> None:
    assert decimal_or_none(text) == number


def test_floats_are_kept_to_the_microsecond_at_any_depth() -> None:
    noisy = {"a": 2.6982039999999996, "b": [0.9514829999999999, {"c": 7.7931479999999995}],
             "d": 3, "e": "2.6982039999999996", "f": None, "g": True}  # fmt: skip
    assert micro_floats(noisy) == {"a": 2.698204, "b": [0.951483, {"c": 7.793148}], "d": 3,
                                   "e": "2.6982039999999996", "f": None, "g": True}  # fmt: skip
