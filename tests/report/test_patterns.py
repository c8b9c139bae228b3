"""One pattern per disruption interval (`report.results.patterns`): a table per rule, and the
precedence when several fit."""

from __future__ import annotations

from typing import Any

import pytest

from prober.core.budgets import PLATFORMS
from prober.core.watch import Heartbeat
from prober.report.results.causes import Cause
from prober.report.results.pattern_labels import heartbeat_stalls, label_summary
from prober.report.results.patterns import (
    Case,
    Confidence,
    Pattern,
    Peer,
    Signals,
    Span,
    label,
)
from prober.report.verdicts.reset_verdicts import judge_resets
from prober.report.verdicts.verdicts import Status

# T0 at 10 s (bound 9.9-10.1), a 20 s delay, closed at 40 s.
WINDOW: Any = {"host": "h1", "node": "master-0", "t0": 10.0, "t0_lo": 9.9, "t0_hi": 10.1,
               "delay": 20.0, "end_t": 40.0, "streams": []}  # fmt: skip
LBS = frozenset({"external-lb", "internal-lb", "localhost"})
BOTH = frozenset({"http1", "http2"})
ME = "kube-api-http2-internal-lb-new-connections"


def case(start: float, cause: Cause = Cause.UNATTRIBUTED, samples: int = 2, **more: Any) -> Case:
    entry: Any = {"start_t": start, "end_t": start + 1.0, "samples": samples, "error": "timeout"}
    return Case({**entry, **more}, ME, "internal-lb", "http2", cause)


def span(lb: str, protocol: str, start: float, end: float, samples: int = 2) -> Span:
    return Span(f"kube-api-{protocol}-{lb}-new-connections", lb, protocol, start, end, samples)


def mine(start: float, samples: int = 2) -> Span:
    return Span(ME, "internal-lb", "http2", start, start + 1.0, samples)


# Every LB and both protocols failing from 60 s to 64 s.
OTHERS = [
    (lb, p) for lb in sorted(LBS) for p in sorted(BOTH) if (lb, p) != ("internal-lb", "http2")
]
EVERYWHERE = [mine(60.0, 5)] + [span(lb, p, 60.2, 64.0) for lb, p in OTHERS]


def signals(spans: list[Span], **more: Any) -> Signals:
    return Signals(LBS, BOTH, spans, **more)


