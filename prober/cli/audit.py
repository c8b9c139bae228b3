"""`prober audit`: summarise or follow kube-apiserver audit logs for late requests

Find requests kube-apiserver received late in its graceful termination (audit annotations
openshift.io/during-graceful and apiserver.k8s.io/shutdown).

Argument parsing only; the work is in the layer below.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from prober.audit.files import DEFAULT_MAX_LINE_BYTES
from prober.audit.output import summarize_command
from prober.audit.run import follow_command
from prober.cli.parsing import Subparsers, add_command, add_out, forward
from prober.common.exits import ExitCode
from prober.common.values import flag, positive_int

SUMMARIZE_EXAMPLE = """\
examples:
  prober audit summarize must-gather/audit_logs/kube-apiserver --out results --junit
  prober audit summarize /var/log/kube-apiserver --node master-0 --events events.jsonl
"""
FOLLOW_EXAMPLE = """\
example:
  prober audit follow /var/log/kube-apiserver --node "$NODE_NAME" --listen "[$POD_IP]:9095"
"""
SUMMARIZE_DOC = """`prober audit summarize`: late requests per apiserver from audit log files

Summarise late requests from audit logs (JSON Lines, plain or gzip, rotated files read oldest
first).
"""

FOLLOW_DOC = """`prober audit follow`: follow a live audit log directory and export late
requests as metrics

Follow audit.log across rotation and truncation (like tail -F), export
prober_audit_late_requests_total on /metrics, and keep the position in a state file so a restart
resumes where it stopped.
"""


def register(sub: Subparsers) -> None:
    parser = add_command(sub, "audit", __doc__, SUMMARIZE_EXAMPLE + FOLLOW_EXAMPLE)
    commands = parser.add_subparsers(dest="audit_command", metavar="SUBCOMMAND")
    parser.set_defaults(handler=lambda _args: _usage(parser))
    _summarize_parser(commands)
    _follow_parser(commands)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return ExitCode.BAD_INPUT


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--node",
        help="the apiserver's node name (default: the <node>- file name prefix, or the "
        "name of the directory holding audit.log)",
    )
    parser.add_argument(
        "--max-line-bytes",
        type=flag(positive_int),
        default=DEFAULT_MAX_LINE_BYTES,
        metavar="N",
        help="count longer lines as bad without reading them into memory (default 4 MiB)",
    )


def _summarize_parser(commands: Any) -> None:
    parser = add_command(
        commands, "summarize", SUMMARIZE_DOC, SUMMARIZE_EXAMPLE, forward(summarize_command, "paths")
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="FILE|DIR")
    _common(parser)
    parser.add_argument(
        "--events",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="a prober event log (and its rotated segments): match its requests by audit "
        "ID and count requests inside its shutdown windows; repeatable",
    )
    parser.add_argument(
        "--shutdown-events",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="Kubernetes Events (kubectl get events -o json) with ShutdownInitiated...: "
        "count requests received during each shutdown; repeatable",
    )
    add_out(parser)
    parser.add_argument("--junit", action="store_true", help="also write junit-audit.xml")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when any apiserver received late requests"
    )


def _follow_parser(commands: Any) -> None:
    parser = add_command(
        commands, "follow", FOLLOW_DOC, FOLLOW_EXAMPLE, forward(follow_command, "directory")
    )
    parser.add_argument("directory", type=Path, metavar="DIR")
    _common(parser)
    parser.add_argument("--listen", default="127.0.0.1:9095", metavar="HOST:PORT")
    parser.add_argument("--interval", default="1s", help="poll interval, Go duration")
    add_out(parser, "where the state file goes")
    parser.add_argument(
        "--state", dest="state_file", type=Path, metavar="FILE", help="the state file itself"
    )
