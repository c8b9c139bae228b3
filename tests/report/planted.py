"""A summary.json with what a test plants in it: the checks of bounds read it back."""

from __future__ import annotations

from prober.core.models import LB, Connection, Protocol, StreamId
from prober.report.format.tables import bound
from prober.report.schema.types import SummaryDocument

STREAM = StreamId("kube-api", Protocol.HTTP1, LB.EXTERNAL, Connection.NEW)


def planted_summary(
    *, reaction: tuple[float, float | None, float | None] = (1.0, 0.9, 1.1), **interval: float
) -> SummaryDocument:
    """One window, one stream, one interval: the interval's end outside its bound by default
    (the issue's numbers), `interval` its edges, `reaction` the stream's (value, lo, hi)."""
    value, lo, hi = reaction
    edges = {"start_t": 5.0, "end_t": 6.135945, "start_lo": 4.9, "start_hi": 5.01,
             "end_lo": 6.148002, "end_hi": 6.159721} | interval  # fmt: skip
    stream = STREAM.fields()
    return {
        "v": 2,
        "run_id": "run-1",
        "started": "2026-11-30T10:00:00.000000Z",
        "platform": "aws",
        "windows": [
            {"host": "apiserver-a", "node": None, "delay": 6.0, "t0": 1.0, "t0_lo": 0.99,
             "t0_hi": 1.01, "closed_by": "recovered",
             "streams": [{**stream, "late": 3, "max_elapsed": 1.0, "reaction": value,  # type: ignore[typeddict-item]
                          "reaction_lo": lo, "reaction_hi": hi, "bound_by": "failure",
                          "failures": 1}]},
        ],
        "streams": [{**stream, "samples": 100, "disruption_seconds": 1.135945,  # type: ignore[typeddict-item]
                     "intervals": [{**edges, "start_ts": "2026-11-30T10:00:05.000000Z",  # type: ignore[typeddict-item]
                                    "end_ts": "2026-11-30T10:00:06.135945Z",
                                    "error": "connect_refused", "detail": "refused",
                                    "samples": 3}]}],
        "worst": [{"lb": "external-lb", "protocol": "http1", "connection": "new",
                   "reaction": value, "reaction_lo": lo, "reaction_hi": hi,
                   "disruption_seconds": 1.135945}],
        "explained": [f"aws external-lb http1 new: stopped routing {value:.2f} s after readyz "
                      f"false (bound {bound(lo, hi)})"],
    }  # fmt: skip
