"""Reading whole numbers out of text that someone else wrote (a flag, a header, a file).

`str.isdigit` is true of '²' and '١', which `int()` refuses with ValueError (or reads as
another number), and `int()` of more than 4,300 digits raises too: a check that lets either
through turns bad input into a traceback, or into a dead worker when a server sent it.
"""

from __future__ import annotations

MAX_DIGITS = 20  # more than any value the prober reads (int64 has 19)


def is_decimal(text: str) -> bool:
    """One to MAX_DIGITS ASCII digits, nothing else: safe for `int()`."""
    return 0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()


def decimal_or_none(text: str) -> int | None:
    """The whole number `text` spells in ASCII digits (a resourceVersion, a Retry-After);
    None for anything else, which a server may send."""
    return int(text) if is_decimal(text) else None
