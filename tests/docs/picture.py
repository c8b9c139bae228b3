"""The README's picture, `docs/rollout.svg`: one rolling restart through a late LB and a good one.

Drawn by the report's own timeline (`report.documents.timeline.lb_timeline`, as `report.html` draws
it) from what `prober analyze` replays of the committed golden fixture, a real lab run
(`prober lab --scenario slow-lb --platform gcp --interval 500ms --workers 1`: gcp's external
LB was made slow). Only the new-connection streams are drawn: a kept connection stays on its
server until the server closes it, through any LB, so those rows say nothing of the LB's
health check.

When the timeline's drawing changes on purpose, draw the picture anew and review it:

    make golden        # also runs: .venv/bin/python -m tests.docs.picture --update
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from prober.core.models import LB, REQUEST, Connection, StreamId, Window
from prober.core.phase import LATE_FRACTION
from prober.report.documents.timeline import WIDTH, StreamMarks, View, lb_timeline, stream_marks
from prober.report.format.page import SVG_CSS
from prober.report.format.svg import FAILURE, HOST_COLOURS, LATE, T0, esc, swatch
from prober.report.replay.replay import Replay, replay
from prober.report.replay.runs import RunLog, load_runs

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "golden" / "fixture" / "events.jsonl.gz"
PICTURE = ROOT / "docs" / "rollout.svg"
SHOWN = (LB.EXTERNAL, LB.INTERNAL)
HEAD = 96  # pixels above the first timeline: title, subtitle, legend
GAP = 30  # pixels above each timeline for its heading
# The report's rules for the timeline's classes, on a white ground (GitHub's dark theme).
STYLE = (
    SVG_CSS
    + ".title { font-size: 16px; font-weight: 600; } .lb { font-size: 14px; font-weight: 600; }\n"
)


class Run:
    """What the picture needs of one event log: the run as `prober analyze` replays it."""

    def __init__(self, path: Path) -> None:
        [log], _ = load_runs([path])
        self.log: RunLog = log
        self.replay: Replay = replay(log)

    def marks(self, lb: LB) -> list[StreamMarks]:
        """The new-connection rows of one LB, in the report's order."""
        names = [
            name
            for name in self.log.run.streams_of(REQUEST)
            if (s := StreamId.parse(name)).lb is lb and s.connection is Connection.NEW
        ]
        rows = stream_marks(names, self.log.samples, self.replay.intervals).values()
        return sorted(rows, key=lambda m: (m.stream.target, m.stream.protocol))

    def heading(self, lb: LB) -> str:
        """The LB's verdict in a line: its worst reaction on new connections against the
        delay (late past the report's 80 % mark, `core.phase`), and what failed."""
        seen = [
            (ws, w)
            for w in self.replay.windows
            for ws in w.streams
            if ws.stream_id.lb is lb and ws.stream_id.connection is Connection.NEW
        ]
        reactions = [(ws.reaction, w.delay) for ws, w in seen if ws.reaction is not None]
        failures = sum(ws.failures for ws, _ in seen)
        failed = f"; {failures} requests failed" if failures else "; no request failed"
        if not reactions:
            return f"{lb}: good: sent no request to a shutting-down apiserver{failed}"
        worst, delay = max(reactions)
        verdict = "late" if worst >= LATE_FRACTION * delay else "good"
        return (
            f"{lb}: {verdict}: still sent requests {worst:.1f} s after T0 "
            f"(shutdown delay {delay:g} s){failed}"
        )


def _legend(y: float) -> str:
    items = [
        ("band", HOST_COLOURS[0], "shutdown window of one apiserver"),
        ("line", T0, "T0: /readyz false"),
        ("dash", HOST_COLOURS[0], "delay ends"),
        ("tick", LATE, "late request"),
        ("cross", FAILURE, "failed request"),
        ("bar", FAILURE, "disruption"),
        ("bracket", T0, "reaction"),
    ]
    parts, x = [], 16.0
    for kind, colour, text in items:
        parts.append(f'<g transform="translate({x:.0f},{y - 11})">{swatch(kind, colour)}</g>')
        parts.append(f'<text x="{x + 32:.0f}" y="{y}">{esc(text)}</text>')
        x += 32 + 6.6 * len(text) + 14
    return "\n".join(parts)


def draw(path: Path = FIXTURE) -> str:
    """The picture of the run in `path`, as SVG text."""
    run = Run(path)
    # Named by their node: the apiservers' long ids would overlap in the windows' labels.
    windows: list[Window] = [
        replace(w, host=w.node or w.host, node=None) for w in run.replay.windows
    ]
    colours: dict[str, str] = {}
    for w in windows:
        colours.setdefault(w.host, HOST_COLOURS[len(colours) % len(HOST_COLOURS)])
    view = View("all", "the whole run", 0.0, max(run.replay.end_t, 1.0), zoomed=False)
    body, y = [], float(HEAD)
    for lb in SHOWN:
        rows = run.marks(lb)
        svg = lb_timeline(f"load balancer {lb}", rows, windows, colours, view)
        height = float(svg.split('height="', 1)[1].split('"', 1)[0])
        body.append(f'<text class="lb" x="16" y="{y + 20:.0f}">{esc(run.heading(lb))}</text>')
        body.append(f'<g transform="translate(0,{y + GAP:.0f})">{svg}</g>')
        y += GAP + height
    title = "One rolling restart of three kube-apiservers, seen through two load balancers"
    subtitle = (
        f"{len(windows)} apiservers shut down one by one; a lab run on gcp whose external "
        "LB was made slow (tests/golden/fixture)"
    )
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{y:.0f}" '
            f'viewBox="0 0 {WIDTH} {y:.0f}" role="img" aria-label="{esc(title)}">',
            f"<title>{esc(title)}</title>",
            f"<style>{STYLE}</style>",
            f'<rect width="{WIDTH}" height="{y:.0f}" fill="#ffffff"/>',
            f'<text class="title" x="16" y="26">{esc(title)}</text>',
            f'<text x="16" y="48">{esc(subtitle)}</text>',
            _legend(78),
            *body,
            "</svg>",
            "",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--update", action="store_true", help=f"write {PICTURE}")
    args = parser.parse_args(argv)
    text = draw()
    if args.update:
        PICTURE.write_text(text, encoding="utf-8")
        print(f"wrote {PICTURE.relative_to(ROOT)}")
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
