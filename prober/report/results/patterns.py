"""Why a disruption interval happened, as TRT reads it: one pattern per interval, decided here.

`causes` says why each interval's requests failed (one cause per interval, from its own
requests); a pattern is one level up: what the interval's timing against the shutdown
windows, the other streams, LBs and daemons failing with it, the heartbeat and the watches
point at (openshift-eng ai-helpers #393, #655, #679; origin's faulty-LB monitor; reference
section 13). Each pattern comes with its evidence (the facts that decided, in words) and a
confidence (`high`, `medium`, `low`: how many of the facts its rule names agree, and whether
the interval's sampling bounds straddle the edge the rule reads).

The rules, in precedence order (the first that fits labels the interval; a stronger,
more specific explanation goes first):
1. `lb-readiness` by cause: its requests were sent to a server that had stopped, or reset
   by the LB as it took a server out (`stopped-server`, `lb-reset`): the LB's readiness.
   Not for localhost, which has no LB: there a stopped server is `no-backend` (its one
   backend, its own node's apiserver, stopped, by design).
2. `one-node`: several daemons' logs were analyzed, others covered the interval on this LB
   and none of them failed then: the prober's own node (its network, its kubelet).
3. `control-plane`: the heartbeat stalled (`pattern_labels.heartbeat_stalls`) while every LB
   and both protocols failed at once; or, outside every shutdown window, while this one
   failed alone: an etcd pause leaves reads at `resourceVersion=0` answered from the watch
   cache, so the heartbeat is what tells it, not how many LBs failed. The watches' blindness
   raises the confidence but never decides: one apiserver that crashes cuts the watches on it
   through every LB, and its failures reach every LB at once too (the lab's `crash`
   scenario), yet the rest of the control plane serves.
4. `lb-readiness` by timing: it started inside a shutdown window, though its requests' cause
   does not tie it to the shutdown.
5. `one-lb`: other LBs were probed and none failed then: this LB alone.
6. `no-backend`: `CONSECUTIVE` failures or more in a row: no backend served.
7. `one-backend`: it is one of `SCATTERED` short intervals or more on its stream within
   `SCATTER_SPAN`, successes between: one bad backend among good ones.
8. `unknown`: nothing above fits; an honest answer.

"At once" is overlap within `AT_ONCE` seconds (the quiet sampling interval: another stream
sampled a second later still saw the same thing). The rules read plain data (`Span`,
`Signals`, the summary's entries), so that they are tested by tables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, NamedTuple

from prober.report.results.causes import Cause, window_at
from prober.report.schema.types import IntervalEntry, WindowEntry

AT_ONCE: Final = 1.0  # s: the default quiet sampling interval
CONSECUTIVE: Final = 3  # failures in a row that mean no backend served
SCATTERED: Final = 3  # short intervals on one stream that mean one bad backend
SHORT: Final = 2  # failures at most in one of those short intervals
SCATTER_SPAN: Final = 30.0  # s within which they count as one scatter
# s a heartbeat stall must last, and a write's acknowledgement be late, to count: two of its
# 1 s periods
STALL_MIN: Final = 2.0
LOCALHOST: Final = "localhost"


class Pattern(StrEnum):
    LB_READINESS = "lb-readiness"
    ONE_NODE = "one-node"
    CONTROL_PLANE = "control-plane"
    ONE_LB = "one-lb"
    NO_BACKEND = "no-backend"
    ONE_BACKEND = "one-backend"
    UNKNOWN = "unknown"


class Confidence(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Label(NamedTuple):
    pattern: Pattern
    evidence: str
    confidence: Confidence


@dataclass(frozen=True, slots=True)
class Span:
    """A disruption interval of some request stream, in this run's seconds."""

    stream: str
    lb: str
    protocol: str
    start: float
    end: float
    samples: int = 1  # its failures


@dataclass(frozen=True, slots=True)
class Peer:
    """Another daemon's run, in this run's seconds: its node, what it covered, its intervals."""

    node: str
    start: float
    end: float
    lbs: frozenset[str]
    spans: Sequence[Span]


