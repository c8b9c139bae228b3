"""Building blocks for tests: samples with sensible defaults, named by what matters."""

from __future__ import annotations

import itertools

from prober.core.header import ShutdownHeader
from prober.core.models import LB, Connection, ErrorClass, Protocol, Sample, StreamId

_ids = itertools.count()

STREAM = StreamId("kube-api", Protocol.HTTP2, LB.INTERNAL, Connection.NEW)
OTHER = StreamId("kube-api", Protocol.HTTP1, LB.EXTERNAL, Connection.REUSED)


def sample(
    t: float,
    *,
    stream: StreamId = STREAM,
    dur: float = 0.01,
    error: ErrorClass | None = None,
    host: str | None = None,
    late: bool = False,
    elapsed: float = 0.0,
    delay: float = 70.0,
    detail: str = "",
    status: int | None = None,
) -> Sample:
    """A sample sent at `t`; with `host`, it carries a shutdown header from that host."""
    header = ShutdownHeader(late, delay, elapsed, host) if host is not None else None
    if status is None:
        status = 200 if error is None else None
    return Sample(
        ts=f"2026-11-30T00:00:{t:09.6f}Z" if 0 <= t < 60 else "2026-11-30T00:00:00.000000Z",
        t=t,
        dur=dur,
        stream_id=stream,
        reused=stream.connection is Connection.REUSED,
        http_version="HTTP/2" if stream.protocol is Protocol.HTTP2 else "HTTP/1.1",
        status=status,
        error=error,
        detail=detail or (error.value if error else ""),
        shutdown=header,
        audit_id=f"00000000-0000-4000-8000-{next(_ids):012d}",
    )


ok = sample


def fail(t: float, error: ErrorClass = ErrorClass.CONNECT_REFUSED, **kw) -> Sample:
    return sample(t, error=error, **kw)
