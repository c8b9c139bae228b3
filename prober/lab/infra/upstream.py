"""Upstream's own kube-apiserver for the lab: where its binaries are, and how one is run.

`make upstream` builds them from the Go module proxy into `upstream/bin` (`upstream/build.sh`):
kube-apiserver v1.37.2 through a main of ours that adds OpenShift's shutdown header and
audit annotations and prints each lifecycle instant as a JSON line; etcd 3.7, which
kube-apiserver 1.37 targets; a client-go informer. Nothing here builds Go: a missing binary is
one line saying which command makes it.

The flags are OpenShift's where the lab measures what they set (`--shutdown-send-retry-after`,
`--goaway-chance`, the platform's delay), upstream's defaults elsewhere. The LBs' checkers read
`/readyz` anonymously (RBAC with anonymous auth: `system:public-info-viewer`); the prober's
token is a static one of `system:masters`, which may read and write the Leases it needs.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prober.common.errors import UserError
from prober.core.durations import format_go_duration
from prober.core.eventlog import encode
from prober.core.header import apiserver_id
from prober.core.phase import ShutdownPhase, phase_at
from prober.core.truthlog import (
    AfterShutdownDelayDuration,
    HTTPServerStoppedListening,
    InFlightRequestsDrained,
    LifecycleSignal,
    Listening,
    NotAcceptingNewRequest,
    PreShutdownHooksStopped,
    Ready,
    Serving,
    ShutdownInitiated,
    TruthRecord,
    WatchEnded,
    WatchStarted,
    stamp,
)

VERSION = "v1.37.2"
SERVICE_RANGE = "198.18.128.0/24"  # the lab's range; a ClusterIP is never dialled here
# Metadata for every request, as OpenShift's default policy keeps them; the stage a request
# was received at is left out, as upstream's examples do (each request is one line then,
# two for a watch: ResponseStarted and ResponseComplete).
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
"""


class UpstreamError(UserError, RuntimeError):
    """Upstream's binaries are not there to run."""


@dataclass(frozen=True, slots=True)
class Binaries:
    kube_apiserver: Path
    etcd: Path
    informer: Path


def binaries(folder: Path | None = None) -> Binaries:
    """The built binaries (`PROBER_UPSTREAM_BIN`, else the repository's `upstream/bin`)."""
    if folder is None:
        here = os.environ.get("PROBER_UPSTREAM_BIN")
        folder = Path(here) if here else Path(__file__).resolve().parents[3] / "upstream" / "bin"
    found = Binaries(folder / "kube-apiserver", folder / "etcd", folder / "informer")
    for path in (found.kube_apiserver, found.etcd, found.informer):
        if not os.access(path, os.X_OK):
            raise UpstreamError(f"{path}: not built; `make upstream` builds upstream's binaries")
    return found


@dataclass(frozen=True, slots=True)
class Instance:
    """One kube-apiserver's settings; times in seconds, before any scaling."""

    etcd: str  # http://host:port
    bind: str
    advertise: str  # written into `default/kubernetes`; never loopback (the reconciler)
    port: int
    cert: Path
    key: Path
    tokens: Path  # --token-auth-file
    audit_policy: Path
    audit_log: Path
    shutdown_delay: float
    watch_grace: float = 0.0
    goaway_chance: float = 0.0  # OpenShift's 0.001: `prober lab --goaway-chance`
    verbosity: int = 2  # [graceful-termination] steps are logged at 1


