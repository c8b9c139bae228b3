"""Verdicts on the first run: each LB against what its own settings promise (`core.budgets`).

Per LB x protocol x connection (localhost has no LB: it gets none of these tests):

- `... should stop routing to a shutting-down apiserver within its health-check budget`: on new
  connections the budget is the LB's worst detection (interval x unhealthy threshold + timeout;
  a managed membership's sync delay); on kept connections it is what the LB does to flows:
  where it resets them, its detection; where it keeps them, they stay on the old server until
  it closes them at the end of its graceful termination. It fails only when the reaction's
  lower bound is over the budget: the sampling cannot blame the LB for less.
- `... shutdown delay should cover this LB` (new connections): it fails when the reaction's
  upper bound passes 80 % of `shutdown-delay-duration`, the mark past which upstream counts a
  request as late (and OpenShift sizes its delays by).

A reaction the sampling does not bound above (the window closed while the LB still sent to the
old server, or a v1 summary) is judged by its lower bound where that already fails; otherwise
the test is skipped with that reason: an unbounded reaction is never a pass.

The delay is the exact one where it is known (the lab's, or one the config gives), and else
the header's, which is rounded to whole seconds: then it carries +- 0.5 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prober.core.budgets import Flows, Platform
from prober.core.models import LB, Connection
from prober.report.format.anchors import link, utc, window_anchor
from prober.report.format.tables import bound, secs
from prober.report.schema.keys import Key, entry_key
from prober.report.schema.types import SummaryDocument, WindowEntry, WindowStreamEntry
from prober.report.verdicts.identity import Case, CaseId
from prober.report.verdicts.verdicts import Status, Verdict, plural, same_node_only

LATE_MARK = 0.8  # upstream's late mark: only the delay's last 20 % may see new connections
HEADER_ROUNDING = 0.5  # the header says the delay in whole seconds


@dataclass(frozen=True, slots=True)
class Reaction:
    """One window's reaction of one stream: the measured value and where the truth lies, with
    what a reader needs to find it: the window's number in the report and the run's start.
    Its tests judge the reaction, not the requests that failed in the window: those are their
    causes' tests' (`causes`), and these messages leave them out."""

    value: float
    lo: float | None
    hi: float | None
    window: WindowEntry
    stream: WindowStreamEntry
    number: int  # the window's, from 1 (`anchors.window_anchor`)
    started: str | None

    @classmethod
    def of(cls, summary: SummaryDocument, number: int, ws: WindowStreamEntry) -> Reaction | None:
        if ws["reaction"] is None:
            return None
        value = ws["reaction"]
        window = summary["windows"][number - 1]
        return cls(
            value, ws.get("reaction_lo", value), ws.get("reaction_hi"), window, ws, number,
            summary.get("started"),
        )  # fmt: skip

    def text(self) -> str:
        w = self.window
        when = utc(self.started, w["t0"])
        t0 = f"T0 {w['t0']:.2f} s" + (f" = {when}" if when else "")
        return (
            f"{self.stream['stream']}: apiserver {w['host']} still got requests "
            f"{self.value:.2f} s {bound(self.lo, self.hi)} after its /readyz went false "
            f"({t0}, delay {secs(w['delay'])}" + f"; {link(window_anchor(self.number))})"
        )


def delay_of(window: WindowEntry, profile: Platform | None) -> tuple[float, float]:
    """The window's shutdown delay and how far it may be off: the profile's where it agrees
    with the header's rounding (the lab's, or the config's), the header's +- 0.5 s else."""
    header = window["delay"]
    if profile is not None and abs(profile.shutdown_delay - header) <= HEADER_ROUNDING:
        return profile.shutdown_delay, 0.0
    return header, HEADER_ROUNDING


def judge_budgets(summary: SummaryDocument, profile: Platform | None) -> list[Verdict]:
    """Both tests of every key the summary has, in its key order; skipped, with the reason,
    where the platform's LB settings are not known."""
    verdicts: list[Verdict] = []
    for key in (entry_key(w) for w in summary["worst"]):
        if key[0] is LB.LOCALHOST:
            continue  # no LB, no budget: not named as an LB test only to be skipped
        reactions = list(_reactions(summary, key))
        verdicts.append(_budget(summary, key, profile, reactions))
        if key[2] is Connection.NEW:
            verdicts.append(_coverage(summary, key, profile, reactions))
    return verdicts


