"""The phases of a server's shutdown in which a connection was opened, in the words the
connection-age finding and its tables both use (`connection_ages`, `age_tables`)."""

from __future__ import annotations

WORDS = {
    "before": "before T0",
    "delay_early": "0-80 %",
    "delay_late": "80-100 %",
    "after": "after",
    "no_server": "no answer",  # no answer on its connection named its server
    "no_shutdown": "no shutdown",
    "no_age": "no age",
    "unknown": "?",
}


def phase_counts(counts: dict[str, int]) -> str:
    """`0-80 % 12, 80-100 % 2`: each phase in words with its count."""
    return ", ".join(f"{phase_words(k)} {n}" for k, n in counts.items())


def phase_words(key: str) -> str:
    """A row's `opened` in words; `a|b`, where its bounds allow either, as both."""
    return "|".join(WORDS.get(part, part) for part in key.split("|"))
