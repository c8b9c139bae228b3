"""The log sink: one line when a disruption starts and ends and when a shutdown window opens
and closes, with the numbers, so the logs alone tell the story. (The set-up, shared with the
audit follower, is `prober.common.logs`.)

Nothing here ever sees a request header, so the bearer token cannot reach a log line.
"""

from __future__ import annotations

from typing import Any

import structlog

from prober.core.disruption import DisruptionStarted
from prober.core.models import Interval, PaceChange, Summary, Window
from prober.core.shutdown import WindowOpened


class LogSink:
    """The pipeline's sink for humans (and for a failed CI job's artifacts)."""

    def __init__(self, node_of: Any = None) -> None:
        self._log = structlog.get_logger("prober.pipeline")
        self._node_of = node_of or (lambda _host: None)

    def handle(self, item: object) -> None:
        if isinstance(item, PaceChange):
            self._log.info(
                "sampling_pace",
                pace=item.pace.value,
                stream=item.stream or "all",
                reason=item.reason,
                t=item.t,
            )
        elif isinstance(item, DisruptionStarted):
            self._log.warning(
                "disruption_started",
                stream=item.stream,
                lb=item.lb.value,
                protocol=item.protocol.value,
                connection=item.connection.value,
                error=item.error.value,
                detail=item.detail,
                t=item.start_t,
            )
        elif isinstance(item, Interval):
            self._log.warning(
                "disruption_ended",
                stream=item.stream,
                lb=item.lb.value,
                protocol=item.protocol.value,
                connection=item.connection.value,
                error=item.error.value,
                seconds=round(item.seconds, 3),
                samples=item.samples,
                start_t=item.start_t,
                end_t=item.end_t,
            )
        elif isinstance(item, WindowOpened):
            self._log.warning(
                "shutdown_window_opened",
                host=item.host,
                node=item.node or self._node_of(item.host),
                delay=item.delay,
                first_seen_t=item.first_seen_t,
                stream=item.stream,
                elapsed=item.elapsed,
            )
        elif isinstance(item, Window):
            self._window_closed(item)
        elif isinstance(item, Summary):
            self._log.info(
                "summary",
                t=item.t,
                samples=sum(s.samples for s in item.streams),
                failures=sum(s.failures for s in item.streams),
                late=sum(s.late for s in item.streams),
            )

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
        )
