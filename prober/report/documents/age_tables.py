"""summary.json's `connection_ages` (`report.results.connection_ages`) as a table: in the text of
`prober analyze` and `prober lab`, and in report.html with each LB's finding and its test's
outcome."""

from __future__ import annotations

from collections.abc import Mapping

from prober.report.format.phase_words import phase_counts, phase_words
from prober.report.format.svg import esc
from prober.report.format.tables import table
from prober.report.schema.types import ConnectionAgesSection

LEGEND = (
    "opened: the phase of its server's shutdown in which the connection was opened (before T0,"
    " 0-80 % or 80-100 % of the delay, after it; a|b: its bounds allow either); each count "
    "says in which phase it was itself met; resent: its kept connection was cut as it went "
    "out, and it was sent again on a new one, as Go's transport does"
)


def age_lines(section: ConnectionAgesSection | None) -> list[str]:
    """The table as text, with its legend: for `prober analyze` and `prober lab`."""
    if not section or not section["rows"]:
        return []
    rows = [
        [r["lb"], r["protocol"], r["connection"], phase_words(r["opened"]),
         _cell(r["late"]), _cell(r["failed"], r["errors"]), _cell(r["resent"])]
        for r in section["rows"]
    ]  # fmt: skip
    headers = ["lb", "protocol", "connection", "opened", "late", "failed", "resent"]
    return [
        "",
        "requests by the phase of its server's shutdown in which their connection was opened:",
        *table(headers, rows),
        LEGEND,
    ]


def ages_html(section: ConnectionAgesSection | None, status: Mapping[str, str]) -> str:
    """The table and the findings, each with its test's outcome (`status`, by LB)."""
    if section is None:
        return "<p>This log has no samples: no connection ages.</p>"
    if not section["rows"]:
        return "<p>No failure, late answer or resend.</p>"
    cells = [
        [esc(r["lb"]), esc(r["protocol"]), esc(r["connection"]), esc(phase_words(r["opened"])),
         esc(_cell(r["late"])), esc(_cell(r["failed"], r["errors"])), esc(_cell(r["resent"]))]
        for r in section["rows"]
    ]  # fmt: skip
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in cells)
    head = (
        "<tr><th>load balancer</th><th>protocol</th><th>connections</th>"
        "<th>connection opened</th><th>late answers</th><th>failed</th><th>resent</th></tr>"
    )
    findings = "".join(
        f'<li><span class="{esc(s)}">{esc(s)}</span> {esc(f["text"])}</li>'
        for f in section["findings"]
        for s in [status.get(f["lb"], "finding")]
    )
    return (
        f'<table>{head}{body}</table><p class="why">{esc(LEGEND)}</p>'
        f'<ul class="explained">{findings}</ul>'
    )


def _cell(counts: dict[str, int], errors: dict[str, int] | None = None) -> str:
    """`14: 0-80 % 12, 80-100 % 2`, with the failures' classes in brackets."""
    if not counts:
        return "-"
    text = f"{sum(counts.values())}: {phase_counts(counts)}"
    if errors:
        text += " [" + ", ".join(f"{c} {n}" for c, n in errors.items()) + "]"
    return text
