"""CI verdicts from a run's summary and the history: the tests `junit.xml` reports.

Per LB x protocol x connection, `... should stop routing to a kube-apiserver before it stops
serving` fails when a request failed inside a shutdown window, or when the worst reaction
exceeds the allowed value (skipped for localhost, which has no LB); per stream, `... should
be available throughout the test` fails when its disruption seconds exceed the allowed value.
Allowed values come from the thresholds file (P99 for the platform, rounded up to the second,
never below 1 s). Without usable history for a key, or without any shutdown to judge, the test
is skipped with the reason: never passed.

Verdicts judge the measured (point) values, as the history they are held against is made of
them; the bound the sampling puts on each value (schema v2 summaries) only enriches the
messages, so that a reader sees how far the true value may be from the one judged, and is
told when the bound spans the allowed value.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from prober.core.models import LB, StreamId
from prober.report.format.anchors import interval_anchor, link, utc, window_anchor
from prober.report.format.tables import bound
from prober.report.history.thresholds import Lookup, Thresholds
from prober.report.results import causes
from prober.report.results.bounds import disruption_bound
from prober.report.results.causes import Cause, Owner, cause_of, owner
from prober.report.results.pattern_labels import pattern_words, window_patterns
from prober.report.schema.keys import Key, entry_key
from prober.report.schema.types import (
    IntervalEntry,
    Metric,
    RetryAfterEntry,
    StreamEntry,
    SummaryDocument,
    WindowEntry,
    WindowStreamEntry,
)
from prober.report.verdicts.identity import Case, CaseId, VerdictKey

LOCALHOST_REASON = (
    "localhost reaches its own apiserver directly: there is no load balancer to stop routing"
)


class Status(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    # Failed as the platform's LB settings predict: junit.xml writes it failed and then
    # passed under one name, as origin reports a known flake (`reset_verdicts`); it fails
    # no job.
    BY_DESIGN = "by-design"


@dataclass(frozen=True, slots=True)
class Verdict:
    id: CaseId
    stream: str | None  # the stream of an availability or watch test; None for a routing test
    status: Status
    message: str  # one line: why it failed, why it was skipped, or what passed
    details: tuple[str, ...] = ()  # every finding, one per line
    observed: float | None = None
    allowed: float | None = None
    cause: str | None = None  # the cause of the failed requests it judges (`causes`)

    @property
    def name(self) -> str:
        return self.id.name

    @property
    def key(self) -> VerdictKey:
        return self.id.key


def judge(
    summary: SummaryDocument, thresholds: Thresholds | None, *, no_thresholds_reason: str = ""
) -> list[Verdict]:
    """Every verdict of one run, routing tests first, in the summary's key order."""
    platform = summary["platform"]

    def lookup(key: Key, metric: Metric) -> Lookup:
        if thresholds is None:
            return Lookup(None, no_thresholds_reason or "no thresholds file given")
        return thresholds.lookup(platform, key, metric)

    keys = [entry_key(w) for w in summary["worst"]]
    verdicts = [
        unless_same_node(summary, key, _routing(summary, key, lookup(key, "reaction")))
        for key in keys
    ]
    per_key = Counter(entry_key(s) for s in summary["streams"])
    told = summary.get("retry_after", {})
    for stream in summary["streams"]:
        key = entry_key(stream)
        target = StreamId.parse(stream["stream"]).target if per_key[key] > 1 else None
        history = lookup(key, "disruption")
        verdict = _availability(
            stream, key, target, history, windows=summary["windows"],
            retried=told.get(stream["stream"]),
        )  # fmt: skip
        verdicts.append(unless_same_node(summary, key, verdict))
    return verdicts


def unless_same_node(summary: SummaryDocument, key: Key, verdict: Verdict) -> Verdict:
    """Skipped where every request of its key reached the prober's own node: nothing of the
    LB was measured (`report.results.samenode`)."""
    reason = same_node_only(summary, key)
    if reason is None:
        return verdict
    return Verdict(verdict.id, verdict.stream, Status.SKIPPED, reason)


# The window stream with the worst reaction seen so far, its reaction first, then its window
# and that window's number (from 1, `anchors.window_anchor`).
Worst = tuple[float, WindowEntry, WindowStreamEntry, int]


def same_node_only(summary: SummaryDocument, key: Key) -> str | None:
    """Why an LB's tests of this key are skipped: every request of it was same-node; None
    where some request measured the LB (or none was sent at all)."""
    entries = [s for s in summary["streams"] if entry_key(s) == key]
    same = sum(s.get("same_node", 0) for s in entries)
    if key[0] is LB.LOCALHOST or same == 0 or same < sum(s.get("samples", 0) for s in entries):
        return None
    node = summary.get("same_node", {}).get("node")
    return (
        f"every request through {key[0]} reached the prober's own node {node}'s apiserver "
        "(a hairpin): nothing here measured the LB; see same_node"
    )


def _apiserver(window: WindowEntry) -> str:
    node = f" (node {window['node']})" if window.get("node") else ""
    return f"apiserver {window['host']}{node}"


