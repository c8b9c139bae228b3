"""`report.html`: one run, for someone who never saw the tool.

A self-contained page (no network at view time): what was measured in plain words, the
verdicts per LB x protocol x connection, the shutdown windows, a timeline per LB that can zoom
onto each window, and every number behind the pictures in tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prober import __version__
from prober.core.models import LB, Interval, WindowStream
from prober.report.documents import pattern_table as patterns
from prober.report.documents.age_tables import ages_html
from prober.report.documents.capacity import READY, ROUTED, capacity_lanes
from prober.report.documents.coverage_tables import coverage_html
from prober.report.documents.latency_table import latency_html
from prober.report.documents.own_late_table import own_late_html
from prober.report.documents.rebalance_table import rebalance_html
from prober.report.documents.restart_table import restarts_table
from prober.report.documents.samenode_tables import same_node_table
from prober.report.documents.timeline import (
    Lane,
    StreamMarks,
    View,
    lb_timeline,
    stream_marks,
    views,
    window_title,
)
from prober.report.documents.watch_lanes import ESTABLISHED, QUIET_END, watch_lanes, watch_table
from prober.report.format.anchors import interval_anchor, window_anchor
from prober.report.format.page import linked, page, status_cell
from prober.report.format.svg import FAILURE, HOST_COLOURS, LATE, T0, esc, swatch
from prober.report.format.tables import bound, bounded, seconds
from prober.report.replay.replay import Replay
from prober.report.replay.runs import ReadStats, RunLog
from prober.report.results.bounds import interval_bound
from prober.report.results.watches import WatchStreams
from prober.report.schema.types import IntervalEntry, SummaryDocument, WorstEntry
from prober.report.verdicts.counts import counts_text
from prober.report.verdicts.identity import Case
from prober.report.verdicts.run_verdict import abrupt_end
from prober.report.verdicts.verdicts import Status, Verdict

_EXPLAIN = """
<p>When a kube-apiserver shuts down gracefully, its <code>/readyz</code> health check fails at once
(instant <b>T0</b>), yet it keeps serving for its <b>shutdown delay</b> so that the load balancers
(LBs) in front of it notice and send requests elsewhere; then it stops. Every request here asked
the apiserver whether it was shutting down. A <b>late request</b> is one an apiserver answered
after T0. An LB's <b>reaction</b> is how long after T0 it still sent a request to that apiserver;
it must stay well inside the shutdown delay, or requests start to fail. <b>Disruption</b> is the
time during which requests failed.</p>
<p>T0 is estimated from the answers (the apiserver reports elapsed time rounded to the second);
the darker band around each T0 line shows the range it must lie in. Requests are only sent every
so often, so a measured value is only known to lie in a range too: a light grey band over each
reaction shows where the true reaction lies (from the last request that reached the apiserver to
the first that showed the LB had stopped; it runs to the window's end when none did), a light red
band around each end of a disruption where it truly began or ended. Tables show these ranges as
<code>[low, high]</code>, with <code>?</code> where nothing bounds a side.</p>
"""

_SCRIPT = """
const zoom = document.getElementById("zoom");
zoom.addEventListener("change", () => {
  for (const figure of document.querySelectorAll("figure[data-view]")) {
    figure.hidden = figure.dataset.view !== zoom.value;
  }
});
"""


@dataclass(frozen=True, slots=True)
class RunReport:
    log: RunLog
    replay: Replay
    summary: SummaryDocument
    verdicts: Sequence[Verdict]
    warnings: Sequence[str]
    stats: ReadStats
    watches: WatchStreams


def render_run_report(report: RunReport) -> str:
    run = report.log.run
    colours: dict[str, str] = {}
    for w in report.replay.windows:
        colours.setdefault(w.host, HOST_COLOURS[len(colours) % len(HOST_COLOURS)])
    samples = sum(s["samples"] for s in report.summary["streams"])
    meta = (
        f"run <b>{esc(run.run_id)}</b> · platform <b>{esc(report.summary['platform'])}</b> · "
        f"started {esc(run.ts)} · {report.replay.end_t:.1f} s long · {samples} requests · "
        f"{len(report.replay.windows)} shutdown windows · measured by prober {esc(run.version)}, "
        f"analyzed by prober {esc(__version__)}"
    )
    body = [
        "<h1>How fast did the load balancers stop sending requests to a shutting-down "
        "kube-apiserver?</h1>",
        f'<p class="meta">{meta}</p>',
        _outcome(report.verdicts),
        *(f'<p class="note">{esc(t)}</p>' for t in [abrupt_end(report.verdicts)] if t),
        f'<div class="explain">{_EXPLAIN}</div>',
        '<h2 id="verdicts">Verdicts</h2>',
        _verdict_table(report.verdicts, report.summary),
        '<h2 id="windows">Shutdown windows</h2>',
        _windows_table(report.replay, colours),
        '<h2 id="timelines">Timeline per load balancer</h2>',
        _timelines(report, colours),
        '<h2 id="restarts">Restarted apiservers: when each LB took them back</h2>',
        restarts_table(report.summary.get("restarts")),
        '<h2 id="rebalancing">Rebalancing: kept HTTP/2 connections after each restart</h2>',
        rebalance_html(report.summary.get("rebalancing")),
        '<h2 id="watches">Watches</h2>',
        watch_table(report.summary.get("watches"), report.verdicts),
        '<h2 id="per-window">Per window and stream</h2>',
        _window_streams_table(report.replay),
        *coverage_html(report.summary.get("coverage")),
        '<h2 id="connection-age">Connection age: which connections failed</h2>',
        ages_html(report.summary.get("connection_ages"), _age_statuses(report.verdicts)),
        own_late_html(report.summary.get("own_late")),
        '<h2 id="latency">Answer times before, in and after the shutdown windows</h2>',
        latency_html(report.summary.get("latency")),
        '<h2 id="intervals">Disruption intervals</h2>',
        _intervals_table(report.replay, patterns.by_interval(report.summary)),
        patterns.pattern_seconds_table(report.summary),
        '<h2 id="same-node">Same-node requests</h2>',
        same_node_table(report.summary),
        '<h2 id="tests">Every test junit.xml reports</h2>',
        _tests_table(report.verdicts),
        _notes(report),
    ]
    return page(f"prober report: run {run.run_id}", "\n".join(body), _SCRIPT)


def _outcome(verdicts: Sequence[Verdict]) -> str:
    """The run's verdicts in one line, then every test that failed, or failed by design,
    with its cause and a link to its row below: what a reader in a hurry came for."""
    worth = [(n, v) for n, v in enumerate(verdicts, 1) if v.status in _SHOWN_FIRST]
    items = "".join(
        f'<li><span class="{v.status}">{v.status}</span> <a href="#test-{n}">{esc(v.name)}</a>'
        + (f" (cause {esc(v.cause)})" if v.cause else "")
        + f'<div class="why">{linked(v.message)}</div></li>'
        for n, v in worth
    )
    clean = "" if any(v.status is Status.FAILED for v in verdicts) else " clean"
    listed = f"<ul>{items}</ul>" if items else ""
    return (
        f'<div class="outcome{clean}"><b>junit.xml: {esc(counts_text(verdicts))}</b> '
        f'(<a href="#tests">every test</a>){listed}</div>'
    )


_SHOWN_FIRST = (Status.FAILED, Status.BY_DESIGN)


def _tests_table(verdicts: Sequence[Verdict]) -> str:
    """Every test, in junit.xml's order: its outcome, its cause and its findings."""
    rows = "".join(
        f'<tr id="test-{n}"><td>{esc(v.name)}</td>'
        + status_cell(v.status, v.message, v.details if len(v.details) > 1 else ())
        + f"<td>{esc(v.cause or '-')}</td></tr>"
        for n, v in enumerate(verdicts, 1)
    )
    return f"<table><tr><th>test</th><th>outcome</th><th>cause</th></tr>{rows}</table>"


def _age_statuses(verdicts: Sequence[Verdict]) -> dict[str, str]:
    """Each LB's outcome of the 20 % rule's test, for the report's findings."""
    return {str(v.id.lb): str(v.status) for v in verdicts if v.id.case is Case.TWENTY_PERCENT}


def _verdict_table(verdicts: Sequence[Verdict], summary: SummaryDocument) -> str:
    rows = []
    for worst in summary["worst"]:
        key = (worst["lb"], worst["protocol"], worst["connection"])
        mine = [v for v in verdicts if v.stream is None and v.key == key]
        routing = [v for v in mine if v.id.case is Case.ROUTING]
        budget = [v for v in mine if v.id.case in (Case.WITHIN_BUDGET, Case.DELAY_COVERS)]
        available = [v for v in verdicts if v.stream is not None and v.key == key]
        cells = [f"<td>{esc(k)}</td>" for k in key]
        reaction = bounded(worst["reaction"], worst["reaction_lo"], worst["reaction_hi"])
        cells.append(f'<td class="num">{reaction}</td>')
        cells += [_verdict_cells(routing), _verdict_cells(budget)]
        cells.append(f'<td class="num">{_disruption(worst)}</td>')
        cells += [_verdict_cells(available)]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = (
        "<tr><th>load balancer</th><th>protocol</th><th>connections</th>"
        "<th>worst reaction [where it truly lies]</th>"
        "<th>should stop routing before the apiserver stops serving</th>"
        "<th>within its health-check budget, covered by the delay</th>"
        "<th>disruption a client felt</th><th>should be available throughout</th></tr>"
    )
    explained = "".join(f"<li>{esc(line)}</li>" for line in summary.get("explained", []))
    told = f'<ul class="explained">{explained}</ul>' if explained else ""
    return f"<table>{head}{''.join(rows)}</table>{told}"


def _disruption(worst: WorstEntry) -> str:
    """The largest disruption a client felt, with the raw figure where they differ."""
    raw = worst["disruption_seconds"]
    felt = worst.get("felt_disruption_seconds", raw)
    return seconds(felt) + ("" if felt == raw else f" (raw {seconds(raw)})")


def _verdict_cells(verdicts: Sequence[Verdict]) -> str:
    if not verdicts:
        return "<td>-</td>"
    order = {"failed": 0, "by-design": 1, "skipped": 2, "passed": 3}
    shown = sorted(verdicts, key=lambda v: order[v.status])[0]
    more = shown.details if len(shown.details) > 1 else ()
    return status_cell(shown.status, shown.message, more)


def _windows_table(replay: Replay, colours: dict[str, str]) -> str:
    if not replay.windows:
        return "<p>No kube-apiserver shut down during this run.</p>"
    rows = []
    for number, w in enumerate(replay.windows, 1):
        late = sum(ws.late for ws in w.streams)
        failures = sum(ws.failures for ws in w.streams)
        rows.append(
            f'<tr id="{window_anchor(number)}">'
            f'<td><span style="color:{colours[w.host]}">■</span> {number}</td>'
            f"<td>{esc(w.host)}</td><td>{esc(w.node or '-')}</td>"
            f'<td class="num">{w.t0:.2f} s</td>'
            f'<td class="num">± {(w.t0_hi - w.t0_lo) / 2:.2f} s</td>'
            f'<td class="num">{w.delay:g} s</td><td>{esc(w.closed_by)} at {w.end_t:.1f} s</td>'
            f'<td class="num">{late}</td><td class="num">{failures}</td></tr>'
        )
    head = (
        "<tr><th>window</th><th>apiserver</th><th>node</th><th>T0 (readyz false)</th>"
        "<th>uncertainty</th><th>shutdown delay</th><th>closed</th><th>late requests</th>"
        "<th>failed requests</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"


def _legend() -> str:
    items = [
        (
            swatch("band", HOST_COLOURS[0]),
            "shutdown window of one apiserver (colour per apiserver)",
        ),
        (swatch("line", T0), "T0: its /readyz went false"),
        (swatch("range", T0), "where T0 must lie (uncertainty)"),
        (swatch("dash", HOST_COLOURS[0]), "end of the shutdown delay: it stops serving"),
        (swatch("tick", LATE), "late request (answered after T0)"),
        (swatch("cross", FAILURE), "failed request"),
        (swatch("bar", FAILURE), "disruption interval"),
        (swatch("bracket", T0), "reaction: T0 to the last late request"),
        (swatch("shade", T0), "where the true reaction lies, given the sampling"),
        (swatch("shade", FAILURE), "where a disruption truly began and ended"),
        (swatch("step", ROUTED), "capacity: apiservers the LB sent new connections to"),
        (swatch("dashstep", READY), "capacity: apiservers ready"),
        (swatch("line", T0), "on the capacity lane, T1 of a restarted apiserver (/readyz true)"),
        (swatch("dot", FAILURE), "early failure: a restarted apiserver failed it young"),
        (swatch("bar", ESTABLISHED), "watch lane: a watch established"),
        (swatch("bar", LATE), "watch lane: blind (the heartbeat unseen past the threshold)"),
        (swatch("tick", QUIET_END), "watch lane: a watch ended by its timeout or our stop"),
        (swatch("tick", FAILURE), "watch lane: a watch cut (closed, reset, PING unanswered)"),
        (swatch("ring", FAILURE), "watch lane: a re-watch on a shutting-down apiserver"),
    ]
    return (
        '<div class="legend">' + "".join(f"<span>{s}{esc(t)}</span>" for s, t in items) + "</div>"
    )


def _timelines(report: RunReport, colours: dict[str, str]) -> str:
    marks = _marks(report)
    lanes: dict[LB, list[Lane]] = {
        lb: list(found) for lb, found in watch_lanes(report.watches, report.replay.end_t).items()
    }
    replay = report.replay
    capacity = capacity_lanes(replay.windows, replay.instances, report.log.samples, replay.end_t)
    for lb, lane in capacity.items():
        lanes.setdefault(lb, []).append(lane)
    all_views = views(report.replay.windows, report.replay.end_t)
    options = "".join(f'<option value="{v.id}">{esc(v.label)}</option>' for v in all_views)
    parts = [
        f'<p><label>Show: <select id="zoom">{options}</select></label></p>',
        _legend(),
    ]
    by_lb: dict[LB, list[StreamMarks]] = {}
    for m in marks.values():
        by_lb.setdefault(m.stream.lb, []).append(m)
    for lb in LB:
        if lb not in by_lb and lb not in lanes:
            continue
        rows = sorted(
            by_lb.get(lb, []),
            key=lambda m: (m.stream.target, m.stream.protocol, m.stream.connection),
        )
        title = f"load balancer {lb}"
        parts.append(f"<h3>{esc(title)}</h3>")
        for view in all_views:
            parts.append(
                _figure(title, rows, lanes.get(lb, []), report=report, colours=colours, view=view)
            )
    return "\n".join(parts)


def _figure(
    title: str,
    rows: list[StreamMarks],
    lanes: Sequence[Lane],
    *,
    report: RunReport,
    colours: dict[str, str],
    view: View,
) -> str:
    hidden = "" if view.id == "all" else " hidden"
    svg = lb_timeline(title, rows, report.replay.windows, colours, view, lanes=lanes)
    caption = f"{esc(title)}, {esc(view.label)}; the run started at {esc(report.log.run.ts)}."
    return f'<figure data-view="{view.id}"{hidden}>{svg}<figcaption>{caption}</figcaption></figure>'


def _marks(report: RunReport) -> dict[str, StreamMarks]:
    names = [s["stream"] for s in report.summary["streams"]]
    marks = stream_marks(names, report.log.samples, report.replay.intervals)
    for (stream, start), entry in patterns.by_interval(report.summary).items():
        marks[stream].patterns[start] = patterns.title(entry)
    return marks


def _window_streams_table(replay: Replay) -> str:
    if not replay.windows:
        return "<p>No shutdown windows.</p>"
    rows = []
    for number, w in enumerate(replay.windows, 1):
        for ws in w.streams:
            rows.append(
                f'<tr><td title="{esc(window_title(number, w))}">{number}</td>'
                f'<td>{esc(ws.stream)}</td><td class="num">{ws.late}</td>'
                f'<td class="num">{seconds(ws.max_elapsed, 0)}</td>'
                f'<td class="num">{bounded(ws.reaction, ws.reaction_lo, ws.reaction_hi)}</td>'
                f"<td>{esc(_bound_by(ws))}</td>"
                f'<td class="num">{ws.failures}</td></tr>'
            )
    head = (
        "<tr><th>window</th><th>stream</th><th>late requests</th>"
        "<th>largest elapsed (header)</th><th>reaction [where it truly lies]</th>"
        "<th>upper bound set by</th><th>failed requests</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"


# What showed the LB had stopped routing to the old server, in the report's words.
_BOUND_BY = {
    "failure": "a failed request",
    "restarted": "the restarted apiserver answering",
    "sampling": "enough answers from other apiservers",
    "closed": "kept until its connection closed",
}


def _bound_by(ws: WindowStream) -> str:
    if ws.reaction is None:
        return "-"
    if ws.bound_by is None:
        return "nothing before the window closed"
    return _BOUND_BY.get(ws.bound_by, ws.bound_by)


def _intervals_table(replay: Replay, labelled: Mapping[patterns.Key, IntervalEntry]) -> str:
    if not replay.intervals:
        return "<p>No request failed during the run.</p>"
    forgiven = {f.interval for f in replay.felt if f.forgiven}
    numbers: dict[str, int] = {}
    anchors = {}
    for i in replay.intervals:  # each stream's own order, as the summary lists them
        numbers[i.stream] = numbers.get(i.stream, 0) + 1
        anchors[id(i)] = interval_anchor(i.stream, numbers[i.stream])
    rows = [
        f'<tr id="{anchors[id(i)]}"><td>{esc(i.stream)}</td><td>{esc(i.error)}</td>'
        f'<td class="num">{i.start_t:.2f} s {bound(i.start_lo, i.start_hi)}</td>'
        f'<td class="num">{i.end_t:.2f} s {bound(i.end_lo, i.end_hi)}</td>'
        f'<td class="num">{_length(i)}</td><td class="num">{i.samples}</td>'
        f"<td>{'no: retried through' if i in forgiven else 'yes'}</td>"
        f"<td>{esc(i.detail)}</td>{patterns.cell(labelled, i.stream, i.start_t)}"
        "</tr>"
        for i in sorted(replay.intervals, key=lambda i: (i.start_t, i.stream))
    ]
    head = (
        "<tr><th>stream</th><th>error</th><th>from [where it truly began]</th>"
        "<th>to [where it truly ended]</th><th>length [bound]</th>"
        "<th>failed requests</th><th>felt by a client (client-go's retries)</th>"
        "<th>detail</th><th>pattern (confidence)</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"


def _length(i: Interval) -> str:
    lo, hi = interval_bound(i.start_lo, i.start_hi, i.end_lo, i.end_hi)
    return bounded(i.seconds, lo, hi)


def _notes(report: RunReport) -> str:
    notes = list(report.warnings)
    stats = report.stats
    if stats.skipped:
        notes.append(
            f"{stats.skipped} of {stats.lines} event-log lines were skipped "
            f"({stats.unknown_kinds} of unknown kinds, {stats.truncated} truncated)"
        )
    if report.replay.stragglers:
        notes.append(f"{report.replay.stragglers} late answers arrived after their window closed")
    for stream in report.summary["streams"]:
        resent = stream.get("retried") or {}
        if resent:
            reasons = ", ".join(f"{n} {why}" for why, n in sorted(resent.items()))
            notes.append(
                f"{stream['stream']}: {sum(resent.values())} requests sent again once on a new "
                f"connection, as Go's transport would ({reasons}); answered then, no disruption"
            )
    if not notes:
        return ""
    items = "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    return f"<h2>Notes</h2>{items}"
