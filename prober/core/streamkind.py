"""The pure side of a kind of stream: its name, its streams' names, its own records.

Requests (one request, one `Sample`) are the first kind; a kind is anything else that measures
an LB over time with records of its own, such as a long-lived watch per LB x protocol. What
the daemon runs of a kind is `daemon.kinds.StreamKind`; what every reader needs to know of it
is here, so that the event log, the replay and the reports take a kind they have no code for:

- `KindSpec`: the kind's name and its record types (frozen dataclasses with a `KIND` of their
  own, fields as `core.models` writes them), which the codec decodes like the built-in ones.
- `KindStreamId`: the identity of a stream of such a kind, one per target x protocol x LB,
  named `<target>-<protocol>-<lb>-<kind>`; a record carries it with `kind_identity`.
- `KindTable`: the kinds a reader or the daemon knows, refusing two of one name or two record
  types of one `KIND`.

"Kind" alone is ambiguous here: a kind of stream ("request", "watch") has record kinds
("sample", "window", ...), the `kind` field of every event-log line.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from prober.core.models import (
    LB,
    ApiserverNode,
    IdentitySeen,
    LogRecord,
    Protocol,
    ReadyzAnswer,
    RunEnd,
    RunRecord,
    StreamIdentity,
    StreamNameError,
    split_stream_name,
)

# A kind's name is the tail of its streams' names: one lowercase word, never `connections`.
_KIND_NAME = re.compile(r"[a-z][a-z0-9]*")


@dataclass(frozen=True, slots=True)
class KindStreamId(StreamIdentity):
    """A stream of a kind other than requests, one per target x protocol x LB: named
    `<target>-<protocol>-<lb>-<kind>`, e.g. `kube-api-http2-internal-lb-watch`. No request
    stream's name parses as one (theirs end in `-connections`, which no kind may be called),
    nor the other way round."""

    FIELDS: ClassVar[tuple[str, ...]] = ("stream", "lb", "protocol")
    target: str
    protocol: Protocol
    lb: LB
    kind: str

    @property
    def name(self) -> str:
        return f"{self.target}-{self.protocol}-{self.lb}-{self.kind}"

    @property
    def key(self) -> tuple[LB, Protocol]:
        return (self.lb, self.protocol)

    @classmethod
    def parse(cls, name: str, kind: str) -> KindStreamId:
        split = split_stream_name(name, kind)
        if split is None:
            raise StreamNameError(f"stream name {name!r} is not <target>-<protocol>-<lb>-{kind}")
        return cls(*split, kind)


def kind_identity(
    kind: str, keys: tuple[str, ...] = ("stream", "lb", "protocol")
) -> dict[str, Any]:
    """Field metadata for a `KindStreamId` on a record of `kind`: the codec writes it as the
    name and `keys` beside it, and reads it back from the name, as for request streams."""
    parse: Callable[[str], KindStreamId] = functools.partial(KindStreamId.parse, kind=kind)
    return {"keys": keys, "parse": parse}


@dataclass(frozen=True, slots=True)
class KindSpec:
    """A kind of stream as readers know it: its name and the record types it writes."""

    name: str
    records: tuple[type[LogRecord], ...] = ()

    def __post_init__(self) -> None:
        if not _KIND_NAME.fullmatch(self.name) or self.name == "connections":
            raise ValueError(f"a kind's name is one lowercase word, not {self.name!r}")

    @property
    def record_kinds(self) -> tuple[str, ...]:
        return tuple(record.KIND for record in self.records)


class KindTable:
    """The kinds of stream one reader or one daemon knows, in the order they were added."""

    def __init__(self, specs: Iterable[KindSpec] = ()) -> None:
        self._specs: dict[str, KindSpec] = {}
        # The run's own records, of no kind of stream.
        self._types: dict[str, type[LogRecord]] = {
            record.KIND: record
            for record in (RunRecord, RunEnd, ApiserverNode, IdentitySeen, ReadyzAnswer)
        }
        self._owner: dict[str, str] = {}  # record kind -> kind of stream
        for spec in specs:
            self.add(spec)

    def add(self, spec: KindSpec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"kind of stream {spec.name!r} is there already")
        kinds = spec.record_kinds
        for record in spec.records:
            taken = self._types.get(record.KIND)
            if taken is not None or kinds.count(record.KIND) > 1:
                owner = taken.__name__ if taken is not None else spec.name
                raise ValueError(f"record kind {record.KIND!r} is taken ({owner})")
        self._specs[spec.name] = spec
        for record in spec.records:
            self._types[record.KIND] = record
            self._owner[record.KIND] = spec.name

    @property
    def specs(self) -> tuple[KindSpec, ...]:
        return tuple(self._specs.values())

    @property
    def record_types(self) -> Mapping[str, type[LogRecord]]:
        """Record kind -> its type, the run record's included: what the codec decodes."""
        return self._types

    def owner(self, record_kind: str) -> str | None:
        """The kind of stream a record kind belongs to (None: the run record, or unknown)."""
        return self._owner.get(record_kind)