def _reactions(summary: SummaryDocument, key: Key) -> Iterator[Reaction]:
    for number, window in enumerate(summary["windows"], 1):
        for ws in window["streams"]:
            if entry_key(ws) == key and (reaction := Reaction.of(summary, number, ws)) is not None:
                yield reaction


def _precondition(
    summary: SummaryDocument, key: Key, profile: Platform | None, case: CaseId
) -> Verdict | None:
    """The skip that comes before any judging, or None."""
    reason = same_node_only(summary, key)  # nothing of the LB was measured from its node
    if reason is None and profile is None:
        reason = f"no LB settings known for platform {summary['platform']!r}"
    elif reason is None and not summary["windows"]:
        reason = "no kube-apiserver shut down during the run"
    return None if reason is None else Verdict(case, None, Status.SKIPPED, reason)


def budget_of(profile: Platform, lb: LB, connection: Connection) -> tuple[float, str]:
    """The budget of one LB and connection mode, and in words where it comes from."""
    settings = profile.lb(lb)
    if connection is Connection.NEW or settings.flows is Flows.RESET:
        if settings.check is None:
            return settings.stop_routing, f"its proxies' sync delay {secs(settings.sync_delay)}"
        c = settings.check
        how = (
            f"interval {secs(c.interval)}, {c.fall} unhealthy checks, timeout {secs(c.timeout)}"
            + ("" if connection is Connection.NEW else ", then it resets kept connections")
        )
        return settings.stop_routing, how
    return profile.kept_budget(lb), (
        f"it keeps established connections: until the server closes them, "
        f"graceful termination {secs(profile.graceful_termination)}"
    )


def _budget(
    summary: SummaryDocument, key: Key, profile: Platform | None, reactions: list[Reaction]
) -> Verdict:
    if profile is None:
        skip = _precondition(summary, key, profile, CaseId.of(Case.WITHIN_BUDGET, key))
        assert skip is not None
        return skip
    budget, how = budget_of(profile, key[0], key[2])
    case = CaseId.of(Case.WITHIN_BUDGET, key)
    skip = _precondition(summary, key, profile, case)
    if skip is not None:
        return skip
    said = f"budget {secs(budget)} on {profile.name} ({how})"
    over = [r for r in reactions if r.lo is not None and r.lo > budget]
    if over:
        worst = max(over, key=lambda r: r.value)
        message = f"{worst.text()}: its lower bound is over the {said}"
        details = tuple(f"{r.text()}: over the budget" for r in over)
        return Verdict(case, None, Status.FAILED, message, details, worst.value, budget)
    if not reactions:
        message = (
            f"no request reached a shutting-down apiserver after its /readyz went false; {said}"
        )
        return Verdict(case, None, Status.PASSED, message, (), 0.0, budget)
    worst = max(reactions, key=lambda r: r.value)
    unbounded = [r for r in reactions if r.hi is None]
    if unbounded:
        message = f"{unbounded[0].text()}: the sampling sets no upper bound; {said}"
        return Verdict(case, None, Status.SKIPPED, message, (), worst.value, budget)
    message = f"{worst.text()}; within the {said}"
    return Verdict(case, None, Status.PASSED, message, (), worst.value, budget)


def _coverage(
    summary: SummaryDocument, key: Key, profile: Platform | None, reactions: list[Reaction]
) -> Verdict:
    case = CaseId.of(Case.DELAY_COVERS, key)
    skip = _precondition(summary, key, profile, case)
    if skip is not None:
        return skip
    assert profile is not None
    judged: list[tuple[Reaction, float, str]] = []
    for r in reactions:
        delay, error = delay_of(r.window, profile)
        mark = LATE_MARK * delay
        said = f"80 % of the {secs(delay)} delay" + (f" (± {secs(error)})" if error else "")
        judged.append((r, mark, f"{said} is {mark:.2f} s"))
    over = [(r, m, s) for r, m, s in judged if r.hi is not None and r.hi > m]
    over += [(r, m, s) for r, m, s in judged if r.hi is None and r.lo is not None and r.lo > m]
    if over:
        r, mark, said = max(over, key=lambda j: j[0].value)
        message = f"{r.text()}: it may pass the late mark; {said}"
        details = tuple(f"{x.text()}; {s}" for x, _, s in over)
        return Verdict(case, None, Status.FAILED, message, details, r.value, mark)
    if not judged:
        delay, error = delay_of(summary["windows"][0], profile)
        message = "no request reached a shutting-down apiserver after its /readyz went false"
        return Verdict(case, None, Status.PASSED, message, (), 0.0, LATE_MARK * delay)
    r, mark, said = max(judged, key=lambda j: j[0].value)
    unbounded = [j for j in judged if j[0].hi is None]
    if unbounded:
        u, umark, usaid = unbounded[0]
        message = f"{u.text()}: the sampling sets no upper bound; {usaid}"
        return Verdict(case, None, Status.SKIPPED, message, (), u.value, umark)
    message = f"{r.text()}; within the late mark: {said}"
    return Verdict(case, None, Status.PASSED, message, (), r.value, mark)


