"""The timeline of one LB as SVG: shutdown windows, T0, late requests, failures, disruption.

One row per stream of the LB. Shutdown windows are bands from T0 to the window's close in
their apiserver's colour, T0 a solid line with its uncertainty as a darker band around it,
the end of the shutdown delay (when the apiserver stops serving) a dashed line. In each row,
late requests are ticks above the line, failed requests crosses below it, disruption intervals
red bars, and the reaction (T0 to the last late request) a bracket. Marks that would fall on the
same pixel are drawn once, so a four-hour run stays a small file.

The sampling only bounds the true values, and the bounds are drawn as light bands: over the
reaction's bracket, T0 + [reaction_lo, reaction_hi] (an unbounded hi runs on to the window's
close, as far as the LB could still have routed to the server); around a disruption bar's
ends, where its start and its end truly lie (an unbounded edge runs to the view's edge).
Each band is clamped to the view, and its title says what it bounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from prober.core.models import Interval, Sample, StreamId, Window, WindowStream
from prober.report.format.svg import FAILURE, LATE, T0, Scale, esc, grid, x_axis
from prober.report.format.tables import bound

WIDTH = 1040
LEFT = 230
RIGHT = 16
TOP = 40
ROW = 34
BOTTOM = 52
LEAST = 1.5  # pixels: the least width of a band or a bar
AXIS_TITLE = "time since the run started (seconds)"


@dataclass(frozen=True, slots=True)
class View:
    """A time range the timelines can show: the whole run, or one window zoomed in."""

    id: str
    label: str
    lo: float
    hi: float
    zoomed: bool


@dataclass(slots=True)
class StreamMarks:
    stream: StreamId
    late: list[float] = field(default_factory=list)
    failures: list[float] = field(default_factory=list)
    intervals: list[Interval] = field(default_factory=list)
    # Each interval's pattern in words, by its start (`documents.pattern_table.interval_key`).
    patterns: dict[float, str] = field(default_factory=dict)


def stream_marks(
    names: Iterable[str], samples: Iterable[Sample], intervals: Iterable[Interval]
) -> dict[str, StreamMarks]:
    """The marks of each named stream: its late and failed requests, its intervals."""
    marks = {name: StreamMarks(StreamId.parse(name)) for name in names}
    for sample in samples:
        m = marks.get(sample.stream)
        if m is None:
            continue
        if sample.late:
            m.late.append(sample.t)
        if sample.failed:
            m.failures.append(sample.t)
    for interval in intervals:
        if interval.stream in marks:
            marks[interval.stream].intervals.append(interval)
    return marks


def views(windows: Sequence[Window], end_t: float) -> list[View]:
    out = [View("all", "the whole run", 0.0, max(end_t, 1.0), zoomed=False)]
    for number, w in enumerate(windows, 1):
        lo = min(w.t0_lo, w.first_seen_t)
        hi = max(w.end_t, w.t0 + w.delay)
        pad = max(2.0, (hi - lo) * 0.06)
        node = f" on {w.node}" if w.node else ""
        label = f"window {number}: {w.host}{node}, T0 {w.t0:.1f} s"
        out.append(View(f"w{number}", label, max(0.0, lo - pad), hi + pad, zoomed=True))
    return out


def window_title(number: int, w: Window) -> str:
    node = f" on node {w.node}" if w.node else ""
    return (
        f"window {number}: {w.host}{node}; /readyz went false at T0 = {w.t0:.2f} s "
        f"(between {w.t0_lo:.2f} and {w.t0_hi:.2f} s); shutdown delay {w.delay:g} s; "
        f"closed ({w.closed_by}) at {w.end_t:.2f} s"
    )


class Lane(Protocol):
    """A row of another kind of stream under the request rows (`report.documents.watch_lanes`)."""

    @property
    def label(self) -> str: ...

    def draw(self, scale: Scale, y: float, zoomed: bool) -> str: ...


def lb_timeline(
    title: str,
    rows: Sequence[StreamMarks],
    windows: Sequence[Window],
    colours: dict[str, str],
    view: View,
    *,
    lanes: Sequence[Lane] = (),
) -> str:
    count = len(rows) + len(lanes)
    height = TOP + ROW * count + BOTTOM
    scale = Scale(view.lo, view.hi, LEFT, WIDTH - RIGHT)
    bottom = TOP + ROW * count
    clip = f"clip-{_ident(title)}-{view.id}"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{esc(title)}: {esc(view.label)}">',
        f"<title>{esc(title)}: {esc(view.label)}</title>",
        f'<clipPath id="{clip}"><rect x="{LEFT}" y="0" width="{WIDTH - RIGHT - LEFT}" '
        f'height="{height}"/></clipPath>',
        grid(scale, TOP - 6, bottom),
        f'<g clip-path="url(#{clip})">',
    ]
    for number, w in enumerate(windows, 1):
        if w.end_t >= view.lo and w.t0_lo <= view.hi:
            parts.append(_window(number, w, colours[w.host], scale, bottom, zoomed=view.zoomed))
    for index, marks in enumerate(rows):
        parts.append(_row(marks, windows, scale, TOP + ROW * index + ROW / 2, view.zoomed))
    for index, lane in enumerate(lanes, len(rows)):
        parts.append(lane.draw(scale, TOP + ROW * index + ROW / 2, view.zoomed))
    parts.append("</g>")
    labels = [f"{m.stream.protocol} · {m.stream.connection} connections" for m in rows]
    for index, label in enumerate([*labels, *(lane.label for lane in lanes)]):
        y = TOP + ROW * index + ROW / 2
        parts.append(
            f'<text class="label" x="{LEFT - 10}" y="{y + 4:.1f}" text-anchor="end">'
            f"{esc(label)}</text>"
        )
    parts.append(x_axis(scale, bottom + 4, AXIS_TITLE))
    parts.append("</svg>")
    return "\n".join(parts)


def _ident(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text)


def _window(
    number: int, w: Window, colour: str, scale: Scale, bottom: float, *, zoomed: bool
) -> str:
    x0, x1 = scale.clamp(w.t0), scale.clamp(w.end_t)
    lo, hi = scale(w.t0_lo), scale(w.t0_hi)
    if hi - lo < LEAST:
        lo, hi = (lo + hi) / 2 - LEAST / 2, (lo + hi) / 2 + LEAST / 2
    lo, width = extent(lo, hi)
    stop = scale(w.t0 + w.delay)
    label = _window_label(number, w, min(x1, WIDTH - RIGHT) - x0 - 8)
    notes = ""
    if zoomed:
        notes = (
            f'<text x="{scale(w.t0) - 4:.1f}" y="{TOP - 18}" text-anchor="end">T0</text>'
            f'<text x="{stop + 4:.1f}" y="{TOP - 18}" fill="{colour}">delay ends: stops serving'
            "</text>"
        )
    return "\n".join(
        [
            f'<g class="window"><title>{esc(window_title(number, w))}</title>',
            notes,
            f'<rect x="{x0:.1f}" y="{TOP - 6}" width="{max(x1 - x0, 1):.1f}" '
            f'height="{bottom - TOP + 6}" fill="{colour}" fill-opacity="0.13" stroke="{colour}" '
            'stroke-opacity="0.5"/>',
            f'<rect class="t0-bound" x="{lo:.1f}" y="{TOP - 6}" width="{width:.1f}" '
            f'height="{bottom - TOP + 6}" fill="{T0}" fill-opacity="0.35"/>',
            f'<line class="t0" x1="{scale(w.t0):.1f}" x2="{scale(w.t0):.1f}" y1="{TOP - 14}" '
            f'y2="{bottom}" stroke="{T0}" stroke-width="1.5"/>',
            f'<line x1="{stop:.1f}" x2="{stop:.1f}" y1="{TOP - 6}" y2="{bottom}" stroke="{colour}" '
            'stroke-width="1.5" stroke-dasharray="5 3"/>',
            f'<text x="{x0 + 4:.1f}" y="{TOP - 18}" fill="{colour}">{esc(label)}</text>',
            "</g>",
        ]
    )


CHAR_WIDTH = 7.0  # about a 12 px system-ui character's, wide enough for digits and lowercase


def _window_label(number: int, w: Window, room: float) -> str:
    """The longest label that fits inside its window's band (the whole is in its tooltip):
    labels of narrow windows never overlap the next one or leave the picture."""
    named = [f"{number}: {w.host} ({w.node})" if w.node else f"{number}: {w.host}"]
    if w.node:
        named.append(f"{number}: {w.node}")
    named.append(f"{number}: {w.host[:12]}…")
    return next((t for t in named if len(t) * CHAR_WIDTH <= room), f"{number}")


def _columns(values: Iterable[float], scale: Scale) -> list[float]:
    """Pixel columns of the values inside the view, each once."""
    lo, hi = sorted((scale.lo, scale.hi))
    return sorted({round(scale(v)) for v in values if lo <= v <= hi})


def _row(
    marks: StreamMarks, windows: Sequence[Window], scale: Scale, y: float, zoomed: bool
) -> str:
    parts = [f'<line class="row" x1="{scale.start}" x2="{scale.end}" y1="{y}" y2="{y}"/>']
    for i in marks.intervals:
        parts.append(_interval(i, scale, y, marks.patterns.get(round(i.start_t, 6), "")))
    late = "".join(f"M{x} {y - 12}V{y - 3}" for x in _columns(marks.late, scale))
    if late:
        parts.append(f'<path d="{late}" stroke="{LATE}" stroke-width="1.5"/>')
    crosses = "".join(
        f"M{x - 3} {y + 5}L{x + 3} {y + 11}M{x + 3} {y + 5}L{x - 3} {y + 11}"
        for x in _columns(marks.failures, scale)
    )
    if crosses:
        parts.append(f'<path d="{crosses}" stroke="{FAILURE}" stroke-width="1.5"/>')
    for w in windows:
        seen = next((ws for ws in w.streams if ws.stream == marks.stream.name), None)
        if seen is not None:
            parts.append(_reaction(w, seen, scale, y - 15, zoomed))
    return "\n".join(p for p in parts if p)


def _band(
    span: tuple[float, float],
    scale: Scale,
    *,
    y: float,
    height: float,
    css: str,
    fill: str,
    title: str,
    edge: str = "",
) -> str:
    """A light band over [lo, hi] seconds clamped to the view; nothing outside it. `edge`:
    which end of its interval it bounds."""
    lo, hi = span
    if hi < scale.lo or lo > scale.hi:
        return ""
    x0, width = extent(scale.clamp(lo), scale.clamp(max(lo, hi)))
    named = f' data-edge="{edge}"' if edge else ""
    return (
        f'<rect class="{css}" x="{x0:.1f}" y="{y - height / 2:.1f}" '
        f'width="{width:.1f}" height="{height}" fill="{fill}" fill-opacity="0.2"'
        f"{named}><title>{esc(title)}</title></rect>"
    )


def _interval(i: Interval, scale: Scale, y: float, pattern: str = "") -> str:
    """A disruption bar, over bands where its start and its end truly lie."""
    first = i.start_t if i.start_lo is None else i.start_lo
    last = i.end_t if i.end_hi is None else i.end_hi
    if last < scale.lo or first > scale.hi:
        return ""  # an unbounded edge reaches the view's edge only from an interval near it
    parts = [
        _band(
            (scale.lo if lo is None else lo, scale.hi if hi is None else hi),
            scale,
            y=y,
            height=14,
            css="disruption-bound",
            fill=FAILURE,
            title=f"{edge} of the disruption ({i.error}, {edge} at {t:.2f} s): within "
            f"{bound(lo, hi)} s given the sampling",
            edge=edge,
        )
        for edge, t, lo, hi in (
            ("start", i.start_t, i.start_lo, i.start_hi),
            ("end", i.end_t, i.end_lo, i.end_hi),
        )
    ]
    x0, width = extent(scale.clamp(i.start_t), scale.clamp(i.end_t))
    if i.end_t >= scale.lo and i.start_t <= scale.hi:
        parts.append(
            f'<rect class="disruption" x="{x0:.1f}" y="{y - 3}" '
            f'width="{width:.1f}" height="6" fill="{FAILURE}" fill-opacity="0.85">'
            f"<title>disruption {esc(i.error)} from {i.start_t:.2f} s to {i.end_t:.2f} s "
            f"({i.seconds:.2f} s, {i.samples} failed requests){esc(pattern)}</title></rect>"
        )
    # Grouped, so that each mark is read with its bands (`inbounds_html`).
    return _group("disruption-interval", parts)


def extent(x0: float, x1: float) -> tuple[float, float]:
    """Where a mark over [x0, x1] pixels is drawn: its x and width, at least `LEAST` wide.
    The edges are rounded as the file writes them, so that what lies inside [x0, x1] is
    drawn inside the mark, and the right edge is x + width exactly."""
    left, right = round(x0, 1), round(x1, 1)
    return left, max(round(right - left, 1), LEAST)


def _group(css: str, parts: list[str]) -> str:
    drawn = [p for p in parts if p]
    return "\n".join([f'<g class="{css}">', *drawn, "</g>"]) if drawn else ""


def _reaction(w: Window, seen: WindowStream, scale: Scale, top: float, zoomed: bool) -> str:
    """The reaction's bracket from T0 to the last late request, over the band of its bound."""
    if seen.reaction is None or seen.last_late_t is None:
        return ""
    parts = []
    if seen.reaction_lo is not None:
        hi = w.end_t if seen.reaction_hi is None else w.t0 + seen.reaction_hi
        why = f", upper bound set by {seen.bound_by}" if seen.bound_by else ""
        title = (
            f"reaction {seen.reaction:.2f} s to {w.host}: the true value lies within "
            f"{bound(seen.reaction_lo, seen.reaction_hi)} s after T0 given the sampling{why}"
        )
        span = (w.t0 + seen.reaction_lo, hi)
        parts.append(
            _band(span, scale, y=top, height=10, css="reaction-bound", fill=T0, title=title)
        )
    # To the reaction, not to this stream's own last late request: on new connections the
    # LB's last one to the server may have been another stream's (`core.shutdown`).
    x0, x1 = scale(w.t0), scale.clamp(w.t0 + seen.reaction)
    parts.append(
        f'<path class="reaction" d="M{x0:.1f} {top - 3}V{top + 3}M{x0:.1f} {top}H{x1:.1f}'
        f'M{x1:.1f} {top - 3}V{top + 3}" stroke="{T0}" fill="none"><title>reaction '
        f"{seen.reaction:.2f} s: the last request this LB sent to {esc(w.host)} left "
        f"{seen.reaction:.2f} s after T0</title></path>"
    )
    if zoomed:
        parts.append(
            f'<text x="{max(x0, x1) + 4:.1f}" y="{top + 4:.1f}">{seen.reaction:.2f} s</text>'
        )
    return _group("reaction", parts)
