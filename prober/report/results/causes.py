"""Why a disruption interval's requests failed: one cause each, decided here only.

The summary writes each interval's cause (`summary.json`, `intervals[].cause`, schema 3) and
every verdict reads it (a v1 or v2 summary gets it decided here on reading), so that a
failed request is judged by the one test its cause belongs to (`OWNER`):

- `stopped-server`: it failed inside a shutdown window after the server's delay ended, when
  that server had stopped serving: the LB still routed to it (localhost: its own apiserver
  went away, by design). The routing test's.
- `lb-reset`: a TCP reset inside a shutdown window while the server still served: the LB
  reset the flow as it took the server out (the AWS NLB's connection termination, HAProxy's
  `on-marked-down shutdown-sessions`). The reset test's, which the platform's LB settings
  may predict (`reset_verdicts`).
- `early`: answered by a restarted process in its first seconds after its `/readyz` went
  true (`core.instances`). The early test's.
- `server-closed`: an HTTP/2 GOAWAY ended it, a server closing its connection (Go resends a
  request on a connection closed before any answer; this one had started). Availability's.
- `unattributed`: nothing ties it to a shutdown, a restart or the server: a lost node, an
  LB with no server, a path gone. Availability's.
- `retry-after`: no failure: answered 429 or 503 with `Retry-After` by a draining server, and
  client-go's retries of every one got through (`core.perceived.Felt`). No test's.

A request the prober sent to its own node's apiserver through the LB (same-node) is in no
interval: the summary keeps those apart (`report.results.samenode`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import StrEnum

from prober.core.budgets import LBProfile
from prober.core.models import LB, ErrorClass, StreamId
from prober.report.schema.types import IntervalEntry, SummaryDocument, WindowEntry


class Cause(StrEnum):
    STOPPED_SERVER = "stopped-server"
    LB_RESET = "lb-reset"
    EARLY = "early"
    SERVER_CLOSED = "server-closed"
    UNATTRIBUTED = "unattributed"
    RETRY_AFTER = "retry-after"

    @property
    def words(self) -> str:
        return _WORDS[self]


_WORDS = {
    Cause.STOPPED_SERVER: "sent to a kube-apiserver that had stopped serving",
    Cause.LB_RESET: "reset by the LB as it took a still-serving kube-apiserver out",
    Cause.EARLY: "answered by a restarted kube-apiserver before it could serve",
    Cause.SERVER_CLOSED: "ended by the server's GOAWAY",
    Cause.UNATTRIBUTED: "not tied to any shutdown, restart or server",
    Cause.RETRY_AFTER: "answered with Retry-After; client-go's retries got through",
}


class Owner(StrEnum):
    """The test that judges a cause's failures."""

    ROUTING = "routing"
    RESETS = "resets"
    EARLY = "early"
    AVAILABILITY = "availability"
    NONE = "none"  # no failure


OWNER = {
    Cause.STOPPED_SERVER: Owner.ROUTING,
    Cause.LB_RESET: Owner.RESETS,
    Cause.EARLY: Owner.EARLY,
    Cause.SERVER_CLOSED: Owner.AVAILABILITY,
    Cause.UNATTRIBUTED: Owner.AVAILABILITY,
    Cause.RETRY_AFTER: Owner.NONE,
}


def owner(cause: Cause, lb: LB) -> Owner:
    """Localhost has no LB: what an LB's test would judge there is availability's."""
    judged = OWNER[cause]
    if lb is LB.LOCALHOST and judged is not Owner.NONE:
        return Owner.AVAILABILITY
    return judged


def decide(interval: IntervalEntry, lb: LB, windows: Sequence[WindowEntry]) -> Cause:
    """The cause of one interval's failures, from its class, its start, the windows and its
    stream's LB (localhost has none to reset a flow)."""
    if not interval.get("felt", True):
        return Cause.RETRY_AFTER
    if interval.get("early", 0):
        return Cause.EARLY
    error = interval["error"]
    window = window_at(interval["start_t"], windows)
    if window is not None:
        if serving_window(interval["start_t"], windows) is None:
            return Cause.STOPPED_SERVER
        if error == ErrorClass.CONNECTION_RESET and lb is not LB.LOCALHOST:
            return Cause.LB_RESET
    if error == ErrorClass.GOAWAY:
        return Cause.SERVER_CLOSED
    return Cause.UNATTRIBUTED


def cause_of(interval: IntervalEntry, lb: LB, windows: Sequence[WindowEntry]) -> Cause:
    """The interval's written cause, or one decided now for a summary written before causes."""
    written = interval.get("cause")
    return Cause(written) if written is not None else decide(interval, lb, windows)


def caused_in(
    summary: SummaryDocument, window: WindowEntry, stream: str, cause: Cause
) -> Iterator[IntervalEntry]:
    """The stream's intervals of one cause that began inside the window: from T0's lower
    bound to its close (to the run's end in a summary without it)."""
    lb = StreamId.parse(stream).lb
    for entry in summary["streams"]:
        if entry["stream"] != stream:
            continue
        for i in entry["intervals"]:
            inside = window["t0_lo"] <= i["start_t"] <= window.get("end_t", float("inf"))
            if inside and cause_of(i, lb, summary["windows"]) is cause:
                yield i


def window_at(t: float, windows: Sequence[WindowEntry]) -> WindowEntry | None:
    """The newest shutdown window open at `t` (from T0's lower bound to its close)."""
    inside = [w for w in windows if w["t0_lo"] <= t <= w.get("end_t", float("inf"))]
    return max(inside, key=lambda w: w["t0"], default=None)


def serving_window(t: float, windows: Sequence[WindowEntry]) -> WindowEntry | None:
    """The window open at `t` while its server still served: before its delay's earliest end
    (the delay runs from T0, so T0's lower bound plus the delay); None outside one."""
    window = window_at(t, windows)
    if window is None or t >= window["t0_lo"] + window["delay"]:
        return None
    return window


def detecting(t: float, window: WindowEntry, lb: LBProfile) -> bool:
    """Whether at `t` the LB may still be detecting the window's shutdown, and so route to
    its server as its settings allow: up to T0's upper bound plus its worst case to stop
    routing (`LBProfile.stop_routing`)."""
    return t <= window["t0_hi"] + lb.stop_routing
