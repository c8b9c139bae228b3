"""OpenShift CI's own file shapes, as typed dicts, and the names the prober's results go by in
them. The shapes are written from openshift/origin's Go types (see docs/ci-formats.md):

- a monitor interval (`pkg/monitor/monitorapi/types.go` `Interval`, `Locator`, `Message`, as
  `pkg/monitor/serialization` writes them and Sippy's `EventInterval` reads them);
- a backend disruption (`pkg/monitortests/testframework/disruptionserializer`);
- an autodl data file (`pkg/dataloader/types.go` `DataFile`).

Go's encoding/json writes a map's keys sorted, a struct's fields in declaration order; the
builders do the same, so that a file reads like origin's own.

Backend names. origin's samplers name a backend `<target>-<protocol>-<lb>-<connection>-
connections` (`pkg/disruption/ci/factory.go`), the very shape of the prober's stream names,
and ci-tools adds up every `backend-disruption*` file's entries by `Name`: under its stream
name, the prober's disruption would be added to origin's sampler's, and the allowed
disruption computed from history would mix both. So a prober backend is named `prober-` and
its stream name; no backend name of origin's starts with `prober-`
(tests/report/origin/backend_names.txt).
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias, TypedDict

from prober.core.models import StreamId, StreamNameError

BACKEND_PREFIX: Final = "prober-"

# monitorapi constants (types.go, identification.go) and the shutdown handler's reason
# (pkg/disruption/backend/shutdown/handler.go, a constant local to it).
LOCATOR_DISRUPTION: Final = "Disruption"
LOCATOR_APISERVER: Final = "APIServer"
SOURCE_DISRUPTION: Final = "Disruption"
SOURCE_APISERVER_SHUTDOWN: Final = "APIServerShutdown"
REASON_DISRUPTION_BEGAN: Final = "DisruptionBegan"
REASON_GRACEFUL_SHUTDOWN: Final = "GracefulShutdownInterval"
# Every shutdown interval's `server` key (construction.go `KubeAPIServerWithLB`): the host
# that shut down is in the message, not in the locator, so that Sippy keeps one row per LB.
SHUTDOWN_SERVER: Final = "kube-apiserver"
# How long past the shutdown delay origin's shutdown interval lasts (shutdown/interval.go).
SHUTDOWN_GRACE_SECONDS: Final = 15.0

Level: TypeAlias = Literal["Info", "Warning", "Error"]
ConnectionType: TypeAlias = Literal["New", "Reused"]


def backend_name(stream: str) -> str:
    """The backend name of a prober stream in CI's files."""
    return BACKEND_PREFIX + stream


def parse_backend_name(name: str) -> StreamId | None:
    """The prober stream a backend name names; None for any other name (one of origin's)."""
    if not name.startswith(BACKEND_PREFIX):
        return None
    try:
        return StreamId.parse(name[len(BACKEND_PREFIX) :])
    except StreamNameError:
        return None


# e2e-timelines_*.json: {"items": [Interval]}


class Locator(TypedDict):
    type: str
    keys: dict[str, str]


class Message(TypedDict):
    reason: str
    cause: str
    humanMessage: str  # origin's JSON name
    annotations: dict[str, str]


# `from` is a Python keyword: the functional form spells it.
Interval = TypedDict(
    "Interval",
    {
        "level": Level,
        "display": bool,
        "source": str,
        "locator": Locator,
        "message": Message,
        "from": str,  # metav1.Time: RFC 3339, UTC, whole seconds
        "to": str,
    },
)


class IntervalList(TypedDict):
    items: list[Interval]


# backend-disruption_*.json: {"BackendDisruptions": {Name: BackendDisruption}}


class BackendDisruption(TypedDict):
    Name: str
    BackendName: str
    ConnectionType: ConnectionType
    DisruptedDuration: str  # metav1.Duration: a Go duration string
    DisruptionMessages: list[str]
    LoadBalancerType: str
    Protocol: str
    TargetAPI: str


class BackendDisruptionList(TypedDict):
    BackendDisruptions: dict[str, BackendDisruption]


# *-autodl.json: ci-data-loader's DataFile


AutodlType: TypeAlias = Literal["string", "int64", "float64", "timestamp", "json", "bool"]


class DataFile(TypedDict):
    table_name: str
    schema: dict[str, AutodlType]
    schema_mapping: dict[str, str]
    rows: list[dict[str, str]]
    chunk_size: int
    expiration_days: int
    partition_column: str
