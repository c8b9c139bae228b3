"""Small SVG and HTML building blocks shared by the run report and the dashboard."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

# Colour-blind safe (Okabe-Ito), one per apiserver; marks have their own fixed colours.
HOST_COLOURS = ("#0072B2", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#999999")
LATE = "#D55E00"
FAILURE = "#B00020"
T0 = "#222222"


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


@dataclass(frozen=True, slots=True)
class Scale:
    """Maps the data interval [lo, hi] linearly onto pixels [start, end]."""

    lo: float
    hi: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        span = self.hi - self.lo or 1.0
        return self.start + (value - self.lo) / span * (self.end - self.start)

    def clamp(self, value: float) -> float:
        low, high = sorted((self.start, self.end))
        return min(max(self(value), low), high)


def nice_ticks(lo: float, hi: float, count: int = 8) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) covering [lo, hi]."""
    if not math.isfinite(lo) or not math.isfinite(hi) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 9))
        value += step
    return ticks


def tick_label(value: float) -> str:
    return f"{value:g}"


def x_axis(scale: Scale, y: float, title: str, count: int = 8) -> str:
    """A horizontal axis at height y: line, ticks with labels, and the axis title below."""
    parts = [f'<line class="axis" x1="{scale.start:.1f}" x2="{scale.end:.1f}" y1="{y}" y2="{y}"/>']
    for tick in nice_ticks(scale.lo, scale.hi, count):
        x = scale(tick)
        parts.append(f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{y}" y2="{y + 5}"/>')
        parts.append(
            f'<text class="tick" x="{x:.1f}" y="{y + 17}" text-anchor="middle">'
            f"{tick_label(tick)}</text>"
        )
    middle = (scale.start + scale.end) / 2
    parts.append(
        f'<text class="axis-title" x="{middle:.1f}" y="{y + 36}" text-anchor="middle">'
        f"{esc(title)}</text>"
    )
    return "\n".join(parts)


def grid(scale: Scale, top: float, bottom: float, count: int = 8) -> str:
    return "\n".join(
        f'<line class="grid" x1="{scale(t):.1f}" x2="{scale(t):.1f}" y1="{top}" y2="{bottom}"/>'
        for t in nice_ticks(scale.lo, scale.hi, count)
    )


def swatch(kind: str, colour: str) -> str:
    """A 28x14 legend symbol drawn like the chart draws that kind of mark."""
    shapes = {
        "band": f'<rect x="1" y="1" width="26" height="12" fill="{colour}" fill-opacity="0.18" '
        f'stroke="{colour}"/>',
        "line": f'<line x1="14" x2="14" y1="0" y2="14" stroke="{colour}" stroke-width="2"/>',
        "range": f'<rect x="8" y="0" width="12" height="14" fill="{colour}" fill-opacity="0.45"/>',
        "shade": f'<rect x="1" y="3" width="26" height="8" fill="{colour}" fill-opacity="0.2"/>',
        "dash": f'<line x1="14" x2="14" y1="0" y2="14" stroke="{colour}" stroke-dasharray="3 2"/>',
        "tick": f'<line x1="14" x2="14" y1="2" y2="12" stroke="{colour}" stroke-width="2"/>',
        "cross": f'<path d="M10 3 L18 11 M18 3 L10 11" stroke="{colour}" stroke-width="2"/>',
        "bar": f'<rect x="2" y="4" width="24" height="6" fill="{colour}"/>',
        "bracket": f'<path d="M3 3 V11 M3 7 H25 M25 3 V11" stroke="{colour}" fill="none"/>',
        "step": f'<path d="M1 4 H12 V11 H27" stroke="{colour}" stroke-width="1.5" fill="none"/>',
        "dashstep": f'<path d="M1 4 H12 V11 H27" stroke="{colour}" stroke-width="1.5" '
        'fill="none" stroke-dasharray="4 3"/>',
        "dot": f'<circle cx="14" cy="7" r="3" fill="{colour}"/>',
        "ring": f'<circle cx="14" cy="7" r="3.5" fill="none" stroke="{colour}" '
        'stroke-width="1.5"/>',
    }
    return (
        f'<svg class="swatch" width="28" height="14" viewBox="0 0 28 14" aria-hidden="true">'
        f"{shapes[kind]}</svg>"
    )
