"""Structured logging for every long-running command (`prober run`, `prober audit follow`):
one set-up, so that what protects one protects all.

Logging never raises: a log line that cannot be written is dropped (`UnfailingOutput`).
The libraries' own loggers (hpack, kubernetes, urllib3) are held at WARNING because at DEBUG
some of them print request details, a bearer token among them.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Any, TextIO

import structlog

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
FORMATS = ("json", "console")
QUIET_LIBRARIES = ("hpack", "kubernetes", "urllib3", "asyncio")


def configure_logging(fmt: str = "json", level: str = "info", stream: TextIO | None = None) -> None:
    """JSON lines (default) or a console renderer for humans, on stdout."""
    # The console renderer's default, a Rich traceback, prints every frame's locals: a task
    # crashing in the probe showed `bearer = 'Bearer ...'`. Plain tracebacks show none.
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
    )
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
    ]
    if fmt == "json":
        processors.append(structlog.processors.format_exc_info)
    processors.append(renderer)
    output: Any = UnfailingOutput(stream or sys.stdout)  # a TextIO in all that structlog uses
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=structlog.WriteLoggerFactory(file=output),
        cache_logger_on_first_use=False,
    )
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)


class UnfailingOutput:
    """The log stream, minus its failures: a line that cannot be written (stdout redirected
    to a full disk, a reader gone) is dropped and counted. A log call raising would stop
    whatever logged, the daemon's pipeline and supervisor or the audit follower's poll."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.dropped = 0

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError):  # ValueError: the stream was closed
            self.dropped += 1
            return 0

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._stream.flush()
