"""The fake apiserver on a real etcd: Leases with optimistic concurrency, lists and watches
as kube-apiserver serves them (resourceVersion = etcd's revision, 410 below the watch cache,
bookmarks, selectors, timeouts), discovery, and the identity Lease. Clients are httpx over
real TLS, HTTP/1.1 and HTTP/2."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest

from prober.core.phase import ShutdownPhase
from prober.core.truthlog import (
    Compacted,
    LeaseWritten,
    SyntheticWatchesEnded,
    WatchEnded,
    first,
    of_kind,
)
from prober.fakeapiserver import server as server_module
from prober.fakeapiserver.etcd import EtcdClient
from prober.fakeapiserver.options import OptionsError
from prober.lab.infra.etcd import LabEtcd
from tests.support.apiservers import TOKEN, LabCerts, Running, StartServer, running_client
from tests.support.waiting import until

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def lease(name: str, holder: str = "me", rv: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if rv is not None:
        metadata["resourceVersion"] = rv
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {"holderIdentity": holder},
    }


async def renew(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> httpx.Response:
    """An update as a client makes one: over the version it read (a Lease takes none without)."""
    body["metadata"]["resourceVersion"] = (await http.get(url)).json()["metadata"][
        "resourceVersion"
    ]
    return await http.put(url, json=body)


def client(
    running: Running, certs: LabCerts, http2: bool = False
) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    return running_client(running, certs, AUTH, http2=http2, timeout=10)


@pytest.fixture
async def on_etcd(start_server: StartServer, etcd: LabEtcd) -> StartServer:
    async def start(**changes: Any) -> Running:
        changes.setdefault("etcd_servers", etcd.endpoint)
        return await start_server(**changes)

    return start


class WatchReader:
    """One watch response, its JSON lines read as they come."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()
        self.ended = False

    async def next(self, timeout: float = 10) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while True:
                try:
                    line = await anext(self._lines)
                except StopAsyncIteration:
                    self.ended = True
                    raise
                if line.strip():
                    event: dict[str, Any] = json.loads(line)
                    return event

    async def until_end(self) -> list[dict[str, Any]]:
        events = []
        try:
            while True:
                events.append(await self.next())
        except StopAsyncIteration:
            return events


@asynccontextmanager
async def watching(http: httpx.AsyncClient, path: str) -> AsyncIterator[WatchReader]:
    async with http.stream("GET", path) as response:
        assert response.status_code == 200
        yield WatchReader(response)


@pytest.mark.parametrize("http2", [False, True])
async def test_leases_round_trip_with_optimistic_concurrency(
    on_etcd: StartServer, certs: LabCerts, http2: bool
) -> None:
    running = await on_etcd()
    path = LEASES.format(ns="ns1")
    async with client(running, certs, http2) as http:
        created = await http.post(path, json=lease("a"))
        assert created.status_code == 201
        first = created.json()
        rv = first["metadata"]["resourceVersion"]
        assert first["metadata"]["uid"]
        assert first["metadata"]["namespace"] == "ns1"

        again = await http.post(path, json=lease("a"))
        assert (again.status_code, again.json()["reason"]) == (409, "AlreadyExists")

        updated = await http.put(f"{path}/a", json=lease("a", "you", rv=rv))
        assert updated.status_code == 200
        new_rv = updated.json()["metadata"]["resourceVersion"]
        assert int(new_rv) > int(rv)
        assert updated.json()["metadata"]["uid"] == first["metadata"]["uid"]

        stale = await http.put(f"{path}/a", json=lease("a", "late", rv=rv))
        assert stale.status_code == 409
        assert stale.json()["reason"] == "Conflict"
        assert stale.json()["message"].startswith(
            'Operation cannot be fulfilled on leases.coordination.k8s.io "a"'
        )
        # A Lease takes no update without a version: upstream's registry answers 422
        # (its strategy's AllowUnconditionalUpdate is false), as kube-apiserver v1.37 did
        # to the daemon's heartbeat when it sent none.
        unconditional = await http.put(f"{path}/a", json=lease("a", "anyone"))
        assert (unconditional.status_code, unconditional.json()["reason"]) == (422, "Invalid")
        assert unconditional.json()["message"] == (
            'leases.coordination.k8s.io "a" is invalid: metadata.resourceVersion: Invalid '
            "value: 0: must be specified for an update"
        )

        got = (await http.get(f"{path}/a")).json()
        assert got["spec"]["holderIdentity"] == "you"
        assert got["metadata"]["resourceVersion"] == new_rv
        listed = (await http.get(path)).json()
        assert listed["kind"] == "LeaseList"
        assert [i["metadata"]["name"] for i in listed["items"]] == ["a"]
        assert int(listed["metadata"]["resourceVersion"]) >= int(got["metadata"]["resourceVersion"])

        assert (await http.delete(f"{path}/a")).status_code == 200
        missing = await http.get(f"{path}/a")
        assert (missing.status_code, missing.json()["reason"]) == (404, "NotFound")
        bad = await http.post(path, content=b"{not json")
        assert bad.status_code == 400


