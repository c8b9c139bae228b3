"""`prober run`: the disruption prober daemon: probe each LB, export metrics, write an event log

Probe kube-apiserver through each load balancer, over HTTP/1.1 and HTTP/2, on new and reused
connections; export Prometheus metrics and write an event log.

Argument parsing only; the work is in the layer below.
"""

from __future__ import annotations

import argparse

from prober.cli.parsing import Subparsers, add_command
from prober.config.keys import KEYS, Flag, Key

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


def register(sub: Subparsers) -> None:
    parser = add_command(sub, "run", __doc__, EXAMPLE, _handle)
    parser.add_argument("--config", metavar="FILE", help="YAML configuration file")
    for key in KEYS:
        _add_flag(parser, key)


def _add_flag(parser: argparse.ArgumentParser, key: Key) -> None:
    help_text = key.described()
    if key.flag is Flag.SWITCH:
        parser.add_argument(
            key.option, dest=key.name, action="store_const", const=True, help=help_text
        )
    elif key.flag is Flag.REPEATED:
        parser.add_argument(
            key.option, dest=key.name, action="append", metavar=key.metavar, help=help_text
        )
    else:
        parser.add_argument(
            key.option,
            dest=key.name,
            nargs="?" if key.flag is Flag.OPTIONAL else None,
            const=key.const,
            metavar=key.metavar or key.name.split("_")[-1].upper(),
            help=help_text,
        )


def _handle(args: argparse.Namespace) -> int:
    # Imported on use: the daemon's libraries would slow every other `prober` command.
    from prober.daemon.commands import run_command  # noqa: PLC0415

    flags: dict[str, object] = {}
    for key in KEYS:
        value = getattr(args, key.name)
        if key.gather is not None and value is not None:
            value = key.gather(value)
        flags[key.name] = value
    return run_command(args.config, flags)
