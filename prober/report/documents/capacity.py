"""Capacity over a rolling restart, per LB: how many apiservers the LB was sending new
connections to, against how many were ready (`report.html`'s capacity lanes).

Ready: every apiserver seen counts from the run's start; a host leaves at its window's T0
(its `/readyz` went false) and comes back at its restarted instance's T1 (`core.instances`;
its first sign where T1 has no estimate). Routed by one LB: a host leaves at T0 plus that LB's
reaction to the window (the largest over its new-connection streams: the last fresh request
it sent there; T0 where none was late) and comes back at the LB's add-back (`AddBack.added_hi`,
the end of its first answer through the LB, or that answer's send). A window with no restarted
instance after it keeps its host out to the run's end, and so does an LB that never took the
instance back. An instance with no window before it (a crash: no shutdown was seen) changes
neither line: nothing says when its host left.

Both lines are estimates of instants the sampling only bounds; the table beside them
(`restart_table`) gives each with its bound, and the lane draws each T1 over its bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from prober.core.instances import AddBack, Instance
from prober.core.models import LB, Connection, Sample, Window
from prober.report.documents.restart_table import signal
from prober.report.documents.timeline import extent
from prober.report.format.svg import FAILURE, T0, Scale, esc

ROUTED = "#0072B2"
READY = "#777777"
HALF = 12  # pixels from the lane's middle to its top and bottom

Steps = tuple[tuple[float, int], ...]  # (from when, how many), in time order


@dataclass(frozen=True, slots=True)
class Restart:
    """One window and the restarted instance that followed it on its host (None: none did)."""

    window: Window
    instance: Instance | None


def restarts(windows: Sequence[Window], instances: Sequence[Instance]) -> list[Restart]:
    """Each window with the first restarted instance of its host whose first sign came after
    its T0's lower bound, each instance taken once."""
    left = sorted(instances, key=lambda i: i.first_t)
    out = []
    for w in sorted(windows, key=lambda w: w.t0):
        after = next((i for i in left if i.host == w.host and i.first_t >= w.t0_lo), None)
        if after is not None:
            left.remove(after)
        out.append(Restart(w, after))
    return out


def _ready_at(instance: Instance) -> float:
    return instance.t1 if instance.t1 is not None else instance.first_t


def _taken_back(back: AddBack | None) -> float | None:
    if back is None:
        return None
    return back.added_hi if back.added_hi is not None else back.first_t


def lb_reaction(window: Window, lb: LB) -> float:
    """The LB's reaction to the window on new connections: the largest; 0 where none was
    late (it had stopped by T0 for all the fresh requests showed)."""
    reactions = [
        ws.reaction
        for ws in window.streams
        if ws.lb is lb and ws.stream_id.connection is Connection.NEW and ws.reaction is not None
    ]
    return max(reactions, default=0.0)


def _steps(total: int, spans: Iterable[tuple[float, float | None]]) -> Steps:
    """`total` less every host out over a span [from, to) (to None: to the end)."""
    changes: dict[float, int] = {}
    for start, end in spans:
        if end is not None and end <= start:
            continue
        changes[start] = changes.get(start, 0) - 1
        if end is not None:
            changes[end] = changes.get(end, 0) + 1
    out, count = [(0.0, total)], total
    for t in sorted(changes):
        if changes[t]:
            count += changes[t]
            out.append((t, count))
    return tuple(out)


def ready_steps(total: int, runs: Sequence[Restart]) -> Steps:
    return _steps(
        total, ((r.window.t0, None if r.instance is None else _ready_at(r.instance)) for r in runs)
    )


def routed_steps(total: int, runs: Sequence[Restart], lb: LB) -> Steps:
    spans = []
    for r in runs:
        back = None
        if r.instance is not None:
            back = next((b for b in r.instance.lbs if b.lb is lb), None)
        spans.append((r.window.t0 + lb_reaction(r.window, lb), _taken_back(back)))
    return _steps(total, spans)


def hosts_seen(
    samples: Iterable[Sample], windows: Iterable[Window], instances: Iterable[Instance]
) -> int:
    """Every apiserver the run met: by its answers, its windows, its restarts."""
    hosts = {s.shutdown.host for s in samples if s.shutdown is not None}
    return len(hosts | {w.host for w in windows} | {i.host for i in instances})


