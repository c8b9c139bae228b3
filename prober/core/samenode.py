"""Which samples measured the prober's own node rather than an LB: same-node samples.

A prober that runs on a master reaches that master's own apiserver through any LB now and
then, and through some LBs always: GCP's internal LB hairpins, so a master's request to its
address is answered by the master itself whatever the LB's health (`core.budgets`,
`LBProfile.hairpin`). Such a sample says nothing of the LB: it went no further than the node.
Charged to the LB, a hairpin makes it look as if the LB kept routing to a shutting-down
apiserver for the whole delay.

A sample through an LB (never localhost, which is the node's own path by name) is same-node:

- answered, when the header's `host` is an apiserver on the prober's own node (the identity
  Leases say which node each APIServerID runs on: `k8s.discovery.HostDecoder`);
- failed unanswered (no header: a refused or reset connection, a timeout), when the LB
  hairpins from this node: the node is a master (an apiserver runs on it) and the platform's
  table, or the cluster's `lb_settings`, says the LB hairpins. Through any other LB an
  unanswered failure stays the LB's: the LB chose where to send it, even if it was here.

A stopped sample, a sample of a prober that does not know its node, and a sample whose host is
not (yet) known to run anywhere are not same-node. The daemon labels each sample once, as it
comes (`Sample.same_node`), and the label is what every later reader goes by: `prober analyze`
of the event log reaches the same result without the map the daemon had then.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from prober.core.models import LB, Sample


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the prober runs: its node, the apiservers' nodes as known so far (APIServerID ->
    node; a live mapping the daemon's host decoder fills), the LBs that hairpin from a master."""

    node: str | None
    nodes: Mapping[str, str]
    hairpins: frozenset[LB] = frozenset()

    def same_node(self, sample: Sample) -> bool:
        if self.node is None or sample.lb is LB.LOCALHOST or sample.stopped:
            return False
        header = sample.shutdown
        if header is not None:
            return self.on_own_node(header.host)
        return sample.failed and sample.lb in self.hairpins and self.on_master

    def on_own_node(self, host: str) -> bool:
        """Whether this APIServerID runs on the prober's own node."""
        return self.node is not None and self.nodes.get(host) == self.node

    @property
    def on_master(self) -> bool:
        """Whether an apiserver runs on the prober's own node."""
        return self.node is not None and self.node in self.nodes.values()

    def label(self, sample: Sample) -> Sample:
        """The sample, marked same-node where it is."""
        if sample.same_node or not self.same_node(sample):
            return sample
        return dataclasses.replace(sample, same_node=True)
