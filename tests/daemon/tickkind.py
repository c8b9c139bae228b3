"""A third kind of stream, written only against the seam (`daemon.kinds`, `core.streamkind`)
as a new kind would be: one stream per target x protocol that records a `Tick` each period of
the daemon's clock. Its own feed counts them and, at the end of the run, records a
`TickTotal` per stream; its own sink counts them in a metric of its own."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from prometheus_client import CollectorRegistry, Counter

from prober.config import Config
from prober.core.streamkind import KindSpec, KindStreamId, kind_identity
from prober.daemon.kinds import KindContext
from prober.daemon.pipeline import Event, Observed, Sink

TICK = "tick"  # the kind's name (not `KIND`: a record class's own `KIND` would shadow it)


@dataclass(frozen=True, slots=True)
class Tick:
    KIND: ClassVar[str] = "tick"
    t: float
    stream_id: KindStreamId = field(metadata=kind_identity(TICK))
    n: int  # the stream's ticks so far, this one included

    @property
    def stream(self) -> str:
        return self.stream_id.name


@dataclass(frozen=True, slots=True)
class TickTotal:
    """What the kind's feed makes of a stream's ticks when the run ends."""

    KIND: ClassVar[str] = "tick_total"
    t: float
    stream_id: KindStreamId = field(metadata=kind_identity(TICK))
    ticks: int

    @property
    def stream(self) -> str:
        return self.stream_id.name


TICKS = KindSpec(TICK, records=(Tick, TickTotal))


class TickFeed:
    records: ClassVar[tuple[type, ...]] = (Tick,)

    def __init__(self, streams: Sequence[KindStreamId], out: Sink) -> None:
        self._streams = streams
        self._out = out
        self.counts = {s.name: 0 for s in streams}

    def feed(self, tick: Tick) -> None:
        self.counts[tick.stream] += 1
        self._out.event(tick)

    restarting = False  # it tracks no shutdowns

    def produced(self, stream: str) -> bool:
        return self.counts.get(stream, 0) > 0

    def summary(self, t: float) -> None:
        pass

    def close(self, t: float) -> None:
        for stream in self._streams:
            self._out.event(TickTotal(t, stream, self.counts[stream.name]))


class TickSink:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.ticks = Counter("prober_ticks", "Ticks recorded.", ["stream"], registry=registry)

    def observe(self, observed: Observed) -> None:
        pass

    def keep(self, sample: object) -> None:
        pass

    def event(self, event: Event) -> None:
        if isinstance(event, Tick):
            self.ticks.labels(event.stream).inc()


class TickKind:
    spec = TICKS

    def __init__(self, period: float, *, feed: bool = True) -> None:
        self.period = period
        self.with_feed = feed  # False: no feed, its records go to the sinks as they are

    def streams(self, config: Config) -> tuple[KindStreamId, ...]:
        return tuple(
            KindStreamId(target.name, protocol, target.lb, TICK)
            for target in config.targets
            for protocol in config.protocols
        )

    def prepare(self, context: KindContext) -> TickRun:
        return TickRun(self, context)


class TickRun:
    in_flight = 0

    def __init__(self, kind: TickKind, context: KindContext) -> None:
        self._kind = kind
        self._context = context
        self.streams = kind.streams(context.config)
        self.feed = TickFeed(self.streams, context.out) if kind.with_feed else None
        self.sink = TickSink(context.registry)
        self.sinks: Sequence[Sink] = (self.sink,)
        self.sent = 0

    def start(self) -> None:
        for stream in self.streams:
            self._context.supervisor.spawn(f"tick:{stream.name}", self._ticker(stream))

    def _ticker(self, stream: KindStreamId) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            clock, n = self._context.clock, 0
            while True:
                await clock.sleep_until(clock.monotonic() + self._kind.period)
                n += 1
                self.sent += 1
                self._context.emit(Tick(self._context.now(), stream, n))

        return run

    def stopping(self) -> None:
        pass  # its ticks stop with their tasks

    def tasks(self) -> list[str]:
        return [f"tick:{stream.name}" for stream in self.streams]

    async def drain(self, timeout: float) -> int:
        return 0  # a tick is made at once: nothing is ever in flight

    async def aclose(self) -> None:
        pass

    def account(self) -> Mapping[str, object]:
        return {TICK: {"sent": self.sent}}