async def test_two_apiservers_share_one_store(on_etcd: StartServer, certs: LabCerts) -> None:
    one, two = await on_etcd(hostname="master-0"), await on_etcd(hostname="master-1")
    path = LEASES.format(ns="shared")
    async with client(one, certs) as first, client(two, certs, http2=True) as second:
        rv = (await first.post(path, json=lease("x"))).json()["metadata"]["resourceVersion"]
        seen = (await second.get(f"{path}/x")).json()
        assert seen["metadata"]["resourceVersion"] == rv
        assert (await second.put(f"{path}/x", json=lease("x", "two", rv=rv))).status_code == 200
        lost = await first.put(f"{path}/x", json=lease("x", "one", rv=rv))
        assert lost.status_code == 409


@pytest.mark.parametrize("http2", [False, True])
async def test_list_then_watch_from_its_version_with_bookmarks(
    on_etcd: StartServer, certs: LabCerts, http2: bool
) -> None:
    running = await on_etcd(bookmark_interval=0.2)
    path = LEASES.format(ns="w")
    async with client(running, certs, http2) as http:
        written = (await http.post(path, json=lease("hb"))).json()["metadata"]["resourceVersion"]
        listed = (await http.get(path)).json()
        rv = listed["metadata"]["resourceVersion"]
        query = f"?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=30"
        async with watching(http, path + query) as watch:
            versions = []
            for holder in ("b", "c", "d"):
                put = await http.put(f"{path}/hb", json=lease("hb", holder, rv=written))
                written = put.json()["metadata"]["resourceVersion"]
                versions.append(written)
            events = [await watch.next() for _ in range(3)]
            assert [e["type"] for e in events] == ["MODIFIED"] * 3
            assert [e["object"]["metadata"]["resourceVersion"] for e in events] == versions
            assert [e["object"]["spec"]["holderIdentity"] for e in events] == ["b", "c", "d"]
            bookmark = await watch.next()
            assert bookmark["type"] == "BOOKMARK"
            assert int(bookmark["object"]["metadata"]["resourceVersion"]) >= int(versions[-1])
    records = running.server.truth.records or []
    writes = [r for r in of_kind(records, LeaseWritten) if r.name == "hb"]
    assert [str(r.revision) for r in writes][-3:] == versions


async def test_a_watch_without_a_version_starts_with_the_current_state_and_selects(
    on_etcd: StartServer, certs: LabCerts
) -> None:
    running = await on_etcd()
    path = LEASES.format(ns="sel")
    async with client(running, certs) as http:
        for name in ("a", "b"):
            await http.post(path, json=lease(name))
        query = "?watch=true&fieldSelector=metadata.name%3Db&timeoutSeconds=30"
        async with watching(http, path + query) as watch:
            first = await watch.next()
            assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "b")
            await renew(http, f"{path}/a", lease("a", "x"))
            await renew(http, f"{path}/b", lease("b", "y"))
            second = await watch.next()
            assert (second["type"], second["object"]["spec"]["holderIdentity"]) == ("MODIFIED", "y")
            await http.delete(f"{path}/b")
            third = await watch.next()
            assert (third["type"], third["object"]["metadata"]["name"]) == ("DELETED", "b")
        labelled = await http.get(
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
            params={"labelSelector": "apiserver.kubernetes.io/identity=kube-apiserver"},
        )
        assert [i["metadata"]["name"] for i in labelled.json()["items"]] == [
            running.server.apiserver_id
        ]
        unsupported = await http.get(path, params={"fieldSelector": "spec.holderIdentity=x"})
        assert unsupported.status_code == 400