@pytest.mark.parametrize(
    ("interval", "spans", "more", "pattern", "confidence"),
    [
        # lb-readiness by cause: sent to a stopped server, the start well inside the window
        (case(31.0, Cause.STOPPED_SERVER), [mine(31.0)], {}, Pattern.LB_READINESS, Confidence.HIGH),
        # ... its start bound straddles the delay's end: the rule still holds, less surely
        (
            case(30.5, Cause.STOPPED_SERVER, start_lo=29.5, start_hi=30.6),
            [mine(30.5)],
            {},
            Pattern.LB_READINESS,
            Confidence.MEDIUM,
        ),
        # a reset by the LB while the server served
        (case(12.0, Cause.LB_RESET), [mine(12.0)], {}, Pattern.LB_READINESS, Confidence.HIGH),
        # localhost has no LB: its own apiserver stopped, its one backend
        (
            Case(
                {"start_t": 31.0, "end_t": 33.0, "samples": 4},
                ME,
                "localhost",
                "http2",
                Cause.STOPPED_SERVER,
            ),  # type: ignore[typeddict-item]
            [mine(31.0)],
            {},
            Pattern.NO_BACKEND,
            Confidence.HIGH,
        ),
        # lb-readiness by timing only: a timeout inside the window, while the server served
        (case(12.0), [mine(12.0)], {}, Pattern.LB_READINESS, Confidence.LOW),
        # control-plane: every LB and both protocols, the heartbeat stalled, watches blind
        (
            case(60.0, samples=5),
            EVERYWHERE,
            {
                "stalls": [(59.5, 64.0)],
                "blind": {"internal-lb": [(60.5, 63.0)], "localhost": [(60.5, 63.0)]},
            },
            Pattern.CONTROL_PLANE,
            Confidence.HIGH,
        ),
        # ... every LB at once with the heartbeat stalled, the watches not blind
        (
            case(60.0, samples=5),
            EVERYWHERE,
            {"stalls": [(59.5, 64.0)]},
            Pattern.CONTROL_PLANE,
            Confidence.MEDIUM,
        ),
        # every LB at once with the watches blind but the heartbeat acknowledged: one crashed
        # apiserver does that (lab `crash`), not the control plane; its shape decides
        (
            case(60.0, samples=5),
            EVERYWHERE,
            {"blind": {"internal-lb": [(60.5, 63.0)], "external-lb": [(60.5, 63.0)]}},
            Pattern.NO_BACKEND,
            Confidence.LOW,
        ),
        # a single heartbeat write lost (1 s) is no stall
        (case(60.0), [mine(60.0)], {"stalls": [(59.0, 60.0)]}, Pattern.ONE_LB, Confidence.HIGH),
        # an etcd pause: reads at resourceVersion=0 mostly answered, the heartbeat stalled
        (
            case(60.0),
            [mine(60.0)],
            {"stalls": [(58.0, 66.0)]},
            Pattern.CONTROL_PLANE,
            Confidence.LOW,
        ),
        (
            case(60.0),
            [mine(60.0), span("localhost", "http1", 60.5, 61.0)],
            {"stalls": [(58.0, 66.0)], "blind": {"localhost": [(59.0, 65.0)]}},
            Pattern.CONTROL_PLANE,
            Confidence.MEDIUM,
        ),
        # every LB at once with nothing else to back it: not enough for control-plane
        (case(60.0, samples=5), EVERYWHERE, {}, Pattern.NO_BACKEND, Confidence.LOW),
        # one-lb: the others answered
        (
            case(60.0, samples=8),
            [mine(60.0, 8), span("internal-lb", "http1", 60.0, 61.0)],
            {},
            Pattern.ONE_LB,
            Confidence.HIGH,
        ),
        # no-backend: several LBs (not all) failing, many failures in a row
        (
            case(60.0, samples=6),
            [mine(60.0, 6), span("external-lb", "http1", 60.0, 62.0)],
            {},
            Pattern.NO_BACKEND,
            Confidence.MEDIUM,
        ),
        # one-backend: short intervals scattered among successes on this stream
        (
            case(60.0, samples=1),
            [mine(52.0, 1), mine(56.0, 1), mine(60.0, 1), span("external-lb", "http1", 60.0, 61.0)],
            {},
            Pattern.ONE_BACKEND,
            Confidence.LOW,
        ),
        # unknown: a lone short interval with another LB failing too
        (
            case(60.0, samples=1),
            [mine(60.0, 1), span("external-lb", "http1", 60.0, 61.0)],
            {},
            Pattern.UNKNOWN,
            Confidence.LOW,
        ),
    ],
)
def test_each_rule_labels_its_interval(
    interval: Case, spans: list[Span], more: Any, pattern: Pattern, confidence: Confidence
) -> None:
    found = label(interval, [WINDOW], signals(spans, **more))
    assert (found.pattern, found.confidence) == (pattern, confidence), found.evidence


def peer(node: str, spans: list[Span], start: float = 0.0, end: float = 100.0) -> Peer:
    return Peer(node, start, end, LBS, spans)


@pytest.mark.parametrize(
    ("peers", "pattern", "confidence"),
    [
        # two other daemons covered it and answered through internal-lb: this node's
        ([peer("m1", []), peer("m2", [])], Pattern.ONE_NODE, Confidence.HIGH),
        (
            [peer("m1", [span("external-lb", "http1", 60.0, 61.0)])],
            Pattern.ONE_NODE,
            Confidence.MEDIUM,
        ),
        # another daemon failed through the same LB then: not this node's alone
        ([peer("m1", [span("internal-lb", "http1", 60.5, 61.0)])], Pattern.ONE_LB, Confidence.HIGH),
        # the other daemon had not started yet: no witness
        ([peer("m1", [], start=70.0)], Pattern.ONE_LB, Confidence.HIGH),
    ],
)
def test_one_node_needs_another_daemon_that_answered(
    peers: list[Peer], pattern: Pattern, confidence: Confidence
) -> None:
    found = label(case(60.0, samples=4), [WINDOW], signals([mine(60.0, 4)], peers=peers))
    assert (found.pattern, found.confidence) == (pattern, confidence), found.evidence


