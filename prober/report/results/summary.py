"""`summary.json`: what one run measured (schema v3; docs/ARCHITECTURE.md, "summary.json").

    {"v": 3, "run_id", "platform", "started",
     "windows": [{"host", "node", "delay", "t0", "t0_lo", "t0_hi", "closed_by",
                  "streams": [{"stream", "lb", "protocol", "connection", "late",
                               "max_elapsed", "reaction", "reaction_lo", "reaction_hi",
                               "bound_by", "failures"}]}],
     "streams": [{"stream", "lb", "protocol", "connection", "samples", "retried",
                  "stopped", "disruption_seconds",
                  "intervals": [{"start_t", "end_t", "start_lo", "start_hi", "end_lo",
                                 "end_hi", "start_ts", "end_ts", "error", "detail",
                                 "samples"}]}],
     "worst": [{"lb", "protocol", "connection", "reaction", "reaction_lo", "reaction_hi",
                "disruption_seconds"}]}

`reaction` is null where no late request was seen. `reaction_lo`/`reaction_hi` bound the true
reaction from the sampling (seconds after T0, see `core.reaction`): lo is null without a late
request, hi null when nothing after the last late request showed the LB had stopped;
`bound_by` names what set hi (`failure`, `restarted`, `sampling`, `closed`: the kept
connection's replacement) or is null. An interval's
`start_lo`..`start_hi` and `end_lo`..`end_hi` bound its true edges in run seconds, like
`start_t` and `end_t` (see `core.disruption`); null is unbounded on that side. `worst` holds,
per LB x protocol x connection, the largest reaction over every window, with the bound of the
window that has it, and the largest disruption of its streams: the numbers a run contributes
to the history (`thresholds`), which uses the point values only.

`retry_after` (by stream, of the streams that had any) follows each answer with `Retry-After` as
client-go would have retried it, on the samples already taken (`core.perceived`): how many
`succeeded` (the client waited, nothing failed), were `felt` (the retries failed or ran out
of tries) or `unresolved` (the run ended first), the longest wait to the answer that ended
a chain, and `felt_disruption_seconds`: the stream's disruption less each interval of such
answers that every retry got through. The raw `disruption_seconds` still counts them, as
origin does.

`connection_ages` (`results.connection_ages`): per stream, its late answers, failures and resends
by the phase of their server's shutdown in which their connection was opened, and per LB
upstream's 20 % rule as a finding (`held`, `broken`, `undecided`, `untested`).

`retried` counts, per reason, the requests sent again once on a new connection as Go's
transport would (`goaway`, `closed_idle`): answered then, they are no disruption; a resend
that failed too is the failure it met. `stopped` counts the requests the daemon's own stop
cut (class `stopped`): among `samples`, so that every request started is counted, and no
disruption, no failure and no witness of any window (`core.models.Sample.stopped`).

`same_node` counts the requests among `samples` that reached the prober's own node's
apiserver through the LB, or were lost through an LB that hairpins from it
(`core.samenode`). None of them is the LB's: the windows, intervals, `worst` and
`retry_after` here are the LB path's alone, and `report.results.samenode` adds what they measured
apart (`same_node`, with `apiservers`: each APIServerID's node).

Schema v1 is v2 without the bound fields; the reader (`history`) accepts both. The shape as types,
checked wherever a summary is built or read: `documents.SummaryDocument`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, Final, cast

from prober.core.models import REQUEST, Interval, LogRecord, StreamId, Window
from prober.core.numbers import micro_floats
from prober.core.perceived import Retried
from prober.core.watch import WATCH
from prober.report.replay.replay import Replay, run_end
from prober.report.replay.runs import RunLog
from prober.report.results.causes import decide
from prober.report.results.connection_ages import ages_section
from prober.report.results.coverage import coverage_section
from prober.report.results.latency import latency_section
from prober.report.results.restarts import shutting_label
from prober.report.results.watches import watches_section
from prober.report.schema.keys import Key, entry_key
from prober.report.schema.types import (
    EndedEntry,
    IntervalEntry,
    RetryAfterEntry,
    StreamEntry,
    StreamFields,
    SummaryDocument,
    WindowEntry,
    WindowStreamEntry,
    WorstEntry,
)

SUMMARY_VERSION: Final = 3


def build_summary(log: RunLog, result: Replay, platform: str) -> tuple[SummaryDocument, list[str]]:
    """The summary of a replayed run, and warnings about what it could not count."""
    streams = _stream_ids(log, result)
    samples, warnings = _sample_counts(log, streams)
    retried: dict[str, Counter[str]] = defaultdict(Counter)
    stopped: Counter[str] = Counter()
    for sample in log.samples:  # every resent or stopped sample is in the log (`compaction`)
        if sample.retried is not None and not sample.held:
            retried[sample.stream][sample.retried] += 1
        stopped[sample.stream] += sample.stopped
    seconds: dict[str, float] = defaultdict(float)
    for interval in result.intervals:
        seconds[interval.stream] += interval.seconds
    felt = felt_seconds(result)
    forgiven = forgiven_intervals(result)
    same = same_node_counts(log)
    stream_entries: list[StreamEntry] = [
        {
            **_ids(s),
            "samples": samples[s.name],
            "retried": dict(sorted(retried[s.name].items())),
            "stopped": stopped[s.name],
            "same_node": same[s.name],
            "disruption_seconds": seconds[s.name],
            "felt_disruption_seconds": felt[s.name],
            "intervals": [
                interval_entry(i, i not in forgiven) for i in result.intervals if i.stream == s.name
            ],
            "pattern_seconds": {},  # filled once every run is known (`results.pattern_labels`)
        }
        for s in streams
    ]
    windows = [window_entry(w) for w in result.windows]
    for entry, window in zip(windows, result.windows, strict=True):
        entry["instance"] = shutting_label(window, result.instances)
    for stream_entry in stream_entries:
        lb = StreamId.parse(stream_entry["stream"]).lb
        for listed in stream_entry["intervals"]:
            listed["cause"] = decide(listed, lb, windows).value
    summary: SummaryDocument = {
        "v": SUMMARY_VERSION,
        "run_id": log.run.run_id,
        "started": log.run.ts,
        "platform": platform,
        "windows": windows,
        "streams": stream_entries,
        "worst": worst_entries(streams, windows, seconds, felt),
    }
    watched = result.others.get(WATCH, ())
    summary["watches"] = watches_section(watched, _end_of(log, watched), result.windows)
    limits = log.run.watch_limits
    if limits is not None:  # what the run's own timers imply (`core.watch.watch_limits`)
        summary["watches"]["limits"] = {"reestablish": limits.reestablish, "blind": limits.blind}
    summary["ended"] = ended_entry(log)
    told: dict[str, list[Retried]] = defaultdict(list)
    for retry in result.retries:
        if not retry.sample.same_node:  # the prober's own node's answer, not the LB's
            told[retry.sample.stream].append(retry)
    summary["retry_after"] = {
        name: retry_after_entry(told[name], felt[name]) for name in sorted(told)
    }
    summary["latency"] = latency_section(log, streams)
    ages = ages_section(result.ages, len(result.windows))
    if ages is not None:
        summary["connection_ages"] = ages
    coverage = coverage_section(log, result.windows, result.instances)
    if coverage is not None:  # absent from a log written before the daemon counted it
        summary["coverage"] = coverage
    # Every number in it is seconds or a count: to the microsecond, as the event log's times.
    return micro_floats(summary), warnings


def same_node_counts(log: RunLog) -> Counter[str]:
    """Per stream, its same-node requests (`core.samenode`): the newest summary's count, or
    the logged ones where there are more (a log cut before its next summary)."""
    logged = Counter(s.stream for s in log.samples if s.same_node)
    return logged | Counter({name: c.same_node for name, c in log.counters.items()})


def forgiven_intervals(result: Replay) -> set[Interval]:
    """The intervals no client felt: every failure in each was an answer with Retry-After
    that client-go's retries got through (`core.perceived.Felt`), of either path."""
    return {f.interval for f in result.felt if f.forgiven}