@dataclass(frozen=True, slots=True)
class Signals:
    """What the rest of the run saw: the LBs and protocols its request streams probe, every
    request stream's intervals, the heartbeat's stalls (writes unacknowledged), each LB's
    watch blind spells, and the other daemons' runs (several logs analyzed together)."""

    lbs: frozenset[str]
    protocols: frozenset[str]
    spans: Sequence[Span]
    stalls: Sequence[tuple[float, float]] = ()
    blind: Mapping[str, Sequence[tuple[float, float]]] = field(default_factory=dict)
    peers: Sequence[Peer] = ()


@dataclass(frozen=True, slots=True)
class Case:
    """One interval to label, with its stream's LB and protocol and its cause."""

    interval: IntervalEntry
    stream: str
    lb: str
    protocol: str
    cause: Cause

    @property
    def start(self) -> float:
        return self.interval["start_t"]

    @property
    def end(self) -> float:
        return max(self.interval["end_t"], self.interval["start_t"])


def overlaps(a: tuple[float, float], b: tuple[float, float], slack: float = AT_ONCE) -> bool:
    return b[0] <= a[1] + slack and a[0] <= b[1] + slack


def overlap_seconds(span: tuple[float, float], spells: Sequence[tuple[float, float]]) -> float:
    """Seconds of `spells` inside `span` widened by `AT_ONCE` on each side."""
    lo, hi = span[0] - AT_ONCE, span[1] + AT_ONCE
    return sum(max(0.0, min(hi, b) - max(lo, a)) for a, b in spells)


def _with(case: Case, spans: Sequence[Span]) -> list[Span]:
    """The other streams' intervals at once with the case's."""
    return [
        s
        for s in spans
        if s.stream != case.stream and overlaps((case.start, case.end), (s.start, s.end))
    ]


def _straddles(case: Case, edge: float) -> bool:
    """Whether the interval's start bound lies either side of `edge`."""
    lo = case.interval.get("start_lo")
    hi = case.interval.get("start_hi")
    return (lo is None or lo < edge) and (hi is None or hi >= edge) and (lo, hi) != (None, None)


def readiness_by_cause(
    case: Case, windows: Sequence[WindowEntry], signals: Signals
) -> Label | None:
    if case.lb == LOCALHOST or case.cause not in (Cause.STOPPED_SERVER, Cause.LB_RESET):
        return None
    window = window_at(case.start, windows)
    if window is None:  # a cause decided from windows has one; a summary's own may not
        return Label(Pattern.LB_READINESS, f"cause {case.cause.value}", Confidence.MEDIUM)
    # The edge the cause reads: the delay's earliest end for a stopped server, T0 for a reset.
    stopped = case.cause is Cause.STOPPED_SERVER
    edge = window["t0_lo"] + window["delay"] if stopped else window["t0_lo"]
    straddles = _straddles(case, edge)
    evidence = (
        f"cause {case.cause.value}, {case.start - window['t0']:.1f} s after "
        f"{window['host']}'s T0 (delay {window['delay']:g} s)"
        + ("; its start's bound straddles the edge" if straddles else "")
    )
    confidence = Confidence.MEDIUM if straddles else Confidence.HIGH
    return Label(Pattern.LB_READINESS, evidence, confidence)


def own_server_stopped(
    case: Case, windows: Sequence[WindowEntry], signals: Signals
) -> Label | None:
    if case.lb != LOCALHOST or case.cause is not Cause.STOPPED_SERVER:
        return None
    window = window_at(case.start, windows)
    host = f"{window['host']}" if window is not None else "its apiserver"
    evidence = f"localhost's one backend, {host}, had stopped"
    return Label(Pattern.NO_BACKEND, evidence, Confidence.HIGH)


def one_node(case: Case, windows: Sequence[WindowEntry], signals: Signals) -> Label | None:
    covering = [
        p for p in signals.peers if case.lb in p.lbs and p.start <= case.start and p.end >= case.end
    ]
    if not covering:
        return None
    if any(s.lb == case.lb for p in covering for s in _with(case, p.spans)):
        return None
    nodes = ", ".join(sorted(p.node for p in covering))
    confidence = Confidence.HIGH if len(covering) >= 2 else Confidence.MEDIUM
    return Label(
        Pattern.ONE_NODE, f"this daemon alone: {nodes} answered through {case.lb}", confidence
    )


