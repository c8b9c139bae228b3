"""The watch streams as origin's monitor intervals, from summary.json's `watches` section.

origin measures no watch, so there is no interval of its own to copy; these take the shapes
Sippy already draws (`intervals.schema.json` holds the sources and reasons it knows), on the
watch stream's own backend (`prober-<stream>`), so that they sit in a row of their own:

- a blind interval (the heartbeat written and not seen past the blind threshold) is an
  `Error` `DisruptionBegan` interval, as a request stream's disruption is: the informer
  behind that LB was not told of what changed;
- a doomed re-watch (established on a server already answering `shutdown=true`) is a
  `Warning` of one second at its landing: the watch will be cut again when that server stops.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prober.core.durations import format_go_duration
from prober.core.models import parse_rfc3339, rfc3339
from prober.report.ci.origin_timeline import interval, message, old_locator
from prober.report.schema.origin_types import (
    LOCATOR_DISRUPTION,
    REASON_DISRUPTION_BEGAN,
    SOURCE_DISRUPTION,
    Interval,
    Locator,
    backend_name,
)


def watch_intervals(section: Mapping[str, Any] | None, started: str) -> list[Interval]:
    """Every blind interval and doomed re-watch of the run's watch streams."""
    base = parse_rfc3339(started)
    out: list[Interval] = []
    for entry in (section or {}).get("streams", []):
        locator = _locator(entry)
        for start_t, end_t in entry["blind"]:
            out.append(_blind(locator, entry, base + start_t, base + end_t))
        for doomed in entry.get("doomed_at", []):
            out.append(_doomed(locator, entry, doomed, base + doomed["t"]))
    return out


def _locator(entry: Mapping[str, Any]) -> Locator:
    return {
        "type": LOCATOR_DISRUPTION,
        "keys": {
            "backend-disruption-name": backend_name(entry["stream"]),
            # origin's LocatorBuilder.Disruption always sets it, new or reused; a watch
            # streams its events on the one connection it keeps
            "connection": "reused",
            "disruption": backend_name(entry["stream"]),
            "load-balancer": entry["lb"],
            "protocol": entry["protocol"],
        },
    }


def _blind(locator: Locator, entry: Mapping[str, Any], start: float, end: float) -> Interval:
    annotations = {
        "duration": format_go_duration(end - start),
        "end": rfc3339(end),
        "reason": REASON_DISRUPTION_BEGAN,
        "start": rfc3339(start),
        "watch": "blind",
    }
    human = (
        f"{old_locator(locator['keys'])} watch saw no heartbeat event for {end - start:.2f} s "
        "past the blind threshold: an informer behind this load balancer was blind"
    )
    return interval(
        "Error", SOURCE_DISRUPTION, locator, message(REASON_DISRUPTION_BEGAN, human, annotations),
        start=start, end=end,
    )  # fmt: skip


def _doomed(locator: Locator, entry: Mapping[str, Any], doomed: Any, at: float) -> Interval:
    elapsed = doomed.get("elapsed")
    annotations = {"server": str(doomed["server"]), "start": rfc3339(at), "watch": "doomed"}
    if elapsed is not None:
        annotations["shutdown-elapsed"] = format_go_duration(elapsed)
    human = (
        f"{old_locator(locator['keys'])} watch re-established on apiserver {doomed['server']}, "
        "already shutting down: it will be cut again when that apiserver stops"
    )
    return interval(
        "Warning", SOURCE_DISRUPTION, locator,
        message(REASON_DISRUPTION_BEGAN, human, annotations), start=at, end=at,
    )  # fmt: skip
