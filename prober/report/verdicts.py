"""CI verdicts from a run's summary and the history: the tests `junit.xml` reports.

Per LB x protocol x connection, `... should stop routing to a kube-apiserver before it stops
serving` fails when a request failed inside a shutdown window, or when the worst reaction
exceeds the allowed value (skipped for localhost, which has no LB); per stream, `... should
be available throughout the test` fails when its disruption seconds exceed the allowed value.
Allowed values come from the thresholds file (P99 for the platform, rounded up to the second,
never below 1 s). Without usable history for a key, or without any shutdown to judge, the test
is skipped with the reason: never passed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from prober.core.models import LB, Connection, Protocol, StreamId
from prober.report.summary import Key
from prober.report.thresholds import Lookup, Thresholds

ROUTING = (
    "[sig-api-machinery] load-balancer/{lb} protocol/{protocol} connection/{connection} "
    "should stop routing to a kube-apiserver before it stops serving"
)
AVAILABLE = (
    "[sig-api-machinery] load-balancer/{lb} protocol/{protocol} connection/{connection} "
    "should be available throughout the test"
)


LOCALHOST_REASON = (
    "localhost reaches its own apiserver directly: there is no load balancer to stop routing"
)


class Status(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class Verdict:
    name: str
    key: Key
    stream: str | None  # the stream of an availability test; None for a routing test
    status: Status
    message: str  # one line: why it failed, why it was skipped, or what passed
    details: tuple[str, ...] = ()  # every finding, one per line
    observed: float | None = None
    allowed: float | None = None


def _name(template: str, key: Key, target: str | None = None) -> str:
    lb, protocol, connection = key
    name = template.format(lb=lb, protocol=protocol, connection=connection)
    if target is not None:  # two targets behind the same LB: tell their tests apart
        name = name.replace(f"connection/{connection}", f"connection/{connection} target/{target}")
    return name


def judge(
    summary: dict[str, Any], thresholds: Thresholds | None, *, no_thresholds_reason: str = ""
) -> list[Verdict]:
    """Every verdict of one run, routing tests first, in the summary's key order."""
    platform = summary["platform"]

    def lookup(key: Key, metric: str) -> Lookup:
        if thresholds is None:
            return Lookup(None, no_thresholds_reason or "no thresholds file given")
        return thresholds.lookup(platform, key, metric)

    keys = [_key(w) for w in summary["worst"]]
    verdicts = [_routing(summary, key, lookup(key, "reaction")) for key in keys]
    per_key = Counter(_key(s) for s in summary["streams"])
    for stream in summary["streams"]:
        key = _key(stream)
        target = StreamId.parse(stream["stream"]).target if per_key[key] > 1 else None
        verdicts.append(_availability(stream, key, target, lookup(key, "disruption")))
    return verdicts


def _key(entry: dict[str, Any]) -> Key:
    return (LB(entry["lb"]), Protocol(entry["protocol"]), Connection(entry["connection"]))


def _apiserver(window: dict[str, Any]) -> str:
    node = f" (node {window['node']})" if window.get("node") else ""
    return f"apiserver {window['host']}{node}"


def _routing(summary: dict[str, Any], key: Key, history: Lookup) -> Verdict:
    name, stream_name = _name(ROUTING, key), None
    if key[0] is LB.LOCALHOST:
        # One apiserver, no LB in between: its requests fail once it stops serving, by design.
        # Its availability test still counts that disruption.
        return Verdict(name, key, stream_name, Status.SKIPPED, LOCALHOST_REASON)
    failed: list[str] = []
    worst: tuple[float, dict[str, Any], dict[str, Any]] | None = None
    for window in summary["windows"]:
        for ws in window["streams"]:
            if _key(ws) != key:
                continue
            if ws["failures"]:
                failed.append(
                    f"{ws['stream']}: {ws['failures']} requests failed inside the shutdown window "
                    f"of {_apiserver(window)}, T0 at {window['t0']:.2f} s"
                )
            reaction = ws["reaction"]
            if reaction is not None and (worst is None or reaction > worst[0]):
                worst = (reaction, window, ws)
    late = _late_text(worst)
    if not summary["windows"]:
        return Verdict(
            name, key, stream_name, Status.SKIPPED, "no kube-apiserver shut down during the run"
        )
    allowed = history.allowed
    observed = 0.0 if worst is None else worst[0]
    if allowed is not None and observed > allowed:
        failed.append(f"{late}; allowed {allowed:.0f} s ({history.source})")
    if failed:
        message = failed[0] if len(failed) == 1 else f"{failed[0]} (and {len(failed) - 1} more)"
        return Verdict(
            name, key, stream_name, Status.FAILED, message, tuple(failed), observed, allowed
        )
    if allowed is None:
        return Verdict(name, key, stream_name, Status.SKIPPED, history.source, (), observed)
    message = f"{late}; allowed {allowed:.0f} s ({history.source})"
    return Verdict(name, key, stream_name, Status.PASSED, message, (), observed, allowed)


def _late_text(worst: tuple[float, dict[str, Any], dict[str, Any]] | None) -> str:
    if worst is None:
        return "no request reached a shutting-down apiserver after its /readyz went false"
    reaction, window, ws = worst
    spread = (window["t0_hi"] - window["t0_lo"]) / 2
    return (
        f"{ws['stream']}: {_apiserver(window)} still got requests {reaction:.2f} s after its "
        f"/readyz went false (T0 {window['t0']:.2f} s ± {spread:.2f} s, {ws['late']} late)"
    )


def _availability(stream: dict[str, Any], key: Key, target: str | None, history: Lookup) -> Verdict:
    name, stream_name = _name(AVAILABLE, key, target), stream["stream"]
    seconds = stream["disruption_seconds"]
    intervals = stream["intervals"]
    errors = Counter(i["error"] for i in intervals)
    what = f"{stream['stream']}: {seconds:.2f} s of disruption in {len(intervals)} intervals"
    if errors:
        what += " (" + ", ".join(f"{e} x{n}" for e, n in errors.most_common()) + ")"
    allowed = history.allowed
    if allowed is None:
        return Verdict(name, key, stream_name, Status.SKIPPED, history.source, (), seconds)
    message = f"{what}; allowed {allowed:.0f} s ({history.source})"
    if seconds > allowed:
        details = tuple(
            f"{i['error']} from {i['start_t']:.2f} s to {i['end_t']:.2f} s "
            f"({i['end_t'] - i['start_t']:.2f} s, {i['samples']} failed requests): {i['detail']}"
            for i in intervals
        )
        return Verdict(
            name, key, stream_name, Status.FAILED, message, (message, *details), seconds, allowed
        )
    return Verdict(name, key, stream_name, Status.PASSED, message, (), seconds, allowed)


def count(verdicts: Iterable[Verdict]) -> Counter[Status]:
    return Counter(v.status for v in verdicts)
