"""The second kind of stream: watches. Per LB x protocol, client-go's reflector loop
(`core.reflector`) over the prober's heartbeat Lease, and one writer that renews the Lease
every `heartbeat_interval` so that a watch's blindness is measurable (`core.watch`).

What each stream records: every LIST, WATCH and WATCH_LIST sent (`WatchAttempt`, with the
apiserver that answered and its shutdown state), every end of an established watch and how
(`WatchEnd`), each watch-list's sync or stall (`WatchSync`, `daemon.watches.sync`), every
version of the heartbeat it saw (`WatchSeen`); the writer each write (`Heartbeat`).
Their feed runs the `WatchTracker`; the metrics are `daemon.metrics.WatchMetrics`.

The Lease is the pod's own (`heartbeat`: `$POD_NAMESPACE/$POD_NAME` in a cluster, with an
ownerReference to the pod when `$POD_UID` is known). Without permission to write it the
watches still run, and one warning says that their lag is not measured.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import ssl
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import structlog

from prober.config import Config
from prober.core.clientgo import TCP_KEEPALIVE
from prober.core.models import Protocol, rfc3339
from prober.core.numbers import decimal_or_none
from prober.core.reflector import Next, Outcome, Reflector, Step
from prober.core.streamkind import KindSpec, KindStreamId
from prober.core.watch import (
    STOPPED,
    WATCH,
    WATCHES,
    Heartbeat,
    WatchAttempt,
    WatchEnd,
    WatchSeen,
)
from prober.core.watchsync import is_end_marker
from prober.daemon.kinds import KindContext
from prober.daemon.metrics import WatchMetrics
from prober.daemon.pipeline import Sink
from prober.daemon.watches.feed import WatchFeed, WatchSink
from prober.daemon.watches.sync import PendingSync, watch_query
from prober.probe.credentials import TokenFile, client_context
from prober.probe.watcher import Answered, WatchClient, WatchTarget
from prober.probe.wire.stream import StreamLimits

log = structlog.get_logger("prober.watches")
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
# client-go's StreamWatcher reads a reset, a GOAWAY or an unanswered PING under a watch as the
# watch's end (net.IsProbableEOF), not an error: it watches again at once.
CLOSES = {"timeout", "closed", "reset", "goaway", "ping"}


def heartbeat_name(config: Config) -> tuple[str, str]:
    """(namespace, name) of the heartbeat Lease."""
    if config.heartbeat:
        namespace, _, name = config.heartbeat.partition("/")
        return namespace, name
    namespace = os.environ.get("POD_NAMESPACE") or "default"
    name = os.environ.get("POD_NAME") or f"prober-{socket.gethostname().lower()}"
    return namespace, name


class WatchKind:
    spec: KindSpec = WATCHES

    def streams(self, config: Config) -> tuple[KindStreamId, ...]:
        if config.watches == "off":
            return ()
        return tuple(
            KindStreamId(target.name, protocol, target.lb, WATCH)
            for target in config.targets
            for protocol in config.protocols
        )

    def prepare(self, context: KindContext) -> WatchRun:
        return WatchRun(context, self.streams(context.config))


class WatchRun:
    """The watch streams and the heartbeat writer of one run (`daemon.kinds.KindRun`)."""

    in_flight = 0  # a watch is never in flight the way a request is: it is cut at the stop

    def __init__(self, context: KindContext, streams: Sequence[KindStreamId]) -> None:
        config = context.config
        self._context = context
        self.streams = tuple(streams)
        self.blind_after = config.watch_blind_after + config.heartbeat_interval
        self.feed = WatchFeed(self.blind_after, context.out)
        metrics = WatchMetrics(context.registry, config.constant_labels)
        self.sinks: Sequence[Sink] = (WatchSink(metrics, self.feed.tracker),)
        self.namespace, self.name = heartbeat_name(config)
        self._clients: dict[str, WatchClient] = {}
        self._writers: list[WatchClient] = []
        self._tokens: dict[str, TokenFile] = {}
        self._contexts: dict[tuple[str | None, Protocol], ssl.SSLContext] = {}
        self._rng = random.Random()
        self._stopping = False
        self._version: str | None = None  # the heartbeat Lease's, as last written or read
        self.counts: Counter[str] = Counter()  # LISTs and WATCHes recorded, by step and outcome
        self.sent = 0  # LISTs and WATCHes sent: each is recorded once, cut by the stop or not

    def start(self) -> None:
        if not self.streams:
            return
        spawn = self._context.supervisor.spawn
        for stream in self.streams:
            client = self._clients[stream.name] = self._client(stream, stream.name)
            spawn(f"watch:{stream.name}", self._runner(stream, client))
        # The writer's connections are its own, one per LB, HTTP/2 where the streams speak it.
        fresh = {(s.target, s.lb): s for s in sorted(self.streams, key=lambda s: s.protocol)}
        self._writers = [self._client(s, "heartbeat") for s in fresh.values()]
        spawn("heartbeat", self._writer(self._writers))

    def _client(self, stream: KindStreamId, name: str) -> WatchClient:
        config = self._context.config
        target = next(t for t in config.targets if (t.name, t.lb) == (stream.target, stream.lb))
        # One token file watched and one TLS context per CA and protocol, as the request
        # streams share theirs: a run has many clients over few files.
        token = None
        if target.token_file:
            token = self._tokens.setdefault(target.token_file, TokenFile(target.token_file))
        key = (target.ca_file, stream.protocol)
        if key not in self._contexts:
            verify = not config.insecure_skip_tls_verify
            self._contexts[key] = client_context(target.ca_file, stream.protocol, verify=verify)
        context = self._contexts[key]
        return WatchClient(
            WatchTarget(
                url=target.url,
                context=context,
                protocol=stream.protocol,
                server_name=target.server_name,
                token=token,
                timeout=config.timeout,
                read_idle=config.http2_read_idle_timeout,
                ping_timeout=config.http2_ping_timeout,
                keepalive=TCP_KEEPALIVE,
                limits=StreamLimits(max_line=config.watch_max_event),
            ),
            f"{name} watch",
            self._context.clock,
            self._context.supervisor.spawn_once,
        )

    # -- a stream: the reflector's loop -----------------------------------------------------
    def _runner(self, stream: KindStreamId, client: WatchClient) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            config = self._context.config
            reflector = Reflector(self._rng.random, config.watch_backoff, config.watch_min_timeout,
                                  watch_list=config.watches == "watch-list")  # fmt: skip
            step = reflector.first()
            while not self._stopping:
                if step.wait:
                    await self._context.clock.sleep(step.wait)
                if step.step is Step.LIST:
                    step = await self._list(stream, client, reflector, step)
                else:
                    step = await self._watch(stream, client, reflector, step)

        return run

    def _path(self, query: str) -> str:
        selector = f"fieldSelector=metadata.name%3D{self.name}"
        return LEASES.format(namespace=self.namespace) + f"?{selector}&{query}"

    async def _list(
        self, stream: KindStreamId, client: WatchClient, reflector: Reflector, step: Next
    ) -> Next:
        t = self._context.now()
        self.sent += 1
        try:
            answered = await client.get(self._path("limit=500&resourceVersion=0"))
        except asyncio.CancelledError:
            self._cut(t, stream, "list", version="", cause=step.relist_cause)
            raise
        self._attempt(
            t, stream, "list", answered, version=answered.version, cause=step.relist_cause
        )
        listed = decimal_or_none(answered.version)
        if answered.outcome is Outcome.OK and listed is not None:
            self._context.emit(WatchSeen(self._context.now(), stream, listed))
        return reflector.listed(answered.outcome, answered.version, self._context.clock.monotonic())

    async def _watch(
        self, stream: KindStreamId, client: WatchClient, reflector: Reflector, step: Next
    ) -> Next:
        """A WATCH, or a WATCH_LIST read on past its end marker as the same watch."""
        context = self._context
        started = context.now()
        opened: list[Answered] = []
        syncs: list[PendingSync] = []
        kind, cause = str(step.step), step.relist_cause

        def on_start(answered: Answered) -> None:
            opened.append(answered)
            self._attempt(started, stream, kind, answered, version=step.version, cause=cause)
            if answered.outcome is Outcome.OK and step.step is Step.WATCH_LIST:
                server = answered.shutdown.host if answered.shutdown else None
                syncs.append(PendingSync(stream, started, context.now() - started,
                                         context.config.watch_list_stall, server))  # fmt: skip

        def on_line(line: bytes) -> str:
            return self._event(stream, reflector, line, syncs[0] if syncs else None)

        self.sent += 1
        try:
            ended = await client.watch(self._path(watch_query(step)), on_start, on_line)
        except asyncio.CancelledError:
            if not opened:  # sent, not answered yet
                self._cut(started, stream, kind, version=step.version, cause=cause)
            elif opened[0].outcome is Outcome.OK:
                self._unsynced(syncs, STOPPED)
                server = opened[0].shutdown.host if opened[0].shutdown else None
                context.emit(WatchEnd(context.now(), stream, started, STOPPED, server))
            raise
        now = context.clock.monotonic()
        if ended is None:
            return reflector.watched(opened[0].outcome if opened else Outcome.FAILED,
                                     events=0, lasted=0.0, now=now)  # fmt: skip
        self._unsynced(syncs, ended.how)
        server = opened[0].shutdown.host if opened and opened[0].shutdown else None
        context.emit(WatchEnd(context.now(), stream, started, ended.how, server, ended.events,
                              ended.detail))  # fmt: skip
        outcome = (
            Outcome.OK if ended.how in CLOSES
            else Outcome.GONE if ended.how == "gone" else Outcome.FAILED
        )  # fmt: skip
        lasted = context.now() - started
        return reflector.watched(outcome, events=ended.events, lasted=lasted, now=now)

    def _unsynced(self, syncs: list[PendingSync], how: str) -> None:
        """The watch-list ended before its marker: the sync's record, its stall logged."""
        if not syncs or syncs[0].done:
            return
        sync = syncs[0].ended(self._context.now(), how)
        self._context.emit(sync)
        if sync.stalled:  # client-go's "awaiting required bookmark event"
            log.warning("watch_list_stalled", stream=sync.stream, how=how,
                        seconds=round(sync.length, 3))  # fmt: skip

    def _event(
        self, stream: KindStreamId, reflector: Reflector, line: bytes, sync: PendingSync | None
    ) -> str:
        """One watch event: "" to read on, or how the watch ends."""
        try:
            event = json.loads(line)
            kind = event["type"]
            metadata = event["object"].get("metadata", {})
        except (ValueError, KeyError, TypeError, AttributeError):
            return "bad_event"
        if kind == "ERROR":
            return "gone" if event["object"].get("code") == 410 else "error"
        version = str(metadata.get("resourceVersion", ""))
        if sync is not None and not sync.done:
            if is_end_marker(event):
                self._context.emit(sync.marker(self._context.now()))
                reflector.synced(version)
            else:
                sync.events += 1
        reflector.note(version)
        seen = decimal_or_none(version)
        if kind in ("ADDED", "MODIFIED") and seen is not None:
            self._context.emit(WatchSeen(self._context.now(), stream, seen))
        return ""

    def _attempt(
        self, t: float, stream: KindStreamId, step: str, answered: Answered, *,
        version: str, cause: str,
    ) -> None:  # fmt: skip
        self.counts[f"{step}_{answered.outcome}"] += 1
        header = answered.shutdown
        dur = round(self._context.now() - t, 6)
        record = WatchAttempt(
            t,
            stream,
            step,
            str(answered.outcome),
            answered.status,
            server=header.host if header else None,
            shutdown=header.shutdown if header else None,
            elapsed=header.elapsed if header else None,
            version=version,
            detail=answered.detail,
            relist_cause=cause,
            dur=dur,
            local=answered.local,
            peer=answered.peer,
        )
        self._context.emit(record)

    def _cut(self, t: float, stream: KindStreamId, step: str, *, version: str, cause: str) -> None:
        """A LIST or WATCH the stop cut before its answer: still one record of what was sent,
        as `stopped` (`core.watch.STOPPED`), with how long it had waited."""
        self.counts[f"{step}_{STOPPED}"] += 1
        dur = round(self._context.now() - t, 6)
        detail = "cut by the daemon's stop before its answer"
        self._context.emit(
            WatchAttempt(t, stream, step, STOPPED, version=version, detail=detail,
                         relist_cause=cause, dur=dur)
        )  # fmt: skip

    # -- the heartbeat writer -------------------------------------------------------------
    def _writer(self, clients: list[WatchClient]) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            clock, interval, turn = self._context.clock, self._context.config.heartbeat_interval, 0
            path = LEASES.format(namespace=self.namespace)
            while not self._stopping:
                due = clock.monotonic() + interval
                client = clients[turn % len(clients)]
                t = self._context.now()
                try:
                    answered = await self._write(client, path)
                except asyncio.CancelledError:  # the stop: still a record of the write sent
                    self._context.emit(Heartbeat(t, None, None, STOPPED, self.blind_after))
                    raise
                written = decimal_or_none(answered.version)
                ok = answered.outcome is Outcome.OK and written is not None
                ack = self._context.now() if ok else None
                revision = written if ok else None
                detail = "" if ok else answered.detail
                self._context.emit(Heartbeat(t, ack, revision, detail, self.blind_after))
                if answered.status in (401, 403):
                    log.warning("heartbeat_forbidden", status=answered.status,
                                detail="watch lag is not measured")  # fmt: skip
                    return
                if not ok:
                    turn += 1  # that LB sent us to a stopping server: another next time
                await clock.sleep_until(due)

        return run

    async def _write(self, client: WatchClient, path: str) -> Answered:
        """As a lease client writes (client-go's, the kubelet's): an update over the version
        it last wrote or read, since a Lease takes no update without one (422); with none,
        or a stale one (409), the Lease read first, and created where there is none."""
        url = f"{path}/{self.name}"
        if self._version is None:
            read = await client.get(url)
            if read.status == 404:
                return self._kept(await client.post(path, self._lease(None)))
            if read.outcome is not Outcome.OK or not read.version:
                return read
            self._version = read.version
        return self._kept(await client.put(url, self._lease(self._version)))

    def _kept(self, answered: Answered) -> Answered:
        """The written Lease's version for the next update; none after a failure."""
        ok = answered.outcome is Outcome.OK and answered.version
        self._version = answered.version if ok else None
        return answered

    def _lease(self, version: str | None) -> bytes:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if version is not None:
            metadata["resourceVersion"] = version
        uid = os.environ.get("POD_UID")
        if uid:
            metadata["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Pod", "name": self.name, "uid": uid}
            ]
        now = rfc3339(self._context.clock.wall())
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {"holderIdentity": self.name, "leaseDurationSeconds": 30, "renewTime": now},
        }
        return json.dumps(lease).encode()

    # -- the stop -------------------------------------------------------------------------
    def stopping(self) -> None:
        self._stopping = True

    def tasks(self) -> list[str]:
        if not self.streams:
            return []
        return [f"watch:{stream.name}" for stream in self.streams] + ["heartbeat"]

    async def drain(self, timeout: float) -> int:
        # Each task recorded what it had in flight as it was cancelled: an established
        # watch's end, a LIST or WATCH not answered yet, a heartbeat write (all `stopped`).
        return 0

    async def aclose(self) -> None:
        for client in (*self._clients.values(), *self._writers):
            await client.aclose()

    def account(self) -> Mapping[str, object]:
        return {"watch": dict(self.counts), "watch_sent": self.sent}
