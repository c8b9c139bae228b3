"""What every command's parser shares: how it is added, and the options many commands take."""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

Handler = Callable[[argparse.Namespace], int]


def add_command(
    subparsers: Any,
    name: str,
    help: str,
    description: str,
    epilog: str,
    *,
    handler: Handler | None = None,
) -> argparse.ArgumentParser:
    """A command's parser, with its handler and the name its errors are printed under
    (`prober audit follow: ...`)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(prog=parser.prog)
    if handler is not None:
        parser.set_defaults(handler=handler)
    return parser


def add_out(parser: argparse.ArgumentParser, help: str = "output directory (created)") -> None:
    """`--out DIR`, the current directory unless given."""
    parser.add_argument("--out", type=Path, default=Path("."), metavar="DIR", help=help)


def add_summaries(parser: argparse.ArgumentParser, nargs: str = "+") -> None:
    """The SUMMARY arguments: summary.json files, or directories searched for them."""
    parser.add_argument("summaries", nargs=nargs, type=Path, metavar="SUMMARY")


def forward(command: Callable[..., int], *positional: str) -> Handler:
    """A handler that calls `command` with the parsed `positional` arguments, then each of its
    keyword-only parameters that the parser has a destination of the same name for: the
    parser's names are the command's, so no command needs a hand-written `_run`."""
    names = [
        name
        for name, parameter in inspect.signature(command).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    ]

    def handler(args: argparse.Namespace) -> int:
        given = {name: getattr(args, name) for name in names if hasattr(args, name)}
        return command(*(getattr(args, name) for name in positional), **given)

    return handler


def add_labels(parser: argparse.ArgumentParser, help: str) -> None:
    """`--label KEY=VALUE`, repeatable, into `labels`."""
    parser.add_argument(
        "--label", dest="labels", action="append", default=[], metavar="KEY=VALUE", help=help
    )
