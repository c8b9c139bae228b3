"""The watch streams' CI verdicts, from summary.json's `watches` section alone.

Per LB x protocol, three tests:

- `... should re-establish within its limit` (R): every watch that ended (other than at the
  daemon's own stop) was established again within R seconds, and none was still waiting at
  the run's end for longer than R. R = 5 s by default: a watch that ends with its server is
  watched again at once; one that lands on a stopping server again, and again, waits
  client-go's backoff (0.8 s, 1.6 s, 3.2 s: 5.6 s by the third), so past 5 s the LB sent at least
  three tries in a row to servers that would not serve them.
- `... should not land on a shutting-down apiserver`: no WATCH got its stream from a server
  already answering `shutdown=true` (a doomed re-watch: cut again when that server stops).
  One that landed within the LB's worst case to stop routing (its health checks' detection,
  the service network's sync delay) after its server's T0 is what the LB's settings predict:
  by design, as a late request within that budget passes its budget test; so is one on a
  connection opened before its server's T0, through an LB that keeps flows (it stays on its
  server until the server closes it).
- `... should not be blind longer than its limit` (B): no blind interval (the heartbeat
  written and not seen past the blind threshold) longer than B seconds. B = 15 s by default,
  client-go's HTTP/2 ping timeout: a graceful rollout behind a working LB blinds a watch for
  the length of a re-watch, a second or two; 15 s and more is a flow the LB dropped without
  a word, which only the ping (HTTP/2) or TCP keepalive (HTTP/1.1, minutes) finds.

R and B are client-go's, scaled as the run's own timers are (its run record's `watch_limits`:
the lab scales the daemon's backoff and ping with `--time-scale`), but never below 1 s: the
LIST and WATCH of a re-watch take what the node gives them, unscaled, and on a busy node that
is a few hundred ms; `prober analyze --watch-*-within` sets them instead. summary.json's
`watches.limits` and every message say which.

A blind interval that began while its server still served, on an LB whose settings reset the
flows of a server it takes out (aws, metal), is the LB's reset that never reached the client
(the lab's aws NLB drops the flow without telling the client; an HTTP/1.1 watch sends
nothing, so only TCP keepalive finds it, an HTTP/2 one its PING): the platform predicts it,
and the blind test reports it by design (`reset_verdicts`) unless another interval fails it.
One still blind when the run ended is judged as blind, since when and for how long.

Localhost has no LB: its watches go down with their own apiserver by design, so its tests are
skipped, as its routing test is. Without a heartbeat the blindness test is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from prober.core.budgets import Flows, Platform
from prober.core.models import LB, Protocol
from prober.core.watch import BLIND_WITHIN, REESTABLISH_WITHIN, UNSCALED_FLOOR
from prober.report.format.tables import secs
from prober.report.results.causes import Cause, detecting, serving_window
from prober.report.schema.types import WindowEntry
from prober.report.verdicts.identity import Case, CaseId
from prober.report.verdicts.reset_verdicts import RESETS_BY
from prober.report.verdicts.verdicts import LOCALHOST_REASON, Status, Verdict, plural


class WatchAllowed(NamedTuple):
    """What the watch tests allow, in seconds (`prober analyze --watch-*-within`); None: the
    run's own limits (`core.watch.watch_limits`), else client-go's."""

    reestablish: float | None = None
    blind: float | None = None


class Limit(NamedTuple):
    seconds: float
    source: str  # where it comes from, in words


@dataclass(frozen=True, slots=True)
class RunContext:
    """What the blindness test needs of the rest of the run to say why a watch was blind."""

    windows: Sequence[WindowEntry] = ()
    profile: Platform | None = None


def limits(allowed: WatchAllowed, section: Mapping[str, Any] | None) -> tuple[Limit, Limit]:
    """The re-establish and blindness limits in force, each with its source."""
    recorded = (section or {}).get("limits")
    chosen = []
    for given, name, default, scaled_as, flag in (
        (allowed.reestablish, "reestablish", REESTABLISH_WITHIN, "reflector backoff",
         "--watch-reestablish-within"),
        (allowed.blind, "blind", BLIND_WITHIN, "HTTP/2 ping timeout", "--watch-blind-within"),
    ):  # fmt: skip
        if given is not None:
            chosen.append(Limit(given, f"set by {flag}"))
        elif recorded is not None and abs(recorded[name] - default) > 1e-9:
            source = (
                f"client-go's {default:g} s, scaled as this run's {scaled_as}, at least "
                f"{UNSCALED_FLOOR:g} s for the requests of a re-watch, which do not scale"
            )
            chosen.append(Limit(recorded[name], source))
        else:
            chosen.append(Limit(default, "client-go's"))
    return chosen[0], chosen[1]


def judge_watches(
    section: Mapping[str, Any] | None, allowed: WatchAllowed, run: RunContext = RunContext()
) -> list[Verdict]:
    """The three tests of every watch stream, in the section's stream order."""
    verdicts: list[Verdict] = []
    heartbeat = bool(section and section["heartbeat"]["writes"])
    reestablish, blind = limits(allowed, section)
    for entry in (section or {}).get("streams", []):
        key = (LB(entry["lb"]), Protocol(entry["protocol"]), "watch")
        cases = [CaseId.of(c, key) for c in (Case.REESTABLISH, Case.NOT_DOOMED, Case.NOT_BLIND)]
        if key[0] is LB.LOCALHOST:
            verdicts += [
                Verdict(c, entry["stream"], Status.SKIPPED, LOCALHOST_REASON) for c in cases
            ]
            continue
        verdicts.append(_reestablish(cases[0], key, entry, reestablish, run))
        verdicts.append(_doomed(cases[1], key, entry, run))
        verdicts.append(_blind(cases[2], key, entry, blind, heartbeat=heartbeat, run=run))
    return verdicts