def test_a_stopped_server_beats_every_other_fact() -> None:
    """Precedence: requests sent to a stopped server are the LB's readiness, even when every
    LB failed with the heartbeat stalled and no other daemon saw it."""
    found = label(
        case(31.0, Cause.STOPPED_SERVER, samples=5),
        [WINDOW],
        signals(EVERYWHERE, stalls=[(30.0, 40.0)], peers=[peer("m1", [])]),
    )
    assert found.pattern is Pattern.LB_READINESS
    assert "h1's T0" in found.evidence


def test_inside_a_window_a_stall_alone_is_not_the_control_plane() -> None:
    """A heartbeat written through an LB that routes to the stopped server stalls too."""
    found = label(case(12.0), [WINDOW], signals([mine(12.0)], stalls=[(11.0, 15.0)]))
    assert found.pattern is Pattern.LB_READINESS


@pytest.mark.parametrize(
    ("beats", "stalls"),
    [
        # acknowledged at once: no stall
        ([Heartbeat(1.0, 1.01, 1), Heartbeat(2.0, 2.01, 2)], []),
        # two failed writes: unacknowledged from the first until the next acknowledged write
        (
            [
                Heartbeat(1.0, None, None, "timeout"),
                Heartbeat(2.0, None, None, "timeout"),
                Heartbeat(3.0, 3.01, 3),
            ],
            [(1.0, 3.0)],
        ),
        # a slow acknowledgement (etcd held it), then two failed writes: merged
        (
            [
                Heartbeat(1.0, 4.0, 3),
                Heartbeat(4.0, None, None, "timeout"),
                Heartbeat(5.0, None, None, "timeout"),
                Heartbeat(6.0, 6.01, 4),
            ],
            [(1.0, 6.0)],
        ),
        # the daemon's stop cut the last write: no stall; failures at the end run to the end
        ([Heartbeat(1.0, None, None, "stopped")], []),
        (
            [Heartbeat(1.0, None, None, "timeout"), Heartbeat(2.0, None, None, "timeout")],
            [(1.0, 9.0)],
        ),
        # one write timed out on a lost server, the next, through another LB, went through
        ([Heartbeat(1.0, None, None, "timeout"), Heartbeat(6.0, 6.01, 2)], []),
    ],
)
def test_heartbeat_stalls_are_its_unacknowledged_writes(
    beats: list[Heartbeat], stalls: list[tuple[float, float]]
) -> None:
    assert heartbeat_stalls(beats, end=9.0) == stalls


def test_the_reset_tests_failure_lines_name_each_intervals_pattern() -> None:
    """gcp's LBs keep flows, so a reset fails its test: each reset's own line of the failure
    text says what its interval points at, the one-line message does not."""
    stream = "kube-api-http2-external-lb-new-connections"
    reset = {"start_t": 12.0, "end_t": 12.5, "error": "connection_reset", "samples": 2,
             "start_ts": "", "end_ts": "", "detail": ""}  # fmt: skip
    summary: Any = {
        "platform": "gcp",
        "started": "2026-12-06T00:00:00Z",
        "windows": [WINDOW],
        "streams": [
            {
                "stream": stream,
                "lb": "external-lb",
                "protocol": "http2",
                "connection": "new",
                "samples": 100,
                "disruption_seconds": 0.5,
                "intervals": [reset],
            },
        ],
    }
    label_summary(summary, [], end=60.0)
    [verdict] = judge_resets(summary, PLATFORMS["gcp"])
    assert verdict.status is Status.FAILED
    assert "pattern" not in verdict.message
    assert verdict.details[1].endswith(
        "; pattern lb-readiness (high confidence): cause lb-reset, 2.0 s after h1's T0 (delay 20 s)"
    ), verdict.details[1]
