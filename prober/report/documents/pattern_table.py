"""Each disruption interval's pattern (`report.results.patterns`) for a reader: in the terminal
(`prober analyze`, `prober lab`) a row per interval and the seconds by pattern; in
`report.html` a cell per interval of its table, and the seconds by pattern per LB. Read from
summary.json's fields, never decided again."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from prober.report.format.svg import esc
from prober.report.format.tables import secs, table
from prober.report.schema.types import IntervalEntry, SummaryDocument

EXPLAIN = (
    "pattern: what each interval points at, the first rule that fits "
    "(docs/glossary.md, 'Why an interval happened')"
)

Key = tuple[str, float]


def interval_key(stream: str, start_t: float) -> Key:
    """An interval as the summary and the replay both name it: its stream and its start."""
    return stream, round(start_t, 6)


def by_interval(summary: SummaryDocument) -> dict[Key, IntervalEntry]:
    return {
        interval_key(s["stream"], i["start_t"]): i
        for s in summary["streams"]
        for i in s["intervals"]
    }


def pattern_lines(summary: SummaryDocument) -> list[str]:
    """A row per labelled interval, in time order, and every stream's seconds by pattern."""
    rows = [
        (i["start_t"], s["stream"], i)
        for s in summary["streams"]
        for i in s["intervals"]
        if "pattern" in i
    ]
    if not rows:
        return []
    body = [
        [
            stream,
            f"{i['start_t']:.2f} s",
            secs(i["end_t"] - i["start_t"]),
            str(i["samples"]),
            i.get("cause", "-"),
            i["pattern"],
            i.get("pattern_confidence", "-"),
            i.get("pattern_evidence", ""),
        ]
        for _, stream, i in sorted(rows, key=lambda r: (r[0], r[1]))
    ]
    headers = ["stream", "from", "length", "failed", "cause", "pattern", "confidence", "evidence"]
    totals = summary.get("patterns", {})
    said = ", ".join(f"{name} {secs(value)}" for name, value in totals.items())
    return [
        "",
        "disruption intervals by pattern:",
        *table(headers, body),
        f"disruption seconds by pattern, every stream: {said}",
        EXPLAIN,
    ]


def cell(labelled: Mapping[Key, IntervalEntry], stream: str, start_t: float) -> str:
    """The interval's pattern and confidence, its evidence as the cell's title."""
    entry = labelled.get(interval_key(stream, start_t))
    if entry is None or "pattern" not in entry:
        return "<td>-</td>"
    evidence = esc(entry.get("pattern_evidence", ""))
    confidence = esc(entry.get("pattern_confidence", ""))
    return f'<td title="{evidence}">{esc(entry["pattern"])} ({confidence})</td>'


def title(entry: IntervalEntry) -> str:
    """`: pattern P (C confidence)` for an interval's mark in the timeline, or ""."""
    if "pattern" not in entry:
        return ""
    return f": pattern {entry['pattern']} ({entry.get('pattern_confidence')} confidence)"


def pattern_seconds_table(summary: SummaryDocument) -> str:
    """Per LB, its streams' disruption seconds by pattern."""
    per_lb: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for stream in summary["streams"]:
        for name, value in stream.get("pattern_seconds", {}).items():
            per_lb[stream["lb"]][name] += value
    names = sorted({name for seconds in per_lb.values() for name in seconds})
    if not names:
        return "<p>No interval to label.</p>"
    head = "<tr><th>LB</th>" + "".join(f"<th>{esc(n)}</th>" for n in names) + "</tr>"
    rows = [
        f"<tr><td>{esc(lb)}</td>"
        + "".join(f'<td class="num">{secs(per_lb[lb].get(n, 0.0))}</td>' for n in names)
        + "</tr>"
        for lb in sorted(per_lb)
    ]
    note = f"<p>Disruption seconds by pattern, every stream of each LB; {esc(EXPLAIN)}.</p>"
    return f"{note}<table>{head}{''.join(rows)}</table>"
