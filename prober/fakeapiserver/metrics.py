"""`/metrics` in the Prometheus text format, with the apiserver's own metric names.

Counters are kept in plain dicts and rendered by hand: a private registry of
prometheus_client would add `_created` series a real apiserver does not export.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return "{" + body + "}" if body else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class ServerMetrics:
    def __init__(self, apiserver_id: str) -> None:
        self.apiserver_id = apiserver_id
        self.requests: Counter[tuple[str, str, str, str]] = Counter()  # verb, resource, code, scope
        self.late_requests = 0
        self.in_flight = 0
        self.watches = 0
        self.connections: Counter[str] = Counter()  # protocol
        self.goaways: Counter[str] = Counter()  # reason
        self.retry_after: Counter[str] = Counter()  # code
        self.shutting_down = 0

    def render(self) -> bytes:
        lines: list[str] = []

        def family(name: str, kind: str, text: str, samples: Iterable[tuple[str, float]]) -> None:
            lines.append(f"# HELP {name} {text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(f"{name}{labels} {value:g}" for labels, value in samples)

        family(
            "apiserver_request_total",
            "counter",
            "[STABLE] Counter of apiserver requests broken out for each verb, group, version, "
            "resource, scope, component, and HTTP response code.",
            (
                (
                    _labels(
                        [
                            ("code", code),
                            ("component", "apiserver"),
                            ("group", ""),
                            ("resource", resource),
                            ("scope", scope),
                            ("verb", verb),
                            ("version", "v1" if resource else ""),
                        ]
                    ),
                    count,
                )
                for (verb, resource, code, scope), count in sorted(self.requests.items())
            ),
        )
        family(
            "apiserver_request_late_graceful_termination_total",
            "counter",
            "Number of requests received through a connection accepted after 80% of the "
            "shutdown delay.",
            [("", self.late_requests)],
        )
        family(
            "apiserver_current_inflight_requests",
            "gauge",
            "Maximal number of currently used inflight request limit of this apiserver.",
            [(_labels([("request_kind", "readOnly")]), self.in_flight)],
        )
        family(
            "apiserver_longrunning_requests",
            "gauge",
            "Gauge of all active long-running apiserver requests.",
            [(_labels([("resource", "namespaces"), ("verb", "WATCH")]), self.watches)],
        )
        family(
            "apiserver_lab_connections_total",
            "counter",
            "Connections accepted by this fake apiserver, by protocol.",
            ((_labels([("protocol", p)]), n) for p, n in sorted(self.connections.items())),
        )
        family(
            "apiserver_lab_goaway_total",
            "counter",
            "HTTP/2 GOAWAY frames sent, by reason.",
            ((_labels([("reason", r)]), n) for r, n in sorted(self.goaways.items())),
        )
        family(
            "apiserver_lab_retry_after_total",
            "counter",
            "Requests refused with Retry-After during shutdown, by code (not audited).",
            ((_labels([("code", c)]), n) for c, n in sorted(self.retry_after.items())),
        )
        return ("\n".join(lines) + "\n").encode()
