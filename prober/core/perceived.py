"""What a client felt: client-go's `Retry-After` rule applied to the samples already taken.

An answer of 429, or a 5xx, with `Retry-After` keeps its raw class (`retry_after`): origin
counts it as disruption, and so does the raw figure. client-go does not give up on it: it
waits the header's seconds and sends the request again, up to `MAX_RETRIES` tries
(`clientgo.retry_after`, its `checkWait`). No extra request is sent to find out how that
went. The first sample through the same target, LB and protocol, on a new connection, sent
at or after the moment the retry would have gone, stands in for it: its answer is what
client-go would have met (a kept connection is the one the 429 came on; client-go's retry
may take any). A stand-in that is itself told to wait extends the chain.

`RetryFollower` is fed every sample in the order the trackers get them, and says, once per
retried sample, how the chain ended (`Retried`): a success, the class that ended it, or
`retry_after` still when the tries ran out. At the end of the run the chains still waiting
end as they are, unresolved: never counted as a success nobody saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from prober.core.clientgo import MAX_RETRIES, retry_after, retry_after_value
from prober.core.models import LB, Connection, ErrorClass, Interval, Protocol, Sample

_Key = tuple[str, LB, Protocol]


@dataclass(frozen=True, slots=True)
class Retried:
    """How client-go's retries of one sample ended."""

    sample: Sample  # the answer with Retry-After, as taken
    outcome: ErrorClass | None  # None: a try succeeded; `retry_after`: the tries ran out
    tries: int  # requests client-go would have sent, the first included
    by: Sample | None  # the sample that stood in for the last try; None: the run ended first
    t: float  # when the chain ended: the last stand-in's end, or the run's end

    @property
    def felt(self) -> bool:
        """Whether the client saw the request fail, in the end."""
        return self.outcome is not None and self.outcome.is_disruption

    @property
    def waited(self) -> float:
        """Seconds from the first try's sending to the chain's end."""
        return self.t - self.sample.t


@dataclass(slots=True)
class _Chain:
    sample: Sample
    due: float  # the next try is sent at or after this
    tries: int = 1


def wait_of(sample: Sample) -> float | None:
    """The seconds client-go waits after this sample before trying again; None: it does not."""
    if sample.error is not ErrorClass.RETRY_AFTER:
        return None
    value = retry_after_value(sample.detail)
    return None if value is None else retry_after(sample.status, {"retry-after": value})


class RetryFollower:
    def __init__(self, max_tries: int = MAX_RETRIES) -> None:
        self.max_tries = max_tries
        self._waiting: dict[_Key, list[_Chain]] = {}

    def feed(self, sample: Sample) -> list[Retried]:
        if sample.stopped or sample.held:
            return []  # no answer (the stop cut it), or fed again for a bound only
        stream = sample.stream_id
        key = (stream.target, stream.lb, stream.protocol)
        ended = self._stand_in(key, sample) if stream.connection is Connection.NEW else []
        wait = wait_of(sample)
        if wait is not None:
            self._waiting.setdefault(key, []).append(_Chain(sample, sample.t + wait))
        return ended

    def close(self, end_t: float) -> list[Retried]:
        """The run ended: every chain still waiting ends unresolved, as it stands."""
        ended = [
            Retried(c.sample, ErrorClass.RETRY_AFTER, c.tries, None, end_t)
            for chains in self._waiting.values()
            for c in chains
        ]
        self._waiting.clear()
        return sorted(ended, key=lambda r: r.sample.t)

    def _stand_in(self, key: _Key, sample: Sample) -> list[Retried]:
        chains = self._waiting.get(key)
        if not chains:
            return []
        due = [c for c in chains if sample.t >= c.due]
        if not due:
            return []
        ended = []
        wait = wait_of(sample)
        for chain in due:
            chain.tries += 1
            if wait is not None and chain.tries < self.max_tries:
                chain.due = sample.t + wait
                continue  # told to wait again: the chain goes on
            chains.remove(chain)
            ended.append(Retried(chain.sample, sample.error, chain.tries, sample, sample.end))
        return ended


@dataclass(frozen=True, slots=True)
class Felt:
    """How much of one closed disruption interval a client felt: none of it where every
    failure in it was an answer with `Retry-After` whose retries got through (`forgiven`),
    all of it otherwise. The raw figure counts it whole either way, as origin does."""

    interval: Interval
    forgiven: bool
    retried_through: int  # answers inside it whose retries got through

    @property
    def seconds(self) -> float:
        return 0.0 if self.forgiven else self.interval.seconds


@dataclass(slots=True)
class _Failures:
    """One stream's failures not yet placed in a decided interval."""

    hard: list[float] = field(default_factory=list)  # sent at: no retry could hide them
    told: dict[str, float] = field(default_factory=dict)  # audit id -> t, chains still waiting
    through: list[float] = field(default_factory=list)  # retried, and a try succeeded
    felt: list[float] = field(default_factory=list)  # retried, and the tries failed
    held: list[Interval] = field(default_factory=list)  # closed, waiting for their chains
    decided_to: float = float("-inf")  # the end of the last interval decided


class FeltDisruption:
    """Of every closed disruption interval, how much a client felt (`Felt`), once the retries
    of every answer inside it have ended: fed each sample with the events the trackers made of
    it, in the order they made them (`core.trackers`). A stream's same-node samples make
    intervals of their own (`core.samenode`): each path of a stream is followed apart."""

    def __init__(self) -> None:
        self._streams: dict[tuple[str, bool], _Failures] = {}

    def feed(self, sample: Sample, events: Sequence[object]) -> list[Felt]:
        if sample.failed and not sample.held:
            failures = self._of(sample.stream, sample.same_node)
            if sample.t <= failures.decided_to:
                pass  # a straggler inside an interval already decided: it changed nothing
            elif wait_of(sample) is None:
                failures.hard.append(sample.t)
            else:
                failures.told[sample.audit_id] = sample.t
        return self.take(events)

    def take(self, events: Sequence[object]) -> list[Felt]:
        """The intervals and ended chains among `events`; what they decide."""
        touched: dict[tuple[str, bool], None] = {}
        for event in events:
            if isinstance(event, Interval):
                path = (event.stream, event.same_node)
                self._of(*path).held.append(event)
                touched[path] = None
            elif isinstance(event, Retried):
                path = (event.sample.stream, event.sample.same_node)
                failures = self._of(*path)
                t = failures.told.pop(event.sample.audit_id, None)
                if t is not None:
                    (failures.felt if event.felt else failures.through).append(t)
                    touched[path] = None
        return [felt for path in touched for felt in self._decide(self._streams[path])]

    def _of(self, stream: str, same_node: bool) -> _Failures:
        return self._streams.setdefault((stream, same_node), _Failures())

    def _decide(self, f: _Failures) -> list[Felt]:
        decided = []
        while f.held:
            interval = f.held[0]
            if any(_inside(t, interval) for t in f.told.values()):
                break  # a retry of an answer inside it has not ended yet
            f.held.pop(0)
            through = sum(_inside(t, interval) for t in f.through)
            forgiven = (
                interval.error is ErrorClass.RETRY_AFTER
                and through > 0
                and not any(_inside(t, interval) for t in (*f.hard, *f.felt))
            )
            decided.append(Felt(interval, forgiven, through))
            f.decided_to = interval.end_t
            for times in (f.hard, f.through, f.felt):
                times[:] = [t for t in times if t > interval.end_t]
        return decided


def _inside(t: float, interval: Interval) -> bool:
    return interval.start_t <= t <= interval.end_t
