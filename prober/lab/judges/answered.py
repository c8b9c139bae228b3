"""An answered request is never a failure: the apiservers' audit logs against the daemon's.

Every request the prober sends carries an `Audit-ID`, and every fake apiserver writes an
audit event when it has answered (`ResponseComplete`, with the status it sent). A failed
sample whose request a server answered with a 2xx is a request the client lost, not one the
load balancer or the server failed: what httpcore did to the streams of a graceful HTTP/2
GOAWAY, which blamed the LB for the client. The lab counts them (`prober lab --check` fails
on any), and the resends that saved the others.

One kind of LB makes such failures itself: one that resets the connections of a server it
marks down (AWS NLB, HAProxy's `shutdown-sessions`) may cut an answer the server had written.
Those are counted apart, as the LB's doing, and fail nothing. So is an answer cut by a crash:
a server SIGKILLed after it logged its answer and before the bytes reached the client (the
kernel resets a killed process's connections); seen under CPU load, where that gap is wide.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prober.audit.event import Line
from prober.audit.files import discover, read_lines
from prober.core.models import LB, ErrorClass, Sample, parse_rfc3339
from prober.lab.infra.daemons import REQUEST_TIMEOUT

CLOCK_SLACK = 0.1  # seconds: the daemon's and the lab's wall clocks, compared


@dataclass(frozen=True, slots=True)
class AnsweredCheck:
    answered_failed: tuple[str, ...]  # "stream: error (detail)" per such sample
    retried: Counter[str] = field(default_factory=Counter)  # resends, by reason
    cut_by_lb: int = 0  # answered, then lost to an LB that resets connections
    cut_by_crash: int = 0  # answered, then lost when its server was killed
    unanswered: Counter[str] = field(default_factory=Counter)  # failed, no 2xx: by class
    too_late: int = 0  # answered 2xx after the client had given up: its timeout was right

    def describe(self) -> str:
        resent = ", ".join(f"{n} {why}" for why, n in sorted(self.retried.items())) or "none"
        # The failures no server answered come first, so that "0 cut by an LB" is not read
        # as "no connection was reset": those resets cut requests before any answer.
        never = ", ".join(f"{n} {why}" for why, n in sorted(self.unanswered.items())) or "none"
        return (
            f"failed requests no server answered: {never}; failed requests a server answered "
            f"(2xx in its audit log): {len(self.answered_failed)} lost by the client, "
            f"{self.cut_by_lb} cut by an LB resetting its connections, {self.cut_by_crash} by "
            f"a crash or a lost node, {self.too_late} answered after the client had given up; "
            f"sent again once, as Go's transport would: {resent}"
        )


def check_answered(
    samples: Sequence[Sample],
    cluster: Path,
    resetting: Collection[LB] = (),
    crashes: Collection[float] = (),
    losses: Collection[tuple[float, float]] = (),
) -> AnsweredCheck:
    """`resetting`: the LBs that reset the connections of a server they mark down;
    `crashes`: when servers were SIGKILLed, `losses`: from when to when a node was gone
    (its answers dropped, then its late answers to clients that had given up), in run
    seconds (the samples' `t`)."""
    failed = {s.audit_id: s for s in samples if s.failed and not s.held}
    completed = _answered_ids(cluster, set(failed))
    ids = set(completed)
    # Answered after the client had given up (its deadline came first): a timeout that was
    # right, whatever the server did next (a restarted kube-apiserver listens seconds before
    # it serves, and answers the connections queued meanwhile).
    too_late = [s for a, s in failed.items() if a in ids and completed[a] > _gave_up(s)]
    answered = [s for a, s in failed.items() if a in ids and s not in too_late]
    by_lb = [s for s in answered if s.lb in resetting]
    cuts = [*((c, c) for c in crashes), *losses]
    by_crash = [s for s in answered if s.lb not in resetting and _in_flight(s, cuts)]
    lost = tuple(
        f"{s.stream}: {s.error} ({s.detail})"
        for s in answered
        if s not in by_lb and s not in by_crash
    )
    retried = Counter(s.retried for s in samples if s.retried and not s.held)
    unanswered = Counter(str(s.error) for a, s in failed.items() if a not in ids)
    return AnsweredCheck(
        lost, retried, cut_by_lb=len(by_lb), cut_by_crash=len(by_crash), unanswered=unanswered,
        too_late=len(too_late),
    )  # fmt: skip


def _gave_up(sample: Sample) -> float:
    """When the client stopped waiting (wall time), and the clocks' slack."""
    return parse_rfc3339(sample.ts) + sample.dur + CLOCK_SLACK


def _in_flight(sample: Sample, cuts: Collection[tuple[float, float]]) -> bool:
    """Whether a crash or a lost node's absence overlapped the request's flight (the lab
    times a kill just before its signal; the slack is for the two processes' clocks)."""
    start, end = sample.t - CLOCK_SLACK, sample.t + sample.dur + CLOCK_SLACK
    if sample.retried:
        # `t` is the resend's; the first attempt, whose answer a crash may have cut, went out
        # before it, no earlier than one request timeout.
        start -= REQUEST_TIMEOUT
    if sample.error is ErrorClass.TIMEOUT:
        # The deadline covers connecting too, and `t` is when the request reached the wire:
        # a SYN to a lost node, retransmitted until it was back, puts `t` after the loss for
        # a request that began during it. A timeout began one request timeout before it ended.
        start = min(start, sample.t + sample.dur - REQUEST_TIMEOUT - CLOCK_SLACK)
    return any(start <= cut_end and cut_start <= end for cut_start, cut_end in cuts)


def _answered_ids(cluster: Path, wanted: set[str]) -> dict[str, float]:
    """Of the `wanted` audit IDs, those some apiserver answered with a 2xx, each with when
    its answer was complete (wall time; the event's `stageTimestamp`)."""
    found: dict[str, float] = {}
    if not wanted:
        return found
    families, _notes = discover([cluster])
    for family in families:
        for path in family.files():
            found |= _answered_in(read_lines(path), wanted)
    return found


def _answered_in(lines: Iterable[Line], wanted: set[str]) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in lines:
        if not isinstance(line, bytes):
            continue  # longer than any audit event we write: skipped by the reader
        try:
            event = json.loads(line)
        except ValueError:
            continue
        audit_id = event.get("auditID") if isinstance(event, dict) else None
        if audit_id not in wanted or event.get("stage") != "ResponseComplete":
            continue
        code = (event.get("responseStatus") or {}).get("code")
        if isinstance(code, int) and 200 <= code < 300:
            try:
                found[audit_id] = parse_rfc3339(str(event.get("stageTimestamp")))
            except ValueError:
                found[audit_id] = -math.inf  # no time: counted as an answer in time
    return found