def kube_apiserver_argv(binary: Path, instance: Instance) -> list[str]:
    i = instance
    return [
        str(binary),
        "--etcd-servers", i.etcd,
        "--bind-address", i.bind,
        "--advertise-address", i.advertise,
        "--secure-port", str(i.port),
        "--tls-cert-file", str(i.cert),
        "--tls-private-key-file", str(i.key),
        # The serving key signs and checks service-account tokens: the lab issues none.
        "--service-account-issuer", f"https://{i.advertise}:{i.port}",
        "--service-account-signing-key-file", str(i.key),
        "--service-account-key-file", str(i.key),
        "--service-cluster-ip-range", SERVICE_RANGE,
        "--authorization-mode", "RBAC",
        "--anonymous-auth=true",
        "--token-auth-file", str(i.tokens),
        "--audit-policy-file", str(i.audit_policy),
        "--audit-log-path", str(i.audit_log),
        "--endpoint-reconciler-type", "lease",
        "--shutdown-delay-duration", format_go_duration(i.shutdown_delay),
        "--shutdown-send-retry-after=true",
        "--shutdown-watch-termination-grace-period", format_go_duration(i.watch_grace),
        "--goaway-chance", f"{i.goaway_chance:g}",
        f"--v={i.verbosity}",
    ]  # fmt: skip


def lease_env(renew: float) -> dict[str, str]:
    """The identity Lease's renew interval (upstream's 10 s) and duration (upstream's
    3600 s, long beside any run): the lab scales the renewals the daemon reads."""
    return {"PROBER_IDENTITY_LEASE_RENEW": format_go_duration(renew)}


def token_file(path: Path, tokens: Sequence[tuple[str, str]]) -> Path:
    """A static token file: each (token, user) in `system:masters`."""
    lines = [f'{token},{user},{user},"system:masters"' for token, user in tokens]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path


def audit_policy(path: Path) -> Path:
    path.write_text(AUDIT_POLICY, encoding="utf-8")
    return path


READY = "identity_lease"  # the main's line once /readyz is true and its Lease names it


@dataclass(frozen=True, slots=True)
class GoLine:
    """A line our Go programs print (`upstream/internal/jsonline`: the main's, the informer's):
    `{"event": ..., "wall": <epoch seconds>, <keys>}`, its event and wall time read, the
    keys beside them as they came."""

    event: str
    wall: float
    fields: Mapping[str, object]

    def text(self, key: str) -> str:
        return str(self.fields.get(key, ""))

    def integer(self, key: str) -> int:
        return int(str(self.fields.get(key, 0)))

    def number(self, key: str) -> float:
        """A number beside the event; 0 where it is absent or null."""
        value = self.fields.get(key)
        return float(value) if isinstance(value, int | float) else 0.0


def go_line(text: str) -> GoLine | None:
    """The line as a `GoLine`; None for a line that is none (not JSON, no event or wall)."""
    try:
        found = json.loads(text)
    except ValueError:
        return None
    if not isinstance(found, dict):
        return None
    event, wall = found.pop("event", None), found.pop("wall", None)
    if not isinstance(event, str) or isinstance(wall, bool) or not isinstance(wall, int | float):
        return None
    return GoLine(event, float(wall), found)


def with_hostname(hostname: str, argv: Sequence[str]) -> list[str]:
    """`argv` in a UTS namespace of its own named `hostname`: kube-apiserver derives its
    APIServerID, and so its identity Lease, from its hostname, and three on one machine
    would share one. `unshare` and `sh` exec: the pid stays kube-apiserver's."""
    script = 'hostname "$0" && exec "$@"'
    return ["unshare", "--uts", "--", "sh", "-c", script, hostname, *argv]


# The main's lifecycle lines, as the truth records of upstream's own names (`core.truthlog`).
SIGNALS: Mapping[str, type[LifecycleSignal]] = {
    "shutdown_initiated": ShutdownInitiated,
    "after_shutdown_delay": AfterShutdownDelayDuration,
    "pre_shutdown_hooks_stopped": PreShutdownHooksStopped,
    "not_accepting_new_requests": NotAcceptingNewRequest,
    "in_flight_drained": InFlightRequestsDrained,
    "http_server_stopped_listening": HTTPServerStoppedListening,
}