def felt_seconds(result: Replay) -> defaultdict[str, float]:
    """Per stream, the disruption a client felt through its LB: the raw seconds less each
    interval no client felt."""
    felt: defaultdict[str, float] = defaultdict(float)
    forgiven = forgiven_intervals(result)
    for interval in result.intervals:
        if interval not in forgiven:
            felt[interval.stream] += interval.seconds
    return felt


def retry_after_entry(told: Sequence[Retried], felt: float) -> RetryAfterEntry:
    """One stream's answers with Retry-After (`told`), and its disruption as a client felt it
    (`felt_seconds`)."""
    ended = [r for r in told if r.by is not None]
    return {
        "answers": len(told),
        "succeeded": sum(not r.felt for r in ended),
        "felt": sum(r.felt for r in ended),
        "unresolved": len(told) - len(ended),
        "max_waited": round(max((r.waited for r in ended), default=0.0), 6),
        "felt_disruption_seconds": round(felt, 6),
    }


def ended_entry(log: RunLog) -> EndedEntry:
    """How the run ended: through the daemon's stop path (its `run_end` record), or abruptly
    at its last whole record (a kill leaves no record of its own)."""
    if log.ended is not None:
        end = log.ended
        return {"abruptly": False, "t": end.t, "ts": end.ts, "reason": end.reason}
    end_t, end_ts = run_end(log)
    return {"abruptly": True, "t": end_t, "ts": end_ts, "reason": None}