async def test_timeout_seconds_ends_the_watch_cleanly(
    on_etcd: StartServer, certs: LabCerts
) -> None:
    running = await on_etcd()
    async with client(running, certs, http2=True) as http:
        path = LEASES.format(ns="t") + "?watch=true&timeoutSeconds=1"
        async with watching(http, path) as watch:
            assert await watch.until_end() == []
    ended = of_kind(running.server.truth.records or [], WatchEnded)
    assert [(r.how, r.phase) for r in ended] == [("timeout", ShutdownPhase.BEFORE)]


async def gone_or_events(http: httpx.AsyncClient, path: str, since: str) -> dict[str, Any]:
    query = f"?watch=true&resourceVersion={since}&timeoutSeconds=30"
    async with watching(http, path + query) as watch:
        return await watch.next()


def expired(event: dict[str, Any]) -> bool:
    status = event["object"]
    return bool(
        event["type"] == "ERROR"
        and status["code"] == 410
        and status["reason"] == "Expired"
        and status["message"].startswith("too old resource version: ")
    )


async def test_a_restarted_apiserver_answers_410_below_its_own_cache(
    on_etcd: StartServer, certs: LabCerts
) -> None:
    before = await on_etcd()
    path = LEASES.format(ns="r")
    async with client(before, certs) as http:
        old = (await http.post(path, json=lease("hb"))).json()["metadata"]["resourceVersion"]
        await renew(http, f"{path}/hb", lease("hb", "next"))
        assert not expired(await gone_or_events(http, path, old)), "the old cache has it"
    await before.server.kill()
    after = await on_etcd()  # the same host, a new process: its cache starts at its LIST
    async with client(after, certs) as http:
        assert expired(await gone_or_events(http, path, old))
        current = (await http.get(path)).json()["metadata"]["resourceVersion"]
        query = f"?watch=true&resourceVersion={current}&timeoutSeconds=30"
        async with watching(http, path + query) as watch:
            await renew(http, f"{path}/hb", lease("hb", "after"))
            event = await watch.next()
            assert event["type"] == "MODIFIED"


async def test_compaction_raises_the_floor_beneath_the_cache(
    on_etcd: StartServer, certs: LabCerts
) -> None:
    running = await on_etcd(compaction_interval=3600.0)
    storage = running.server.storage
    assert storage is not None
    path = LEASES.format(ns="c")
    async with client(running, certs) as http:
        old = (await http.post(path, json=lease("hb"))).json()["metadata"]["resourceVersion"]
        # The cache follows etcd a moment behind; a compaction before it caught up would
        # make it list again, which is a different case.
        await until(lambda: storage.cache.revision >= int(old), "the cache has the write")
        assert await storage.compactor.round() is None  # upstream's first round only records
        await renew(http, f"{path}/hb", lease("hb", "x"))
        compacted = await storage.compactor.round()
        assert compacted is not None
        assert compacted > int(old)
        await until(lambda: running.server.storage.cache.floor >= compacted, "the cache floor")
        assert expired(await gone_or_events(http, path, old))
    record = first(running.server.truth.records or [], Compacted)
    assert record is not None
    assert record.revision == compacted


async def identity_lease(running: Running, certs: LabCerts, path: str) -> dict[str, Any]:
    """The identity Lease once this server has written it: it serves before its post-start
    hook's first write, as kube-apiserver does, and a GET then met the last process's."""
    assert running.server.storage is not None
    async with asyncio.timeout(15):
        await running.server.storage.identity_written.wait()
    async with client(running, certs) as http:
        found: dict[str, Any] = (await http.get(path)).json()
    return found