def _verdict(
    case: CaseId,
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
        return Verdict(case, stream, Status.FAILED, message, tuple(findings), observed, allowed)
    return Verdict(case, stream, Status.PASSED, f"{stream}: {passed}", (), observed, allowed)


def _by_design(
    case: CaseId,
    entry: Mapping[str, Any],
    findings: Sequence[str],
    reason: str,
    *,
    details: tuple[str, ...],
    observed: float,
    allowed: float,
    cause: Cause | None = None,
) -> Verdict:
    """What the platform's LB settings predict: the first finding and why it is predicted."""
    stream = entry["stream"]
    more = "" if len(findings) == 1 else f" (and {len(findings) - 1} more below)"
    message = f"{stream}: by design: {findings[0]}; {reason}{more}"
    return Verdict(case, stream, Status.BY_DESIGN, message, details, observed, allowed,
                   None if cause is None else str(cause))  # fmt: skip


def _reestablish(
    case: CaseId,
    key: tuple[LB, Protocol, str],
    entry: Mapping[str, Any],
    limit: Limit,
    run: RunContext,
) -> Verdict:
    times = entry["reestablish"]
    ends = sum(n for how, n in entry["ends"].items() if how != "stopped")
    allowed = f"allowed {secs(limit.seconds)} ({limit.source})"
    if not ends:
        reason = "no watch end reached the client during the run"
        still = _still_blind(entry)
        if still is not None:
            reason += (
                f"; a watch was blind from {still:.2f} s to the run's end, an end the client "
                "never learnt of, which the blindness test judges"
            )
        return Verdict(case, entry["stream"], Status.SKIPPED, reason)
    worst = times["max"] or 0.0
    findings = []
    if worst > limit.seconds:
        findings.append(
            f"a watch took {worst:.2f} s to re-establish after it ended (p50 {times['p50']:.2f} s"
            f", p99 {times['p99']:.2f} s over {times['count']}); {allowed}"
        )
    waiting = entry.get("unrestored")
    if waiting is not None and waiting > limit.seconds:
        findings.append(
            f"a watch ended {waiting:.2f} s before the run's end was never re-established; "
            f"{allowed}"
        )
        worst = max(worst, waiting)
    passed = (
        f"{plural(ends, 'watch end')}, re-established in at most {worst:.2f} s "
        f"(p50 {times['p50'] or 0.0:.2f} s); {allowed}"
    )
    return _verdict(case, entry, findings, passed, observed=worst, allowed=limit.seconds)


def _still_blind(entry: Mapping[str, Any]) -> float | None:
    """When the blind interval still open at the run's end began; None: none was."""
    return entry["blind"][-1][0] if entry.get("blind_at_end") else None


def _doomed(
    case: CaseId, key: tuple[LB, Protocol, str], entry: Mapping[str, Any], run: RunContext
) -> Verdict:
    doomed = entry.get("doomed_at", [])
    findings = [
        f"a watch established at {d.get('landed', d['t']):.2f} s on apiserver {d['server']}, "
        f"which was already shutting down ({_elapsed(d['elapsed'])})"
        for d in doomed
    ]
    passed = (
        f"{plural(entry['established'], 'watch')} established, none on a shutting-down apiserver"
    )
    why = [_predicted(d, key[0], run) for d in doomed]
    if findings and all(w is not None for w in why):
        assert run.profile is not None
        said = tuple(f"{f}; {w}" for f, w in zip(findings, why, strict=True))
        return _by_design(case, entry, findings, f"on {run.profile.name} {why[0]}",
                          details=said, observed=float(len(doomed)), allowed=0.0)  # fmt: skip
    return _verdict(case, entry, findings, passed, observed=float(entry["doomed"]), allowed=0.0)


def _predicted(doomed: Mapping[str, Any], lb: LB, run: RunContext) -> str | None:
    """Why the LB's settings predict a doomed watch, or None where they do not: it landed
    while the LB could still be detecting its server's shutdown (by T0's upper bound plus
    the LB's worst case to stop routing), or on a connection opened before that shutdown
    began, which an LB that keeps flows leaves on its server until the server closes it."""
    if run.profile is None:
        return None
    profile = run.profile.lb(lb)
    # Where it landed: a watch sent just before T0 may land after it (its head's arrival;
    # its send time in logs written before `landed` was).
    t, opened = doomed.get("landed", doomed["t"]), doomed.get("opened")
    for w in run.windows:
        if w["host"] != doomed["server"] or t < w["t0_lo"]:
            continue
        if detecting(t, w, profile):
            return (
                f"this LB may route new connections to a server up to "
                f"{profile.stop_routing:.2f} s after its /readyz went false (its worst case to "
                "stop routing), and a watch sent then lands there: predicted within its "
                "detection"
            )
        if opened is not None and opened < w["t0_lo"] and profile.flows is not Flows.RESET:
            return (
                f"this LB keeps established flows on their server, and the watch went on a "
                f"connection opened at {opened:.2f} s, before that server's T0: predicted "
                "until the server closes it"
            )
    return None


def _elapsed(elapsed: float | None) -> str:
    return "elapsed unknown" if elapsed is None else f"{elapsed:.2f} s after its /readyz went false"


def _blind(
    case: CaseId,
    key: tuple[LB, Protocol, str],
    entry: Mapping[str, Any],
    limit: Limit,
    *,
    heartbeat: bool,
    run: RunContext,
) -> Verdict:
    stream = entry["stream"]
    if not heartbeat:
        return Verdict(
            case, stream, Status.SKIPPED, "no heartbeat was written: blindness is not measured"
        )
    allowed = f"allowed {secs(limit.seconds)} ({limit.source})"
    spells = [(a, b) for a, b in entry["blind"]]
    worst = max((b - a for a, b in spells), default=0.0)
    over = [(a, b) for a, b in spells if b - a > limit.seconds]
    if not over:
        passed = (
            f"{plural(len(spells), 'blind interval')}, the longest {worst:.2f} s; {allowed}"
            if spells
            else f"never blind; {allowed}"
        )
        return Verdict(case, stream, Status.PASSED, f"{stream}: {passed}", (), worst,
                       limit.seconds)  # fmt: skip
    last = entry["blind"][-1] if entry.get("blind_at_end") else None
    said = [
        (_spell_text(a, b, key, run, at_end=[a, b] == last), _reset_while_serving(a, key[0], run))
        for a, b in over
    ]
    findings = [f"{text}; {allowed}" for text, _ in said]
    predicted = run.profile is not None and run.profile.lb(key[0]).flows is Flows.RESET
    if predicted and all(host is not None for _, host in said):
        assert run.profile is not None
        how = RESETS_BY.get(run.profile.name, "its settings reset established flows")
        reason = (
            f"on {run.profile.name} this LB resets the flows of a server it takes out ({how}), "
            "and a watch learns of it only as its client finds the flow dead"
        )
        return _by_design(case, entry, findings, reason, details=tuple(findings),
                          observed=worst, allowed=limit.seconds, cause=Cause.LB_RESET)  # fmt: skip
    return _verdict(case, entry, findings, "", observed=worst, allowed=limit.seconds)


def _spell_text(
    a: float, b: float, key: tuple[LB, Protocol, str], run: RunContext, *, at_end: bool
) -> str:
    """One blind interval: how long, from when, whether it ran to the run's end, and why."""
    text = f"blind for {b - a:.2f} s from {a:.2f} s to " + (
        f"the run's end at {b:.2f} s, still blind then" if at_end else f"{b:.2f} s"
    )
    text += " (the heartbeat unseen past the blind threshold)"
    host = _reset_while_serving(a, key[0], run)
    if host is not None:
        finds = (
            "an HTTP/1.1 watch sends nothing, so only TCP keepalive finds a dead flow"
            if key[1] is Protocol.HTTP1
            else "an HTTP/2 watch finds a dead flow by its PING, after its read-idle timeout"
        )
        text += (
            f": it began while apiserver {host} still served, as the LB took it out; the LB "
            f"cut the watch's flow (cause {Cause.LB_RESET}) without a word the client heard: "
            f"{finds}"
        )
    return text


def _reset_while_serving(t: float, lb: LB, run: RunContext) -> str | None:
    """The apiserver whose shutdown window `t` falls in while it still served, where the LB
    takes a server out; None where the blindness began otherwise."""
    window = serving_window(t, run.windows)
    return None if lb is LB.LOCALHOST or window is None else window["host"]
