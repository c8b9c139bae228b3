"""What a file the prober wrote is, from what it holds: so that a valid file given where
another kind was expected (`prober analyze summary.json`, `prober thresholds events.jsonl`) is
named for what it is and what was expected, not called "not JSON" or missing a field.

Only the documents' shapes are known here (their identifying keys), not their schemas: each
reader still checks the file it expects, field by field.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from prober.core import strictjson

EVENT_LOG = "an event log"
SUMMARY = "a summary.json"
THRESHOLDS = "a thresholds.json"
MAX_SNIFFED = 16 * 1024 * 1024  # a summary of a long run is a few MB; past this, no guess

# Kind, the keys that tell it, and the command that writes it; the first match wins.
_DOCUMENTS: tuple[tuple[str, frozenset[str], str], ...] = (
    (SUMMARY, frozenset({"run_id", "windows", "worst"}), "prober analyze"),
    (THRESHOLDS, frozenset({"entries"}), "prober thresholds"),
    ("a recommendations.json", frozenset({"rule", "platforms"}), "prober recommend"),
    ("a regression.json", frozenset({"test", "results"}), "prober thresholds --check"),
    ("an audit-summary.json", frozenset({"bad_lines", "late"}), "prober audit summarize"),
)


def of_document(document: object) -> str | None:
    """The kind of a parsed JSON document, with the command that writes it, or None."""
    if not isinstance(document, Mapping):
        return None
    if isinstance(document.get("kind"), str) and "v" in document:
        return f"{EVENT_LOG} (prober run writes it)"
    for kind, keys, writer in _DOCUMENTS:
        if keys <= document.keys():
            return f"{kind} ({writer} writes it)"
    return None


def of_text(text: str) -> str | None:
    """The kind of a file's text: one JSON document, or JSON lines (an event log)."""
    try:
        return of_document(strictjson.loads_marked(text))
    except ValueError:
        pass
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        return of_document(strictjson.loads_marked(first))
    except ValueError:
        return None


def of_file(path: Path) -> str | None:
    """The kind of a plain file, or None when it cannot be told (gzip, too large, unreadable)."""
    try:
        if path.stat().st_size > MAX_SNIFFED:
            return None
        return of_text(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def mismatch(path: Path | str, found: str | None, expected: str) -> str | None:
    """The one line that names a file of the wrong kind, or None if it is not known to be."""
    if found is None or found.startswith(expected + " "):
        return None
    return f"{path}: {found}, not {expected}"
