"""`prober` command line: argument parsing only; every command's work lives in its layer.

Each command is a module here with `register(subparsers)`, which adds its parser and sets
`handler` (`parsing.add_command`), a function taking the parsed arguments and returning the
exit code: 0 done, 1 a verdict failed, 2 bad usage or bad input. A `UserError` raised anywhere
below is caught here, once: `prober <command>: <message>` on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from prober import __version__
from prober.common.errors import UserError
from prober.common.exits import ExitCode

# Command modules, in the order `--help` lists them.
COMMANDS: tuple[str, ...] = (
    "run",
    "lab",
    "analyze",
    "thresholds",
    "recommend",
    "export",
    "origin",
    "dashboard",
    "audit",
)

DESCRIPTION = (
    "Measure how long the load balancers in front of kube-apiserver keep routing requests to "
    "an apiserver after its /readyz went false."
)


EPILOG = """\
Examples:
  prober lab --check                      # the whole job on this machine, held to the truth
  prober run --config prober.yaml         # the daemon, in a cluster
  prober analyze events.jsonl --out out/  # its event log to summary.json, junit.xml, report.html
  prober thresholds runs/*/summary.json -o thresholds.json      # many runs to a history
  prober COMMAND --help                   # each command, its examples and its exit codes
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prober",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"prober {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"prober.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return dispatch(build_parser(), argv)


def dispatch(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    """Parse `argv`, run its command's handler; its exit code, or 2 for a `UserError`."""
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return ExitCode.BAD_INPUT
    try:
        code: int = handler(args)
    except UserError as exc:  # the one place a user's error becomes output
        for line in exc.lines():
            print(f"{args.prog}: {line}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except BrokenPipeError:
        # `prober analyze ... | head`: the reader left. Exit as a process killed by SIGPIPE
        # would, without a traceback, and keep Python from failing again on flushing stdout.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.BROKEN_PIPE
    return code


if __name__ == "__main__":
    sys.exit(main())
