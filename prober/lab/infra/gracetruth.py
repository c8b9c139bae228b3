"""What each apiserver did to its watches at shutdown, from its own truth log.

Per graceful shutdown (one server process that reached NotAcceptingNewRequest): how many
watches its drain ended cleanly (`drained`) and how many it cut at exit (`cut`), real and
synthetic together; when the first and the last of those ends came and when the listener
closed, each in seconds after NotAcceptingNewRequest, on the server's own monotonic clock;
and how many requests it refused with 429, every client's (`retry_after_total`). A watch
grace of 0 s ends none cleanly: all are cut when the process exits, after the listener
closed; with a grace the drain starts at NotAcceptingNewRequest and the listener stays open
until it is over (upstream's InFlightRequestsDrained waits for the watches), answering 429.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from prober.core.truthlog import (
    HTTPServerStoppedListening,
    NotAcceptingNewRequest,
    RetryAfterTotal,
    SyntheticWatchesEnded,
    TruthRecord,
    WatchEnded,
    first,
)
from prober.lab.infra.truth import process_records

SERVER_ENDS = ("drained", "cut")  # how a shutdown ends a watch (the rest are the client's)


@dataclass(frozen=True, slots=True)
class ServerShutdown:
    apiserver: str  # the hostname
    drained: int
    cut: int
    first: float | None  # the first watch the shutdown ended, seconds after NotAccepting...
    last: float | None  # the last one
    stopped: float | None  # HTTPServerStoppedListening, seconds after NotAccepting...
    refused: int  # requests it answered 429, every client's


def server_shutdowns(paths: Iterable[Path]) -> tuple[ServerShutdown, ...]:
    """Every graceful shutdown in these truth logs, in file and then process order."""
    found = []
    for path in paths:
        for process in process_records(path):
            shutdown = _shutdown(process)
            if shutdown is not None:
                found.append(shutdown)
    return tuple(found)


def _shutdown(records: Sequence[TruthRecord]) -> ServerShutdown | None:
    start = first(records, NotAcceptingNewRequest)
    if start is None:
        return None  # never shut down gracefully: killed at the lab's teardown, or crashed
    since = start.mono
    ends = dict.fromkeys(SERVER_ENDS, 0)
    times: list[float] = []
    synthetic = first(records, SyntheticWatchesEnded)
    if synthetic is not None:
        for how in SERVER_ENDS:
            ends[how] += synthetic.ended.get(how, 0)
        times += [synthetic.first, synthetic.last]
    for record in records:
        if isinstance(record, WatchEnded) and record.how in SERVER_ENDS:
            ends[record.how] += 1
            times.append(record.mono)
    stopped = first(records, HTTPServerStoppedListening)
    refused = first(records, RetryAfterTotal)
    return ServerShutdown(
        apiserver=start.host,
        drained=ends["drained"],
        cut=ends["cut"],
        first=None if not times else round(min(times) - since, 6),
        last=None if not times else round(max(times) - since, 6),
        stopped=None if stopped is None else round(stopped.mono - since, 6),
        refused=0 if refused is None else refused.codes.get("429", 0),
    )