@dataclass(frozen=True, slots=True)
class CapacityLane:
    """The lane under an LB's request rows (a `timeline.Lane`)."""

    lb: LB
    total: int
    ready: Steps
    routed: Steps
    instances: tuple[Instance, ...]
    early: tuple[tuple[float, str], ...]  # (send time, host) of each early failure through it
    end_t: float

    @property
    def label(self) -> str:
        return f"capacity: routed / ready of {self.total}"

    def draw(self, scale: Scale, y: float, zoomed: bool) -> str:
        del zoomed  # the same marks at every zoom
        parts = [f'<line class="row" x1="{scale.start}" x2="{scale.end}" y1="{y}" y2="{y}"/>']
        for css, steps, colour, what, dash in (
            ("ready", self.ready, READY, "apiservers ready", ' stroke-dasharray="4 3"'),
            ("routed", self.routed, ROUTED, f"apiservers {self.lb} sent new connections to", ""),
        ):
            said = ", ".join(f"{n} from {t:.2f} s" for t, n in steps)
            parts.append(
                f'<path class="{css}" d="{self._path(steps, scale, y)}" stroke="{colour}" '
                f'stroke-width="1.5" fill="none"{dash}><title>{esc(what)}: {esc(said)}'
                "</title></path>"
            )
        parts += [self._t1(i, scale, y) for i in self.instances]
        for t, host in self.early:
            if scale.lo <= t <= scale.hi:
                parts.append(
                    f'<circle class="early" cx="{scale(t):.1f}" cy="{y + HALF:.1f}" r="3" '
                    f'fill="{FAILURE}"><title>early failure at {t:.2f} s on {esc(host)}: routed '
                    "before it could serve</title></circle>"
                )
        return "\n".join(p for p in parts if p)

    def _level(self, count: int, y: float) -> float:
        return y + HALF - 2 * HALF * count / max(self.total, 1)

    def _path(self, steps: Steps, scale: Scale, y: float) -> str:
        d = f"M{scale.start:.1f} {self._level(steps[0][1], y):.1f}"
        for t, count in steps[1:]:
            d += f"H{scale.clamp(t):.1f}V{self._level(count, y):.1f}"
        return d + f"H{scale.clamp(self.end_t):.1f}"

    def _t1(self, instance: Instance, scale: Scale, y: float) -> str:
        """T1 as a tick over the band of its bound (`inbounds_html` holds one to the other)."""
        t1, lo, hi = instance.t1, instance.t1_lo, instance.t1_hi
        if t1 is None or lo is None or hi is None or hi < scale.lo or lo > scale.hi:
            return ""
        x0, width = extent(scale.clamp(lo), scale.clamp(hi))
        x = scale.clamp(t1)
        title = (
            f"{instance.label}: /readyz went true at T1 = {t1:.2f} s, within "
            f"[{lo:.2f}, {hi:.2f}] s, from below: {signal(instance.t1_lo_by)}, from above: "
            f"{signal(instance.t1_hi_by)}"
        )
        return (
            f'<g class="instance-t1"><title>{esc(title)}</title>'
            f'<rect class="t1-bound" x="{x0:.1f}" y="{y - HALF:.1f}" width="{width:.1f}" '
            f'height="{2 * HALF}" fill="{T0}" fill-opacity="0.15"/>'
            f'<line class="t1" x1="{x:.1f}" x2="{x:.1f}" y1="{y - HALF:.1f}" '
            f'y2="{y + HALF:.1f}" stroke="{T0}" stroke-width="1.5"/></g>'
        )


def capacity_lanes(
    windows: Sequence[Window],
    instances: Sequence[Instance],
    samples: Sequence[Sample],
    end_t: float,
) -> dict[LB, CapacityLane]:
    """A lane per LB that a restarted instance was to be taken back by; none without one."""
    if not instances:
        return {}
    runs = restarts(windows, instances)
    total = hosts_seen(samples, windows, instances)
    ready = ready_steps(total, runs)
    kinds = sorted({b.lb for i in instances for b in i.lbs}, key=list(LB).index)
    return {
        lb: CapacityLane(
            lb,
            total,
            ready,
            routed_steps(total, runs, lb),
            tuple(instances),
            tuple((s.t, s.shutdown.host) for s in samples if s.early and s.lb is lb and s.shutdown),
            end_t,
        )
        for lb in kinds
    }
