"""Reading whole numbers out of text that someone else wrote (a flag, a header, a file).

`str.isdigit` is true of '²' and '١', which `int()` refuses with ValueError (or reads as
another number), and `int()` of more than 4,300 digits raises too: a check that lets either
through turns bad input into a traceback, or into a dead worker when a server sent it.
"""

from __future__ import annotations

from typing import TypeVar

_T = TypeVar("_T")
MICRO = 6  # decimals: seconds to the microsecond, as the event log's times

MAX_DIGITS = 20  # more than any value the prober reads (int64 has 19)


def is_decimal(text: str) -> bool:
    """One to MAX_DIGITS ASCII digits, nothing else: safe for `int()`."""
    return 0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()


def decimal_or_none(text: str) -> int | None:
    """The whole number `text` spells in ASCII digits (a resourceVersion, a Retry-After);
    None for anything else, which a server may send."""
    return int(text) if is_decimal(text) else None


def micro(value: float) -> float:
    """Seconds to the microsecond, as the event log's times: past that a float's last digits
    (7.8799999999999955, a difference of two times) are arithmetic, not measurement."""
    return round(value, MICRO)


def micro_floats(document: _T) -> _T:
    """A JSON document with every float to the microsecond, whatever its nesting."""
    if isinstance(document, float):
        return micro(document)  # type: ignore[return-value]
    if isinstance(document, dict):
        return {k: micro_floats(v) for k, v in document.items()}  # type: ignore[return-value]
    if isinstance(document, list | tuple):
        return [micro_floats(v) for v in document]  # type: ignore[return-value]
    return document
