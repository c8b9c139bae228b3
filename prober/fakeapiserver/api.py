"""The resource API on storage: `coordination.k8s.io/v1` Leases (get, list, watch, create,
update, delete, with field and label selectors) and the discovery documents client-go needs to
resolve them. RBAC is out of scope: whoever authenticates may do everything.

Reads of `resourceVersion=0` and every watch are served by the watch cache, other reads by
etcd, as kube-apiserver does. A watch is an `ApiAnswer` with a `start`: the connection calls it
once the response headers are out, with a `WatchSink` to write events into.

A watch-list (KEP-3157: `sendInitialEvents=true`, which needs `resourceVersionMatch=
NotOlderThan` and bookmarks) is served as kube-apiserver 1.37's cacher serves it: once the
cache is at least as fresh as the version asked for (with none, as a consistent read of etcd
now), the state as ADDED events, then a BOOKMARK annotated `k8s.io/initial-events-end: "true"`
at the cache's revision, sent even when nothing matched; then the watch goes on. A cache that
does not get that fresh within `FRESH_WITHIN` answers 504, as the cacher's "Too large resource
version". `withhold_end` (the lab's `--withhold-initial-events-end`) never sends the marker.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from prober.fakeapiserver import resources
from prober.fakeapiserver.requests import RequestInfo
from prober.fakeapiserver.store import LEASES, Kind, Store, StoreError
from prober.fakeapiserver.watchcache import CacheEvent, Gone, Match, WatchCache, Watcher

MAX_BODY = 3 << 20  # kube-apiserver's limit on a request body (3 MiB)
FRESH_WITHIN = 3.0  # the cacher's wait for a fresh enough cache (waitUntilFreshAndBlock)
END_MARKER = "k8s.io/initial-events-end"
WATCH_LIST_NEEDS = (
    "sendInitialEvents is allowed only with resourceVersionMatch=NotOlderThan and "
    "allowWatchBookmarks=true"
)
KINDS = {(LEASES.group, "v1", LEASES.resource): LEASES}


class WatchSink(Protocol):
    """Where a watch's events go: the open response stream."""

    def write(self, data: bytes) -> None: ...

    def finish(self, how: str) -> None: ...

    @property
    def ident(self) -> tuple[int, int]:
        """(connection, stream): what names the watch in the truth log."""
        ...


WatchStart = Callable[[WatchSink], Callable[[], None]]  # returns what stops the watch
# A watch-list's initial events were sent (events, the marker's revision, whether withheld).
InitialEventsEnd = Callable[[WatchSink, int, int, bool], None]


@dataclass(frozen=True, slots=True)
class ApiAnswer:
    status: int
    body: bytes
    start: WatchStart | None = None
    retry_after: int | None = None  # seconds, sent as Retry-After


class BadRequest(Exception):
    pass


def _status(code: int, reason: str, message: str) -> ApiAnswer:
    return ApiAnswer(code, resources.encode(resources.status(code, reason, message)))


def _failure(error: StoreError) -> ApiAnswer:
    body = resources.status(error.code, error.reason, error.message)
    if error.details:
        body["details"] = error.details
    return ApiAnswer(error.code, resources.encode(body))


def selector(query: Mapping[str, str]) -> Match:
    """fieldSelector (metadata.name, metadata.namespace) and labelSelector (k=v, k!=v, k)."""
    tests: list[Match] = []
    for term in filter(None, query.get("fieldSelector", "").split(",")):
        field, negate, value = _split_term(term)
        if field not in ("metadata.name", "metadata.namespace"):
            raise BadRequest(f"field label not supported: {field}")
        tests.append(_compare(_metadata(field.removeprefix("metadata.")), value, negate))
    for term in filter(None, query.get("labelSelector", "").split(",")):
        if "=" in term:
            key, negate, value = _split_term(term)
            tests.append(_compare(_labels(key), value, negate))
        else:
            tests.append(_exists(term.strip()))
    return lambda obj: all(test(obj) for test in tests)


def _compare(read: Callable[[dict[str, Any]], Any], value: str, negate: bool) -> Match:
    return lambda obj: (read(obj) == value) != negate


def _metadata(attribute: str) -> Callable[[dict[str, Any]], Any]:
    return lambda obj: obj["metadata"].get(attribute)


