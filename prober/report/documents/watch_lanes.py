"""The watch streams in the run report: one lane per watch stream under its LB's request rows,
and a table with their three tests.

A lane shows what an informer behind that LB lived through: a green bar while a watch was
established, a tick where it ended (grey for its timeout or the daemon's stop, red for a cut), a
red ring where a re-watch landed on a server already shutting down (doomed), and an orange
bar where the heartbeat went unseen past the blind threshold (blind). The shutdown windows'
bands run through the lanes, so an end can be read against the window that caused it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prober.core.models import LB
from prober.core.watch import WatchResult
from prober.report.format.page import status_cell
from prober.report.format.svg import FAILURE, LATE, Scale, esc
from prober.report.format.tables import seconds
from prober.report.results.watch_syncs import syncs_text
from prober.report.results.watches import WatchStreams
from prober.report.verdicts.verdicts import Verdict

ESTABLISHED = "#009E73"
QUIET_END = "#777777"
QUIET_HOWS = ("timeout", "stopped")  # ends a healthy watch has too; "closed" is a cut


@dataclass(frozen=True, slots=True)
class WatchLane:
    protocol: str
    result: WatchResult
    end_t: float  # the run's end: where a watch still established is drawn to

    @property
    def label(self) -> str:
        return f"{self.protocol} · watch"

    def draw(self, scale: Scale, y: float, zoomed: bool) -> str:
        del zoomed  # the lane's marks are the same at every zoom
        parts = [f'<line class="row" x1="{scale.start}" x2="{scale.end}" y1="{y}" y2="{y}"/>']
        for start, end in self.result.spans:
            title = f"watch established from {start:.2f} s"
            parts.append(_bar(scale, (start, self.end_t if end is None else end), (y - 2, 4),
                              ESTABLISHED, title))  # fmt: skip
        for start, end in self.result.blind:
            title = f"blind from {start:.2f} s to {end:.2f} s ({end - start:.2f} s)"
            parts.append(_bar(scale, (start, end), (y + 6, 5), LATE, title))
        for e in self.result.ended:
            if scale.lo <= e.t <= scale.hi:
                colour = QUIET_END if e.how in QUIET_HOWS else FAILURE
                on = f" on {e.server}" if e.server else ""
                parts.append(
                    f'<path d="M{scale(e.t):.1f} {y - 9}V{y + 3}" stroke="{colour}" '
                    f'stroke-width="1.5"><title>watch ended ({esc(e.how)}){esc(on)} at '
                    f"{e.t:.2f} s</title></path>"
                )
        for a, _ in self.result.doomed_at:
            if scale.lo <= a.t <= scale.hi:
                parts.append(
                    f'<circle cx="{scale(a.t):.1f}" cy="{y - 10}" r="3.5" fill="none" '
                    f'stroke="{FAILURE}" stroke-width="1.5"><title>doomed re-watch at {a.t:.2f} s'
                    f" on {esc(a.server)}, already shutting down</title></circle>"
                )
        return "\n".join(p for p in parts if p)


def _bar(
    scale: Scale, span: tuple[float, float], box: tuple[float, float], fill: str, title: str
) -> str:
    """A bar over `span` seconds, `box` = (its top, its height) in pixels."""
    (start, end), (y, height) = span, box
    if end < scale.lo or start > scale.hi:
        return ""
    x0, x1 = scale.clamp(start), scale.clamp(end)
    return (
        f'<rect x="{x0:.1f}" y="{y:.1f}" width="{max(x1 - x0, 1.5):.1f}" height="{height}" '
        f'fill="{fill}" fill-opacity="0.8"><title>{esc(title)}</title></rect>'
    )


def watch_lanes(streams: WatchStreams, end_t: float) -> dict[LB, list[WatchLane]]:
    """Each LB's watch lanes, by protocol (`watches.watch_streams`)."""
    return {
        lb: [WatchLane(protocol, result, end_t) for protocol, result in found]
        for lb, found in streams.items()
    }


def watch_table(section: Mapping[str, Any] | None, verdicts: Sequence[Verdict]) -> str:
    if not section or not section["streams"]:
        return "<p>No watch streams in this run.</p>"
    rows = []
    for entry in section["streams"]:
        mine = [
            v for v in verdicts if v.stream == entry["stream"] and v.key and v.key[2] == "watch"
        ]
        ends = ", ".join(f"{how} {n}" for how, n in entry["ends"].items()) or "-"
        r, lag = entry["reestablish"], entry["lag"]
        cells = [
            esc(entry["lb"]), esc(entry["protocol"]), str(entry["established"]), esc(ends),
            str(entry["doomed"]), f"{seconds(r['p50'])} / {seconds(r['max'])}",
            f"{seconds(lag['p50'], 3)} / {seconds(lag['p99'], 3)}", seconds(entry["blind_seconds"]),
            esc(syncs_text(entry.get("syncs"))),
        ]  # fmt: skip
        rows.append(
            "<tr>" + "".join(f"<td>{c}</td>" for c in cells)
            + "".join(status_cell(v.status, v.message) for v in mine) + "</tr>"
        )  # fmt: skip
    head = (
        "<tr><th>load balancer</th><th>protocol</th><th>watches</th><th>ends</th>"
        "<th>doomed</th><th>re-establish p50 / max</th><th>heartbeat lag p50 / p99</th>"
        "<th>blind</th><th>syncs (p50 / max)</th><th>should re-establish in time</th>"
        "<th>should not land on a shutting-down apiserver</th><th>should not be blind</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"
