"""Which audited requests were the prober's own, by their User-Agent.

The late-connection test can be failed by the probe itself (cluster-kube-apiserver-operator
#2222: origin's `kube-api-http2-internal-lb-new-connections` probe among the late requests).
Every request the daemon sends names it: `prober/<version> <stream>` (`probe.prober`, the
watch streams' `probe.watcher`, the heartbeat, discovery), so a reader of the late requests
sees which were ours without the daemon's event log. With the event log, `prober audit
--events` matches them by Audit-ID as well (`audit.evidence`).
"""

from __future__ import annotations

PRODUCT = "prober/"  # the daemon's User-Agent product token, then its version


def prober_stream(user_agent: str | None) -> str | None:
    """The daemon's stream (or part) a User-Agent names, None where it is not the prober's:
    `prober/0.1.0 kube-api-http2-internal-lb-new-connections` ->
    `kube-api-http2-internal-lb-new-connections`; the prober without a stream -> `prober`."""
    if not user_agent or not user_agent.startswith(PRODUCT):
        return None
    _version, _, stream = user_agent.partition(" ")
    return stream.strip() or "prober"
