"""The watch streams' CI verdicts, from summary.json's `watches` section alone.

Per LB x protocol, three tests:

- `... should re-establish within R s`: every watch that ended (other than at the daemon's own
  stop) was established again within R seconds, and none was still waiting at the run's end
  for longer than R. R = 5 s by default: a watch that ends with its server is watched again
  at once; one that lands on a stopping server again, and again, waits client-go's backoff
  (0.8 s, 1.6 s, 3.2 s: 5.6 s by the third), so past 5 s the LB sent at least three tries in a
  row to servers that would not serve them.
- `... should not land on a shutting-down apiserver`: no WATCH got its stream from a server
  already answering `shutdown=true` (a doomed re-watch: cut again when that server stops).
- `... should not be blind longer than B s`: no blind interval (the heartbeat written and not
  seen past the blind threshold) longer than B seconds. B = 15 s by default, client-go's
  HTTP/2 ping timeout: a graceful rollout behind a working LB blinds a watch for the length
  of a re-watch, a second or two; 15 s and more is a flow the LB dropped without a word, which
  only the ping (HTTP/2) or TCP keepalive (HTTP/1.1, minutes) finds.

Localhost has no LB: its watches go down with their own apiserver by design, so its tests are
skipped, as its routing test is. Without a heartbeat the blindness test is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from prober.core.models import LB, Protocol
from prober.report.tables import secs
from prober.report.verdicts import LOCALHOST_REASON, Status, Verdict

PREFIX = "[sig-api-machinery] load-balancer/{lb} protocol/{protocol} watch"
REESTABLISH = PREFIX + " should re-establish within its limit"
NOT_DOOMED = PREFIX + " should not land on a shutting-down apiserver"
NOT_BLIND = PREFIX + " should not be blind longer than its limit"


REESTABLISH_WITHIN = 5.0
BLIND_WITHIN = 15.0


class WatchAllowed(NamedTuple):
    """What the watch tests allow, in seconds (`prober analyze --watch-*-within`)."""

    reestablish: float = REESTABLISH_WITHIN
    blind: float = BLIND_WITHIN


def judge_watches(section: Mapping[str, Any] | None, allowed: WatchAllowed) -> list[Verdict]:
    """The three tests of every watch stream, in the section's stream order."""
    verdicts: list[Verdict] = []
    heartbeat = bool(section and section["heartbeat"]["writes"])
    for entry in (section or {}).get("streams", []):
        key = (LB(entry["lb"]), Protocol(entry["protocol"]), "watch")
        names = [
            template.format(lb=key[0], protocol=key[1], allowed=limit)
            for template, limit in (
                (REESTABLISH, allowed.reestablish),
                (NOT_DOOMED, 0.0),
                (NOT_BLIND, allowed.blind),
            )
        ]
        if key[0] is LB.LOCALHOST:
            verdicts += [
                Verdict(n, key, entry["stream"], Status.SKIPPED, LOCALHOST_REASON) for n in names
            ]
            continue
        verdicts.append(_reestablish(names[0], key, entry, allowed.reestablish))
        verdicts.append(_doomed(names[1], key, entry))
        verdicts.append(_blind(names[2], key, entry, allowed.blind, heartbeat))
    return verdicts


def _verdict(
    name: str,
    key: tuple[LB, Protocol, str],
    entry: Mapping[str, Any],
    findings: Sequence[str],
    passed: str,
    *,
    observed: float,
    allowed: float,
) -> Verdict:
    stream = entry["stream"]
    if findings:
        more = "" if len(findings) == 1 else f" (and {len(findings) - 1} more)"
        message = f"{stream}: {findings[0]}{more}"
        return Verdict(
            name, key, stream, Status.FAILED, message, tuple(findings), observed, allowed
        )
    return Verdict(name, key, stream, Status.PASSED, f"{stream}: {passed}", (), observed, allowed)


def _reestablish(
    name: str, key: tuple[LB, Protocol, str], entry: Mapping[str, Any], allowed: float
) -> Verdict:
    times = entry["reestablish"]
    ends = sum(n for how, n in entry["ends"].items() if how != "stopped")
    if not ends:
        return Verdict(name, key, entry["stream"], Status.SKIPPED, "no watch ended during the run")
    worst = times["max"] or 0.0
    findings = []
    if worst > allowed:
        findings.append(
            f"a watch took {worst:.2f} s to re-establish after it ended (p50 {times['p50']:.2f} s"
            f", p99 {times['p99']:.2f} s over {times['count']}); allowed {secs(allowed)}"
        )
    waiting = entry.get("unrestored")
    if waiting is not None and waiting > allowed:
        findings.append(
            f"a watch ended {waiting:.2f} s before the run's end was never re-established; "
            f"allowed {secs(allowed)}"
        )
        worst = max(worst, waiting)
    passed = (
        f"{ends} watch ends, re-established in at most {worst:.2f} s "
        f"(p50 {times['p50'] or 0.0:.2f} s); allowed {secs(allowed)}"
    )
    return _verdict(name, key, entry, findings, passed, observed=worst, allowed=allowed)


def _doomed(name: str, key: tuple[LB, Protocol, str], entry: Mapping[str, Any]) -> Verdict:
    findings = [
        f"a watch established at {d['t']:.2f} s on apiserver {d['server']}, which was already "
        f"shutting down ({_elapsed(d['elapsed'])})"
        for d in entry.get("doomed_at", [])
    ]
    passed = f"{entry['established']} watches established, none on a shutting-down apiserver"
    return _verdict(
        name, key, entry, findings, passed, observed=float(entry["doomed"]), allowed=0.0
    )


def _elapsed(elapsed: float | None) -> str:
    return "elapsed unknown" if elapsed is None else f"{elapsed:.2f} s after its /readyz went false"


def _blind(
    name: str,
    key: tuple[LB, Protocol, str],
    entry: Mapping[str, Any],
    allowed: float,
    heartbeat: bool,
) -> Verdict:
    if not heartbeat:
        return Verdict(
            name, key, entry["stream"], Status.SKIPPED,
            "no heartbeat was written: blindness is not measured",
        )  # fmt: skip
    spells = [(a, b) for a, b in entry["blind"]]
    findings = [
        f"blind for {b - a:.2f} s from {a:.2f} s to {b:.2f} s (the heartbeat unseen past the "
        f"blind threshold); allowed {secs(allowed)}"
        for a, b in spells
        if b - a > allowed
    ]
    worst = max((b - a for a, b in spells), default=0.0)
    passed = (
        f"{len(spells)} blind intervals, the longest {worst:.2f} s; allowed {secs(allowed)}"
        if spells
        else f"never blind; allowed {secs(allowed)}"
    )
    return _verdict(name, key, entry, findings, passed, observed=worst, allowed=allowed)
