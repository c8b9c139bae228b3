"""The run as origin's monitor intervals (`e2e-timelines_prober_<stamp>.json`), built from the
warehouse rows `export.export_rows` makes of a summary: one interval per disruption interval
and one per apiserver shutdown window x LB, shaped as origin's own (origin_types.py).

Times: a row's run seconds plus the run's start. `from` and `to` are `metav1.Time`, whole
seconds: `from` is rounded down and `to` up, so that an interval always covers what was
measured and never shrinks to nothing (origin's serializer drops an interval whose ends are
equal); the measured instants and their bounds, to the microsecond, are in the annotations.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from itertools import groupby

from prober.core.durations import (
    MILLISECOND,
    SECOND,
    format_go_duration,
    format_go_duration_ns,
    format_go_seconds,
    round_ns,
    seconds_to_ns,
)
from prober.core.models import Connection, StreamId, parse_rfc3339, rfc3339
from prober.core.numbers import micro
from prober.report.history.export import Row
from prober.report.schema.origin_types import (
    BACKEND_PREFIX,
    LOCATOR_APISERVER,
    LOCATOR_DISRUPTION,
    REASON_DISRUPTION_BEGAN,
    REASON_GRACEFUL_SHUTDOWN,
    SHUTDOWN_GRACE_SECONDS,
    SHUTDOWN_SERVER,
    SOURCE_APISERVER_SHUTDOWN,
    SOURCE_DISRUPTION,
    Interval,
    IntervalList,
    Level,
    Locator,
    Message,
    backend_name,
)

# origin's Locator.OldLocator puts these keys first, in this order (types.go `sortKeys`).
_LEADING_KEYS = ("namespace", "node", "pod", "uid", "server", "container", "shutdown", "row")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_WINDOW_FIELDS = ("host", "node", "delay", "closed_by", "t0", "t0_lo", "t0_hi")


def timeline(rows: Sequence[Row], others: Sequence[Interval] = ()) -> IntervalList:
    """Every interval of the run, with `others` (the watch streams'), in origin's order
    (`Intervals.Less`)."""
    items = [disruption_interval(r) for r in rows if r["row_type"] == "interval"]
    items += shutdown_intervals([r for r in rows if r["row_type"] == "shutdown"])
    items += others
    items.sort(key=_order)
    return {"items": items}


def disruption_interval(row: Row) -> Interval:
    """A disruption interval as origin's samplers record one (`DisruptionBegan`)."""
    stream = StreamId.parse(row["stream"])
    keys = {
        "backend-disruption-name": backend_name(stream.name),
        "connection": stream.connection.value,
        # origin's `disruption` key is target-protocol-lb; prefixed like the name, since an
        # older serializer derived the backend's name from it.
        "disruption": f"{BACKEND_PREFIX}{stream.target}-{stream.protocol}-{stream.lb}",
        "load-balancer": stream.lb.value,
        "protocol": stream.protocol.value,
        "target": stream.target,
    }
    start, end = _moment(row, row["start_t"]), _moment(row, row["end_t"])
    annotations = {
        "duration": format_go_duration(row["seconds"]),
        "end": rfc3339(end),
        "error": row["error"],
        "failed-requests": str(row["interval_samples"]),
        "reason": REASON_DISRUPTION_BEGAN,
        "start": rfc3339(start),
    }
    for name in ("start_lo", "start_hi", "end_lo", "end_hi"):
        if row[name] is not None:  # None: unbounded on that side
            annotations[name.replace("_", "-")] = rfc3339(_moment(row, row[name]))
    # Raw, as origin counts it, whatever a client felt; the annotation says which it was
    # (absent for a summary before it was kept).
    if row.get("felt") is not None:
        annotations["client-felt"] = "true" if row["felt"] else "false"
    if row.get("pattern") is not None:  # what it points at (`results.patterns`)
        annotations["pattern"] = row["pattern"]
        annotations["pattern-confidence"] = row["pattern_confidence"]
    # The client's words, where they say more than the error class.
    detail = f": {row['detail']}" if row["detail"] not in ("", row["error"]) else ""
    human = (
        f"{old_locator(keys)} stopped responding to GET requests over {stream.connection} "
        f"connections: {row['error']}{detail} ({_ms(row['seconds'])}, "
        f"{row['interval_samples']} failed requests"
        + ("; client-go's retries of every answer got through" if row.get("felt") is False else "")
        + ")"
        + _pattern_words(row)
    )
    return interval(
        "Error", SOURCE_DISRUPTION, {"type": LOCATOR_DISRUPTION, "keys": keys},
        message(REASON_DISRUPTION_BEGAN, human, annotations), start=start, end=end,
    )  # fmt: skip


def _pattern_words(row: Row) -> str:
    """What the interval points at, for the person reading Sippy's chart: its pattern, how
    sure, and the facts that decided (absent for a summary written before patterns)."""
    if row.get("pattern") is None:
        return ""
    said = f"; pattern {row['pattern']} ({row['pattern_confidence']} confidence)"
    evidence = row.get("pattern_evidence")
    return said + (f": {evidence}" if evidence else "")


def disruption_line(row: Row) -> str:
    """An interval row as origin's `Interval.String()` prints it: what origin puts in a
    backend's `DisruptionMessages`."""
    interval = disruption_interval(row)
    when = datetime.fromtimestamp(_moment(row, row["start_t"]), UTC)
    stamp = f"{_MONTHS[when.month - 1]} {when:%d %H:%M:%S}.{when.microsecond // 1000:03d}"
    text = f"{interval['level'][0]} {old_locator(interval['locator']['keys'])} "
    text += old_message(interval["message"]).replace("\n", "\\n")
    # From run seconds: an epoch's float has lost the sub-microsecond digits.
    ns = seconds_to_ns(row["end_t"] - row["start_t"])
    if ns <= 0:
        return f"{stamp} {text}"
    # Go truncates: int(duration/time.Second), or milliseconds under a second.
    length = f"{ns // MILLISECOND}ms" if ns < SECOND else f"{ns // SECOND}s"
    return f"{stamp} - {length:<5} {text}"


def shutdown_intervals(rows: Sequence[Row]) -> list[Interval]:
    """One interval per shutdown window x LB, from the window's `shutdown` rows."""
    # export yields a window's rows together, and no two windows share a host and a T0.
    out: list[Interval] = []
    for _, window in groupby(rows, key=lambda r: tuple(r[f] for f in _WINDOW_FIELDS)):
        for lb, lb_rows in _grouped(window, "lb").items():
            out.append(_shutdown_interval(lb, lb_rows))
    return out


def _shutdown_interval(lb: str, rows: list[Row]) -> Interval:
    first = rows[0]
    start = _moment(first, first["t0"])
    end = start + first["delay"] + SHUTDOWN_GRACE_SECONDS
    failures = sum(r["failures"] for r in rows)
    annotations = {
        "closed-by": first["closed_by"],
        "host": first["host"],
        "reason": REASON_GRACEFUL_SHUTDOWN,
        "shutdown-delay-duration": format_go_duration(first["delay"]),
        "t0": rfc3339(start),
        "t0-hi": rfc3339(_moment(first, first["t0_hi"])),
        "t0-lo": rfc3339(_moment(first, first["t0_lo"])),
    }
    if first["node"] is not None:
        annotations["node"] = first["node"]
    for mode, mode_rows in _grouped(rows, "protocol", "connection").items():
        annotations.update(_reaction_annotations(mode, _worst(mode_rows)))
    level: Level = "Warning" if failures else "Info"
    locator: Locator = {"type": LOCATOR_APISERVER, "keys": {"load-balancer": lb,
                                                            "server": SHUTDOWN_SERVER}}  # fmt: skip
    human = _shutdown_message(first, rows, failures)
    said = message(REASON_GRACEFUL_SHUTDOWN, human, annotations)
    return interval(level, SOURCE_APISERVER_SHUTDOWN, locator, said, start=start, end=end)


def _shutdown_message(first: Row, rows: Sequence[Row], failures: int) -> str:
    """origin's words (shutdown/handler.go, interval.go), then the prober's bounds: whole
    seconds throughout, as origin's."""
    new = _worst(r for r in rows if r["connection"] == Connection.NEW)
    reused = _worst(r for r in rows if r["connection"] == Connection.REUSED)
    head = "graceful shutdown interval"
    if failures:
        head += f": {failures} failures"
    return (
        f"{head}: load balancer took new({_took(new)}) reused({_took(reused)}) to switch to a "
        f"new host: host={first['host']} "
        f"shutdown-delay-duration={format_go_seconds(first['delay'])} "
        f"max-elapsed-reuse={_max_elapsed(rows, Connection.REUSED)} "
        f"max-elapsed-new={_max_elapsed(rows, Connection.NEW)} failure={failures} "
        f"new-bound={_bound(new)} reused-bound={_bound(reused)}"
    )


def _reaction_annotations(mode: str, worst: Row | None) -> dict[str, str]:
    """The worst stream of one protocol x connection: its reaction exactly, with its bound;
    a value that is None (no late request, an unbounded side) is left out."""
    if worst is None:
        return {}
    found = {
        "stream": worst["stream"],
        "late": worst["late"],
        "failures": worst["failures"],
        "reaction": worst["reaction"],
        "reaction-lo": worst["reaction_lo"],
        "reaction-hi": worst["reaction_hi"],
        "bound-by": worst["bound_by"],
        "max-elapsed": worst["max_elapsed"],
    }
    return {f"{mode}-{name}": _text(value) for name, value in found.items() if value is not None}


def _text(value: object) -> str:
    return repr(micro(value)) if isinstance(value, float) else str(value)


def _worst(rows: Iterable[Row]) -> Row | None:
    """The row with the largest reaction (the first of equals), else the first row."""
    found: Row | None = None
    for row in rows:
        if found is None or _above(row["reaction"], found["reaction"]):
            found = row
    return found


def _above(value: float | None, than: float | None) -> bool:
    return value is not None and (than is None or value > than)


def _took(worst: Row | None) -> str:
    # origin prints whole seconds; a small negative reaction (sent just before T0) is 0 s.
    reaction = None if worst is None else worst["reaction"]
    return format_go_seconds(max(0.0, reaction)) if reaction is not None else "0s"


def _bound(worst: Row | None) -> str:
    """The reaction's bound in the message's whole seconds, rounded outward: it still holds
    the truth, and the reaction as `_took` shows it (the exact bound is in the annotations)."""
    if worst is None:
        return "[?, ?]"
    lo, hi = worst["reaction_lo"], worst["reaction_hi"]
    low = "?" if lo is None else format_go_duration(math.floor(lo))
    high = "?" if hi is None else format_go_duration(math.ceil(hi))
    return f"[{low}, {high}]"


def _max_elapsed(rows: Iterable[Row], connection: Connection) -> str:
    seen = [r["max_elapsed"] for r in rows if r["connection"] == connection]
    return format_go_seconds(max((e for e in seen if e is not None), default=0.0))


def _ms(seconds: float | None) -> str:
    """A Go duration to the millisecond; `?` for an unbounded side."""
    if seconds is None:
        return "?"
    return format_go_duration_ns(round_ns(seconds_to_ns(seconds), MILLISECOND))


def _grouped(rows: Iterable[Row], *fields: str) -> dict[str, list[Row]]:
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault("-".join(str(row[f]) for f in fields), []).append(row)
    return groups


def _moment(row: Row, run_seconds: float) -> float:
    return parse_rfc3339(row["started"]) + run_seconds


def interval(
    level: Level, source: str, locator: Locator, message: Message, *, start: float, end: float
) -> Interval:
    low = math.floor(start)
    high = max(math.ceil(end), low + 1)
    return {
        "level": level,
        "display": True,
        "source": source,
        "locator": {"type": locator["type"], "keys": dict(sorted(locator["keys"].items()))},
        "message": message,
        "from": _whole_seconds(low),
        "to": _whole_seconds(high),
    }


def message(reason: str, human: str, annotations: Mapping[str, str]) -> Message:
    return {
        "reason": reason,
        "cause": "",
        "humanMessage": human,
        "annotations": dict(sorted(annotations.items())),
    }


def _whole_seconds(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def old_locator(keys: Mapping[str, str]) -> str:
    """origin's `Locator.OldLocator()`: `key/value` pairs, its leading keys first."""

    def rank(key: str) -> tuple[int, int, str]:
        if key in _LEADING_KEYS:
            return (0, _LEADING_KEYS.index(key), "")
        return (1, 0, key)

    return " ".join(f"{k}/{keys[k]}" for k in sorted(keys, key=rank))


def old_message(message: Message) -> str:
    """origin's `Message.OldMessage()`: the annotations as `key/value`, then the text."""
    pairs = " ".join(f"{k}/{v}" for k, v in sorted(message["annotations"].items()))
    if not message["humanMessage"]:
        return pairs
    return f"{pairs} {message['humanMessage']}".strip()


def _order(item: Interval) -> tuple[str, str, str, str, str]:
    return (
        item["from"],
        item["to"],
        item["message"]["reason"],
        item["message"]["humanMessage"],
        old_locator(item["locator"]["keys"]),
    )