def explain(
    summary: SummaryDocument, verdicts: list[Verdict], profile: Platform | None
) -> list[str]:
    """One line per LB x protocol x connection that says why its numbers are what they are:
    the worst reaction and its bound, the LB's settings and the budget they imply, the late
    mark, with the tests' outcomes, and the failures inside the shutdown windows. Every
    figure is one of the summary's or the table's."""
    status = {v.id: v.status for v in verdicts}
    lines = []
    for key in (entry_key(w) for w in summary["worst"]):
        if key[0] is LB.LOCALHOST:
            continue
        lb, protocol, connection = key
        parts = [f"{summary['platform']} {lb} {protocol} {connection}: {_reacted(summary, key)}"]
        if profile is not None:
            budget, how = budget_of(profile, lb, connection)
            within = status.get(CaseId.of(Case.WITHIN_BUDGET, key))
            parts.append(f"budget {secs(budget)} ({how}): {_word(within)}")
            if connection is Connection.NEW and summary["windows"]:
                delay, error = delay_of(summary["windows"][0], profile)
                shown = f"{secs(delay)}" + (f" ± {secs(error)}" if error else "")
                outcome = _word(status.get(CaseId.of(Case.DELAY_COVERS, key)))
                parts.append(f"80 % of the {shown} delay: {outcome}")
        failures = sum(
            ws["failures"] for w in summary["windows"] for ws in w["streams"]
            if entry_key(ws) == key
        )  # fmt: skip
        parts.append(f"{failures} failed inside the shutdown windows")
        parts.append(_disruption_text(summary, key))
        lines.append("; ".join(parts))
    return lines


def _disruption_text(summary: SummaryDocument, key: Key) -> str:
    """The key's disruption as a client felt it and raw, with the answers with Retry-After
    that make the difference (summed over the key's streams: one per target)."""
    streams = [s for s in summary["streams"] if entry_key(s) == key]
    raw = sum(s["disruption_seconds"] for s in streams)
    felt = sum(s.get("felt_disruption_seconds", s["disruption_seconds"]) for s in streams)
    told = [summary.get("retry_after", {}).get(s["stream"]) for s in streams]
    answers = sum(t["answers"] for t in told if t is not None)
    through = sum(t["succeeded"] for t in told if t is not None)
    text = f"disruption a client felt {felt:.2f} s"
    if answers:
        text += (
            f" (raw {raw:.2f} s: {plural(answers, 'answer')} with Retry-After, {through} retried "
            "through)"
        )
    elif raw != felt:
        text += f" (raw {raw:.2f} s)"
    return text


def _reacted(summary: SummaryDocument, key: Key) -> str:
    only = same_node_only(summary, key)
    if only is not None:
        return only
    reactions = list(_reactions(summary, key))
    if not reactions:
        return (
            "no shutdown"
            if not summary["windows"]
            else "sent no request to a shutting-down apiserver"
        )
    worst = max(reactions, key=lambda r: r.value)
    spread = (
        "unbounded above"
        if worst.lo is None or worst.hi is None
        else f"bound {bound(worst.lo, worst.hi)}"
    )
    return f"stopped routing {worst.value:.2f} s after readyz false ({spread})"


def _word(status: Status | None) -> str:
    words = {Status.PASSED: "within", Status.FAILED: "OVER", Status.SKIPPED: "not shown"}
    return "not judged" if status is None else words[status]