def control_plane(case: Case, windows: Sequence[WindowEntry], signals: Signals) -> Label | None:
    failing = _with(case, signals.spans)
    lbs = {case.lb, *(s.lb for s in failing)}
    protocols = {case.protocol, *(s.protocol for s in failing)}
    every = len(signals.lbs) >= 2 and lbs >= signals.lbs and protocols >= signals.protocols
    stalled = overlap_seconds((case.start, case.end), signals.stalls)
    blind = sorted(
        lb
        for lb, spells in signals.blind.items()
        if overlap_seconds((case.start, case.end), spells) > 0
    )
    stall = stalled >= STALL_MIN
    facts = [f"{len(lbs & signals.lbs)} of {len(signals.lbs)} LBs, {'/'.join(sorted(protocols))}"]
    if stall:
        facts.append(f"heartbeat unacknowledged {stalled:.1f} s")
    if blind:
        facts.append(f"watches blind on {', '.join(blind)}")
    evidence = "; ".join(facts)
    if every and stall:
        confidence = Confidence.HIGH if len(blind) >= 2 else Confidence.MEDIUM
        return Label(Pattern.CONTROL_PLANE, evidence, confidence)
    if stall and window_at(case.start, windows) is None:
        confidence = Confidence.MEDIUM if len(lbs) >= 2 or blind else Confidence.LOW
        return Label(Pattern.CONTROL_PLANE, evidence, confidence)
    return None


def readiness_by_timing(
    case: Case, windows: Sequence[WindowEntry], signals: Signals
) -> Label | None:
    window = window_at(case.start, windows)
    if window is None or case.lb == LOCALHOST:
        return None
    after = case.start - window["t0"]
    evidence = f"started {after:.1f} s after {window['host']}'s T0, cause {case.cause.value}"
    return Label(Pattern.LB_READINESS, evidence, Confidence.LOW)


def one_lb(case: Case, windows: Sequence[WindowEntry], signals: Signals) -> Label | None:
    others = signals.lbs - {case.lb}
    if not others or any(s.lb != case.lb for s in _with(case, signals.spans)):
        return None
    confidence = Confidence.HIGH if len(others) >= 2 else Confidence.MEDIUM
    evidence = f"{case.lb} alone: {', '.join(sorted(others))} answered"
    return Label(Pattern.ONE_LB, evidence, confidence)


def no_backend(case: Case, windows: Sequence[WindowEntry], signals: Signals) -> Label | None:
    failed = case.interval["samples"]
    if failed < CONSECUTIVE:
        return None
    confidence = Confidence.MEDIUM if failed >= 2 * CONSECUTIVE else Confidence.LOW
    seconds = case.end - case.start
    return Label(Pattern.NO_BACKEND, f"{failed} failures in a row over {seconds:.1f} s", confidence)


def one_backend(case: Case, windows: Sequence[WindowEntry], signals: Signals) -> Label | None:
    if case.interval["samples"] > SHORT:
        return None
    near = [
        s
        for s in signals.spans
        if s.stream == case.stream
        and s.samples <= SHORT
        and abs(s.start - case.start) <= SCATTER_SPAN / 2
    ]
    if len(near) < SCATTERED:
        return None
    confidence = Confidence.MEDIUM if len(near) >= 2 * SCATTERED else Confidence.LOW
    evidence = f"{len(near)} short intervals within {SCATTER_SPAN:.0f} s, successes between"
    return Label(Pattern.ONE_BACKEND, evidence, confidence)


Rule = Callable[[Case, Sequence[WindowEntry], Signals], Label | None]

RULES: Final[tuple[Rule, ...]] = (
    readiness_by_cause,
    own_server_stopped,
    one_node,
    control_plane,
    readiness_by_timing,
    one_lb,
    no_backend,
    one_backend,
)

UNKNOWN: Final = Label(Pattern.UNKNOWN, "no rule fits", Confidence.LOW)


def label(case: Case, windows: Sequence[WindowEntry], signals: Signals) -> Label:
    """The interval's pattern: the first rule in `RULES` that fits, else `unknown`."""
    for rule in RULES:
        found = rule(case, windows, signals)
        if found is not None:
            return found
    return UNKNOWN
