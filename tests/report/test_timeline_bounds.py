"""The timeline draws each estimate inside its band: the reaction's bracket ends at the
reaction, and a mark at the edge of its bound is not pushed out of it by the rounding of
the pixels the file writes."""

from __future__ import annotations

import re

import pytest

from prober.core.models import (
    LB,
    ClosedBy,
    Connection,
    ErrorClass,
    Interval,
    Protocol,
    StreamId,
    Window,
    WindowStream,
)
from prober.lab.judges.inbounds.page import check_html
from prober.report.documents.timeline import LEFT, RIGHT, WIDTH, StreamMarks, View, lb_timeline
from prober.report.format.svg import Scale

STREAM = StreamId("kube-api", Protocol.HTTP2, LB.INTERNAL, Connection.NEW)
VIEW = View("v", "a view", 0.0, 10.0, zoomed=True)
SCALE = Scale(VIEW.lo, VIEW.hi, LEFT, WIDTH - RIGHT)


def _window(last_late: float, reaction: float, lo: float, hi: float | None) -> Window:
    seen = WindowStream(STREAM, late=4, max_elapsed=1.0, last_late_t=last_late,
                        reaction=reaction, failures=0, reaction_lo=lo, reaction_hi=hi)  # fmt: skip
    return Window("h", None, 6.0, 1.0, 2.0, 1.98, 2.02, ClosedBy.END, 9.0, (seen,))


def _draw(window: Window, intervals: list[Interval] = []) -> str:  # noqa: B006 (not mutated)
    marks = StreamMarks(STREAM, intervals=intervals)
    return lb_timeline("lb", [marks], [window], {"h": "#0072B2"}, VIEW)


def _bracket_end(svg: str) -> float:
    [end] = re.findall(r'<path class="reaction" d="[^"]*H([\d.]+)', svg)
    return float(end)


@pytest.mark.parametrize(
    ("last_late", "reaction", "lo", "hi"),
    [
        (2.8, 0.8, 0.78, 0.9),  # the stream's own last late request is the LB's last
        (2.3, 0.8, 0.78, 0.9),  # another stream's, through the same LB, was later
        (2.1, 1.5, 1.48, None),  # unbounded above: the band runs to the window's close
        (1.9, 0.0, -0.02, 0.4),  # sent just before T0
    ],
)
def test_the_bracket_ends_at_the_reaction_inside_its_band(
    last_late: float, reaction: float, lo: float, hi: float | None
) -> None:
    svg = _draw(_window(last_late, reaction, lo, hi))
    assert _bracket_end(svg) == pytest.approx(SCALE(2.0 + reaction), abs=0.05)
    assert check_html("report.html", svg).problems() == []


# Estimates 0.2 ms (a sixtieth of a pixel) inside their bound's edge, where a band's right
# edge, its rounded x plus its separately rounded width, could fall a tenth of a pixel short.
EDGES = [round(4.0 + 0.0137 * n, 4) for n in range(60)]


@pytest.mark.parametrize("edge", EDGES)
def test_a_mark_at_its_bounds_edge_is_drawn_inside_the_band(edge: float) -> None:
    interval = Interval(STREAM, edge - 0.0002, edge + 0.5, "a", "b", ErrorClass.CONNECT_REFUSED,
                        "refused", 2, start_lo=edge - 0.07, start_hi=edge, end_lo=edge + 0.5,
                        end_hi=edge + 0.5002)  # fmt: skip
    reaction = edge - 2.0 - 0.0002  # T0 2.0 s; its witness 0.2 ms later
    window = _window(2.0 + reaction, reaction, reaction - 0.07, reaction + 0.0002)
    checked = check_html("report.html", _draw(window, [interval]))
    assert checked.problems() == []
    assert checked.counts["report.html"] >= 4  # the bar's two ends, the bracket, T0
