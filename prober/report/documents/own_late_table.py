"""summary.json's `own_late` (`report.results.own_late`) beside the 20 % rule: per shutdown
window, the connections the prober itself opened in the delay's last 20 % and the requests it
sent on them, in the text of `prober analyze` and `prober lab`, and in report.html."""

from __future__ import annotations

from prober.report.format.svg import esc
from prober.report.format.tables import table
from prober.report.schema.types import OwnLateSection

LEGEND = (
    "the apiserver calls a connection accepted past 80 % of its delay late, and audits every "
    "request on it (openshift.io/during-graceful): these are the prober's own, its User-Agent "
    "`prober/<version> <stream>`; maybe: the bounds put the opening on either side of a mark"
)


def own_late_lines(section: OwnLateSection | None) -> list[str]:
    if not section or not section["windows"]:
        return []
    rows = [
        [w["node"] or w["host"], f"{w['t0']:.2f}", s["stream"], str(s["connections"]),
         str(s["requests"]), f"{s['maybe_connections']}/{s['maybe_requests']}"]
        for w in section["windows"]
        for s in w["streams"]
    ]  # fmt: skip
    headers = ["apiserver", "T0", "stream", "connections", "requests", "maybe conn/req"]
    said = (
        f"the prober's own connections opened in the delay's last 20 %: "
        f"{section['connections']}, {section['requests']} requests on them"
    )
    return ["", said, *(table(headers, rows) if rows else []), LEGEND]


def own_late_html(section: OwnLateSection | None) -> str:
    if not section or not section["windows"]:
        return "<p>No kube-apiserver shut down: no connection of the prober's could be late.</p>"
    items = "".join(f"<li>{esc(w['text'])}</li>" for w in section["windows"])
    rows = "".join(
        f"<tr><td>{esc(w['node'] or w['host'])}</td><td>{esc(s['stream'])}</td>"
        f'<td class="num">{s["connections"]}</td><td class="num">{s["requests"]}</td>'
        f'<td class="num">{s["maybe_connections"]} / {s["maybe_requests"]}</td></tr>'
        for w in section["windows"]
        for s in w["streams"]
    )
    head = (
        "<tr><th>apiserver</th><th>stream</th><th>connections</th><th>requests on them</th>"
        "<th>maybe: connections / requests</th></tr>"
    )
    table_html = f"<table>{head}{rows}</table>" if rows else ""
    return (
        "<h3>The prober's own late connections</h3>"
        f'<ul class="explained">{items}</ul>{table_html}<p class="note">{esc(LEGEND)}</p>'
    )