def _routing(summary: SummaryDocument, key: Key, history: Lookup) -> Verdict:
    case, stream_name = CaseId.of(Case.ROUTING, key), None
    if key[0] is LB.LOCALHOST:
        # One apiserver, no LB in between: its requests fail once it stops serving, by design.
        # Its availability test still counts that disruption.
        return Verdict(case, stream_name, Status.SKIPPED, LOCALHOST_REASON)
    failed: list[str] = []
    retried_through = 0  # failed, as answers with Retry-After no client felt
    stopped_any = False
    worst: Worst | None = None
    for number, window in enumerate(summary["windows"], 1):
        for ws in window["streams"]:
            if entry_key(ws) != key:
                continue
            stopped = caused_in(summary, window, ws["stream"], Cause.STOPPED_SERVER)
            if stopped:
                stopped_any = True
                failed.append(
                    _failed_text(summary, number, ws, stopped)
                    + window_patterns(summary, window, ws["stream"], Cause.STOPPED_SERVER)
                )
            retried_through += caused_in(summary, window, ws["stream"], Cause.RETRY_AFTER).total()
            reaction = ws["reaction"]
            if reaction is not None and (worst is None or reaction > worst[0]):
                worst = (reaction, window, ws, number)
    late = _late_text(worst, summary.get("started"))
    if not summary["windows"]:
        return Verdict(
            case, stream_name, Status.SKIPPED, "no kube-apiserver shut down during the run"
        )
    allowed = history.allowed
    observed = 0.0 if worst is None else worst[0]
    judged = "" if allowed is None or worst is None else _spans(worst[2], allowed, observed)
    if allowed is not None and observed > allowed:
        failed.append(f"{late}; allowed {allowed:.0f} s ({history.source}){judged}")
    if failed:
        message = failed[0] if len(failed) == 1 else f"{failed[0]} (and {len(failed) - 1} more)"
        cause = str(Cause.STOPPED_SERVER) if stopped_any else None
        return Verdict(
            case, stream_name, Status.FAILED, message, tuple(failed), observed, allowed,
            cause,
        )  # fmt: skip
    told = (
        f"; {plural(retried_through, 'request')} inside the shutdown windows "
        f"{'was' if retried_through == 1 else 'were'} answered with Retry-After and "
        "client-go's retries of every one got through: no client failed"
        if retried_through
        else ""
    )
    if allowed is None:
        message = history.source + told
        return Verdict(case, stream_name, Status.SKIPPED, message, (), observed)
    message = f"{late}; allowed {allowed:.0f} s ({history.source}){judged}{told}"
    return Verdict(case, stream_name, Status.PASSED, message, (), observed, allowed)


def caused_in(
    summary: SummaryDocument, window: WindowEntry, stream: str, cause: Cause
) -> Counter[str]:
    """The stream's failed requests of one cause, by class, in the intervals that began
    inside the window (`causes.caused_in`)."""
    failed: Counter[str] = Counter()
    for i in causes.caused_in(summary, window, stream, cause):
        failed[i["error"]] += i["samples"]
    return failed


def _failed_text(
    summary: SummaryDocument, number: int, ws: WindowStreamEntry, failed: Counter[str]
) -> str:
    """Failures inside a window, as a reader acts on them: their cause, by class, when, and
    where to look."""
    window = summary["windows"][number - 1]
    when = utc(summary.get("started"), window["t0"])
    said = ", ".join(f"{error} x{n}" for error, n in failed.most_common())
    return (
        f"{ws['stream']}: {plural(failed.total(), 'request')} {Cause.STOPPED_SERVER.words} "
        f"(cause {Cause.STOPPED_SERVER}: {said}), {_apiserver(window)}, T0 at "
        f"{window['t0']:.2f} s" + (f" = {when}" if when else "")
        + f" ({link(window_anchor(number))})"
    )  # fmt: skip


