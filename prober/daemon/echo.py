"""The event log's records on stdout too, one JSON line each beside the structured log lines.

CI collects pod logs (`oc logs`, gather-extra's pod logs, `--previous` for a restarted
container) and none of a pod's files; a pod evicted by an upgrade's node drain takes its
emptyDir with it, and a step that fails never copies one. On stdout, every record is out of the
pod the moment it is made. `prober analyze --pod-logs` reads them back from such logs.

The kubelet rotates a container's log (10 MiB by default, 50 MiB on OpenShift nodes) and
`oc logs` returns only the newest file, so the run record is written again before every summary
record: any stretch of the log long enough to hold a summary names its run. Every sample the
trackers need is tens of MB over an upgrade, more than one rotation keeps; `compact` writes what
was measured instead (windows, intervals, pace changes, summaries: what `prober analyze` reports,
and the records of every other kind of stream but their raw observations, marked `RAW`), tens
of kB, which no rotation of a whole job's log reaches (`deploy/README.md`).
"""

from __future__ import annotations

import sys
from typing import TextIO

from prober.common.logs import UnfailingOutput
from prober.core.eventlog import EventLogError, encode
from prober.core.models import LogRecord, RunRecord, Sample, Summary
from prober.daemon.pipeline import Event, Observed, logged


class RecordEcho:
    """A pipeline sink writing what the event log keeps (`EventLogWriter`) to a stream."""

    def __init__(
        self, header: RunRecord, stream: TextIO | None = None, *, samples: bool = True
    ) -> None:
        self._out = UnfailingOutput(stream or sys.stdout)
        self._header = header
        self._samples = samples  # False: compact, the measurements only
        self.write(header)

    def observe(self, observed: Observed) -> None:
        pass

    def keep(self, sample: Sample) -> None:
        if self._samples:
            self.write(sample)

    def event(self, event: Event) -> None:
        if isinstance(event, Summary):
            self.write(self._header)
        record = logged(event)
        # A kind's raw observations (`RAW`, like samples: a watch's every event seen, each
        # heartbeat write) are left out of the compact stream, as samples are.
        if record is not None and (self._samples or not getattr(type(record), "RAW", False)):
            self.write(record)

    def write(self, record: LogRecord) -> None:
        try:
            line = encode(record) + "\n"
        except (EventLogError, UnicodeError):
            return  # the event log says so, with its drop counter
        # One write call per line: the log lines of the same stream never land inside it.
        self._out.write(line)
        self._out.flush()

    @property
    def dropped(self) -> int:
        return self._out.dropped