class TruthWriter:
    """The truth file of one host, written from its kube-apiserver's lines in the fake's
    records (`core.truthlog`), so that every truth reader of the lab reads both: `listening`
    and `ready` once its identity Lease names this process's holder, each lifecycle signal
    by upstream's name, each watch it served with the peer it saw."""

    def __init__(self, path: Path, hostname: str, delay: float, port: int) -> None:
        self._path = path
        self._host, self._apiserver = hostname, apiserver_id(hostname)
        self._delay, self._port = delay, port
        self._held: dict[str, float] = {}  # listening, ready: until the holder is known
        # Every record until then: a process's records begin with its `listening`.
        self._before: list[TruthRecord] | None = []
        self._t0: float | None = None
        self._draining = False
        self._streams: dict[int, float] = {}  # watch number -> when it began (wall)

    def __call__(self, text: str) -> None:
        line = go_line(text)
        if line is None:
            return  # not one of the main's lines: its log file keeps it
        if line.event in ("listening", "ready"):
            self._held.setdefault(line.event, line.wall)
        elif line.event == READY:
            self._begin(line)
        elif line.event in SIGNALS:
            self._signal(line)
        elif line.event == "watch_started":
            self._watch_started(line)
        elif line.event == "watch_ended":
            self._watch_ended(line)

    def _begin(self, line: GoLine) -> None:
        """The holder is known: the process listened, and what came before is written."""
        holder = line.text("holder")
        before, self._before = self._before or [], None
        listening = self._held.get("listening", line.wall)
        ready = self._held.get("ready", line.wall)
        self._write(Listening(port=self._port, holder=holder), listening)
        self._write(Ready(holder=holder), ready)
        self._write(Serving(holder=holder), ready)
        for record in before:
            self._append(record)

    def _signal(self, line: GoLine) -> None:
        if line.event == "shutdown_initiated":
            self._t0 = line.wall
            self._write(ShutdownInitiated(delay=self._delay), line.wall)
            return
        self._draining = self._draining or line.event == "not_accepting_new_requests"
        self._write(SIGNALS[line.event](), line.wall)

    def _watch_started(self, line: GoLine) -> None:
        # The main numbers each watch of the process: (0, its number) names it.
        stream = line.integer("stream")
        self._streams[stream] = line.wall
        self._write(WatchStarted(conn=0, stream=stream, peer=line.text("peer"),
                                 protocol=line.text("protocol"), path=line.text("path"),
                                 phase=self._phase(line.wall)), line.wall)  # fmt: skip

    def _watch_ended(self, line: GoLine) -> None:
        stream = line.integer("stream")
        how = line.text("how")
        if how == "ended":  # the server ended it: its timeout, or the drain past the delay
            how = "drained" if self._draining else "timeout"
        began = self._streams.pop(stream, line.wall)
        # The events it sent are not counted: upstream's filters need the connection's own
        # writer to stream a watch, and a counting one around it would break every watch.
        self._write(WatchEnded(conn=0, stream=stream, how=how, phase=self._phase(line.wall),
                               events=0, seconds=round(line.wall - began, 6)),
                    line.wall)  # fmt: skip

    def _phase(self, wall: float) -> ShutdownPhase:
        return ShutdownPhase.BEFORE if self._t0 is None else phase_at(wall, self._t0, self._delay)

    def _write(self, record: TruthRecord, wall: float) -> None:
        # `mono` on this machine's CLOCK_MONOTONIC, as the fake's records have it.
        mono = time.monotonic() - (time.time() - wall)
        stamped = stamp(record, host=self._host, apiserver=self._apiserver, wall=wall, mono=mono)
        if self._before is not None:
            self._before.append(stamped)
        else:
            self._append(stamped)

    def _append(self, record: TruthRecord) -> None:
        # Each record one append, the file closed between: a restart's writer appends to it.
        with self._path.open("a", encoding="utf-8") as sink:
            sink.write(encode(record) + "\n")