def plural(n: int, word: str) -> str:
    """`1 request`, `2 requests`, `2 watches`."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word}es" if word.endswith(("s", "sh", "ch", "x")) else f"{n} {word}s"


def _late_text(worst: Worst | None, started: str | None) -> str:
    if worst is None:
        return "no request reached a shutting-down apiserver after its /readyz went false"
    reaction, window, ws, number = worst
    when = utc(started, window["t0"])
    spread = (window["t0_hi"] - window["t0_lo"]) / 2
    sampled = ""
    if "reaction_lo" in ws:  # a v1 summary has no bound to state
        sampled = within(ws["reaction_lo"], ws["reaction_hi"]) + "; "
    return (
        f"{ws['stream']}: {_apiserver(window)} still got requests {reaction:.2f} s after its "
        f"/readyz went false ({sampled}T0 {window['t0']:.2f} s ± {spread:.2f} s"
        + (f" = {when}" if when else "")
        + f", {ws['late']} late; {link(window_anchor(number))})"
    )


def _spans(ws: WindowStreamEntry, allowed: float, observed: float) -> str:
    """A note when the true reaction may lie on either side of the allowed value."""
    if "reaction_lo" not in ws:
        return ""
    lo, hi = ws["reaction_lo"], ws["reaction_hi"]
    if (lo is not None and lo > allowed) or (hi is not None and hi <= allowed):
        return ""  # the whole bound lies on one side: the point value's verdict is the truth's
    return f"; its bound spans the allowed value: judged on the measured {observed:.2f} s"


def within(lo: float | None, hi: float | None) -> str:
    """What the sampling says of a true value, in words for a one-line message."""
    if lo is not None and hi is not None:
        return f"true value within [{lo:.2f}, {hi:.2f}] s given the sampling"
    if lo is not None:
        return f"true value at least {lo:.2f} s given the sampling, which sets no upper bound"
    if hi is not None:
        return f"true value at most {hi:.2f} s given the sampling, which sets no lower bound"
    return "no bound from the sampling"


def _availability(
    stream: StreamEntry,
    key: Key,
    target: str | None,
    history: Lookup,
    *,
    windows: Sequence[WindowEntry],
    retried: RetryAfterEntry | None = None,
) -> Verdict:
    """Judged on the disruption a client felt of the causes no other test judges
    (`causes.OWNER`): client-go waits out an answer with Retry-After and tries again, so
    where a try got through, no client failed; a failure another test judges is named here,
    not judged again."""
    case, stream_name = CaseId.of(Case.AVAILABLE, key, target), stream["stream"]
    raw = stream["disruption_seconds"]
    intervals = stream["intervals"]
    owners = [owner(cause_of(i, key[0], windows), key[0]) for i in intervals]
    mine = [i for i, o in zip(intervals, owners, strict=True) if o is Owner.AVAILABILITY]
    elsewhere = Counter(
        str(cause_of(i, key[0], windows))
        for i, o in zip(intervals, owners, strict=True)
        if o not in (Owner.AVAILABILITY, Owner.NONE)
    )
    seconds = sum(i["end_t"] - i["start_t"] for i in mine)
    errors = Counter(f"{cause_of(i, key[0], windows)}: {i['error']}" for i in mine)
    sampled = disruption_bound(mine)
    figure = f"{seconds:.2f} s" + ("" if sampled is None else f" ({within(*sampled)})")
    what = f"{stream['stream']}: {figure} of disruption a client felt"
    what += f" in {plural(len(mine), 'interval')}"
    if errors:
        what += " (cause " + ", ".join(f"{e} x{n}" for e, n in errors.most_common()) + ")"
    if elsewhere:
        other = sum(
            i["end_t"] - i["start_t"]
            for i, o in zip(intervals, owners, strict=True)
            if o not in (Owner.AVAILABILITY, Owner.NONE)
        )
        what += (
            f", besides {other:.2f} s in {plural(elsewhere.total(), 'interval')} that other "
            "tests judge (cause " + ", ".join(f"{c} x{n}" for c, n in sorted(elsewhere.items()))
            + ")"
        )  # fmt: skip
    if len(mine) + sum(elsewhere.values()) < len(intervals) or retried is not None:
        what += f"; {_raw_text(raw, retried)}"
    allowed = history.allowed
    if allowed is None:
        return Verdict(case, stream_name, Status.SKIPPED, history.source, (), seconds)
    message = f"{what}; allowed {allowed:.0f} s ({history.source})"
    if seconds > allowed:
        numbered = [(n, i) for n, i in enumerate(intervals, 1) if i in mine]
        details = tuple(_interval_text(i, stream_name, n) for n, i in numbered)
        causes = ", ".join(sorted({str(cause_of(i, key[0], windows)) for i in mine}))
        return Verdict(
            case, stream_name, Status.FAILED, message, (message, *details), seconds, allowed,
            causes,
        )  # fmt: skip
    return Verdict(case, stream_name, Status.PASSED, message, (), seconds, allowed)


def _raw_text(raw: float, retried: RetryAfterEntry | None) -> str:
    """The raw figure, as origin counts it, and the answers with Retry-After in it."""
    text = f"raw {raw:.2f} s, as origin counts it"
    if retried is None:
        return text
    answers = retried["answers"]
    return (
        f"{text}: {answers} {'answer' if answers == 1 else 'answers'} with Retry-After, "
        f"{retried['succeeded']} retried through, {retried['felt']} felt, "
        f"{retried['unresolved']} unresolved"
    )


def _interval_text(i: IntervalEntry, stream: str, number: int) -> str:
    """One interval: its class, edges with their bounds and UTC times, length, and anchor."""
    start, end = f"{i['start_t']:.2f} s", f"{i['end_t']:.2f} s"
    facts = [f"{i['end_t'] - i['start_t']:.2f} s"]
    length = disruption_bound([i])
    if length is not None:  # v2: where its edges and its length truly lie
        start += f" {bound(i['start_lo'], i['start_hi'])}"
        end += f" {bound(i['end_lo'], i['end_hi'])}"
        facts.append(within(*length))
    facts.append(f"{i['samples']} failed requests")
    facts.append(f"{i['start_ts']} to {i['end_ts']}")
    facts.append(link(interval_anchor(stream, number)))
    text = f"{i['error']} from {start} to {end} ({', '.join(facts)}): {i['detail']}"
    return text + pattern_words(i)
