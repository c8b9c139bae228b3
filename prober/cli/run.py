"""`prober run`: the in-cluster disruption prober daemon (argument parsing only)."""

from __future__ import annotations

import argparse
from typing import Any

from prober.cli.parsing import add_command

EXAMPLE = """\
examples:
  prober run --config /etc/prober/prober.yaml
  prober run --in-cluster --event-log /var/log/prober/events.jsonl
  prober run --target internal-lb=https://api-int.example.com:6443 --ca-file ca.crt \\
      --token-file token --duration 10m --listen 127.0.0.1:0

Settings come from the YAML file, then PROBER_<KEY> environment variables (PROBER_WORKERS=4),
then these flags. Logs are JSON lines on stdout; the first, {"event": "listening", "port": N},
says the endpoints are up, and {"event": "ready"} follows once every stream has a sample.
SIGTERM drains and exits 0.
"""

# Flags that map one-to-one onto configuration keys: (flag, key, help).
_VALUE_FLAGS = [
    ("--platform", "platform", "constant `platform` label (default: discovered, or unknown)"),
    ("--interval", "interval", "one worker's gap while an apiserver shuts down (100ms)"),
    (
        "--quiet-interval",
        "quiet_interval",
        "a stream's gap while none does; 0: always --interval (1s)",
    ),
    ("--settle", "settle", "quiet again this long after the last window or failure (30s)"),
    ("--workers", "workers", "parallel workers per stream, staggered (2)"),
    ("--timeout", "timeout", "request timeout (5s)"),
    ("--max-in-flight", "max_in_flight", "requests waiting per worker before ticks skip (10)"),
    ("--max-apiservers", "max_apiservers", "most apiservers a run tracks and labels (16)"),
    ("--protocols", "protocols", "comma-separated: http1,http2"),
    ("--connections", "connections", "comma-separated: new,reused"),
    ("--path", "path", "probed path (/api/v1/namespaces/default)"),
    ("--listen", "listen", "HOST:PORT of /metrics, /healthz, /readyz (127.0.0.1:9090)"),
    ("--event-log", "event_log", "write the JSON Lines event log to PATH"),
    ("--event-log-max-size", "event_log_max_size", "rotate PATH past this size (32MiB)"),
    ("--summary-interval", "summary_interval", "period of summary records (60s)"),
    ("--duration", "duration", "stop after this long (default: run until SIGTERM)"),
    ("--drain-timeout", "drain_timeout", "on stop, wait this long for requests in flight (5s)"),
    ("--ca-file", "ca_file", "CA bundle for targets that name none"),
    ("--token-file", "token_file", "bearer token file for targets that name none"),
    ("--kubeconfig", "kubeconfig", "discover targets and node names with this kubeconfig"),
    ("--node-refresh", "node_refresh", "how often to re-read the identity Leases (60s)"),
    ("--log-format", "log_format", "json or console"),
    ("--log-level", "log_level", "debug, info, warning or error"),
    ("--event-loop", "event_loop", "uvloop (default: about a third less CPU) or asyncio"),
]
_SWITCHES = [
    ("--in-cluster", "in_cluster", "discover targets, platform and node names from the cluster"),
    ("--localhost", "localhost", "with discovery, also probe https://localhost:6443"),
    ("--insecure-skip-tls-verify", "insecure_skip_tls_verify", "do not verify certificates"),
    (
        "--consistent-reads",
        "consistent_reads",
        "read from etcd, not the watch cache (default: resourceVersion=0, as origin reads)",
    ),
]


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers,
        "run",
        help="the disruption prober daemon: probe each LB, export metrics, write an event log",
        description="Probe kube-apiserver through each load balancer, over HTTP/1.1 and HTTP/2, "
        "on new and reused connections; export Prometheus metrics and write an event log.",
        epilog=EXAMPLE,
        handler=_handle,
    )
    parser.add_argument("--config", metavar="FILE", help="YAML configuration file")
    for flag, key, text in _VALUE_FLAGS:
        parser.add_argument(flag, dest=key, metavar=key.split("_")[-1].upper(), help=text)
    for flag, key, text in _SWITCHES:
        parser.add_argument(flag, dest=key, action="store_const", const=True, help=text)
    parser.add_argument(
        "--event-log-stdout",
        dest="event_log_stdout",
        nargs="?",
        const="all",
        metavar="MODE",
        help="also write the event log's records to stdout (CI collects pod logs, not files): "
        "all of them (no MODE), or compact: windows, intervals, pace, summaries, no samples",
    )
    parser.add_argument(
        "--label", dest="labels", action="append", metavar="KEY=VALUE", help="constant label"
    )
    parser.add_argument(
        "--target",
        dest="targets",
        action="append",
        metavar="LB=URL",
        help="probe URL behind LB (external-lb, internal-lb, service-network, localhost)",
    )


def _handle(args: argparse.Namespace) -> int:
    # Imported on use: the daemon's libraries would slow every other `prober` command.
    from prober.daemon.commands import run_command  # noqa: PLC0415

    keys = [key for _, key, _ in _VALUE_FLAGS + _SWITCHES] + ["event_log_stdout"]
    flags: dict[str, object] = {key: getattr(args, key) for key in keys}
    if args.labels:
        flags["labels"] = ",".join(args.labels)
    if args.targets:
        flags["targets"] = [_target(text) for text in args.targets]
    return run_command(args.config, flags)


def _target(text: str) -> object:
    lb, sep, url = text.partition("=")
    return {"lb": lb, "url": url} if sep else text  # the loader names what is wrong