def _labels(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda obj: obj["metadata"].get("labels", {}).get(key)


def _exists(key: str) -> Match:
    return lambda obj: key in obj["metadata"].get("labels", {})


def _split_term(term: str) -> tuple[str, bool, str]:
    for operator, negate in (("!=", True), ("==", False), ("=", False)):
        if operator in term:
            left, _, right = term.partition(operator)
            return left.strip(), negate, right.strip()
    raise BadRequest(f"invalid selector: {term!r}")


class Api:
    def __init__(
        self,
        store: Store,
        cache: WatchCache,
        *,
        bookmark_interval: float,
        on_write: Callable[[str, dict[str, Any]], None],
        on_initial_events: InitialEventsEnd = lambda sink, events, revision, withheld: None,
        withhold_end: bool = False,
        initializing: Callable[[], bool] = lambda: False,
    ) -> None:
        self.store, self.cache = store, cache
        self.bookmark_interval = bookmark_interval
        self._on_write = on_write
        self._on_initial_events = on_initial_events
        self.withhold_end = withhold_end
        self._initializing = initializing

    @staticmethod
    def serves(info: RequestInfo) -> bool:
        ref = info.object_ref
        return ref is not None and (ref.api_group, ref.api_version, ref.resource) in KINDS

    async def serve(
        self, method: str, info: RequestInfo, query: Mapping[str, str], body: bytes
    ) -> ApiAnswer:
        ref = info.object_ref
        assert ref is not None
        kind = KINDS[(ref.api_group, ref.api_version, ref.resource)]
        namespace, name = ref.namespace, ref.name
        if info.verb in ("list", "watch") and self._initializing():
            # KEP-4568: a cacher not ready rejects LIST and WATCH (`cacher.go`), Retry-After 1
            # for a downtime this short (`calculateRetryAfterForUnreadyCache`)
            answer = _status(429, "TooManyRequests", "storage is (re)initializing")
            return ApiAnswer(429, answer.body, retry_after=1)
        try:
            match = selector(query)
            if info.verb == "watch" and _true(query.get("sendInitialEvents", "")):
                return await self._watch_list(kind, namespace, name, query, match)
            if info.verb == "watch":
                return self._watch(kind, namespace, name, query, match)
            if info.verb == "list":
                return await self._list(kind, namespace, query, match)
            if info.verb == "create" and namespace and not name:
                return await self._write(kind, "create", namespace, None, body)
            if namespace and name:
                if info.verb == "get":
                    return self._object(200, await self.store.get(kind, namespace, name))
                if info.verb == "update":
                    return await self._write(kind, "update", namespace, name, body)
                if info.verb == "delete":
                    deleted = await self.store.delete(kind, namespace, name)
                    self._on_write("delete", deleted)
                    return self._object(200, deleted)
        except StoreError as error:
            return _failure(error)
        except BadRequest as error:
            return _status(400, "BadRequest", str(error))
        return _status(
            405, "MethodNotAllowed", f"the server does not allow this method on {kind.qualified}"
        )

    async def _list(
        self, kind: Kind, namespace: str | None, query: Mapping[str, str], match: Match
    ) -> ApiAnswer:
        if query.get("resourceVersion") == "0":
            items, revision = (
                self.cache.snapshot(kind.prefix(namespace), match),
                self.cache.revision,
            )
        else:
            everything, revision = await self.store.items(kind, namespace)
            items = [item for item in everything if match(item)]
        body = {
            "kind": f"{kind.kind}List",
            "apiVersion": kind.api_version,
            "metadata": {"resourceVersion": str(revision)},
            "items": [
                {k: v for k, v in i.items() if k not in ("kind", "apiVersion")} for i in items
            ],
        }
        return ApiAnswer(200, resources.encode(body))

    async def _write(
        self, kind: Kind, verb: str, namespace: str, name: str | None, body: bytes
    ) -> ApiAnswer:
        obj = _parse_object(body, kind)
        given = str(obj.get("metadata", {}).get("name", "") or "")
        if verb == "create":
            if not given:
                raise BadRequest(
                    f'{kind.kind}.{kind.group} "" is invalid: metadata.name: Required value'
                )
            written = await self.store.create(kind, namespace, obj)
        else:
            assert name is not None
            if given and given != name:
                raise BadRequest("the name of the object does not match the name on the URL")
            written = await self.store.update(kind, namespace, name, obj)
        self._on_write(verb, written)
        return self._object(201 if verb == "create" else 200, written)

    @staticmethod
    def _object(code: int, obj: dict[str, Any]) -> ApiAnswer:
        return ApiAnswer(code, resources.encode(obj))

    def _watch(
        self,
        kind: Kind,
        namespace: str | None,
        name: str | None,
        query: Mapping[str, str],
        match: Match,
    ) -> ApiAnswer:
        match = _named(match, name)
        version = query.get("resourceVersion", "")
        if version not in ("", "0") and not version.isdigit():
            raise BadRequest(f"invalid resourceVersion: {version!r}")
        since = int(version) if version not in ("", "0") else None
        bookmarks = _true(query.get("allowWatchBookmarks", ""))
        prefix = kind.prefix(namespace)

        def start(sink: WatchSink) -> Callable[[], None]:
            watcher = _watcher(prefix, match, sink)
            try:
                self.cache.watch(watcher, since)
            except Gone as gone:
                sink.write(_error_event(410, "Expired", str(gone)))
                sink.finish("gone")
                return lambda: None
            return self._stopper(watcher, self._bookmarks(kind, sink) if bookmarks else None)

        return ApiAnswer(200, b"", start)

    async def _watch_list(
        self,
        kind: Kind,
        namespace: str | None,
        name: str | None,
        query: Mapping[str, str],
        match: Match,
    ) -> ApiAnswer:
        bookmarks = _true(query.get("allowWatchBookmarks", ""))
        if query.get("resourceVersionMatch") != "NotOlderThan" or not bookmarks:
            return _status(422, "Invalid", WATCH_LIST_NEEDS)
        version = query.get("resourceVersion", "")
        if version and not version.isdigit():
            raise BadRequest(f"invalid resourceVersion: {version!r}")
        if version != "0":  # "": as fresh as etcd now (a consistent read); N: at least N
            wanted = int(version) if version else (await self.store.items(kind, namespace))[1]
            if not await self.cache.fresh(wanted, FRESH_WITHIN):
                return _status(504, "Timeout", f"Too large resource version: {wanted}, "
                               f"current: {self.cache.revision}")  # fmt: skip
        match, prefix = _named(match, name), kind.prefix(namespace)

        def start(sink: WatchSink) -> Callable[[], None]:
            watcher = _watcher(prefix, match, sink)
            self.cache.watch(watcher, None)  # the state, as ADDED events
            initial, revision = watcher.sent, self.cache.revision
            if not self.withhold_end:
                marker = _bookmark(kind, revision)
                marker["metadata"]["annotations"] = {END_MARKER: "true"}
                sink.write(CacheEvent("BOOKMARK", b"", marker, 0).line())
            self._on_initial_events(sink, initial, revision, self.withhold_end)
            return self._stopper(watcher, self._bookmarks(kind, sink))

        return ApiAnswer(200, b"", start)

    def _stopper(self, watcher: Watcher, timer: _Cancel | None) -> Callable[[], None]:
        """What ends a watch the cache serves: its watcher gone, its bookmarks stopped."""

        def stop() -> None:
            self.cache.stop(watcher)
            if timer is not None:
                timer.cancel()

        return stop

    def _bookmarks(self, kind: Kind, sink: WatchSink) -> _Cancel:
        """kube-apiserver sends a watcher a BOOKMARK about once a minute."""
        loop = asyncio.get_running_loop()
        handle: list[asyncio.TimerHandle] = []

        def tick() -> None:
            event = CacheEvent("BOOKMARK", b"", _bookmark(kind, self.cache.revision), 0)
            sink.write(event.line())
            handle[0] = loop.call_later(self.bookmark_interval, tick)

        handle.append(loop.call_later(self.bookmark_interval, tick))
        return _Cancel(handle)


class _Cancel:
    """Cancels whichever timer of a repeating chain is pending."""

    def __init__(self, handle: list[asyncio.TimerHandle]) -> None:
        self._handle = handle

    def cancel(self) -> None:
        self._handle[0].cancel()


def _bookmark(kind: Kind, revision: int) -> dict[str, Any]:
    return {
        "kind": kind.kind,
        "apiVersion": kind.api_version,
        "metadata": {"resourceVersion": str(revision), "creationTimestamp": None},
        "spec": {},
    }


def _named(match: Match, name: str | None) -> Match:
    """`match`, narrowed to the object called `name` when the path names one."""
    if name is None:
        return match
    return lambda o: o["metadata"].get("name") == name and match(o)


def _watcher(prefix: bytes, match: Match, sink: WatchSink) -> Watcher:
    """A cache watcher writing its events to the open response; a relist ends it."""
    return Watcher(prefix, match, lambda e: sink.write(e.line()), lambda: sink.finish("relisted"))


def _true(value: str) -> bool:
    return value.lower() in ("true", "1")


def _error_event(code: int, reason: str, message: str) -> bytes:
    return resources.encode({"type": "ERROR", "object": resources.status(code, reason, message)})


def _parse_object(body: bytes, kind: Kind) -> dict[str, Any]:
    if len(body) > MAX_BODY:
        raise BadRequest("the request body is too large")
    try:
        obj = json.loads(body or b"null")
    except ValueError as error:
        raise BadRequest(f"the body of the request was in an unknown format: {error}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
        raise BadRequest(f"the body of the request is not a {kind.kind}")
    obj["kind"], obj["apiVersion"] = kind.kind, kind.api_version
    return obj
