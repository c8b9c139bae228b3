"""The log sink: one line when a disruption starts and ends and when a shutdown window opens
and closes, with the numbers, so the logs alone tell the story. (The set-up, shared with the
audit follower, is `prober.common.logs`.)

Nothing here ever sees a request header, so the bearer token cannot reach a log line.
"""

from __future__ import annotations

from typing import Any

import structlog

from prober.core.connection_age import ConnectionAges
from prober.core.coverage import Coverage
from prober.core.disruption import DisruptionStarted
from prober.core.models import Interval, PaceChange, Sample, Summary, Window
from prober.core.shutdown import WindowOpened
from prober.daemon.pipeline import Event, Observed


class LogSink:
    """The pipeline's sink for humans (and for a failed CI job's artifacts)."""

    def __init__(self, node_of: Any = None) -> None:
        self._log = structlog.get_logger("prober.pipeline")
        self._node_of = node_of or (lambda _host: None)

    def observe(self, observed: Observed) -> None:
        pass  # a line per sample would drown the story

    def keep(self, sample: Sample) -> None:
        pass

    def event(self, event: Event) -> None:
        if isinstance(event, PaceChange):
            self._log.info(
                "sampling_pace",
                pace=event.pace.value,
                stream=event.stream or "all",
                reason=event.reason,
                t=event.t,
            )
        elif isinstance(event, DisruptionStarted):
            self._disruption("disruption_started", event, detail=event.detail, t=event.start_t)
        elif isinstance(event, Interval):
            self._disruption(
                "disruption_ended",
                event,
                seconds=round(event.seconds, 3),
                samples=event.samples,
                start_t=event.start_t,
                end_t=event.end_t,
            )
        elif isinstance(event, WindowOpened):
            self._log.warning(
                "shutdown_window_opened",
                host=event.host,
                node=event.node or self._node_of(event.host),
                delay=event.delay,
                first_seen_t=event.first_seen_t,
                stream=event.stream,
                elapsed=event.elapsed,
                **_same_node(event.same_node),
            )
        elif isinstance(event, Window):
            self._window_closed(event)
        elif isinstance(event, Coverage):
            self._coverage(event)
        elif isinstance(event, ConnectionAges):
            self._connection_ages(event)
        elif isinstance(event, Summary):
            self._log.info(
                "summary",
                t=event.t,
                samples=sum(s.samples for s in event.streams),
                failures=sum(s.failures for s in event.streams),
                late=sum(s.late for s in event.streams),
            )

    def _coverage(self, coverage: Coverage) -> None:
        """A closed window's coverage: one line, and a warning per stream whose worst gap
        passed its limit (`core.coverage`), with its place."""
        self._log.info(
            "window_coverage",
            host=coverage.host,
            t0=coverage.t0,
            due=sum(s.due for s in coverage.streams),
            taken=sum(s.taken for s in coverage.streams),
        )
        for s in coverage.streams:
            if s.gap is not None and s.limit is not None and s.gap > s.limit:
                self._log.warning(
                    "window_gap_past_limit",
                    stream=s.stream,
                    host=coverage.host,
                    gap=s.gap,
                    start_t=s.gap_start,
                    end_t=s.gap_end,
                    limit=round(s.limit, 6),
                )

    def _disruption(self, name: str, of: DisruptionStarted | Interval, **numbers: Any) -> None:
        """A disruption's start or end: its stream and error, then that moment's numbers."""
        self._log.warning(
            name,
            **of.stream_id.fields(),
            error=of.error.value,
            **numbers,
            **_same_node(of.same_node),
        )

    def _connection_ages(self, table: ConnectionAges) -> None:
        """At the run's end: failures, late answers and resends by the phase of their
        server's shutdown in which their connection was opened (`core.connection_age`)."""
        rows = [
            {"stream": r.stream_id.name, "opened": r.opened, "late": r.late,
             "failed": r.failed, "resent": r.resent, "errors": r.errors}
            for r in table.rows
        ]  # fmt: skip
        self._log.info("connection_ages", rows=rows)

    def _window_closed(self, window: Window) -> None:
        streams = [
            {
                "stream": s.stream,
                "late": s.late,
                "max_elapsed": s.max_elapsed,
                "reaction": None if s.reaction is None else round(s.reaction, 3),
                "failures": s.failures,
            }
            for s in window.streams
            if s.late or s.failures
        ]
        reactions = [s.reaction for s in window.streams if s.reaction is not None]
        self._log.warning(
            "shutdown_window_closed",
            host=window.host,
            node=window.node,
            closed_by=window.closed_by.value,
            delay=window.delay,
            t0=round(window.t0, 3),
            t0_lo=round(window.t0_lo, 3),
            t0_hi=round(window.t0_hi, 3),
            late=sum(s.late for s in window.streams),
            worst_reaction=round(max(reactions), 3) if reactions else None,
            streams=streams,
            **_same_node(window.same_node),
        )


def _same_node(same_node: bool) -> dict[str, bool]:
    """On the lines of the same-node path (`core.trackers`) only: the prober's own node's
    apiserver, not an LB's doing."""
    return {"same_node": True} if same_node else {}
