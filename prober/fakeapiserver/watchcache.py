"""kube-apiserver's watch cache, in small: one etcd watch over the whole keyspace from the
revision of a LIST made at start, a window of recent events, and the watchers it feeds.

The window is what makes a restart visible to clients: a watch from a resourceVersion older
than the cache's floor gets 410 Gone, as from a freshly started kube-apiserver whose cache
begins at its own LIST. The floor rises as events leave the bounded window and when etcd is
compacted (kube-apiserver's compactor writes the revision it compacts to `compact_rev_key`,
which every cache sees in its etcd watch).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prober.fakeapiserver.etcd import (
    WHOLE_KEYSPACE,
    EtcdClient,
    EtcdError,
    WatchEvent,
    key_value,
    prefix_end,
)
from prober.fakeapiserver.store import PREFIX, decode

log = logging.getLogger("prober.fakeapiserver")

COMPACT_KEY = b"compact_rev_key"  # kube-apiserver's compactor (storage/etcd3/compact.go)
RETRY = 0.2  # seconds between attempts to reach etcd again


@dataclass(slots=True)
class CacheEvent:
    type: str  # ADDED, MODIFIED, DELETED
    key: bytes
    obj: dict[str, Any]
    revision: int
    _line: bytes = b""

    def line(self) -> bytes:
        """The event as a watch response carries it: one JSON line, encoded once."""
        if not self._line:
            event = {"type": self.type, "object": self.obj}
            self._line = (json.dumps(event, separators=(",", ":")) + "\n").encode()
        return self._line


class Gone(Exception):
    """The resourceVersion asked for is older than what the cache holds."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested, self.oldest = requested, oldest


Match = Callable[[dict[str, Any]], bool]


@dataclass(eq=False, slots=True)
class Watcher:
    prefix: bytes
    match: Match
    deliver: Callable[[CacheEvent], None]
    reset: Callable[[], None]  # the cache started over: end this watch
    sent: int = 0
    after: int = 0  # only events past this revision: a watch from N starts after N

    def offer(self, event: CacheEvent) -> None:
        fresh = event.revision > self.after and event.key.startswith(self.prefix)
        if fresh and self.match(event.obj):
            self.sent += 1
            self.deliver(event)


@dataclass(slots=True)
class WatchCache:
    etcd: EtcdClient
    capacity: int = 10000
    on_compacted: Callable[[int], None] = lambda revision: None
    revision: int = 0  # the newest revision the cache has seen
    floor: int = 0  # a watch may start after this revision, not before
    objects: dict[bytes, dict[str, Any]] = field(default_factory=dict)
    _events: deque[CacheEvent] = field(default_factory=deque)
    _watchers: set[Watcher] = field(default_factory=set)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    _moved: asyncio.Event = field(default_factory=asyncio.Event)  # set as the revision moves

    async def run(self) -> None:
        """LIST, then follow etcd from there; reconnect from the last revision seen while
        etcd is away, and start over when its watch breaks off at a compacted revision."""
        while True:
            try:
                await self._list()
            except EtcdError as error:
                log.warning("watch cache: %s; retrying", error)
                await asyncio.sleep(RETRY)
                continue
            while True:
                try:
                    if not await self._follow():
                        break
                except EtcdError as error:
                    log.warning("watch cache: %s; retrying", error)
                    await asyncio.sleep(RETRY)

    async def _list(self) -> None:
        answer = await self.etcd.range(PREFIX, prefix_end(PREFIX))
        revision = int(answer.get("header", {}).get("revision", 0))
        self.objects = {}
        for raw in answer.get("kvs", []):
            kv = key_value(raw)
            self.objects[kv.key] = decode(kv)
        for watcher in list(self._watchers):
            watcher.reset()  # their resourceVersions may be gone: clients must re-watch
        self._watchers.clear()
        self._events.clear()
        self.revision = self.floor = revision
        self._advanced()
        self.ready.set()

    def _advanced(self) -> None:
        """Wake whoever waits for the revision to move (`fresh`)."""
        self._moved.set()
        self._moved = asyncio.Event()

    async def _follow(self) -> bool:
        """Apply etcd's events from the next revision on; False when etcd compacted past it."""
        async for message in self.etcd.watch(WHOLE_KEYSPACE, WHOLE_KEYSPACE, self.revision + 1):
            if message.canceled:
                log.warning("watch cache: etcd compacted past %d; listing again", self.revision)
                return False
            for event in message.events:
                self._apply(event)
        return True

    def _apply(self, event: WatchEvent) -> None:
        kv, revision = event.kv, event.kv.mod_revision
        self.revision = max(self.revision, revision)
        self._advanced()
        if kv.key == COMPACT_KEY:
            # The compactor's first round writes 0: nothing compacted yet.
            if event.kind != "DELETE" and kv.value.isdigit() and int(kv.value) > 0:
                self._raise_floor(int(kv.value))
                self.on_compacted(int(kv.value))
            return
        if not kv.key.startswith(PREFIX):
            return
        if event.kind == "DELETE":
            previous = decode(event.prev) if event.prev is not None else self.objects.get(kv.key)
            self.objects.pop(kv.key, None)
            if previous is None:
                return
            obj = {**previous, "metadata": {**previous["metadata"]}}
            obj["metadata"]["resourceVersion"] = str(revision)
            cached = CacheEvent("DELETED", kv.key, obj, revision)
        else:
            obj = decode(kv)
            self.objects[kv.key] = obj
            kind = "ADDED" if kv.create_revision == kv.mod_revision else "MODIFIED"
            cached = CacheEvent(kind, kv.key, obj, revision)
        self._events.append(cached)
        if len(self._events) > self.capacity:
            self._raise_floor(self._events[0].revision)
        for watcher in list(self._watchers):
            watcher.offer(cached)

    def _raise_floor(self, revision: int) -> None:
        self.floor = max(self.floor, revision)
        while self._events and self._events[0].revision <= self.floor:
            self._events.popleft()

    # -- what requests ask -----------------------------------------------------------
    async def fresh(self, revision: int, within: float) -> bool:
        """Whether the cache reaches `revision` within `within` seconds (the cacher's
        waitUntilFreshAndBlock, before a watch-list's initial events)."""
        try:
            async with asyncio.timeout(within):
                while self.revision < revision:
                    await self._moved.wait()
        except TimeoutError:
            return False
        return True

    def snapshot(self, prefix: bytes, match: Match) -> list[dict[str, Any]]:
        return [o for k, o in sorted(self.objects.items()) if k.startswith(prefix) and match(o)]

    def watch(self, watcher: Watcher, since: int | None) -> None:
        """Start `watcher`: from `since` (events after that revision), or with the current
        state as ADDED events when None. Raises `Gone` below the floor."""
        if since is None:
            for key, obj in sorted(self.objects.items()):
                revision = int(obj["metadata"]["resourceVersion"])
                watcher.offer(CacheEvent("ADDED", key, obj, revision))
            watcher.after = self.revision
        elif since < self.floor:
            raise Gone(since, self.floor)
        else:
            # A version the cache has not reached yet is waited for: its events pass later.
            watcher.after = since
            for event in self._events:
                watcher.offer(event)
        self._watchers.add(watcher)

    def stop(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)

    @property
    def watchers(self) -> int:
        return len(self._watchers)
