"""The seam for kinds of stream: what a kind gives the daemon, and what the daemon gives it.

A kind of stream (requests, watches) says which streams it runs for a `Config`,
how it runs them and what it records; `Daemon.run` holds no code of any kind. For each
registered `StreamKind`, in order:

1. `streams(config)`: its streams, each with its `name` (the run record lists them, `/readyz`
   waits for a record of each). The pure side of the kind (`spec`: its name and its record
   types, `core.streamkind.KindSpec`) is what the event log and the readers know of it.
2. `prepare(context)` once the pipeline exists: a `KindRun`, whose `feed` (its trackers over
   its records, `daemon.pipeline.Feed`; None: its records go to the sinks as they are) the
   daemon attaches to the pipeline and whose `sinks` it adds to every sink there is.
3. `start()` once the status server and the event log are up: its runners, as named tasks of
   the supervisor, emitting records to the pipeline (`KindContext.emit`).
4. At the stop: the tasks it names (`tasks`) are cancelled, `drain(timeout)` waits for work in
   flight (returns how much was cancelled after all), the pipeline closes, `aclose()`, and its
   `account()` joins the `stopped` log line (its keys its own: another kind uses its name).

Kinds know nothing of each other; the pipeline, the event log and the readers know nothing
of any kind (import-linter holds both).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CollectorRegistry

from prober.common.clock import Clock
from prober.config import Config
from prober.core.models import LogRecord
from prober.core.streamkind import KindSpec, KindTable
from prober.daemon.metrics import Metrics
from prober.daemon.pipeline import Feed, Sink
from prober.daemon.supervisor import Supervisor


@dataclass(frozen=True, slots=True)
class KindContext:
    """What the daemon gives each kind for one run."""

    config: Config
    clock: Clock  # every wait of a runner: faked in tests
    run_start: float  # monotonic: t = 0 of every record
    wall_start: float  # the epoch seconds at run_start, for `ts` fields
    supervisor: Supervisor  # runners are its named tasks
    metrics: Metrics  # the daemon's metrics (`daemon.metrics`): a kind's series live there
    registry: CollectorRegistry  # where `daemon.metrics` makes a kind's own metric set
    node_of: Callable[[str], str | None] | None  # APIServerID -> node, where known
    emit: Callable[[LogRecord], None]  # a record made: to the pipeline's queue
    out: Sink  # every sink, for a feed to tell what it makes of the records
    now: Callable[[], float]  # run time now
    # APIServerID -> node as known so far, a live view (the identity Leases): what tells a
    # same-node sample (`core.samenode`); empty without discovery.
    apiservers: Mapping[str, str] = field(default_factory=dict)


class Named(Protocol):
    @property
    def name(self) -> str: ...


class KindRun(Protocol):
    """One kind's streams for one run."""

    @property
    def feed(self) -> Feed | None: ...

    @property
    def sinks(self) -> Sequence[Sink]: ...

    @property
    def in_flight(self) -> int:
        """Work under way now (requests sent, not yet ended)."""

    def start(self) -> None:
        """Build the runners and spawn them as supervised tasks."""

    def stopping(self) -> None:
        """The stop begins: start no new work (what is in flight drains)."""

    def tasks(self) -> list[str]:
        """The names of its tasks to cancel first at the stop."""

    async def drain(self, timeout: float) -> int:
        """Wait up to `timeout` for work in flight to end as records; how many were
        cancelled without one."""

    async def aclose(self) -> None:
        """Release what the runners held (connections)."""

    def account(self) -> Mapping[str, object]:
        """Its part of the `stopped` log line."""


class StreamKind(Protocol):
    @property
    def spec(self) -> KindSpec: ...

    def streams(self, config: Config) -> Sequence[Named]: ...

    def prepare(self, context: KindContext) -> KindRun: ...


class KindRegistry:
    """The kinds one daemon runs, in order; their specs make the readers' `KindTable`."""

    def __init__(self, kinds: Iterable[StreamKind] = ()) -> None:
        self._kinds: list[StreamKind] = []
        self.table = KindTable()
        for kind in kinds:
            self.register(kind)

    def register(self, kind: StreamKind) -> None:
        """Add a kind; refused (ValueError) if its name or a record kind of it is taken."""
        self.table.add(kind.spec)
        self._kinds.append(kind)

    def __iter__(self) -> Iterator[StreamKind]:
        return iter(self._kinds)
