"""Targets found in the cluster, and the APIServerID -> node name decoder, which also tells
each new holder of an identity Lease (`k8s.holders`).

The service network comes from `KUBERNETES_SERVICE_HOST`/`_PORT` (set in every pod), the
internal and external LBs from the Infrastructure object, `localhost:6443` only when asked
(a pod on the host network of a control-plane node).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType

import structlog

from prober.config import Target
from prober.config.fields import Invalid, base_url
from prober.config.model import DEFAULT_TARGET_NAME
from prober.core.models import LB, IdentitySeen
from prober.k8s.cluster import ClusterAccess, Infrastructure
from prober.k8s.errors import ClusterError
from prober.k8s.holders import Holders, LeaseRead

log = structlog.get_logger("prober.k8s")
LOCALHOST_URL = "https://localhost:6443"


def discover_targets(
    infrastructure: Infrastructure,
    *,
    localhost: bool = False,
    env: Mapping[str, str] | None = None,
) -> tuple[Target, ...]:
    environ = os.environ if env is None else env
    found: list[tuple[LB, str]] = []
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if host and port:
        shown = f"[{host}]" if ":" in host else host
        found.append((LB.SERVICE_NETWORK, f"https://{shown}:{port}"))
    if infrastructure.internal_url:
        found.append((LB.INTERNAL, infrastructure.internal_url))
    if infrastructure.api_url:
        found.append((LB.EXTERNAL, infrastructure.api_url))
    if localhost:
        found.append((LB.LOCALHOST, LOCALHOST_URL))
    targets = []
    for lb, url in found:
        try:
            normal = base_url(url)
        except Invalid as exc:
            raise ClusterError(f"discovered {lb} URL: {exc.problem}") from None
        targets.append(Target(DEFAULT_TARGET_NAME, lb, normal))
    return tuple(targets)


class HostDecoder:
    """APIServerID -> node name from the identity Leases. Names are kept once learnt: a
    server's Lease may vanish while it is down, and its window still needs the node.

    Once the run's clock is given (`start_run`), each refresh also returns an `IdentitySeen`
    for every host and holder it shows first (`k8s.holders`); before, as at discovery,
    there is no run time to put them at.

    A refresh that cannot read the Leases (no permission to list them, the API unreachable
    while an apiserver restarts) keeps what was learnt and goes on: the first such failure is
    one `apiserver_identity_unavailable` warning, and another is said only when the reason
    changes, or once the Leases were read again in between. The names only label outputs and
    tell same-node samples (`core.samenode`), the holders only tell restarts: without them
    the prober measures as before."""

    def __init__(self, access: ClusterAccess, *, renew_interval: float) -> None:
        """`renew_interval`: the apiservers' identity Lease renew interval (config
        `identity_renew_interval`), which alone proves a renewal seen the holder's first:
        no default, so that no caller reads the Leases by another's."""
        self._access = access
        self._nodes: dict[str, str] = {}
        self.nodes: Mapping[str, str] = MappingProxyType(self._nodes)
        self._failing: str | None = None  # the reason last said, while refreshes fail
        self._holders = Holders(renew_interval)
        self._clocks: tuple[Callable[[], float], Callable[[], float]] | None = None

    def node_of(self, host: str) -> str | None:
        return self._nodes.get(host)

    def known(self) -> dict[str, str]:
        return dict(self._nodes)

    def start_run(self, now: Callable[[], float], wall: Callable[[], float]) -> None:
        """From here on, reads are timed by `now` (run time) and `wall` (epoch seconds)."""
        self._clocks = (now, wall)

    async def refresh(self) -> list[IdentitySeen]:
        """Read the Leases: learn nodes, and the holders seen first (none before
        `start_run`, none when the read fails)."""
        sent_t, _ = self._times()
        try:
            leases = await asyncio.to_thread(self._access.identity_leases)
        except ClusterError as exc:
            self._unavailable(str(exc))
            return []
        read = LeaseRead(tuple(leases), sent_t, *self._times())
        self._failing = None
        for lease in leases:
            if lease.node is not None and self._nodes.get(lease.host) != lease.node:
                log.info("apiserver_identity", host=lease.host, node=lease.node)
                self._nodes[lease.host] = lease.node
        return [] if self._clocks is None else self._holders.read(read, self._nodes)

    def _times(self) -> tuple[float, float]:
        """Run time and wall clock now; zeros before the run's clock is given."""
        if self._clocks is None:
            return 0.0, 0.0
        now, wall = self._clocks
        return now(), wall()

    def _unavailable(self, reason: str) -> None:
        if reason == self._failing:
            return
        self._failing = reason
        log.warning(
            "apiserver_identity_unavailable",
            error=reason,
            known=len(self._nodes),
            effect="apiservers without a known node: no node in the outputs, "
            "no same-node samples; no identity records",
        )