def _end_of(log: RunLog, records: Sequence[LogRecord]) -> float:
    """The run's last instant on its own clock: its last record's."""
    last: list[float] = [t for r in records if isinstance(t := getattr(r, "t", None), float)]
    return max([*last, *(s.t for s in log.samples[-1:])], default=0.0)


# The record fields each entry copies, in the document's order (enums as their values).
_INTERVAL_FIELDS = (
    "start_t", "end_t", "start_lo", "start_hi", "end_lo", "end_hi", "start_ts", "end_ts",
    "error", "detail", "samples",
)  # fmt: skip
_WINDOW_FIELDS = ("host", "node", "delay", "t0", "t0_lo", "t0_hi", "closed_by", "end_t")
_WINDOW_STREAM_FIELDS = (
    "late", "max_elapsed", "reaction", "reaction_lo", "reaction_hi", "bound_by", "failures",
)  # fmt: skip


def _copied(record: object, names: tuple[str, ...]) -> dict[str, Any]:
    values = {name: getattr(record, name) for name in names}
    return {k: v.value if isinstance(v, Enum) else v for k, v in values.items()}


def interval_entry(i: Interval, felt: bool = True) -> IntervalEntry:
    """`felt`: whether a client felt it (`core.perceived.Felt`). Its cause is decided once
    the windows are known (`build_summary`)."""
    return cast(IntervalEntry, {**_copied(i, _INTERVAL_FIELDS), "felt": felt, "early": i.early})


def window_entry(w: Window) -> WindowEntry:
    streams = [{**_ids(ws.stream_id), **_copied(ws, _WINDOW_STREAM_FIELDS)} for ws in w.streams]
    return cast(WindowEntry, {**_copied(w, _WINDOW_FIELDS), "streams": streams})


def _ids(stream: StreamId) -> StreamFields:
    return cast(StreamFields, stream.fields())


def _stream_ids(log: RunLog, result: Replay) -> list[StreamId]:
    """The run record's streams, then any other stream the log has samples of."""
    names = dict.fromkeys(log.run.streams_of(REQUEST))
    ids = {StreamId.parse(name): None for name in names}
    ids.update(dict.fromkeys(s.stream_id for s in log.samples))
    ids.update(dict.fromkeys(i.stream_id for i in result.intervals))
    return list(ids)


def _sample_counts(log: RunLog, streams: list[StreamId]) -> tuple[dict[str, int], list[str]]:
    """Per stream, the newest summary's count: the log itself keeps only some samples."""
    logged = Counter(s.stream for s in log.samples)
    counts: dict[str, int] = {}
    missing: list[str] = []
    for stream in streams:
        counters = log.counters.get(stream.name)
        if counters is None:
            missing.append(stream.name)
            counts[stream.name] = logged[stream.name]
        else:
            counts[stream.name] = max(counters.samples, logged[stream.name])
    warnings = []
    if missing:
        warnings.append(
            f"{log.source}: no summary record for {len(missing)} streams "
            f"({', '.join(missing[:2])}{', ...' if len(missing) > 2 else ''}): "
            "their sample counts are the logged samples only"
        )
    return counts, warnings


def worst_entries(
    streams: list[StreamId],
    windows: list[WindowEntry],
    seconds: Mapping[str, float],
    felt: Mapping[str, float],
) -> list[WorstEntry]:
    # The window stream entry with the largest reaction per key: its bound goes with it.
    # Strictly larger replaces, so a tie keeps the first, as the routing verdict does.
    reaction: dict[Key, tuple[float, WindowStreamEntry] | None] = {}
    disruption: dict[Key, float] = {}
    felt_most: dict[Key, float] = {}
    for s in streams:
        key = s.key
        reaction.setdefault(key, None)
        disruption[key] = max(disruption.get(key, 0.0), seconds[s.name])
        felt_most[key] = max(felt_most.get(key, 0.0), felt[s.name])
    for window in windows:
        for ws in window["streams"]:
            key = entry_key(ws)
            current = reaction.get(key)
            value = ws["reaction"]
            if value is not None and (current is None or value > current[0]):
                reaction[key] = (value, ws)
    out: list[WorstEntry] = []
    for key, found in reaction.items():
        # No late request on any window: no reaction, no bound.
        worst = found[1] if found is not None else None
        out.append(
            {
                "lb": key[0].value,
                "protocol": key[1].value,
                "connection": key[2].value,
                "reaction": worst["reaction"] if worst else None,
                "reaction_lo": worst.get("reaction_lo") if worst else None,
                "reaction_hi": worst.get("reaction_hi") if worst else None,
                "disruption_seconds": disruption.get(key, 0.0),
                "felt_disruption_seconds": felt_most.get(key, 0.0),
            }
        )
    return out
