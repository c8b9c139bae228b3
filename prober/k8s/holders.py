"""Each new holder of an apiserver's identity Lease, from successive reads of the Leases:
the in-cluster source of "a new apiserver process" and of a lower bound on its T1.

A restarted kube-apiserver takes its host's Lease over under a new `spec.holderIdentity`
(the Lease itself, and its creationTimestamp, stay). Its first write comes from a post-start
hook before `/readyz` goes true, and it renews every renew interval (upstream 10 s, jitter
only ever adds). So when the read before the one that shows a new holder was sent less than
one renew interval ahead of the renewTime seen, no earlier renewal by that holder fits in
between: the renewTime seen is its first write, and a lower bound on T1.

Pure: the reads come with their times, on the run's clock and on the wall clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prober.core.models import IdentitySeen, rfc3339
from prober.k8s.cluster import LeaseView


@dataclass(frozen=True, slots=True)
class LeaseRead:
    """One successful list of the identity Leases and when it happened."""

    leases: tuple[LeaseView, ...]
    sent_t: float  # run time the request went out
    answered_t: float  # run time the answer was in
    answered_wall: float  # the wall clock at `answered_t`: moves renewTimes onto the run's


class Holders:
    """Every (host, holder) pair seen in the run, and the send time of the last read."""

    def __init__(self, renew_interval: float) -> None:
        self.renew_interval = renew_interval
        self._seen: set[tuple[str, str]] = set()
        self._last_sent: float | None = None

    def read(self, read: LeaseRead, known_node: Mapping[str, str]) -> list[IdentitySeen]:
        """An `IdentitySeen` for each pair this read shows first. `known_node`: the nodes
        learnt so far, for a Lease that lost its hostname label."""
        # The read before showed every host absent or under another holder than one seen
        # now for the first time (else the pair would not be new): its send time bounds
        # the new holder's first write from below.
        before_t, self._last_sent = self._last_sent, read.sent_t
        return [
            self._seen_first(lease, read, before_t, known_node.get(lease.host))
            for lease in self._new_pairs(read.leases)
        ]

    def _new_pairs(self, leases: Iterable[LeaseView]) -> list[LeaseView]:
        new = []
        for lease in leases:
            if lease.holder is not None and (lease.host, lease.holder) not in self._seen:
                self._seen.add((lease.host, lease.holder))
                new.append(lease)
        return new

    def _seen_first(
        self, lease: LeaseView, read: LeaseRead, before_t: float | None, known: str | None
    ) -> IdentitySeen:
        assert lease.holder is not None
        renew_t = None
        if lease.renew_wall is not None:
            renew_t = round(read.answered_t - (read.answered_wall - lease.renew_wall), 6)
        first = (
            before_t is not None
            and renew_t is not None
            and renew_t - before_t < self.renew_interval
        )
        return IdentitySeen(
            t=read.answered_t,
            ts=rfc3339(read.answered_wall),
            host=lease.host,
            node=lease.node or known,
            holder=lease.holder,
            renew_t=renew_t,
            before_t=before_t,
            first=first,
        )