async def test_the_identity_lease_gets_a_new_holder_with_each_start(
    on_etcd: StartServer, certs: LabCerts
) -> None:
    path = LEASES.format(ns="kube-system")
    first = await on_etcd()
    name = first.server.apiserver_id
    one = await identity_lease(first, certs, f"{path}/{name}")
    await first.server.kill()
    second = await on_etcd()
    two = await identity_lease(second, certs, f"{path}/{name}")
    assert one["metadata"]["labels"] == {
        "apiserver.kubernetes.io/identity": "kube-apiserver",
        "kubernetes.io/hostname": "master-0",
    }
    assert one["spec"]["holderIdentity"].startswith(name + "_")
    assert two["spec"]["holderIdentity"] != one["spec"]["holderIdentity"]
    assert two["metadata"]["creationTimestamp"] == one["metadata"]["creationTimestamp"]
    assert two["metadata"]["uid"] == one["metadata"]["uid"]


async def test_graceful_termination_deletes_the_identity_lease(
    on_etcd: StartServer, certs: LabCerts
) -> None:
    """As upstream's pre-shutdown hook does (kube-apiserver v1.37.2 deleted its own 7 ms
    after SIGTERM); a crash leaves it, as the test above shows."""
    path = LEASES.format(ns="kube-system")
    running = await on_etcd(shutdown_delay=30.0)
    url = f"{path}/{running.server.apiserver_id}"
    await identity_lease(running, certs, url)
    running.server.begin_shutdown("test")
    async with client(running, certs) as http:

        async def gone() -> bool:
            return (await http.get(url)).status_code == 404

        await until(gone, "the identity Lease deleted")


async def test_discovery_resolves_leases(on_etcd: StartServer, certs: LabCerts) -> None:
    running = await on_etcd()
    async with client(running, certs) as http:
        assert (await http.get("/api")).json()["versions"] == ["v1"]
        groups = (await http.get("/apis")).json()["groups"]
        assert [g["name"] for g in groups] == ["coordination.k8s.io"]
        resources = (await http.get("/apis/coordination.k8s.io/v1")).json()["resources"]
        assert [(r["name"], r["kind"], r["namespaced"]) for r in resources] == [
            ("leases", "Lease", True)
        ]


@pytest.mark.parametrize(("grace", "how"), [(0.0, "cut"), (2.0, "drained")])
async def test_watches_end_at_shutdown_as_the_grace_period_says(
    on_etcd: StartServer, certs: LabCerts, grace: float, how: str
) -> None:
    running = await on_etcd(
        shutdown_delay=0.2, watch_grace=grace, synthetic_watches=200, shutdown_timeout=0.5
    )
    # HTTP/1.1: httpx gives up an HTTP/2 stream at GOAWAY, where Go's client keeps it.
    async with client(running, certs) as http:
        path = LEASES.format(ns="s") + "?watch=true&timeoutSeconds=60"
        async with watching(http, path) as watch:
            running.server.begin_shutdown("test")
            # Drained: the body ends; cut: the connection closes in the middle of it.
            with contextlib.suppress(httpx.RemoteProtocolError, httpx.ReadError):
                await watch.until_end()
        await asyncio.wait_for(running.server.wait_stopped(), 30)
    records = running.server.truth.records or []
    ended = of_kind(records, WatchEnded)
    assert [(r.how, r.phase) for r in ended] == [(how, ShutdownPhase.AFTER)]
    synthetic = first(records, SyntheticWatchesEnded)
    assert synthetic is not None
    assert synthetic.ended == {how: 200}
    if how == "drained":
        rank = ended[0].drain_rank
        assert rank is not None
        assert 1 <= rank <= 201
        # A rate limiter's floor: 201 watches at max(201 / 2 s, 200 per second).
        assert synthetic.last - synthetic.first >= 199 / 200 * 0.95


async def test_etcd_out_of_reach_at_start_is_one_line(
    start_server: StartServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module, "STORAGE_TIMEOUT", 0.3)
    with pytest.raises(OptionsError, match=r"^--etcd-servers 127\.0\.0\.1:1: not reachable"):
        await start_server(etcd_servers="127.0.0.1:1")


async def test_a_call_that_ends_after_its_client_closed_keeps_no_connection(
    etcd: LabEtcd,
) -> None:
    """A killed server closes its etcd client while calls are out; one that then ends must
    close its connection, not idle it on a client no one closes again (the collector found
    it, as a ResourceWarning, in a later test)."""
    client = EtcdClient(etcd.endpoint)
    call = asyncio.create_task(client.range(b"/registry/x"))
    await asyncio.sleep(0)  # the call is out: its connection is no idle one
    client.close()
    await call
    assert client._idle == []
