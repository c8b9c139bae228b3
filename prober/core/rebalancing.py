"""Which apiserver answered the requests of the kept HTTP/2 connections, counted live.

Clients do not rebalance by themselves: a kept HTTP/2 connection stays on the apiserver it
reached until something closes it, so after a rollout the connections sit on the servers that
came back first, until `--goaway-chance` moves them (kubernetes #48610). How long a cluster
stays unbalanced after each restart is read from the shares of requests each apiserver
answered over time (`report.results.rebalancing`).

Compaction drops the plain successes (`core.compaction`), which are almost all of these
answers, so the event log alone cannot give the shares: this tracker counts them as they come,
per stream, and the daemon writes its counts in each `summary` record (`StreamCounters`
`kept_answers`, cumulative, and `kept_connections`), so `prober analyze` reads the same
figures a live run had. The shares per summary period are the differences of two records.

Counted: every sample of a `reused` HTTP/2 stream through an LB (localhost has no choice to
make) whose shutdown header names its server, except a same-node one (its own node's
apiserver answered, whatever the LB would have done, `core.samenode`) and one the daemon's
stop cut. `kept_connections` is the number of kept connections the stream holds now: each
connection is its local port, and one leaves the count when a later sample says it replaced
it (`Sample.replaced_port`).
"""

from __future__ import annotations

from collections import Counter

from prober.core.models import LB, Connection, Protocol, Sample

MAX_HOSTS = 64  # hosts are the server's to name: counted per stream up to this many
MAX_PORTS = 1024  # kept connections remembered per stream: a handful are alive at once
OTHER_HOSTS = "(other)"  # where the answers of hosts past MAX_HOSTS are counted


def counted(sample: Sample) -> bool:
    """Whether a sample is one of the kept HTTP/2 connections' answers this tracker counts."""
    return (
        sample.connection is Connection.REUSED
        and sample.protocol is Protocol.HTTP2
        and sample.lb is not LB.LOCALHOST
        and not sample.same_node
        and not sample.stopped
    )


class KeptAnswers:
    """Per kept HTTP/2 stream: its answers by apiserver, cumulative, and its live connections."""

    def __init__(self) -> None:
        self._answers: dict[str, Counter[str]] = {}
        self._ports: dict[str, set[int]] = {}

    def feed(self, sample: Sample) -> None:
        if not counted(sample):
            return
        ports = self._ports.setdefault(sample.stream, set())
        if sample.replaced_port is not None:
            ports.discard(sample.replaced_port)
        if sample.local_port is not None and len(ports) < MAX_PORTS:
            ports.add(sample.local_port)
        header = sample.shutdown
        if header is None:
            return  # nothing says which server it reached
        answers = self._answers.setdefault(sample.stream, Counter())
        host = header.host
        if host not in answers and len(answers) >= MAX_HOSTS:
            host = OTHER_HOSTS
        answers[host] += 1

    def answers(self, stream: str) -> dict[str, int]:
        """The stream's answers so far, by the host that gave them, in host order."""
        return dict(sorted(self._answers.get(stream, Counter()).items()))

    def connections(self, stream: str) -> int:
        """How many kept connections the stream holds now."""
        return len(self._ports.get(stream, ()))
