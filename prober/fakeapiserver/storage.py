"""Everything a server keeps in etcd, wired together: the client, the registry, the watch
cache, the resource API on them, and the loops kube-apiserver runs (compactor, identity
Lease). The truth log gets every Lease write with its revision, and every compaction."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

from prober.common.clock import Clock
from prober.core.models import rfc3339
from prober.core.truthlog import Compacted, InitialEventsEnd, LeaseWritten
from prober.fakeapiserver.api import Api, WatchSink
from prober.fakeapiserver.controllers import Compactor, IdentityLease
from prober.fakeapiserver.etcd import EtcdClient
from prober.fakeapiserver.options import ApiServerOptions
from prober.fakeapiserver.store import Store
from prober.fakeapiserver.truth import TruthLog
from prober.fakeapiserver.watchcache import WatchCache


class Storage:
    def __init__(
        self, options: ApiServerOptions, clock: Clock, truth: TruthLog, holder: str | None = None
    ) -> None:
        assert options.etcd_servers is not None
        self.truth = truth
        # Until then LIST and WATCH get 429 (KEP-4568): set as the server listens (`listening`)
        self.initialized_at = 0.0
        self._cache_init = options.watch_cache_init
        self.identity_written = asyncio.Event()  # the identity Lease's first write is done
        self.etcd = EtcdClient(options.etcd_servers)
        # metav1.Time is whole seconds
        self.store = Store(self.etcd, lambda: rfc3339(int(clock.wall())).replace(".000000", ""))
        self.cache = WatchCache(self.etcd, options.watch_cache_size, on_compacted=self._compacted)
        self.api = Api(
            self.store,
            self.cache,
            bookmark_interval=options.bookmark_interval,
            on_write=self._written,
            on_initial_events=self._initial_events,
            withhold_end=options.withhold_initial_events_end,
            initializing=lambda: clock.monotonic() < self.initialized_at,
        )
        self.compactor = Compactor(self.etcd, options.compaction_interval, clock)
        self.identity = IdentityLease(
            self.store,
            options.apiserver_id,
            hostname=options.hostname,
            renew_interval=options.identity_renew_interval,
            clock=clock,
            on_write=self._identity_written,
            holder=holder,
        )

    def _initial_events(self, sink: WatchSink, events: int, revision: int, withheld: bool) -> None:
        conn, stream = sink.ident
        self.truth.write(InitialEventsEnd(conn=conn, stream=stream, events=events,
                                          revision=revision, withheld=withheld))  # fmt: skip

    def listening(self, now: float) -> None:
        """The server listens at monotonic `now`: its cache counts as initializing for
        `--watch-cache-init-duration` from here, as a restarted kube-apiserver's does."""
        self.initialized_at = now + self._cache_init

    async def wait_ready(self, timeout: float) -> bool:
        """Whether the watch cache has its first LIST within `timeout` seconds."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.cache.ready.wait()
        return self.cache.ready.is_set()

    def controllers(self) -> list[tuple[str, Coroutine[Any, Any, None]]]:
        return [("compactor", self.compactor.run()), ("identity lease", self.identity.run())]

    def _written(self, verb: str, obj: dict[str, Any]) -> None:
        metadata, spec = obj.get("metadata", {}), obj.get("spec", {})
        self.truth.write(
            LeaseWritten(
                verb=verb,
                namespace=metadata.get("namespace"),
                name=metadata.get("name"),
                revision=int(metadata.get("resourceVersion", 0)),
                holder=spec.get("holderIdentity"),
                renew_time=spec.get("renewTime"),
            )
        )

    def _identity_written(self, lease: dict[str, Any]) -> None:
        self._written("identity", lease)
        self.identity_written.set()

    def _compacted(self, revision: int) -> None:
        self.truth.write(Compacted(revision=revision))

    def close(self) -> None:
        self.etcd.close()
