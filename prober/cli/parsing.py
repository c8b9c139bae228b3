"""What every command's parser shares: how it is added, and the options many commands take."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from prober.common.values import flag

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    D = TypeVar("D", bound=DataclassInstance)

Handler = Callable[[argparse.Namespace], int]
# Generic only to type checkers: argparse's class takes no subscript at run time.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_command(
    subparsers: Any, name: str, doc: str | None, epilog: str, handler: Handler | None = None
) -> argparse.ArgumentParser:
    """A command's parser, with its handler and the name its errors are printed under
    (`prober audit follow: ...`). `doc` is the command module's docstring: its first line,
    after "`prober <name>`: ", is the one-line help, and the paragraph after it the
    description (a paragraph after that is for the reader of the code)."""
    first, description, *_ = [*(doc or "").strip().split("\n\n"), ""]
    help = " ".join(first.partition(": ")[2].split())
    description = " ".join(description.split())
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


OUTSIDE = ("stdout", "stderr")  # a command's streams: the test's or the process's, no flag's


def forward(command: Callable[..., int], *positional: str) -> Forwarded:
    """A handler that calls `command` with the parsed `positional` arguments, then each of its
    keyword-only parameters but its streams (`OUTSIDE`) from the parser's destination of the
    same name: the parser's names are the command's, so no command needs a hand-written
    `_run`. Each one must have a destination (`needs`, which a test holds against every
    parser): a flag renamed apart from its parameter fails, not falls back to a default."""
    keywords = tuple(
        name
        for name, parameter in inspect.signature(command).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and name not in OUTSIDE
    )
    return Forwarded(command, positional, keywords)


@dataclass(frozen=True, slots=True)
class Forwarded:
    command: Callable[..., int]
    positional: tuple[str, ...]
    keywords: tuple[str, ...]

    @property
    def needs(self) -> frozenset[str]:
        return frozenset((*self.positional, *self.keywords))

    def __call__(self, args: argparse.Namespace) -> int:
        values = _flagged(args, (*self.positional, *self.keywords), self.command.__name__)
        return self.command(*(values[n] for n in self.positional),
                            **{n: values[n] for n in self.keywords})  # fmt: skip


def options_of(
    cls: type[D], args: argparse.Namespace, *, unflagged: tuple[str, ...] = (), **given: Any
) -> D:
    """`cls`, a dataclass of options, from the parsed destinations named as its fields, as
    `forward` does for a command's keywords; `given`: values the parser cannot make as
    they are; `unflagged`: fields no flag sets, left at their defaults. Every other field
    must come from the parser: a renamed flag fails, not falls back to a default."""
    names = [f.name for f in dataclasses.fields(cls) if f.name not in unflagged]
    return cls(**_flagged(args, names, cls.__name__, given))


def _flagged(
    args: argparse.Namespace,
    names: Sequence[str],
    owner: str,
    given: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Each of `names` from `given`, else from its flag's destination; a TypeError naming
    those neither gives."""
    parsed = {**vars(args), **(given or {})}
    missing = [name for name in names if name not in parsed]
    if missing:
        raise TypeError(f"{owner}: no flag gives {', '.join(missing)}")
    return {name: parsed[name] for name in names}


def add_labels(parser: argparse.ArgumentParser, help: str) -> None:
    """`--label KEY=VALUE`, repeatable, into `labels`."""
    parser.add_argument(
        "--label", dest="labels", action="append", default=[], metavar="KEY=VALUE", help=help
    )


def add_value(
    parser: argparse.ArgumentParser,
    name: str,
    parse: Callable[[object], object],
    default: object,
    *,
    metavar: str,
    help: str,
) -> None:
    """An option of one value, checked by `parse` (a bad one is a usage error), `default`
    unless given."""
    parser.add_argument(name, type=flag(parse), default=default, metavar=metavar, help=help)
